"""
The web lab under load: a burst of concurrent requests, and clients that drip a request slowly.

A burst of 200 concurrent requests once lost about half (connection resets, or no answer
after 60 s), and a client sending one header line every 45 s held a thread for minutes. Now
every request of a burst is answered, with a result or at once with a 503 and Retry-After
(serve.Slots), a page still loads while the burst is served, and a request has
Handler.request_time seconds to arrive whole, however slowly it drips.

Everything goes to 127.0.0.1 only, is bounded in count and time, and stops by itself. The
burst is sent to the real command in its own process (serve.py's server sharing no interpreter
with the test's client), from one thread that multiplexes 200 sockets.
"""

import selectors
import socket
import threading
import time

from labserver import live_server, request, server_process
from microgpt.lab.serve import BUSY_QUEUE, BUSY_SLOTS, Handler

BURST = 200
DEADLINE = 60  # seconds the whole burst may take before the test gives up on it
BODY = b'{"text": "emmanuelle"}'
PAGE_LOAD_BOUND = 10  # seconds: far above what is measured (under 1 s), far below a starved page


def burst(port, n, path='/api/attention', body=BODY):
    """Send n POSTs at once on n connections; [(status or None, Retry-After or None)], one per
    connection: None where the connection was reset or never answered within DEADLINE."""
    head = (f'POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n'
            f'Content-Length: {len(body)}\r\nConnection: close\r\n\r\n').encode() + body
    selector = selectors.DefaultSelector()
    answers = {}
    for k in range(n):
        sock = socket.socket()
        sock.setblocking(False)
        sock.connect_ex(('127.0.0.1', port))
        selector.register(sock, selectors.EVENT_WRITE, [k, b''])
    end = time.monotonic() + DEADLINE
    while selector.get_map() and time.monotonic() < end:
        for key, events in selector.select(timeout=1):
            sock, (k, got) = key.fileobj, key.data
            try:
                if events & selectors.EVENT_WRITE:
                    sock.sendall(head)  # small: it fits the socket's buffer at once
                    selector.modify(sock, selectors.EVENT_READ, [k, b''])
                    continue
                chunk = sock.recv(65536)
            except OSError:  # reset or refused: no answer
                chunk = None
            if chunk:
                key.data[1] = got + chunk
                continue
            selector.unregister(sock)
            sock.close()
            answers[k] = parse(got) if chunk == b'' else (None, None)
    for key in list(selector.get_map().values()):  # still silent at the deadline
        key.fileobj.close()
    selector.close()
    return [answers.get(k, (None, None)) for k in range(n)]


def parse(raw):
    """(status, Retry-After) of a raw HTTP answer, (None, None) if it is not one."""
    lines = raw.split(b'\r\n\r\n')[0].decode('latin-1').split('\r\n')
    if not lines[0].startswith('HTTP/1.1 '):
        return None, None
    headers = dict(line.split(': ', 1) for line in lines[1:] if ': ' in line)
    return int(lines[0].split()[1]), headers.get('Retry-After')


def page_load(server):
    """GET a page and everything it loads first, each on its own connection: (statuses, seconds)."""
    start = time.perf_counter()
    statuses = [request(server, 'GET', path)[0] for path in
                ('/attention', '/static/lab.css', '/static/lab.js', '/static/attention.js', '/api/config')]
    return statuses, time.perf_counter() - start


def test_every_request_of_a_burst_is_answered_and_a_page_still_loads(tiny_ckpt, names_file, tmp_path, measured):
    with server_process(tiny_ckpt, tmp_path, names_file) as (proc, server):
        port = server.server_address[1]
        alone = page_load(server)
        loads = []
        loader = threading.Thread(target=lambda: loads.append(page_load(server)))
        start = time.perf_counter()
        threading.Timer(0.05, loader.start).start()  # while the burst is on its way in
        answers = burst(port, BURST)
        took = time.perf_counter() - start
        loader.join(DEADLINE)
        after = burst(port, 1)  # and it keeps serving
    statuses = [s for s, _ in answers]
    measured(f"\nburst of {BURST} POST /api/attention: {statuses.count(200)} answered 200, "
          f"{statuses.count(503)} 503 in {took:.2f} s; a page load took {alone[1] * 1000:.0f} ms alone, "
          f"{loads[0][1] * 1000:.0f} ms during the burst")
    assert None not in statuses, f"{statuses.count(None)} of {BURST} connections got no answer"
    assert set(statuses) <= {200, 503}
    assert statuses.count(200) >= BUSY_SLOTS  # the slots computed (how many 503s depends on the pace)
    assert all(retry == '1' for status, retry in answers if status == 503)
    # answered while the burst was served, not starved behind it (the time is printed, not
    # asserted, beyond this: a timed test on a shared machine would be flaky)
    assert loads and loads[0][0] == [200] * 5 and loads[0][1] < PAGE_LOAD_BOUND
    assert after == [(200, None)]


def test_a_saturated_server_answers_503_with_retry_after_at_once(tiny_ckpt, names_file, tmp_path):
    """The same bound, in the test's process: every slot and queue place taken (as if by
    long computations), the next request is refused at once, and served once they are free."""
    with live_server(tiny_ckpt, tmp_path, names_file) as server:
        slots = server.slots
        held = [slots.take() for _ in range(BUSY_SLOTS)]
        for h in held:
            h.__enter__()
        slots.inside += BUSY_QUEUE  # the queue full too
        start = time.perf_counter()
        status, retry = burst(server.server_address[1], 1, '/api/overview', b'{"text": "emma"}')[0]
        assert (status, retry) == (503, '1')
        assert time.perf_counter() - start < 5  # not after a wait for a slot: at once
        assert request(server, 'GET', '/overview')[0] == 200  # the pages' files are not queued
        assert request(server, 'GET', '/api/config')[0] == 200
        slots.inside -= BUSY_QUEUE
        for h in held:
            h.__exit__(None, None, None)
        assert request(server, 'POST', '/api/overview', {'text': 'emma'})[0] == 200


def test_a_request_dripped_slowly_is_dropped_when_its_whole_time_is_up(server, monkeypatch):
    """One header line every 0.4 s, each within the idle timeout: the connection is closed
    when Handler.request_time (here 1 s) has passed since the request began, not kept while
    the client drips (it would have sent its last line after 4 s)."""
    monkeypatch.setattr(Handler, 'request_time', 1.0)
    host, port = server.server_address[:2]
    with socket.create_connection((host, port), timeout=10) as sock:
        start = time.perf_counter()
        sock.sendall(f'GET /overview HTTP/1.1\r\nHost: {host}:{port}\r\n'.encode())
        closed = None
        for k in range(10):
            time.sleep(0.4)
            try:
                sock.sendall(f'X-Drip-{k}: {k}\r\n'.encode())
            except OSError:  # the server closed it: a reset on the next write
                closed = time.perf_counter() - start
                break
            sock.settimeout(0.01)
            try:
                if sock.recv(100) == b'':
                    closed = time.perf_counter() - start
                    break
            except socket.timeout:
                pass
            sock.settimeout(10)
    assert closed is not None, "the server kept a dripping client for 4 s with request_time 1 s"
    assert 1.0 <= closed < 4.0
    assert request(server, 'GET', '/overview')[0] == 200


def test_a_body_dripped_slowly_is_answered_408(server, monkeypatch):
    monkeypatch.setattr(Handler, 'request_time', 1.0)
    host, port = server.server_address[:2]
    body = b'{"text": "emma"}' + b' ' * 84
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(f'POST /api/overview HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n'
                     f'Content-Length: {len(body)}\r\n\r\n'.encode())
        start = time.perf_counter()
        try:
            for k in range(len(body)):  # one byte every 0.1 s: 10 s for the whole body
                sock.sendall(body[k:k + 1])
                time.sleep(0.1)
                if time.perf_counter() - start > 4:
                    break
        except OSError:
            pass
        answer = sock.makefile('rb').read()
    assert answer.startswith(b'HTTP/1.1 408') and b'the whole request took over 1 s' in answer
    assert time.perf_counter() - start < 6


def test_a_request_in_time_on_a_kept_alive_connection_gets_a_fresh_clock(server, monkeypatch):
    """The clock is per request: a connection kept alive for longer than request_time, between
    requests that each arrive at once, is served every time."""
    import http.client
    monkeypatch.setattr(Handler, 'request_time', 0.5)
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=10)
    for _ in range(3):
        conn.request('GET', '/overview')
        response = conn.getresponse()
        assert response.status == 200
        response.read()
        time.sleep(0.4)
    conn.close()
