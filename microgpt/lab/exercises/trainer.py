"""
`exercises train`, the payoff: microgpt trained with the learner's own engine and model, step by
step beside the project's, then names sampled from the learner's model.

Two processes, as for every check. In runner.py's subprocess, run() trains the learner's side:
their Value assembled from exercises 1 to 7 (learner_value_class: each op's forward value and
local derivatives are theirs, + is given, backward() is theirs), their name_loss (14, through
their gpt 13 and blocks 8 to 12), backward (7) and adam_step (15), on weights that are the same
numbers as a fresh GPT(config, seed)'s; it reports each step's loss, gradients and updated
weights (every number for the first FULL_STEPS steps, then one weighted sum a row: summary()).
In the checker's process, where no learner's code runs, Project trains microgpt's own side on
the same names (training.doc_loss on GPT's fused blocks, train.py's default, Value.backward,
optim.Adam.step) and judges each reported step: the loss, every gradient, every weight after the
update, in that order; the first that differs by more than PART is reported once, with its step.
The losses are shown at every step (equal to rounding when the learner is right: a sum taken in
another order differs in its last bits). Then the learner's model samples names through their
gpt() and probabilities() (16), and Project samples microgpt's with the same seed.
"""

import math
import random

from ... import sampling, training
from ...edge.data import load_docs, split_docs
from ...engine import Tape
from ...model import GPT, GPTConfig
from ...optim import Adam
from ...tokenizer import CharTokenizer
from . import catalog, harness

PART = 1e-9         # two numbers differ when |a - b| > PART * max(1, |b|): rounding stays far below
FULL_STEPS = 2      # steps reported number by number (a slip shows at step 1 or 2); later ones, a sum a row
STEP_SECONDS = 60.0  # one step of the learner's engine, at most (about 0.05 s on the default model)


class Failed(Exception):
    """The learner's code failed during training: the event says how, in one line."""


def learner_value_class(mul, power, exp, log, relu, backward):
    """A Value class whose ops take their numbers from the learner's exercises 1 to 5 and whose
    backward() is their exercise 7: engine.py's Value, with the learner's arithmetic."""

    class Value:
        __slots__ = ('data', 'grad', '_children', '_local_grads', '_op')

        def __init__(self, data, children=(), local_grads=(), op=''):
            self.data, self.grad = data, 0.0
            self._children, self._local_grads, self._op = children, local_grads, op

        def __add__(self, other):  # given in exercise 1's docstring
            other = other if isinstance(other, Value) else Value(other)
            return Value(self.data + other.data, (self, other), (1.0, 1.0), '+')

        def __mul__(self, other):
            other = other if isinstance(other, Value) else Value(other)
            out, grads = mul(self.data, other.data)
            return Value(out, (self, other), tuple(grads), '*')

        def __pow__(self, n):
            out, grads = power(self.data, n)
            return Value(out, (self,), tuple(grads), f'**{n}')

        def exp(self):
            out, grads = exp(self.data)
            return Value(out, (self,), tuple(grads), 'exp')

        def log(self):
            out, grads = log(self.data)
            return Value(out, (self,), tuple(grads), 'log')

        def relu(self):
            out, grads = relu(self.data)
            return Value(out, (self,), tuple(grads), 'relu')

        def __neg__(self): return self * -1
        def __radd__(self, other): return self + other
        def __sub__(self, other): return self + (-other)
        def __rsub__(self, other): return other + (-self)
        def __rmul__(self, other): return self * other
        def __truediv__(self, other): return self * other ** -1
        def __rtruediv__(self, other): return other * self ** -1

        def backward(self):
            backward(self)

        def __repr__(self):
            return f"Value(data={self.data:.6g}, grad={self.grad:.6g})"
    return Value


class Learner:
    """The learner's functions, loaded from their workspace, and a guard to call them with."""

    def __init__(self, workspace):
        self.workspace = workspace
        self.fn = {}
        for n in catalog.TRAIN_USES:
            e = catalog.get(n)
            try:
                self.fn[e.function] = harness.load(e, workspace)
            except harness.Report as r:
                raise Failed(f"your {e.label} cannot be used: {r.line}") from None
        f = self.fn
        self.Value = learner_value_class(f['mul'], f['power'], f['exp'], f['log'], f['relu'], f['backward'])

    def call(self, what, fn, *args):
        """fn(*args) under a time limit with its printing bounded; Failed in one line otherwise."""
        try:
            with harness.guarded(harness.Bounded(), STEP_SECONDS):
                return fn(*args)
        except harness.TimeLimit:
            raise Failed(f"{what} did not finish within {STEP_SECONDS:g} s") from None
        except harness.OutputFlood:
            raise Failed(f"{what} printed more than {harness.OUTPUT_LIMIT:,} characters") from None
        except BaseException as e:  # noqa: B902: whatever the learner's code raises, in one line
            if isinstance(e, KeyboardInterrupt):
                raise
            raise Failed(f"{what} raised {harness.exception_line(e)}{harness.where_in(e, self.workspace)}") from None


def number(x):
    """A learner's number as the report carries it: None for what is not an int or a float."""
    return float(x) if type(x) in (int, float) else None


def row_sum(row):
    """One number for a row, weighted by position (1 to 2), so that two entries swapped show."""
    total = 0.0
    for j, x in enumerate(row):
        if type(x) not in (int, float):
            return None
        total += (1.0 + j / len(row)) * x
    return total


def summary(matrices, step):
    """A step's gradients or weights as the learner's process reports them ({name: rows}): each
    number for the first FULL_STEPS steps, then [row_sum] a row (a step of train.py's default
    model is then about 10 KB of report, not 200 KB)."""
    if step <= FULL_STEPS:
        return {name: [[number(x) for x in row] for row in m] for name, m in matrices.items()}
    return {name: [[row_sum(row)] for row in m] for name, m in matrices.items()}


def tolerance(row, step):
    """How far a reported entry of `row` (microgpt's) may be from it: PART, scaled by the entry
    for a full row, by the row's weighted sum of sizes for a row's sum."""
    if step <= FULL_STEPS:
        return [PART * max(1.0, abs(x)) for x in row]
    return [PART * max(1.0, row_sum([abs(x) for x in row]))]


def first_difference(mine, theirs, step):
    """(largest difference, where, mine, theirs) of a reported matrix against microgpt's, or
    None within PART. `mine` is checked to be the reported form of `theirs` first (Malformed)."""
    want = summary({'m': theirs}, step)['m']
    if type(mine) is not list or len(mine) != len(want) or any(
            type(r) is not list or len(r) != len(w) or any(x is not None and type(x) not in (int, float) for x in r)
            for r, w in zip(mine, want)):
        raise Malformed("a step's numbers of the wrong form")
    worst = None
    for i, (a_row, b_row, tol_row) in enumerate(zip(mine, want, (tolerance(row, step) for row in theirs))):
        for j, (a, b, tol) in enumerate(zip(a_row, b_row, tol_row)):
            d = abs(a - b) if a is not None else math.inf
            if not d <= tol and (worst is None or not d <= worst[0]):
                where = f'[{i}][{j}]' if step <= FULL_STEPS else f'[{i}] (its row, summed)'
                worst = (d, where, a, b)
    return worst


WHERE = {'loss': "the forward pass: your ops' forward values (1 to 5), blocks (8 to 12), gpt() (13) "
                 "or name_loss (14)",
         'gradient': "the backward pass: your local derivatives (1 to 5), topological order (6) or "
                     "backward() (7); the forward agrees",
         'weights': "the update: your adam_step (15); the loss and the gradients agree"}


def setting(seed):
    """What both sides train on: train.py's default model, the bundled names, their split."""
    docs = load_docs(None)
    train_docs, _ = split_docs(docs, seed=seed)
    tokenizer = CharTokenizer.from_docs(docs)
    return train_docs, tokenizer, GPTConfig(vocab_size=tokenizer.vocab_size)


# ---------------------------------------------------------------------------- microgpt's side (the checker's process)
class Malformed(Exception):
    """An event from the learner's process that is not one of run()'s, in its form and order."""


class Project:
    """microgpt's own run, in the checker's process, and the judge of the learner's: follow(event)
    takes each event the learner's process reports and returns the events to show."""

    def __init__(self, steps, seed, lr, num_samples, temperature):
        self.steps, self.seed, self.lr = steps, seed, lr
        self.num_samples, self.temperature = num_samples, temperature
        self.train_docs, self.tokenizer, self.config = setting(seed)
        self.model = GPT(self.config, seed=seed, tokenizer=self.tokenizer)  # train.py's own model and engine
        self.adam = Adam(self.model.params)
        self.done, self.parted, self.sampled, self.failed = 0, False, False, False

    def start(self):
        return {'event': 'train-start', 'steps': self.steps, 'seed': self.seed, 'config': self.config.to_dict(),
                'names': len(self.train_docs), 'parameters': len(self.model.params)}

    def finished(self):
        """Whether the run told its whole story: every step and the names, or a failure."""
        return self.failed or (self.done == self.steps and self.sampled)

    def follow(self, event):
        kind = event.get('event')
        if self.failed:
            raise Malformed("an event after the run failed")
        if kind == 'step' and not self.sampled:
            return self.step(event)
        if kind == 'names' and not self.sampled:
            yours = event.get('yours')
            if type(yours) is not list or len(yours) != self.num_samples or any(type(n) is not str for n in yours):
                raise Malformed("names of the wrong form")
            self.sampled = True
            return [{'event': 'names', 'yours': [n[:200] for n in yours],
                     'project': sampling.sample_names(self.model, self.num_samples, self.temperature, self.seed)}]
        if kind == 'failed' and type(event.get('line')) is str and not self.failed:
            self.failed = True
            return [{'event': 'failed', 'line': event['line'][:2000]}]
        raise Malformed(f"an event out of place ({str(kind)[:20]!r})")

    def step(self, event):
        step = self.done + 1
        if event.get('step') != step or step > self.steps:
            raise Malformed("a step out of order")
        loss = event.get('loss')
        if type(loss) is not float:
            raise Malformed("a loss that is not a number")
        doc = self.train_docs[(step - 1) % len(self.train_docs)]
        rate = training.learning_rate(self.lr, step - 1, self.steps)
        with Tape() as tape:
            p_loss = training.doc_loss(self.model, training.doc_tokens(self.tokenizer, doc))
        p_loss.backward(tape)
        p_grads = {name: [[p.grad for p in row] for row in m] for name, m in self.model.state_dict.items()}
        self.adam.step(rate)  # the gradients were read before Adam uses them up
        p_weights = {name: [[p.data for p in row] for row in m] for name, m in self.model.state_dict.items()}
        grads, weights = event.get('grads'), event.get('weights')
        if not (type(grads) is dict and type(weights) is dict and set(grads) == set(weights) == set(p_grads)):
            raise Malformed("a step without its gradients and weights")
        self.done = step
        shown = [{'event': 'step', 'step': step, 'name': doc, 'loss': loss, 'project': p_loss.data}]
        part = self.compare(step, loss, p_loss.data, grads, p_grads, weights, p_weights)
        if part and not self.parted:
            self.parted = True
            shown.append({'event': 'parted', 'step': step, **part})
        return shown

    def compare(self, step, loss, p_loss, grads, p_grads, weights, p_weights):
        """The first of loss, gradients, weights after the update that differs, as a dict; else None.
        Every matrix is looked at (a reported matrix of the wrong form is Malformed at any step)."""
        found = None
        if not abs(loss - p_loss) <= PART * max(1.0, abs(p_loss)):
            found = {'quantity': 'the loss', 'yours': loss, 'project': p_loss, 'difference': abs(loss - p_loss),
                     'where': WHERE['loss']}
        for kind, mine, theirs in (('gradient', grads, p_grads), ('weights', weights, p_weights)):
            for name in self.model.state_dict:
                worst = first_difference(mine[name], theirs[name], step)
                if worst and not found:
                    quantity = (f"the gradient of {name}{worst[1]}" if kind == 'gradient'
                                else f"{name}{worst[1]} after the update")
                    found = {'quantity': quantity, 'yours': worst[2] if worst[2] is not None else math.nan,
                             'project': worst[3], 'difference': worst[0], 'where': WHERE[kind]}
        return found


# ---------------------------------------------------------------------------- the learner's side (runner.py's process)
def run(request, report):
    steps, seed = request['steps'], request['seed']
    lr, num_samples, temperature = request['lr'], request['num_samples'], request['temperature']
    try:
        learner = Learner(request['workspace'])
    except Failed as e:
        report(event='failed', line=str(e))
        return
    train_docs, tokenizer, config = setting(seed)
    V, f = learner.Value, learner.fn
    init = GPT(config, seed=seed).weights()  # a fresh GPT's weights: the numbers microgpt's run starts from
    sd = {name: [[V(x) for x in row] for row in matrix] for name, matrix in init.items()}
    params = [p for matrix in sd.values() for row in matrix for p in row]
    m, v = [0.0] * len(params), [0.0] * len(params)
    try:
        for step in range(steps):
            tokens = training.doc_tokens(tokenizer, train_docs[step % len(train_docs)])
            rate = training.learning_rate(lr, step, steps)
            mine = learner.call(f"step {step + 1}: your name_loss()", f['name_loss'], tokens, sd, config)
            if not isinstance(mine, V):
                kind = learner.call(f"step {step + 1}: what your name_loss() returned", harness.kind_of, mine)
                raise Failed(f"step {step + 1}: your name_loss() returned {kind}, not a Value")
            if type(mine.data) not in (int, float):
                raise Failed(f"step {step + 1}: your name_loss() returned a Value whose data is not a number")
            learner.call(f"step {step + 1}: your backward()", f['backward'], mine)
            grads = {name: [[p.grad for p in row] for row in matrix] for name, matrix in sd.items()}
            learner.call(f"step {step + 1}: your adam_step()", f['adam_step'], params, m, v, step + 1, rate)
            weights = {name: [[p.data for p in row] for row in matrix] for name, matrix in sd.items()}
            report(event='step', step=step + 1, loss=float(mine.data), grads=summary(grads, step + 1),
                   weights=summary(weights, step + 1))
        report(event='names', yours=sample(learner, sd, config, tokenizer, num_samples, temperature, seed))
    except Failed as e:
        report(event='failed', line=str(e))


def sample(learner, sd, config, tokenizer, num, temperature, seed):
    """num names from the learner's model (their gpt() and probabilities(), microgpt's draw),
    from a generator seeded with `seed` (Project samples microgpt's own with the same seed)."""
    f, bos = learner.fn, tokenizer.bos
    rng, names = random.Random(seed), []
    for _ in range(num):
        keys, values = [[] for _ in range(config.n_layer)], [[] for _ in range(config.n_layer)]
        ids = [bos]
        while len(ids) <= config.block_size:
            logits = learner.call("sampling: your gpt()", f['gpt'], ids[-1], len(ids) - 1, keys, values, sd, config)
            numbers = learner.call("sampling: the logits of your gpt()", lambda: [float(l.data) for l in logits])
            probs = learner.call("sampling: your probabilities()", f['probabilities'], numbers, temperature)
            token = learner.call("sampling: drawing from your probabilities()", sampling.draw, probs, rng,
                                 temperature)
            if token == bos:
                break
            ids.append(token)
        names.append(tokenizer.decode(ids[1:]))
    return names
