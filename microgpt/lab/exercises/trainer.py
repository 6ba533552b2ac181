"""
`exercises train`, the payoff: microgpt trained with the learner's own engine and model, step by
step beside the project's, then names sampled from the learner's model.

It runs in runner.py's subprocess, like every check. The learner's Value is assembled here from
their exercises 1 to 7 (learner_value_class: each op's forward value and local derivatives are
theirs, + is given, backward() is theirs), their weights are the same numbers as a fresh
GPT(config, seed)'s, and each step feeds the same name to both:
    project: training.doc_loss on GPT (its fused blocks, train.py's default: the same numbers as
             ops.py's to rounding, 25 to 40 times quicker here), Value.backward, optim.Adam.step
    learner: their name_loss (14, through their gpt 13 and blocks 8 to 12), backward (7),
             adam_step (15)
The two are compared in the order a step computes them: the loss, every weight's gradient,
every weight after the update. The first quantity that differs by more than PART is reported
once, with its step; the losses are reported at every step (equal to rounding when the learner
is right: a sum taken in another order differs in its last bits). Then both models sample names
with the same seed: the learner's through their gpt() and probabilities() (16).
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


def first_difference(mine, theirs):
    """(largest difference, [i][j], mine, theirs) of two matrices, or None within PART."""
    worst = None
    for i, (a_row, b_row) in enumerate(zip(mine, theirs)):
        for j, (a, b) in enumerate(zip(a_row, b_row)):
            d = abs(a - b) if isinstance(a, (int, float)) else math.inf
            if not d <= PART * max(1.0, abs(b)) and (worst is None or not d <= worst[0]):
                worst = (d, f'[{i}][{j}]', a, b)
    return worst


WHERE = {'loss': "the forward pass: your ops' forward values (1 to 5), blocks (8 to 12), gpt() (13) "
                 "or name_loss (14)",
         'gradient': "the backward pass: your local derivatives (1 to 5), topological order (6) or "
                     "backward() (7); the forward agrees",
         'weights': "the update: your adam_step (15); the loss and the gradients agree"}


def run(request, report):
    steps, seed = request['steps'], request['seed']
    lr, num_samples, temperature = request['lr'], request['num_samples'], request['temperature']
    try:
        learner = Learner(request['workspace'])
    except Failed as e:
        report(event='failed', line=str(e))
        return
    docs = load_docs(None)
    train_docs, _ = split_docs(docs, seed=seed)
    tokenizer = CharTokenizer.from_docs(docs)
    config = GPTConfig(vocab_size=tokenizer.vocab_size)  # train.py's default model
    model = GPT(config, seed=seed, tokenizer=tokenizer)  # train.py's own model and engine
    adam = Adam(model.params)
    V, f = learner.Value, learner.fn
    sd = {name: [[V(x) for x in row] for row in matrix] for name, matrix in model.weights().items()}
    params = [p for matrix in sd.values() for row in matrix for p in row]
    m, v = [0.0] * len(params), [0.0] * len(params)
    report(event='train-start', steps=steps, seed=seed, config=config.to_dict(), names=len(train_docs),
           parameters=len(params))
    parted = False
    try:
        for step in range(steps):
            doc = train_docs[step % len(train_docs)]
            tokens = training.doc_tokens(tokenizer, doc)
            rate = training.learning_rate(lr, step, steps)
            # the project's step, as training.train_step takes it, the gradients read before Adam uses them up
            with Tape() as tape:
                loss = training.doc_loss(model, tokens)
            loss.backward(tape)
            p_grads = {name: [[p.grad for p in row] for row in matrix] for name, matrix in model.state_dict.items()}
            adam.step(rate)
            # the learner's
            mine = learner.call(f"step {step + 1}: your name_loss()", f['name_loss'], tokens, sd, config)
            if not isinstance(mine, V):
                raise Failed(f"step {step + 1}: your name_loss() returned {harness.kind_of(mine)}, not a Value")
            learner.call(f"step {step + 1}: your backward()", f['backward'], mine)
            grads = {name: [[p.grad for p in row] for row in matrix] for name, matrix in sd.items()}
            learner.call(f"step {step + 1}: your adam_step()", f['adam_step'], params, m, v, step + 1, rate)
            report(event='step', step=step + 1, name=doc, loss=mine.data, project=loss.data)
            if not parted:
                part = compare_step(mine.data, loss.data, grads, p_grads, sd, model)
                if part:
                    parted = True
                    report(event='parted', step=step + 1, **part)
        sample(learner, model, sd, config, tokenizer, num_samples, temperature, seed, report)
    except Failed as e:
        report(event='failed', line=str(e))


def compare_step(loss, p_loss, grads, p_grads, sd, model):
    """The first of loss, gradients, weights after the update that differs, as a dict; else None."""
    if not abs(loss - p_loss) <= PART * max(1.0, abs(p_loss)):
        return {'quantity': 'the loss', 'yours': loss, 'project': p_loss, 'difference': abs(loss - p_loss),
                'where': WHERE['loss']}
    for name in model.state_dict:
        worst = first_difference(grads[name], p_grads[name])
        if worst:
            return {'quantity': f"the gradient of {name}{worst[1]}", 'yours': worst[2], 'project': worst[3],
                    'difference': worst[0], 'where': WHERE['gradient']}
    for name, matrix in model.state_dict.items():
        worst = first_difference([[p.data for p in row] for row in sd[name]], [[p.data for p in row] for row in matrix])
        if worst:
            return {'quantity': f"{name}{worst[1]} after the update", 'yours': worst[2], 'project': worst[3],
                    'difference': worst[0], 'where': WHERE['weights']}
    return None


def sample(learner, model, sd, config, tokenizer, num, temperature, seed, report):
    """num names from the learner's model (their gpt() and probabilities(), microgpt's draw) and
    from the project's, each from a generator seeded with `seed`."""
    f, bos = learner.fn, tokenizer.bos
    rng, names = random.Random(seed), []
    for _ in range(num):
        keys, values = [[] for _ in range(config.n_layer)], [[] for _ in range(config.n_layer)]
        ids = [bos]
        while len(ids) <= config.block_size:
            logits = learner.call("sampling: your gpt()", f['gpt'], ids[-1], len(ids) - 1, keys, values, sd, config)
            probs = learner.call("sampling: your probabilities()", f['probabilities'],
                                 [float(l.data) for l in logits], temperature)
            token = learner.call("sampling: drawing from your probabilities()", sampling.draw, probs, rng,
                                 temperature)
            if token == bos:
                break
            ids.append(token)
        names.append(tokenizer.decode(ids[1:]))
    report(event='names', yours=names, project=sampling.sample_names(model, num, temperature, seed))
