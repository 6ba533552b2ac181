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
(the one given at start, those its own training runs wrote, and train.py's others that it
finds beside the one given at start).
"""

import math
import os
import threading
from contextlib import contextmanager, nullcontext

from ..edge.checkpoint import is_our_checkpoint
from ..edge.checks import short
from ..edge.errors import UserError
from ..programs.run import log_path_for
from . import registry
from .loading import example_text, trained_lr
from .render import unit
from .limits import MAX_MANY, MAX_TEXT, MAX_VARIABLES
from .workers import MODELS, ApiError, Pool, estimate_run


# ---------------------------------------------------------------------------- reading a request
def only_known(body, known):
    """A request naming a field the route does not take is refused, as the command line refuses
    an unknown flag: a misspelt "temperature" for "temperatures" must not answer with the default."""
    unknown = [name for name in body if name not in known]
    if unknown:
        listed = ', '.join(known) if known else 'no fields'
        raise ApiError(400, f"unknown field{'s' * (len(unknown) > 1)} "
                            f"{', '.join(short(name, 30) for name in unknown[:3])}"
                            f"{' and more' if len(unknown) > 3 else ''}: this route takes {listed}")
    return body


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
        if not isinstance(value, list) or not 1 <= len(value) <= MAX_MANY:
            raise ApiError(400, f"{name!r} must be a list of 1..{MAX_MANY} values")
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
                                f"{p.range_text() or 'in range'}")
        value = float(value)
    if isinstance(value, bool) != (kind is bool) or not isinstance(value, kind):
        raise ApiError(400, f"{name!r} must be {KIND_NAMES[kind]}, got {value!r:.40}")
    if kind is float and not math.isfinite(value):
        raise ApiError(400, f"{name!r} must be a finite number")
    most = p.high if (kind is str and p.high) else MAX_TEXT
    if kind is str and len(value) > most:
        raise ApiError(400, f"{name!r} is {len(value)} characters long; at most {most}")
    return value


def read_values(name, values, p):
    """A {variable: number} field: at most MAX_VARIABLES, each a number within p's range."""
    if not isinstance(values, dict) or len(values) > MAX_VARIABLES:
        raise ApiError(400, f"{name!r} must be an object of at most {MAX_VARIABLES} {{name: number}}")
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
NEARBY_MOST = 6  # other checkpoints of the start's folder listed: as many as the Loss page draws at once


class Checkpoints:
    """The checkpoints the pages may open, by id: 'start' (given at start), 'run<n>' (the
    Training page's runs) and 'file:<name>' (train.py's other checkpoints in the start's folder).

    Models are loaded once and kept (workers.MODELS); a file that changed on disk since is
    loaded afresh. The folder is looked at again at each listing, so a run trained from the
    command line beside the start appears once its checkpoint is saved; a request's id is only
    ever looked up among the names the server found there, never joined onto a path.
    """

    def __init__(self, start_path, n_head=None):
        self.lock = threading.Lock()
        self.paths = {}     # id -> (path, label)
        self.n_head = n_head
        self.folder = os.path.dirname(os.path.abspath(start_path))
        self.start = os.path.realpath(start_path)
        self.add('start', start_path, None)  # labelled from the file at each listing: its steps and size

    def add(self, ckpt_id, path, label):
        with self.lock:
            self.paths[ckpt_id] = (path, label)

    def nearby(self):
        """{'file:<name>': path} of the checkpoints beside the start's, in name order: each a
        file of ours (is_our_checkpoint: its first bytes) with train.py's log beside it, at most
        NEARBY_MOST. Not the start itself, nor a converted checkpoint (no log: no run to draw)."""
        try:
            names = sorted(os.listdir(self.folder))
        except OSError:
            return {}
        found = {}
        for name in names:
            path = os.path.join(self.folder, name)
            if len(found) == NEARBY_MOST:
                break
            if (name.endswith(CHECKPOINT_ENDINGS) and os.path.realpath(path) != self.start
                    and os.path.isfile(log_path_for(path)) and is_our_checkpoint(path)):
                found[f'file:{name}'] = path
        return found

    def path(self, ckpt_id):
        with self.lock:
            if ckpt_id in self.paths:
                return self.paths[ckpt_id][0]
        if isinstance(ckpt_id, str) and ckpt_id.startswith('file:'):
            path = self.nearby().get(ckpt_id)
            if path is not None:
                return path
        raise ApiError(404, f"no checkpoint with id {short(ckpt_id, 60)}: pick one the page lists")

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
        """[{id, label, config, ...}] in the order they were added, then the start's neighbours,
        each config read from its model, with whether a training log lies beside it and what
        each page's about_model adds.

        A run's checkpoint deleted or damaged on disk since is left out, so every page still
        opens; the one given at start is always listed, or its error is the answer.
        """
        with self.lock:
            items = list(self.paths.items())
        items += [(ckpt_id, (path, None)) for ckpt_id, path in self.nearby().items()]
        out = []
        for ckpt_id, (path, label) in items:
            try:
                ckpt, model = self.model(ckpt_id)
            except (ApiError, UserError):
                if ckpt_id == 'start':
                    raise
                continue
            c = model.config
            entry = {'id': ckpt_id, 'label': label or file_label(path, ckpt, ckpt_id == 'start'),
                     'trained_lr': trained_lr(ckpt),
                     'data_mode': ckpt.data_mode,  # 'text': the pages ask for text, not a name
                     'example': example_text(ckpt),  # what the pages' text box starts with
                     'unit': unit(model.tokenizer),  # 'character' or 'token': the pages' word for what it reads
                     # a converted checkpoint has no log beside it: the Loss page says so, asking nothing
                     'log': os.path.isfile(log_path_for(path)),
                     'config': {k: getattr(c, k) for k in
                                ('n_layer', 'n_embd', 'n_head', 'head_dim', 'block_size', 'vocab_size')}}
            for s in registry.SANDBOXES:  # what a page knows of each checkpoint before it asks
                if s.about_model is not None:
                    entry.update(s.about_model(c))
            out.append(entry)
        return out


# the files a checkpoint is written to (edge/checkpoint's formats); a log is never one
CHECKPOINT_ENDINGS = ('.json', '.safetensors')


def model_size(config):
    """A model's size as a label gives it: n_layer x n_embd, '2x64'."""
    return f"{config.n_layer}x{config.n_embd}"


def file_label(path, ckpt, start=False):
    """How the list names the checkpoint given at start, or one found beside it: its file, its
    steps (a converted checkpoint has none) and its size."""
    steps = f"{ckpt.train_state.step} steps, " if ckpt.train_state is not None else ''
    return f"{os.path.basename(path)}{' (given at start)' if start else ''}: {steps}{model_size(ckpt.config)}"


WAIT = 30.0  # seconds a request to a one-at-a-time sandbox waits for the one being computed


class Overtaken(Exception):
    """A one-at-a-time sandbox's request left uncomputed: a newer one came while it waited
    (Lab.turn). serve.py answers it 204, with no content."""


# ---------------------------------------------------------------------------- the routes
class Lab:
    """The API's routes: POST /api/NAME for every sandbox of the registry (`sandbox`), and the
    server's own: config, the Training page's train_start / train_stop / train_status, and the
    Exercises page's exercises / exercises_check."""

    def __init__(self, checkpoints, runs, pool=None, exercises=None):
        self.checkpoints = checkpoints
        self.runs = runs
        self.exercise_page = exercises  # the Exercises page (exercises/web.py), with or without a workspace
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
        only_known(body, [p.name for p in s.params if p.web] + (['ckpt'] if s.model is not None else []))
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

    def train_estimate(self, body):
        return self.runs.estimate(body, lambda flags, name: self.pool.call(estimate_run, flags, name))

    def train_stop(self, body):
        only_known(body, [])
        return self.runs.stop()

    def train_status(self, body):
        only_known(body, ['offset'])
        return self.runs.status(field(body, 'offset', int, 0, 0, 2 ** 40))

    def exercises(self, body):
        """The Exercises page: the path, and each exercise's last result in `serve --exercises DIR`."""
        return self.exercises_page().listing(dict(registry.pages()))

    def exercises_check(self, body):
        """Check one exercise of the --exercises workspace now, in the checker's subprocess."""
        from .exercises.catalog import EXERCISES
        from .exercises.web import Busy
        number = field(body, 'number', int, None, 1, len(EXERCISES))
        try:
            return self.exercises_page().check(number, dict(registry.pages()))
        except Busy:
            raise ApiError(503, "a check is running already: try again when it has ended", retry_after=1) from None

    def exercises_page(self):
        if self.exercise_page is None:  # a Lab made without one (the tests' own): the path only
            from .exercises.web import ExercisesPage
            self.exercise_page = ExercisesPage()
        return self.exercise_page
