"""
The original single-file microgpt.py's recipe, as functions: `train.py --reproduce-original`
reproduces that script's run number for number.

The original seeds one generator with 42 and draws everything from it, in this order: the
documents shuffled once (no held-out split); the weights, gauss(0, 0.08) matrix by matrix in
state_dict order, row by row; nothing while training (step s trains docs[s % len(docs)], 1000
steps, Adam with lr 0.01 decayed linearly, betas 0.85 and 0.99, eps 1e-8); then 20 samples at
temperature 0.5 from the generator where the weights left it. `prepare(docs)` does the first
two, `sample_original` the last; tests/test_original.py checks a port of the original loop
against them, loss by loss, name by name.
"""

import random
from typing import NamedTuple

from ..edge.errors import UserError
from ..model import GPTConfig, parameter_shapes
from ..sampling import TEMPERATURE, iter_names
from ..tokenizer import CharTokenizer

# Every setting of the original script; train.py refuses flags that would change them.
ORIGINAL = {
    'seed': 42,            # random.seed(42): shuffle, then weights, then samples, one stream
    'n_layer': 1,
    'n_embd': 16,
    'n_head': 4,
    'block_size': 16,
    'init_std': 0.08,      # matrix(..., std=0.08)
    'steps': 1000,         # num_steps
    'lr': 0.01,            # learning_rate, decayed linearly: lr * (1 - step / num_steps)
    'weight_decay': 0.0,   # plain Adam
    'dropout': 0.0,        # nothing dropped
    'beta1': 0.85,
    'beta2': 0.99,
    'eps': 1e-8,           # eps_adam
    'batch_size': 1,       # one document per step
    'val_size': 0,         # no held-out split
    'temperature': TEMPERATURE,  # 0.5: microgpt's, which sampling.py declares
    'num_samples': 20,
}


def check_flags(**given):
    """Refuse, in one line naming the fix, any flag that would change the original's run.
    given: each setting under its ORIGINAL name (or shuffle, init), None where not passed."""
    for name, value in given.items():
        if value is None:
            continue
        flag = '--' + name.replace('_', '-')
        if name == 'shuffle':
            if not value:
                raise UserError("--no-shuffle would change the original's data order (it shuffles "
                                "once with seed 42): drop --no-shuffle or --reproduce-original")
            continue
        if name == 'init':
            raise UserError(f"--init {value} would replace the original's initial weights: drop --init "
                            "or --reproduce-original")
        if value != ORIGINAL[name]:
            raise UserError(f"{flag} {value} would change the original's run ({name} = {ORIGINAL[name]}): "
                            f"drop {flag}, or drop --reproduce-original")


class Recipe(NamedTuple):
    """What the original's generator gives before training, in the order it draws."""
    rng: random.Random      # used for the shuffle and the weights, nothing else: it samples next
    docs: list              # the documents in the original's order
    tokenizer: CharTokenizer
    config: GPTConfig
    weights: dict           # the initial weights {name: [[float]]}


def prepare(docs, settings=ORIGINAL):
    """The original's Recipe. docs: as load_docs reads them (stripped, blank lines dropped,
    which is the original's `[l.strip() for l in ... if l.strip()]`)."""
    rng = random.Random(settings['seed'])  # the same stream as random.seed(42)
    docs = list(docs)
    rng.shuffle(docs)                       # 1. the data order, once
    tokenizer = CharTokenizer.from_docs(docs)  # sorted unique characters, BOS = their count
    config = GPTConfig(tokenizer.vocab_size, settings['n_layer'], settings['n_embd'],
                       settings['n_head'], settings['block_size'])
    std = settings['init_std']
    weights = {}                            # 2. the weights, in state_dict order, row by row
    for name, (n_out, n_in) in parameter_shapes(config).items():
        weights[name] = [[rng.gauss(0, std) for _ in range(n_in)] for _ in range(n_out)]
    return Recipe(rng, docs, tokenizer, config, weights)


def sample_original(model, rng, settings=ORIGINAL):
    """The original's samples, one by one, drawn from `rng` as training left it: our sampler
    draws as its loop does, one rng.choices per position, stopping at BOS."""
    return iter_names(model, num=settings['num_samples'], temperature=settings['temperature'], rng=rng)
