"""
The web lab: the lab's sandboxes as local web pages, on the learner's own checkpoint.

    python -m microgpt.lab serve --ckpt out/big.json --port 8080   # http://127.0.0.1:8080/

The standard library's server answers the pages (microgpt/lab/web/) and the JSON API under
/api/ (api.py). It protects the learner's machine from others and nothing more
(docs/reliability.md): loopback only; the Host must name it (no DNS rebinding) and a browser's
Origin must be it; a request never names a file; a POST is JSON of at most MAX_BODY bytes; a
mistake is a one-line JSON {"error": ...}. When it stops, its training run stops as with Ctrl-C.
"""

import errno
import ipaddress
import json
import os
import signal
import socket
import sys
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from ..edge.checkpoint import read_checkpoint
from ..edge.errors import UserError
from . import registry
from .api import ApiError, Checkpoints, Lab
from .exercises.web import ExercisesPage
from .limits import MAX_BODY
from .loading import DEFAULT_HOST, DEFAULT_PORT, require_checkpoint, trained_data
from .runs import RunManager

WEB_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'web')


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


class Handler(BaseHTTPRequestHandler):
    """One connection: each request is looked up in the tables above and answered, every
    mistake as a JSON {"error": ...}."""
    server_version = 'microgpt-lab'
    protocol_version = 'HTTP/1.1'

    def answer(self):
        method = self.command
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
                self.send_json(200, lab.sandbox(sandbox, body) if sandbox else getattr(lab, name)(body))
            elif path in pages or path in static:
                if method not in ('GET', 'HEAD'):
                    raise ApiError(405, f"{path} answers GET only")
                self.send_file(pages.get(path) or static[path], head=method == 'HEAD')
            else:
                raise ApiError(404, f"no such page or route: {path[:80]!r}")
        except ApiError as e:
            self.send_json(e.status, {'error': str(e)})
        except UserError as e:  # the lab's own one-line message about what was asked
            self.send_json(400, {'error': str(e)})
        except ConnectionError:  # the client left: not a bug, and no one to answer
            raise
        except Exception as e:  # a bug: say so, keep serving
            traceback.print_exc()
            self.send_json(500, {'error': f"internal error ({type(e).__name__}): see the server's terminal"})

    # every method is looked up in the tables (OPTIONS too: no cross-origin preflight is ever granted)
    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_OPTIONS = answer

    def check_origin(self):
        """The Host must be a loopback name of this server: a page elsewhere that makes a browser
        resolve its own name to this machine (DNS rebinding) sends that name. So must an Origin."""
        host = self.headers.get('Host', '')
        if host not in self.server.local_hosts:
            raise ApiError(400, f"unexpected Host {host[:60]!r}: open the address the server printed")
        origin = self.headers.get('Origin')
        if origin is not None and origin != f'http://{host}':
            raise ApiError(403, "requests from other sites are refused")

    def read_json(self):
        """The request's JSON object, after checking its type and size."""
        if self.headers.get('Content-Type', '').split(';')[0].strip() != 'application/json':
            raise ApiError(415, "send the request body as JSON (Content-Type: application/json)")
        length = self.headers.get('Content-Length', '')
        if not length.isdigit() or int(length) > MAX_BODY:
            raise ApiError(413, f"the request body is {length[:20] or 'of no stated length'}: at most {MAX_BODY} bytes")
        try:
            body = json.loads(self.rfile.read(int(length)).decode('utf-8') or '{}')
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
            raise ApiError(400, "the request body is not valid JSON") from None
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be a JSON object")
        return body

    def send_json(self, status, obj):
        self.close_connection |= status >= 400  # a body left unread must not be taken for the next request
        self.send_bytes(status, 'application/json; charset=utf-8', json.dumps(obj, allow_nan=False).encode('utf-8'))

    def send_file(self, name, head=False):
        with open(os.path.join(WEB_DIR, name), 'rb') as f:  # a name from the tables above only
            data = f.read()
        if name.endswith('.html'):  # a page is its <main>, sent in the frame every page shares
            with open(os.path.join(WEB_DIR, 'frame.html'), 'rb') as f:
                data = f.read().replace(b'{name}', name[:-5].encode()).replace(b'{main}', data)
        self.send_bytes(200, CONTENT_TYPES[os.path.splitext(name)[1]], data, head)

    def send_bytes(self, status, content_type, data, head=False):
        self.send_response(status)
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
    """The lab's HTTP server: a thread per connection, the Lab behind the API."""
    daemon_threads = True  # a page left open does not keep Ctrl-C waiting

    def __init__(self, address, lab):
        if ':' in address[0]:  # an IPv6 address such as ::1
            self.address_family = socket.AF_INET6
        self.lab = lab
        super().__init__(address, Handler)
        self.routes = routes()
        self.local_hosts = local_hosts(address[0], self.server_address[1])

    def handle_error(self, request, client_address):
        """A client that left mid-conversation (a page closed while its answer was on the wire)
        is not a bug: nobody to tell. Anything else keeps the traceback socketserver prints."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    @property
    def url(self):
        host, port = self.server_address[:2]
        return f'http://{url_host(host)}:{port}/'


def local_hosts(host, port):
    """The Host headers a browser sends for this server (none with a port for port 80)."""
    names = {'127.0.0.1', 'localhost', '[::1]', url_host(host)}
    return {f'{name}:{port}' for name in names} | (names if port == 80 else set())


def url_host(host):
    """The host as a URL and a Host header write it: an IPv6 address in brackets."""
    return f'[{host}]' if ':' in host else host


def is_loopback(host):
    """Whether an address reaches this machine only: localhost, 127.x, ::1, and 127.x written as
    an IPv4-mapped IPv6 address (::ffff:127.0.0.1), which ipaddress does not count as loopback."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host == 'localhost'
    return address.is_loopback or bool(getattr(address, 'ipv4_mapped', None) and address.ipv4_mapped.is_loopback)


def make_server(ckpt, host=DEFAULT_HOST, port=DEFAULT_PORT, runs_dir='out/lab-runs', data=None, n_head=None,
                exercises=None, text=None):
    """A LabServer bound and ready, after checking everything a learner passed, each mistake a
    one-line UserError. text: the Training page's running text (default: the checkpoint's)."""
    if not is_loopback(host):
        raise UserError(f"--host {host[:60]} is not a loopback address: the lab serves this machine only "
                        "(127.0.0.1, ::1 or localhost)")
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
    lab = Lab(checkpoints, RunManager(runs_dir, checkpoints, data=data, text=text), exercises=exercise_page)
    try:
        return LabServer((host, port), lab)
    except OSError as e:
        if e.errno in (errno.EADDRINUSE, errno.EACCES):  # taken, or below 1024 without root
            raise UserError(f"cannot listen on port {port}: {e.strerror}: pick another --port") from None
        raise UserError(f"cannot listen on {host}: {e.strerror}: try --host 127.0.0.1") from None


def stop_like_ctrl_c(signum, frame):
    raise KeyboardInterrupt


def run(args):
    server = make_server(args.ckpt, args.host, args.port, args.runs_dir, args.data, args.n_head,
                         exercises=args.exercises, text=args.text)
    print(f"microgpt lab on {args.ckpt}: {server.url}  (Ctrl-C to stop)", flush=True)
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
