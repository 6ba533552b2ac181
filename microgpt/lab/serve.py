"""
The web lab: the lab's sandboxes as local web pages, on the learner's own checkpoint.

    python -m microgpt.lab serve                       # http://127.0.0.1:8000/, out/model.json
    python -m microgpt.lab serve --ckpt out/big.json --port 8080

Python's standard library server (http.server.ThreadingHTTPServer) answers two kinds of
request, each from a fixed table built from the lab's registry (registry.py), so only known
routes answer:
  - pages and their files, from microgpt/lab/web/ (plain HTML, CSS and JavaScript shipped in
    the package: no build step, nothing fetched from the internet, so it works offline);
  - the JSON API under /api/ (api.py), which calls the same lab functions as the terminal
    commands. The pages only draw what the API returns: no attention, softmax, gradient or
    sampling is computed a second time in JavaScript.

Safety, for a server that can start processes: it listens on 127.0.0.1 unless --host says
otherwise (and then warns); a request never names a file (checkpoints are picked by id, see
api.Checkpoints); a POST must be JSON of at most MAX_BODY bytes; a request must name the
server as its Host (a web page elsewhere cannot reach it by DNS tricks, see check_origin);
every mistake is a JSON {"error": "..."} with a 4xx status, and the server keeps serving.
Work is bounded: a client silent for Handler.timeout seconds is dropped, and so is one whose
request (its line, headers and body) takes longer than Handler.request_time to arrive, however
slowly it drips; the sandboxes compute in worker processes (workers.py), so this process's
threads only read requests and write answers, and a page's files never wait behind the
arithmetic; at most BUSY_SLOTS API requests compute at once and BUSY_QUEUE more wait their
turn, the rest are answered 503 with Retry-After at once (the pages retry); every number a
request gives is range-checked (api.py), one scalar-engine step and one training run are
computed at a time, and when the server stops (Ctrl-C, kill, the terminal closed) it stops
its run as Ctrl-C would, and its workers with it.
"""

import errno
import io
import ipaddress
import json
import os
import signal
import socket
import sys
import threading
import time
import traceback
from contextlib import contextmanager, nullcontext
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from ..edge.checkpoint import read_checkpoint
from ..edge.errors import UserError
from . import registry
from .api import ApiError, Checkpoints, Lab, Overtaken
from .exercises.web import ExercisesPage
from .limits import MAX_BODY
from .loading import DEFAULT_HOST, DEFAULT_PORT, require_checkpoint, trained_data
from .runs import RunManager
from .workers import WORKERS, Pool

WEB_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'web')
# API requests computing at once: one per worker process (workers.py), each of which computes one
BUSY_SLOTS = WORKERS
BUSY_QUEUE = 8        # more that wait for a slot: a page, or two tabs, asking several things at once
BUSY_WAIT = 5.0       # seconds one of them waits before it is told to retry
RETRY_AFTER = 1       # seconds, the Retry-After of a 503 for a saturated server (lab.js waits, retries)

# Every page and file the server has, from the registry; a request is looked up here and nowhere else.
def routes():
    """(pages, static files, API routes): {URL path: file name} twice, and {URL path: (method,
    Lab method, sandbox name or None)}. Read from registry.SANDBOXES when a server starts."""
    names = [name for name, _ in registry.pages()]
    pages = {'/': f'{names[0]}.html', **{f'/{n}': f'{n}.html' for n in names}}
    static = {f'/static/{f}': f for f in ['lab.css', 'lab.js', 'icon.svg'] + [f'{n}.js' for n in names]}
    static['/favicon.ico'] = 'icon.svg'
    api = {'/api/config': ('GET', 'config', None),
           **{f'/api/{s.name}': ('POST', 'sandbox', s.name) for s in registry.SANDBOXES if s.page},
           **{path: ('POST', method, None) for path, method in registry.OTHER_ROUTES.items()}}
    return pages, static, api


CONTENT_TYPES = {'.html': 'text/html; charset=utf-8', '.css': 'text/css; charset=utf-8',
                 '.js': 'text/javascript; charset=utf-8', '.svg': 'image/svg+xml'}
# The pages load only their own files and talk only to this server.
CSP = ("default-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
       "frame-ancestors 'none'")


class Slots:
    """At most `slots` requests computing at once, at most `queue` more waiting up to `wait`
    seconds for one; any other is refused at once with a 503 and Retry-After, so that under a
    burst the threads that hold the interpreter are few and every connection is answered."""

    def __init__(self, slots=BUSY_SLOTS, queue=BUSY_QUEUE, wait=BUSY_WAIT):
        self.free = threading.BoundedSemaphore(slots)
        self.most, self.wait = slots + queue, wait
        self.lock = threading.Lock()
        self.inside = 0  # computing or waiting

    @contextmanager
    def take(self):
        with self.lock:
            full = self.inside >= self.most
            if not full:
                self.inside += 1
        if full:
            raise ApiError(503, "the lab is busy with other requests: try again in a moment",
                           retry_after=RETRY_AFTER)
        try:
            if not self.free.acquire(timeout=self.wait):
                raise ApiError(503, f"the lab is busy: no answer began within {self.wait:g} s, "
                                    "try again in a moment", retry_after=RETRY_AFTER)
            try:
                yield
            finally:
                self.free.release()
        finally:
            with self.lock:
                self.inside -= 1


class RequestReader(io.RawIOBase):
    """A connection's bytes, read with two clocks: `idle` seconds of silence at most (while a
    kept-alive connection waits for its next request, and at any read), and `whole` seconds
    for all of one request from its first byte (line, headers, body), however it is dripped.
    next_request() starts the clock again for the next one."""

    def __init__(self, sock, idle, whole):
        self.sock, self.idle, self.whole = sock, idle, whole
        self.deadline = None  # set when the request's first byte arrives

    def readable(self):
        return True

    def next_request(self):
        self.deadline = None

    def readinto(self, buffer):
        wait = self.idle
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"the request took longer than {self.whole:g} s to arrive")
            wait = min(wait, left)
        self.sock.settimeout(wait)
        try:
            n = self.sock.recv_into(buffer)
        finally:
            self.sock.settimeout(self.idle)  # writing the answer keeps the idle clock only
        if n and self.deadline is None:
            self.deadline = time.monotonic() + self.whole
        return n


class Handler(BaseHTTPRequestHandler):
    """One connection: each request is looked up in the tables above and answered, every
    mistake as a JSON {"error": ...}."""
    server_version = 'microgpt-lab'
    protocol_version = 'HTTP/1.1'
    # seconds a client may stay silent, mid-request or between requests on a kept-alive
    # connection, before it is dropped: each connection holds a thread, so a client that
    # opens many and sends nothing must not pile them up for ever
    timeout = 60
    # seconds all of one request (line, headers and body) may take to arrive, however slowly it
    # drips: a client that sends a header line every 45 s must not hold a thread for minutes
    request_time = 10

    def setup(self):
        super().setup()
        self.rfile.close()  # the plain reader; this one keeps the whole request's clock
        self.rfile = io.BufferedReader(RequestReader(self.connection, self.timeout, self.request_time))

    def handle_one_request(self):
        self.rfile.raw.next_request()
        super().handle_one_request()  # a request too slow to arrive ends there, and the connection

    def do_GET(self):
        self.handle_request('GET')

    def do_POST(self):
        self.handle_request('POST')

    def do_PUT(self):
        self.handle_request('PUT')

    def do_DELETE(self):
        self.handle_request('DELETE')

    def do_HEAD(self):
        self.handle_request('HEAD')

    def do_OPTIONS(self):  # no cross-origin preflight is ever granted
        self.handle_request('OPTIONS')

    def handle_request(self, method):
        self.answer(method)  # a client that leaves midway is LabServer.handle_error's to ignore

    def answer(self, method):
        try:
            path = urlsplit(self.path).path
            self.check_origin()
            pages, static, api = self.server.routes
            if path in api:
                want, name, sandbox = api[path]
                if method != want:
                    raise ApiError(405, f"{path} answers {want} only")
                body = self.read_json() if method == 'POST' else {}
                lab = self.server.lab
                # the pages' one GET (what to draw) stays out of the queue: a page still opens in a burst
                slot = self.server.slots.take if method == 'POST' else nullcontext
                if sandbox:  # a slot taken only once its turn has come (api.Lab.sandbox)
                    answer = lab.sandbox(sandbox, body, slot)
                else:
                    with slot():
                        answer = getattr(lab, name)(body)
                self.send_json(200, answer)
            elif path in pages or path in static:
                if method not in ('GET', 'HEAD'):
                    raise ApiError(405, f"{path} answers GET only")
                self.send_file(pages.get(path) or static[path], head=method == 'HEAD')
            else:
                raise ApiError(404, f"no such page or route: {path[:80]!r}")
        except Overtaken:  # a newer request of the same page is computed instead (api.Lab.turn)
            self.send_bytes(204, 'application/json; charset=utf-8', b'')
        except ApiError as e:
            self.send_json(e.status, {'error': str(e)}, retry_after=e.retry_after)
        except UserError as e:  # the lab's own one-line message about what was asked
            self.send_json(400, {'error': str(e)})
        except ConnectionError:  # the client left: not a bug, and no one to answer
            raise
        except Exception as e:  # a bug: say so, keep serving
            traceback.print_exc()
            self.send_json(500, {'error': f"internal error ({type(e).__name__}): see the server's terminal"})

    def check_origin(self):
        """The Host must name this server: a page on another site that makes a browser resolve
        its own name to this machine (DNS rebinding) cannot talk to the lab. On loopback that is
        one of the names in local_hosts; on another --host, also any IP address with this port
        (a rebinding page's Host is its own domain name, never an address). A browser's Origin,
        when sent, must be this server too."""
        host = self.headers.get('Host', '')
        known = host in self.server.local_hosts or (not self.server.local_only and self.is_address(host))
        if not known:
            self.close_connection = True
            raise ApiError(400, f"unexpected Host {host[:60]!r}: open the address the server printed")
        origin = self.headers.get('Origin')
        if origin is not None and origin != f'http://{host}':
            raise ApiError(403, "requests from other sites are refused")

    def is_address(self, host):
        """Whether a Host header is an IP address and this server's port: 192.168.1.5:8000."""
        name, _, port = host.rpartition(':')
        if port != str(self.server.server_address[1]):
            return False
        try:
            ipaddress.ip_address(name[1:-1] if name.startswith('[') and name.endswith(']') else name)
        except ValueError:
            return False
        return True

    def read_json(self):
        """The request's JSON object, after checking its type and size."""
        if self.headers.get('Content-Type', '').split(';')[0].strip() != 'application/json':
            self.close_connection = True
            raise ApiError(415, "send the request body as JSON (Content-Type: application/json)")
        try:
            length = int(self.headers.get('Content-Length', ''))
        except ValueError:
            self.close_connection = True
            raise ApiError(411, "the request needs a Content-Length") from None
        if length < 0 or length > MAX_BODY:
            self.close_connection = True  # the body is not read: the connection cannot be reused
            raise ApiError(413, f"the request body is {length} bytes; at most {MAX_BODY}")
        try:
            raw = self.rfile.read(length)
        except TimeoutError:
            self.close_connection = True
            raise ApiError(408, f"the request body stopped arriving: silent for {self.timeout:g} s, or "
                                f"the whole request took over {self.request_time:g} s") from None
        try:
            body = json.loads(raw.decode('utf-8')) if raw.strip() else {}
        except (ValueError, UnicodeDecodeError):
            raise ApiError(400, "the request body is not valid JSON") from None
        except RecursionError:  # thousands of nested [ fit in MAX_BODY; no route takes nesting
            raise ApiError(400, "the request body is nested too deeply") from None
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be a JSON object")
        return body

    def send_json(self, status, obj, retry_after=None):
        if status >= 400:
            self.close_connection = True  # a body left unread must not be taken for the next request
        data = json.dumps(obj, allow_nan=False).encode('utf-8')
        self.send_bytes(status, 'application/json; charset=utf-8', data, retry_after=retry_after)

    def send_file(self, name, head=False):
        with open(os.path.join(WEB_DIR, name), 'rb') as f:  # a name from the tables above only
            data = f.read()
        self.send_bytes(200, CONTENT_TYPES[os.path.splitext(name)[1]], data, head)

    def send_bytes(self, status, content_type, data, head=False, retry_after=None):
        self.send_response(status)
        if retry_after is not None:
            self.send_header('Retry-After', str(retry_after))
        self.send_header('Content-Type', content_type)
        self.send_header('Content-Length', str(len(data)))
        self.send_header('Cache-Control', 'no-store')
        self.send_header('X-Content-Type-Options', 'nosniff')
        self.send_header('Content-Security-Policy', CSP)
        if self.close_connection:
            self.send_header('Connection', 'close')
        self.end_headers()
        if not head:
            self.wfile.write(data)

    def log_request(self, code='-', size='-'):
        """Quiet when all is well; a refused or failed request is printed."""
        if isinstance(code, int) and code >= 400:
            super().log_request(code, size)


class LabServer(ThreadingHTTPServer):
    """The lab's HTTP server: a thread per connection, the Lab behind the API, and on the
    loopback address the Host names it answers to."""
    daemon_threads = True  # a page left open does not keep Ctrl-C waiting
    # connections the kernel holds while the server is busy accepting: socketserver's 5 reset
    # most of a burst of 200 at once (the system caps it at net.core.somaxconn)
    request_queue_size = 256

    def __init__(self, address, lab, own_pool=True):
        if ':' in address[0]:  # an IPv6 address such as ::1
            self.address_family = socket.AF_INET6
        self.lab, self.own_pool = lab, own_pool  # before binding: a port taken closes the server at once
        super().__init__(address, Handler)
        self.routes = routes()
        self.slots = Slots()
        port = self.server_address[1]
        self.local_only = is_loopback(address[0])
        self.local_hosts = local_hosts(address[0], port)

    def server_close(self):
        super().server_close()
        if self.own_pool:
            self.lab.pool.shutdown()  # the worker processes end with the server

    def handle_error(self, request, client_address):
        """A client that left mid-conversation (reset while its answer, or its next request,
        was on the wire, wherever in the handler that lands) is not a bug: nobody to tell.
        Anything else keeps the traceback socketserver prints."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)

    @property
    def url(self):
        host, port = self.server_address[:2]
        return f'http://{url_host(host)}:{port}/'


def local_hosts(host, port):
    """The Host headers a browser sends for this server on loopback (none for port 80)."""
    names = {'127.0.0.1', 'localhost', '[::1]', url_host(host)}
    return {f'{name}:{port}' for name in names} | (names if port == 80 else set())


def url_host(host):
    """The host as a URL and a Host header write it: an IPv6 address in brackets."""
    return f'[{host}]' if ':' in host else host


def is_loopback(host):
    """Whether an address reaches this machine only: 127.x, ::1, and 127.x written as an
    IPv4-mapped IPv6 address (::ffff:127.0.0.1), which ipaddress does not count as loopback."""
    if host == 'localhost':
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or bool(getattr(address, 'ipv4_mapped', None) and address.ipv4_mapped.is_loopback)


def make_server(ckpt, host=DEFAULT_HOST, port=DEFAULT_PORT, runs_dir='out/lab-runs', data=None, n_head=None,
                pool=None, exercises=None, text=None):
    """A LabServer bound and ready, after checking everything a learner passed: a missing or
    damaged checkpoint, a port taken or out of range, each a one-line UserError (a current
    folder deleted since is cli.run's, for every program). text: the running text the Training
    page trains on (default: the one a running-text checkpoint given at start was trained on,
    where it is still a file)."""
    if not 0 <= port <= 65535:
        raise UserError(f"--port {port} is out of range: use 1..65535 (or 0 for any free port)")
    if data is not None and not os.path.isfile(data):
        raise UserError(f"--data {data} is not a file: give a text file of names, one per line")
    if text is not None and not os.path.isfile(text):
        raise UserError(f"--text {text} is not a file: give a UTF-8 text file (a play, a book, code)")
    require_checkpoint(ckpt)
    record = read_checkpoint(ckpt, n_head=n_head)  # a missing or damaged checkpoint fails here, before serving
    if text is None and record.data_mode == 'text':
        trained_on = trained_data(record)
        text = trained_on if isinstance(trained_on, str) and os.path.isfile(trained_on) else None
    exercise_page = ExercisesPage(exercises)  # and a folder that is not a workspace of exercises
    checkpoints = Checkpoints(ckpt, n_head=n_head)
    # the processes the sandboxes compute in: the server's own (stopped with it), unless given
    own = pool is None
    lab = Lab(checkpoints, RunManager(runs_dir, checkpoints, data=data, text=text), Pool(WORKERS) if own else pool,
              exercises=exercise_page)
    try:
        return LabServer((host, port), lab, own_pool=own)
    except OSError as e:
        if e.errno in (errno.EADDRINUSE, errno.EACCES):  # taken, or below 1024 without root
            raise UserError(f"cannot listen on port {port}: {e.strerror}: pick another --port") from None
        raise UserError(f"cannot listen on {host}: {e.strerror}: give --host an address of this "
                        "machine, such as 127.0.0.1") from None


def stop_like_ctrl_c(signum, frame):
    raise KeyboardInterrupt


def run(args):
    server = make_server(args.ckpt, args.host, args.port, args.runs_dir, args.data, args.n_head,
                         exercises=args.exercises, text=args.text)
    if not server.local_only:
        print(f"warning: listening on {args.host}: anyone who can reach port {server.server_address[1]} "
              "can use this lab, including starting training runs"
              + (" and running your exercises' code" if args.exercises else '') + " (open it by IP address: other "
              "names are refused)", file=sys.stderr)
    print(f"microgpt lab on {args.ckpt}: {server.url}  (Ctrl-C to stop)", flush=True)
    for line in server.lab.runs.news:
        print(line, flush=True)
    if args.warm_up:
        server.lab.pool.warm(args.ckpt, args.n_head)  # the first click then finds the workers ready
    # `kill`, and closing the terminal (SIGHUP), stop it as Ctrl-C does: otherwise the server
    # would die at once and leave its training run going, in a session no terminal reaches
    for name in ('SIGTERM', 'SIGHUP'):
        if hasattr(signal, name):  # Windows has no SIGHUP
            signal.signal(getattr(signal, name), stop_like_ctrl_c)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        going = server.lab.runs.going()
        print("\nstopping" + (f": training run {going}, still going, stops as with Ctrl-C and saves "
                              "its last whole step" if going is not None else ''), flush=True)
    finally:
        server.lab.runs.shutdown()
        server.server_close()
    return 0
