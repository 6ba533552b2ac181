"""
The web lab's JSON API: each route takes a small JSON object and returns the numbers that a
lab function computes, made JSON-ready. Nothing here computes the model itself.

    lab = Lab(Checkpoints('out/model.json'), runs)
    lab.sandbox('attention', {'ckpt': 'start', 'text': 'anna', 'head': 1})  # -> a dict for json.dumps

POST /api/NAME's fields are sandbox NAME's Params (registry.py), checked as the command line
checks its flags. A request never names a file: a model is picked by the id of a checkpoint
the server knows (Checkpoints).
"""

import collections
import importlib
import math
import os
import threading

import numpy as np

from ..edge.checkpoint import is_our_checkpoint
from ..edge.checks import short
from ..edge.errors import UserError
from ..engine import zero_grad
from ..programs.run import log_path_for
from . import registry
from .exercises.catalog import EXERCISES
from .exercises.web import ExercisesPage
from .loading import example_text, load, rungs_text, trained_lr
from .render import unit
from .limits import MAX_TEXT


class ApiError(Exception):
    """A request the API refuses, with the HTTP status to answer and a one-line message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


# ---------------------------------------------------------------------------- reading a request
def only_known(body, known):
    """Refuse a field the route does not take, as the command line refuses an unknown flag: a
    misspelt "temperature" for "temperatures" must not answer with the default."""
    unknown = [short(name, 30) for name in body if name not in known]
    if unknown:
        raise ApiError(400, f"unknown field{'s' * (len(unknown) > 1)} {', '.join(unknown[:3])}"
                            f"{' and more' if len(unknown) > 3 else ''}: this route takes {', '.join(known) or 'no fields'}")
    return body


def field(body, name, kind, default=None, low=None, high=None):
    """body[name] of `kind`, within [low, high]; `default` if missing (required without one)."""
    return read_param(body, registry.Param(name, kind, default, low, high, required=default is None))


def read_param(body, p):
    """Param p's value in a request body, checked as the command line checks it (Param.check)."""
    name = p.name
    if name not in body or body[name] is None:
        if p.required:
            raise ApiError(400, f"the request needs the field {name!r}")
        return list(p.default) if p.many else p.default
    value = body[name]
    if p.kind == 'values':
        return registry.read_values(value, p, repr(name))
    if p.many:
        if not isinstance(value, list) or not value:
            raise ApiError(400, f"{name!r} must be a list of one value or more")
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
        value = float(value)  # JSON's 2 is a number as 2.0 is
    if isinstance(value, bool) != (kind is bool) or not isinstance(value, kind):
        raise ApiError(400, f"{name!r} must be {KIND_NAMES[kind]}, got {value!r:.40}")
    if kind is float and not math.isfinite(value):
        raise ApiError(400, f"{name!r} must be a finite number")
    most = p.high if (kind is str and p.high) else MAX_TEXT
    if kind is str and len(value) > most:
        raise ApiError(400, f"{name!r} is {len(value)} characters long; at most {most}")
    return value


KIND_NAMES = {int: 'an integer', float: 'a number', bool: 'true or false', str: 'a string'}


# ---------------------------------------------------------------------------- the answer, JSON-ready
def jsonable(x):
    """numpy arrays and numbers as plain lists and floats; NaN and infinities become null
    (JSON has no NaN: a masked attention cell is null, "no weight", never 0)."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(x) else None
    return x


def public(data):
    """A compute() dict as the API sends it: JSON-ready, without its terminal-only '_' keys."""
    return jsonable({k: v for k, v in data.items() if not str(k).startswith('_')})


# ---------------------------------------------------------------------------- checkpoints
class Models:
    """Checkpoints read once and kept (loading.Loaded) by (kind, path, n_head), so that a page's
    next request does not read the file again; one changed on disk since is read afresh. A GPT
    of Values ('scalar') gets the file's weights back, and zero gradients, before each use."""

    def __init__(self, keep=4):  # the start checkpoint, and the latest runs'
        self.keep, self.lock = keep, threading.Lock()
        self.kept = collections.OrderedDict()  # key -> (the file's mtime, Loaded)

    def get(self, kind, path, n_head=None):
        mtime, key = os.stat(path).st_mtime_ns, (kind, path, n_head)
        with self.lock:
            if key not in self.kept or self.kept[key][0] != mtime:
                self.kept[key] = (mtime, load(path, kind, n_head))
            self.kept.move_to_end(key)
            loaded = self.kept[key][1]
            while len(self.kept) > self.keep:
                self.kept.popitem(last=False)
        if kind == 'scalar':  # as the file has it, whatever the last step did to it
            loaded.model.load_weights(loaded.ckpt.weights)
            zero_grad(loaded.model.params)
        return loaded


NEARBY_MOST = 6  # other checkpoints of the start's folder listed: as many as the Loss page draws at once
ENDINGS = ('.json', '.safetensors')  # a checkpoint's files (edge/checkpoint's formats); a log is never one


class Checkpoints:
    """The checkpoints the pages may open, by id: 'start' (given at start), 'run<n>' (the
    Training page's runs) and 'file:<name>' (train.py's others in the start's folder, looked at
    again at each listing). An id is only looked up among those, never joined onto a path."""

    def __init__(self, start_path, n_head=None):
        self.lock = threading.Lock()
        self.paths = {}     # id -> (path, label)
        self.models = Models()
        self.n_head = n_head
        self.folder = os.path.dirname(os.path.abspath(start_path))
        self.start = os.path.realpath(start_path)
        self.add('start', start_path, None)  # labelled from the file at each listing: its steps and size

    def add(self, ckpt_id, path, label):
        with self.lock:
            self.paths[ckpt_id] = (path, label)

    def nearby(self):
        """{'file:<name>': path} of the first NEARBY_MOST checkpoints of ours beside the start's,
        by name, with train.py's log beside (not a converted one)."""
        try:
            paths = [os.path.join(self.folder, n) for n in sorted(os.listdir(self.folder)) if n.endswith(ENDINGS)]
        except OSError:
            return {}
        ours = [p for p in paths if os.path.realpath(p) != self.start and os.path.isfile(log_path_for(p))
                and is_our_checkpoint(p)]
        return {f'file:{os.path.basename(p)}': p for p in ours[:NEARBY_MOST]}

    def path(self, ckpt_id):
        with self.lock:
            if ckpt_id in self.paths:
                return self.paths[ckpt_id][0]
        if isinstance(ckpt_id, str) and ckpt_id.startswith('file:'):
            path = self.nearby().get(ckpt_id)
            if path is not None:
                return path
        raise ApiError(404, f"no checkpoint with id {short(ckpt_id, 60)}: pick one the page lists")

    def model(self, ckpt_id, kind='numpy'):
        """The checkpoint as loading.Loaded, read once (Models)."""
        path = self.path(ckpt_id)
        try:
            return self.models.get(kind, path, self.n_head if ckpt_id == 'start' else None)
        except FileNotFoundError:
            raise ApiError(404, f"checkpoint {short(ckpt_id, 60)} no longer exists on the server") from None

    def listing(self):
        """[{id, label, config, ...}] in the order added, then the start's neighbours, with what
        each page's about_model adds. One deleted or damaged since is left out (every page still
        opens), but the start, whose error is then the answer."""
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
            entry['config']['rungs'] = rungs_text(c)  # the header's words for them ('' for microgpt's)
            for s in registry.SANDBOXES:  # what a page knows of each checkpoint before it asks
                entry.update(s.about_model(c) if s.about_model else {})
            out.append(entry)
        return out


def model_size(config):
    """A model's size as a label gives it: n_layer x n_embd, '2x64'."""
    return f"{config.n_layer}x{config.n_embd}"


def file_label(path, ckpt, start=False):
    """How the list names the start's checkpoint, or one beside it: file, steps, size."""
    steps = f"{ckpt.train_state.step} steps, " if ckpt.train_state is not None else ''
    return f"{os.path.basename(path)}{' (given at start)' if start else ''}: {steps}{model_size(ckpt.config)}"


# ---------------------------------------------------------------------------- the routes
class Lab:
    """The API's routes: POST /api/NAME for every sandbox of the registry (`sandbox`), and the
    server's own: config, the Training page's train_start / train_stop / train_status, and the
    Exercises page's exercises / exercises_check."""

    def __init__(self, checkpoints, runs, exercises=None):
        self.checkpoints, self.runs = checkpoints, runs
        self.exercise_page = exercises or ExercisesPage()  # exercises/web.py's, with or without a workspace
        # one computation at a time: a scalar-engine step on a large model takes a second and
        # hundreds of MB, and two at once would only share the cores (the pages drop stale answers)
        self.lock = threading.Lock()

    def config(self, body):
        """The checkpoints to choose from, the pages to navigate, what the Training page offers."""
        return {'checkpoints': self.checkpoints.listing(),
                'pages': [{'name': name, 'title': title} for name, title in registry.pages()],
                'features': {'training': self.runs.options()}}

    def sandbox(self, name, body):
        """POST /api/NAME: the module's compute() on the model the request names (a checkpoint,
        its training log, or none)."""
        s = registry.get(name)
        only_known(body, [p.name for p in s.params if p.web] + (['ckpt'] if s.model is not None else []))
        params = {p.name: read_param(body, p) if p.web else p.default for p in s.params}
        ckpt_id = read_param(body, registry.Param('ckpt', str, 'start')) if s.model is not None else None
        module = importlib.import_module(s.module_name)
        with self.lock:
            if s.model is None:
                return public(module.compute(**params))
            if s.model == 'log':  # the chosen checkpoint's log, and those of the others asked beside it
                ids = [ckpt_id, *params.pop('also', ())]
                return public(module.compute([log_path_for(self.checkpoints.path(i)) for i in ids], **params))
            loaded = self.checkpoints.model(ckpt_id, s.model)
            return public(registry.compute_on_model(s, loaded, params, spell=lambda p: repr(p.name)))

    def train_start(self, body):
        return self.runs.start(body)

    def train_stop(self, body):
        only_known(body, [])
        return self.runs.stop()

    def train_status(self, body):
        only_known(body, ['offset'])
        return self.runs.status(field(body, 'offset', int, 0, 0, 2 ** 40))

    def exercises(self, body):
        """The Exercises page: the path, and each exercise's last result in `serve --exercises DIR`."""
        return self.exercise_page.listing(dict(registry.pages()))

    def exercises_check(self, body):
        """Check one exercise of the --exercises workspace now, in the checker's subprocess."""
        number = field(body, 'number', int, None, 1, len(EXERCISES))
        return self.exercise_page.check(number, dict(registry.pages()))
