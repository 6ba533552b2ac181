"""
The web lab's JSON API: each route takes a small JSON object and returns the numbers that
a lab function computes, made JSON-ready. Nothing here computes the model itself.

    lab = Lab(Checkpoints('out/model.json'), trainer)
    lab.attention({'ckpt': 'start', 'text': 'anna', 'head': 1})   # -> a dict for json.dumps

serve.py maps URLs to these methods and turns their exceptions into HTTP answers: an
ApiError carries its own status, a UserError from the lab (an unknown character, a head out
of range, an expression the parser refuses) becomes 400 with the lab's one-line message.
A request never names a file: a model is picked by the id of a checkpoint the server knows
(the one given at start, and those its own training runs wrote).
"""

import math
import os
import threading

import numpy as np

from .. import sampling
from ..checks import check_prompt
from ..errors import UserError
from . import attention, autograd, overview, sampler, step
from .loading import load_model

# Limits on what one request may ask for: enough for any lesson, small enough to stay quick.
MAX_TEXT = 64           # characters of a name or prompt (the block is shorter anyway)
MAX_NAMES = 50          # names per sampling request
MAX_TOP = 50            # most likely characters per position on the overview


class ApiError(Exception):
    """A request the API refuses, with the HTTP status to answer and a one-line message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


# ---------------------------------------------------------------------------- reading a request
def field(body, name, kind, default=None, low=None, high=None):
    """body[name] checked to be of `kind` (int, float, bool, str) and within [low, high].

    A missing field takes `default`; without a default it is an error. JSON numbers arrive
    as int or float, so a float field accepts an int, and an int field refuses 2.5 and true.
    """
    if name not in body or body[name] is None:
        if default is None:
            raise ApiError(400, f"the request needs the field {name!r}")
        return default
    value = body[name]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if isinstance(value, bool) != (kind is bool) or not isinstance(value, kind):
        raise ApiError(400, f"{name!r} must be {KIND_NAMES[kind]}, got {value!r:.40}")
    if kind is float and not math.isfinite(value):
        raise ApiError(400, f"{name!r} must be a finite number")
    if kind is str and len(value) > (high or MAX_TEXT):
        raise ApiError(400, f"{name!r} is {len(value)} characters long; at most {high or MAX_TEXT}")
    if kind in (int, float) and ((low is not None and value < low) or (high is not None and value > high)):
        raise ApiError(400, f"{name!r} is {value}; it must lie in {low}..{high}")
    return value


KIND_NAMES = {int: 'an integer', float: 'a number', bool: 'true or false', str: 'a string'}


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


# ---------------------------------------------------------------------------- checkpoints
class Checkpoints:
    """The checkpoints the pages may open, by id: 'start' (given at start) and 'run<n>'.

    Models are loaded once and kept; a file that changed on disk since is loaded afresh.
    """

    def __init__(self, start_path, n_head=None):
        self.lock = threading.Lock()
        self.paths = {}     # id -> (path, label)
        self.loaded = {}    # id -> (mtime, NumpyGPT)
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

    def model(self, ckpt_id):
        path = self.path(ckpt_id)
        try:
            mtime = os.stat(path).st_mtime_ns
        except OSError:
            raise ApiError(404, f"checkpoint {ckpt_id!r} no longer exists on the server") from None
        with self.lock:
            cached = self.loaded.get(ckpt_id)
        if cached and cached[0] == mtime:
            return cached[1]
        model = load_model(path, n_head=self.n_head if ckpt_id == 'start' else None)
        with self.lock:
            self.loaded[ckpt_id] = (mtime, model)
        return model

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
                c = self.model(ckpt_id).config
            except (ApiError, UserError):
                if ckpt_id == 'start':
                    raise
                continue
            out.append({'id': ckpt_id, 'label': label,
                        'config': {k: getattr(c, k) for k in
                                   ('n_layer', 'n_embd', 'n_head', 'head_dim', 'block_size', 'vocab_size')}})
        return out


STEP_WAIT = 30.0  # seconds a step request waits for the one being computed


# ---------------------------------------------------------------------------- the routes
class Lab:
    """One method per API route: body (a dict parsed from JSON) -> a JSON-ready dict."""

    def __init__(self, checkpoints, trainer):
        self.checkpoints = checkpoints
        self.trainer = trainer
        # one step at a time: the scalar engine's graph of a step on a large model takes
        # seconds and hundreds of MB (n_layer 4, n_embd 64, 31 characters: ~6 s, ~600 MB),
        # so a burst of requests must not build many at once. A request waits its turn for up
        # to STEP_WAIT seconds (a learner who types a second name before the first is drawn
        # gets both), then is told to try again.
        self.step_gate = threading.Lock()

    def _model(self, body):
        return self.checkpoints.model(field(body, 'ckpt', str, 'start'))

    def config(self, body):
        """The checkpoints to choose from, and what the Training page may offer."""
        return {'checkpoints': self.checkpoints.listing(),
                'features': {'training': self.trainer.options()}}

    def overview(self, body):
        """overview.predictions at every position, their mean loss, and one continuation."""
        model = self._model(body)
        text = field(body, 'text', str)
        top = field(body, 'top', int, 5, 1, MAX_TOP)
        temperature = field(body, 'temperature', float, 0.5, 1e-3, 100.0)
        seed = field(body, 'seed', int, 42, 0, 2 ** 32 - 1)
        rows = overview.predictions(model, text, top)
        vocab_size = model.config.vocab_size
        return jsonable({'text': text, 'positions': rows,
                         'mean_loss': sum(r['loss'] for r in rows) / len(rows),
                         'uniform_loss': math.log(vocab_size), 'vocab_size': vocab_size,
                         'continuation': overview.continuation(model, text, temperature, seed),
                         'temperature': temperature, 'seed': seed})

    def attention(self, body):
        """attention.attention_view: one head and query in detail, and every head's weights."""
        model = self._model(body)
        query = body.get('query')
        scale = field(body, 'scale', bool, True)
        view = attention.attention_view(
            model, field(body, 'text', str), field(body, 'layer', int, 0, 0, 1000),
            field(body, 'head', int, 0, 0, 1000),
            None if query is None else field(body, 'query', int, 0, 0, 1000),
            scale=scale, temperature=field(body, 'temperature', float, 1.0, 1e-3, 100.0))
        keep = ('query', 'labels', 'q', 'keys', 'values', 'products', 'raw', 'scores', 'weights',
                'weighted_values', 'out', 'all_heads', 'stats')
        out = {k: view[k] for k in keep}
        head_dim = model.config.head_dim
        # q.k after the model's 1/sqrt(head_dim) (or not, with scale off), before the temperature
        out['scaled'] = view['raw'] * (head_dim ** -0.5 if scale else 1.0)
        out['head_dim'] = head_dim
        return jsonable(out)

    def autograd(self, body):
        """autograd.explore: the graph's nodes in topological order, each with data and grad."""
        expression = field(body, 'expression', str, high=autograd.MAX_LENGTH)
        values = body.get('values', {})
        if not isinstance(values, dict) or len(values) > 50:
            raise ApiError(400, "'values' must be an object of at most 50 {name: number}")
        for name, value in values.items():
            # JSON's integers are unbounded: 1e400 written out in digits has no float
            if isinstance(value, bool) or not isinstance(value, (int, float)) or abs(value) > 1e300:
                raise ApiError(400, f"the value of {name!r:.40} must be a number of at most 1e300")
        # the page sends values for the variables it knows of; a new variable starts at 1,
        # and a value whose variable was deleted from the expression is dropped
        _, variables = autograd.parse_expression(expression)
        given = {n: float(values.get(n, 1.0)) for n in variables}
        root, leaves, names = autograd.explore(expression, [f'{n}={v!r}' for n, v in given.items()])
        nodes = [{'label': names.get(node) or op or 'leaf', 'op': op, 'data': data, 'grad': grad,
                  'inputs': children, 'variable': next((n for n, l in leaves.items() if l is node), None)}
                 for node, op, data, grad, children in autograd.graph_rows(root)]
        return jsonable({'expression': expression.strip(), 'value': root.data, 'nodes': nodes,
                         'variables': {n: {'value': l.data, 'grad': l.grad} for n, l in leaves.items()}})

    def sample(self, body):
        """The next-character distribution after [BOS] + prompt, and names drawn by
        microgpt.sampling, at the given temperature and top-k; beside them lesson 04's sandbox,
        the same distribution at several temperatures (microgpt.lab.sampler.sample_view)."""
        model = self._model(body)
        prompt = field(body, 'prompt', str, '')
        temperature = field(body, 'temperature', float, 0.5, 0.0, 100.0)
        num = field(body, 'num', int, 10, 1, MAX_NAMES)
        seed = field(body, 'seed', int, 42, 0, 2 ** 32 - 1)
        options = {'temperature': temperature, 'seed': seed, 'prompt': prompt}
        top_k = body.get('top_k')
        if top_k is not None:
            options['top_k'] = field(body, 'top_k', int, 0, 1, model.config.vocab_size)
        ids = [model.tokenizer.bos] + check_prompt(model.tokenizer, model.config.block_size, prompt)
        names = sampling.sample_names(model, num=num, **options)
        logits = model.next_logits_fn()(ids)
        probs = sampling.probabilities(logits, temperature, options.get('top_k'))
        chars = [overview.token_label(model.tokenizer, i) for i in range(model.config.vocab_size)]
        out = {'prompt': prompt, 'names': names, 'distribution': [{'char': c, 'p': p} for c, p in zip(chars, probs)],
               **options}
        out['sandbox'] = sampler.sample_view(model, **options)
        return jsonable(out)

    def step(self, body):
        """Lesson 04's training step on the chosen checkpoint: lab step's numbers (step_view)."""
        path = self.checkpoints.path(field(body, 'ckpt', str, 'start'))
        text, lr = field(body, 'text', str), field(body, 'lr', float, 0.01, 0.0, 10.0)
        if not self.step_gate.acquire(timeout=STEP_WAIT):
            raise ApiError(503, "another step is being computed: try again when it has ended")
        try:
            return jsonable(step.step_view(path, text=text, lr=lr))
        finally:
            self.step_gate.release()

    def train_start(self, body):
        return self.trainer.start(body)

    def train_stop(self, body):
        return self.trainer.stop()

    def train_status(self, body):
        return self.trainer.status(field(body, 'offset', int, 0, 0, 2 ** 40))

