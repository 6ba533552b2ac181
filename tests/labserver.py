"""
Helpers for the web lab's tests: a live server on an ephemeral port, and a JSON client.

test_lab_serve.py (the API) and test_lab_browser.py (the pages in Chromium) both start the
real server of `python -m microgpt.lab serve` (serve.make_server) in a thread of the test
process, on port 0 (a free port the system picks), and talk to it over HTTP. server_process
runs the real command in a process of its own.
"""

import http.client
import json
import threading
import time
from contextlib import contextmanager

from microgpt.lab.serve import make_server

RUN_TIMEOUT = 60  # seconds a small training run may take on a loaded 2-core machine


@contextmanager
def live_server(ckpt, runs_dir, data, exercises=None, text=None):
    """A server on its own thread. exercises: the folder `serve --exercises DIR` names, or None;
    text: `serve --text FILE`'s."""
    server = make_server(ckpt, port=0, runs_dir=str(runs_dir), data=data, exercises=exercises, text=text)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.lab.runs.shutdown()
        server.shutdown()
        server.server_close()


def request(server, method, path, body=None, raw=None, headers=None):
    """(status, parsed JSON or None, raw bytes) of one request on a fresh connection."""
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=30)
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    hdrs = {'Content-Type': 'application/json'} if data is not None else {}
    hdrs.update(headers or {})
    conn.request(method, path, body=data, headers=hdrs)
    response = conn.getresponse()
    payload = response.read()
    conn.close()
    try:
        parsed = json.loads(payload)
    except ValueError:
        parsed = None
    return response.status, parsed, payload


def post(server, path, body):
    status, parsed, _ = request(server, 'POST', path, body)
    assert status == 200, (status, parsed)
    return parsed


def wait_for_run(server, offset=0):
    """Poll /api/train/status until the run has ended and its whole log is read:
    (the last status, every record after `offset`, every [step, running mean] sent)."""
    records, smooth, deadline = [], [], time.time() + RUN_TIMEOUT
    while True:
        status = post(server, '/api/train/status', {'offset': offset})
        records += status['records']
        smooth += status['smooth']
        offset = status['offset']
        if status['state'] in ('finished', 'stopped', 'failed') and not status['records']:
            return status, records, smooth
        assert time.time() < deadline, f"the run did not end in {RUN_TIMEOUT} s: {status['state']}"
        time.sleep(0.05)


class Address:
    """What request() and post() need of a server running in another process: its address."""

    def __init__(self, port):
        self.server_address = ('127.0.0.1', port)
        self.url = f'http://127.0.0.1:{port}/'


@contextmanager
def server_process(ckpt, runs_dir, data):
    """`python -m microgpt.lab serve` in its own process on a free port: yields (the process,
    its Address). On leaving it is stopped as Ctrl-C stops it, unless the test has already
    stopped it; it never outlives the test."""
    import os
    import signal
    import subprocess
    import sys
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, '-m', 'microgpt.lab', 'serve', '--ckpt', ckpt, '--port', '0',
                             '--runs-dir', str(runs_dir), '--data', data],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = proc.stdout.readline()
        assert first.startswith('microgpt lab on '), (first, proc.stderr.read() if proc.poll() else '')
        address = Address(int(first.split('http://127.0.0.1:')[1].split('/')[0]))
        address.first_line = first  # what the server printed first: its address
        yield proc, address
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
