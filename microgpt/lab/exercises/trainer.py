"""
`exercises train`, the payoff: microgpt trained with the learner's own engine and model, step by
step beside the project's, then names sampled from the learner's model. It runs in the checker's subprocess (checker.py). The learner's side: their Value (exercises 1
to 7), name_loss (14, through 8 to 13) and adam_step (15), on the same weights as a fresh
GPT(config, seed). microgpt's side: train.py's default on the same names. Each step compares
the loss, every gradient and every weight after the update; the first that differs by more than
PART is reported once, with its step. Then both models sample names with the same seed.
"""

import math
import random

from ... import engine, sampling, training
from ...edge.data import load_docs, split_docs
from ...model import GPT, GPTConfig
from ...tokenizer import CharTokenizer
from ...optim import Adam
from . import catalog, harness

PART = 1e-9          # two numbers differ when |a - b| > PART * max(1, |b|): rounding stays far below
STEP_SECONDS = 60.0  # one call of the learner's code in a step, at most (about 0.05 s on the default model)


class Failed(Exception):
    """The learner's code failed during training: the event says how, in one line."""


def learner_value_class(mul, power, exp, log, relu, backward):
    """engine.py's Value with the learner's arithmetic: its ops take their numbers from
    exercises 1 to 5, its backward() is exercise 7; +, -, / and the rest are the engine's own,
    written on top of these."""

    class Value(engine.Value):
        __slots__ = ()

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

        def backward(self):
            backward(self)
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
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: B902: whatever the learner's code raises, in one line
            raise Failed(harness.mistake(e, what, STEP_SECONDS, self.workspace)[0]) from None


def first_difference(mine, theirs):
    """(difference, '[i][j]', mine, theirs) at the largest difference past PART of two matrices
    (rows of the learner's numbers and of microgpt's), or None."""
    worst = None
    for i, (a_row, b_row) in enumerate(zip(mine, theirs)):
        for j, (a, b) in enumerate(zip(a_row, b_row)):
            d = abs(a - b) if harness.is_number(a) else math.inf
            if not d <= PART * max(1.0, abs(b)) and (worst is None or not d <= worst[0]):
                worst = (d, f'[{i}][{j}]', float(a) if harness.is_number(a) else math.nan, b)
    return worst


WHERE = {'loss': "the forward pass: your ops' forward values (1 to 5), blocks (8 to 12), gpt() (13) "
                 "or name_loss (14)",
         'gradient': "the backward pass: your local derivatives (1 to 5), topological order (6) or "
                     "backward() (7); the forward agrees",
         'weights': "the update: your adam_step (15); the loss and the gradients agree"}


def parting(loss, p_loss, grads, p_grads, weights, p_weights):
    """The first of the loss, the gradients, the weights after the update that differs, as a
    dict; else None."""
    for kind, mine, theirs in (('loss', {'': [[loss]]}, {'': [[p_loss]]}), ('gradient', grads, p_grads),
                               ('weights', weights, p_weights)):
        for name in theirs:
            worst = first_difference(mine[name], theirs[name])
            if worst:
                quantity = {'loss': 'the loss', 'gradient': f"the gradient of {name}{worst[1]}",
                            'weights': f"{name}{worst[1]} after the update"}[kind]
                return {'quantity': quantity, 'yours': worst[2], 'project': worst[3], 'difference': worst[0],
                        'where': WHERE[kind]}
    return None


def setting(seed):
    """What both sides train on: train.py's default model, the bundled names, their split."""
    docs = load_docs(None)
    train_docs, _ = split_docs(docs, seed=seed)
    tokenizer = CharTokenizer.from_docs(docs)
    return train_docs, tokenizer, GPTConfig(vocab_size=tokenizer.vocab_size)


def numbers_of(state_dict, field):
    return {name: [[getattr(p, field) for p in row] for row in m] for name, m in state_dict.items()}


def run(request, report):
    """Both runs, step by step, reported as events: 'train-start', a 'step' each (both losses),
    'parted' once where they first differ, 'names', or 'failed' in one line; then 'done'."""
    steps, seed = request['steps'], request['seed']
    lr, num_samples, temperature = request['lr'], request['num_samples'], request['temperature']
    train_docs, tokenizer, config = setting(seed)
    model = GPT(config, seed=seed, tokenizer=tokenizer, fused=True)  # train.py's own model and engine
    adam = Adam(model.params)
    report(event='train-start', steps=steps, seed=seed, config=config.to_dict(), names=len(train_docs),
           parameters=len(model.params))
    try:
        learner = Learner(request['workspace'])
        V, f = learner.Value, learner.fn
        sd = {name: [[V(x) for x in row] for row in matrix] for name, matrix in model.weights().items()}
        params = [p for matrix in sd.values() for row in matrix for p in row]
        m, v = [0.0] * len(params), [0.0] * len(params)
        parted = False
        for step in range(1, steps + 1):
            doc = train_docs[(step - 1) % len(train_docs)]
            tokens, rate = training.doc_tokens(tokenizer, doc), training.learning_rate(lr, step - 1, steps)
            mine = learner.call(f"step {step}: your name_loss()", f['name_loss'], tokens, sd, config)
            if not isinstance(mine, V):
                raise Failed(f"step {step}: your name_loss() returned {harness.kind_of(mine)}, not a Value")
            learner.call(f"step {step}: your backward()", f['backward'], mine)
            grads = numbers_of(sd, 'grad')
            learner.call(f"step {step}: your adam_step()", f['adam_step'], params, m, v, step, rate)
            with engine.Tape() as tape:
                p_loss = training.doc_loss(model, tokens)
            p_loss.backward(tape)
            p_grads = numbers_of(model.state_dict, 'grad')
            adam.step(rate)  # the gradients were read before Adam uses them up
            report(event='step', step=step, name=doc, loss=float(mine.data) if harness.is_number(mine.data) else math.nan,
                   project=p_loss.data)
            part = None if parted else parting(mine.data, p_loss.data, grads, p_grads, numbers_of(sd, 'data'),
                                               numbers_of(model.state_dict, 'data'))
            if part:
                parted = True
                report(event='parted', step=step, **part)
        report(event='names', yours=sample(learner, sd, config, tokenizer, num_samples, temperature, seed),
               project=sampling.sample_names(model, num_samples, temperature, seed))
    except Failed as e:
        report(event='failed', line=str(e))
    report(event='done')


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
