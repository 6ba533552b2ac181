"""
The web lab's JSON API: each route takes a small JSON object and returns the numbers that
a lab function computes, made JSON-ready. Nothing here computes the model itself.

    lab = Lab(Checkpoints('out/model.json'), runs)
    lab.sandbox('attention', {'ckpt': 'start', 'text': 'anna', 'head': 1})  # -> a dict for json.dumps

Every sandbox route is POST /api/NAME for a sandbox of registry.SANDBOXES: its fields are the
sandbox's Params, read and range-checked here exactly as the command line checks its flags
(the same numbers, declared once), and the answer is the module's compute() dict.

The computing itself happens in workers.answer, in one of serve.py's worker processes.
serve.py maps URLs to these methods and turns their exceptions into HTTP answers: an
ApiError carries its own status, a UserError from the lab (an unknown character, a head out
of range, an expression the parser refuses) becomes 400 with the lab's one-line message.
A request never names a file: a model is picked by the id of a checkpoint the server knows
(the one given at start, and those its own training runs wrote).
"""

import math
import os
import threading
from contextlib import contextmanager, nullcontext

from ..edge.errors import UserError
from ..edge.limits import parameter_count
from . import registry
from .loading import example_text, trained_lr
from .step import scalar_positions
from .workers import MODELS, ApiError, Pool


# ---------------------------------------------------------------------------- reading a request
def field(body, name, kind, default=None, low=None, high=None):
    """body[name] checked to be of `kind` (int, float, bool, str) and within [low, high].

    A missing field takes `default`; without a default it is an error. JSON numbers arrive
    as int or float, so a float field accepts an int (one too large for a float is refused,
    not an OverflowError), and an int field refuses 2.5 and true.
    """
    return read_param(body, registry.Param(name, kind, default, low, high, required=default is None))


def read_param(body, p):
    """The value of Param p in a request body: its kind and range checked as the command line
    checks them (registry.Param.check), a 400 ApiError naming the field otherwise."""
    name = p.name
    if name not in body or body[name] is None:
        if p.required:
            raise ApiError(400, f"the request needs the field {name!r}")
        return list(p.default) if p.many else p.default
    value = body[name]
    if p.kind == 'values':
        return read_values(name, value, p)
    if p.many:
        if not isinstance(value, list) or not 1 <= len(value) <= registry.MAX_MANY:
            raise ApiError(400, f"{name!r} must be a list of 1..{registry.MAX_MANY} values")
        value = [one_value(name, v, p) for v in value]
    else:
        value = one_value(name, value, p)
    try:
        return p.check(value, repr(name))
    except UserError as e:
        raise ApiError(400, str(e)) from None


def one_value(name, value, p):
    kind = p.kind
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        if abs(value) > 1e308:  # JSON's integers are unbounded; float(10**400) would overflow
            raise ApiError(400, f"{name!r} is a {len(str(abs(value)))}-digit integer: give a number "
                                f"in {p.range_text() or 'range'}")
        value = float(value)
    if isinstance(value, bool) != (kind is bool) or not isinstance(value, kind):
        raise ApiError(400, f"{name!r} must be {KIND_NAMES[kind]}, got {value!r:.40}")
    if kind is float and not math.isfinite(value):
        raise ApiError(400, f"{name!r} must be a finite number")
    most = p.high if (kind is str and p.high) else registry.MAX_TEXT
    if kind is str and len(value) > most:
        raise ApiError(400, f"{name!r} is {len(value)} characters long; at most {most}")
    return value


def read_values(name, values, p):
    """A {variable: number} field: at most MAX_VARIABLES, each a number within p's range."""
    if not isinstance(values, dict) or len(values) > registry.MAX_VARIABLES:
        raise ApiError(400, f"{name!r} must be an object of at most {registry.MAX_VARIABLES} {{name: number}}")
    out = {}
    for key, value in values.items():
        # JSON's integers are unbounded: 1e400 written out in digits has no float
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                isinstance(value, float) and math.isfinite(value) or isinstance(value, int)) \
                or not p.low <= value <= p.high:
            raise ApiError(400, f"the value of {key!r:.40} must be a number in {p.low:g}..{p.high:g}")
        out[key] = float(value)
    return out


KIND_NAMES = {int: 'an integer', float: 'a number', bool: 'true or false', str: 'a string'}


# ---------------------------------------------------------------------------- checkpoints
class Checkpoints:
    """The checkpoints the pages may open, by id: 'start' (given at start) and 'run<n>'.

    Models are loaded once and kept (workers.MODELS); a file that changed on disk since is
    loaded afresh.
    """

    def __init__(self, start_path, n_head=None):
        self.lock = threading.Lock()
        self.paths = {}     # id -> (path, label)
        self.n_head = n_head
        self.add('start', start_path, f"{os.path.basename(start_path)} (given at start)")

    def add(self, ckpt_id, path, label):
        with self.lock:
            self.paths[ckpt_id] = (path, label)

    def path(self, ckpt_id):
        with self.lock:
            if ckpt_id not in self.paths:
                raise ApiError(404, f"no checkpoint with id {ckpt_id!r}: pick one the page lists")
            return self.paths[ckpt_id][0]

    def head_count(self, ckpt_id):
        """The --n-head given at start, for the checkpoint given at start (a flat export's)."""
        return self.n_head if ckpt_id == 'start' else None

    def model(self, ckpt_id):
        """The checkpoint as loading.Loaded (its record and numpy model), read once by this
        process (workers.MODELS)."""
        try:
            return MODELS.get('numpy', self.path(ckpt_id), self.head_count(ckpt_id))
        except ApiError as e:
            if e.status == 404:
                raise ApiError(404, f"checkpoint {ckpt_id!r} no longer exists on the server") from None
            raise

    def listing(self):
        """[{id, label, config}] in the order they were added, each config read from its model.

        A run's checkpoint deleted or damaged on disk since is left out, so every page still
        opens; the one given at start is always listed, or its error is the answer.
        """
        with self.lock:
            items = list(self.paths.items())
        out = []
        for ckpt_id, (_, label) in items:
            try:
                ckpt, model = self.model(ckpt_id)
            except (ApiError, UserError):
                if ckpt_id == 'start':
                    raise
                continue
            c = model.config
            out.append({'id': ckpt_id, 'label': label, 'trained_lr': trained_lr(ckpt),
                        'data_mode': ckpt.data_mode,  # 'text': the pages ask for text, not a name
                        'example': example_text(ckpt),  # what the pages' text box starts with
                        'step_numpy_first': parameter_count(c) > STEP_NUMPY_FIRST_ABOVE,
                        'step_scalar_positions': scalar_positions(c),  # the scalar step's most positions
                        'config': {k: getattr(c, k) for k in
                                   ('n_layer', 'n_embd', 'n_head', 'head_dim', 'block_size', 'vocab_size')}})
        return out


WAIT = 30.0  # seconds a request to a one-at-a-time sandbox waits for the one being computed


class Overtaken(Exception):
    """A one-at-a-time sandbox's request left uncomputed: a newer one came while it waited
    (Lab.turn). serve.py answers it 204, with no content."""


# The Step page asks the numpy engine's step first (drawn at once, the scalar engine's after it)
# on a model of more weights than this; on fewer, the scalar engine's step answers by itself:
# through the API, 59-111 ms at n_embd 32 (14,528 weights), 19-52 ms on train.py's default
# (4,192), against 0.65-1.35 s on the names recipe's 4x64 (201,088), for names of 4 to 11 letters
STEP_NUMPY_FIRST_ABOVE = 15_000


# ---------------------------------------------------------------------------- the routes
class Lab:
    """The API's routes: POST /api/NAME for every sandbox of the registry (`sandbox`), and the
    server's own: config, and the Training page's train_start / train_stop / train_status."""

    def __init__(self, checkpoints, runs, pool=None):
        self.checkpoints = checkpoints
        self.runs = runs
        # where the sandboxes compute: serve.py's worker processes, else this process (workers.py)
        self.pool = Pool(0) if pool is None else pool
        # a one-at-a-time sandbox (the scalar engine's graph of a step on a large model takes
        # a second or more and its memory: n_layer 4, n_embd 64, 15 characters: 1.6 s and 180 MiB
        # more at the peak, measured in one process by ru_maxrss) takes
        # requests in turn: one waits up to WAIT seconds (a learner who types a second name
        # before the first is drawn gets both), then is told to try again; one still waiting
        # when a newer one comes is overtaken by it (see `turn`)
        self.gates = {}
        self.latest = {}  # sandbox -> the number of the newest request for it
        self.gates_lock = threading.Lock()

    def config(self, body):
        """The checkpoints to choose from, the pages to navigate, what the Training page offers."""
        return {'checkpoints': self.checkpoints.listing(),
                'pages': [{'name': name, 'title': title} for name, title in registry.pages()],
                'features': {'training': self.runs.options()}}

    def sandbox(self, name, body, slot=nullcontext):
        """POST /api/NAME: the request's fields read as the registry declares them, then the
        module's compute() on the model it names, in a worker process (workers.answer).
        slot: what the computing is done inside (serve.py's Slots.take: so many at once), taken
        once a one-at-a-time sandbox's turn has come, so that a request waiting for its turn
        keeps no other page waiting (the Step page's numpy step, while a scalar one runs)."""
        s = registry.get(name)
        params = {p.name: read_param(body, p) if p.web else p.default for p in s.params}
        path = n_head = None
        if s.model is not None:
            ckpt_id = read_param(body, registry.Param('ckpt', str, 'start'))
            path, n_head = self.checkpoints.path(ckpt_id), self.checkpoints.head_count(ckpt_id)
        if s.model == 'log':  # the chosen checkpoint's log, and those of the others asked beside it
            path = [path] + [self.checkpoints.path(other) for other in params.pop('also', ())]
        with self.turn(name) if s.waits_its_turn(params) else nullcontext(), slot():
            return self.pool.compute(name, path, n_head, params)

    @contextmanager
    def turn(self, name):
        """A one-at-a-time sandbox's lock, held for one request; refused after WAIT seconds.

        A request that waited while a newer one for the same sandbox came is not computed
        (Overtaken: 204, no content): the page that sent both draws the newer one only (lab.js
        drops an overtaken answer), so a learner typing a name on the Step page queues one scalar
        step at most, not one per key. (Not a 4xx: the browser would log each as an error.)
        """
        with self.gates_lock:
            gate = self.gates.setdefault(name, threading.Lock())
            mine = self.latest[name] = self.latest.get(name, 0) + 1
        if not gate.acquire(timeout=WAIT):
            raise ApiError(503, f"another {name} is being computed: try again when it has ended")
        try:
            if self.latest[name] != mine:
                raise Overtaken(name)
            yield
        finally:
            gate.release()

    def train_start(self, body):
        return self.runs.start(body)

    def train_stop(self, body):
        return self.runs.stop()

    def train_status(self, body):
        return self.runs.status(field(body, 'offset', int, 0, 0, 2 ** 40))
