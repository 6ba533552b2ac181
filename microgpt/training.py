"""
One training step, and the loss it minimises, as microgpt defines them.

A name is trained as tokens [BOS] + name + [BOS]. At every position the model predicts the
next token, and the loss is the mean over positions of -log(probability of the true next
token): 0 for a model always certain and right, log(vocab_size) (3.3 for 27 tokens) for one
that guesses uniformly. A step may take a batch of names: its loss is then the mean over every
predicted token of the batch, which for one name is exactly microgpt's per-name mean.

train.py drives `batch_step` through a small adapter (ScalarTrainer, in microgpt/programs/train.py) with
the same methods as the numpy engine's, so its loop is the same for every engine. The scalar
`evaluate` here is the reference for the numpy port's faster validation loss.
"""

import gc
import math
from contextlib import contextmanager

from .engine import Tape, zero_grad


def doc_tokens(tokenizer, doc):
    """[BOS] + the name's ids + [BOS]: the start marker, the letters, the end marker."""
    return [tokenizer.bos] + tokenizer.encode(doc) + [tokenizer.bos]


def num_predictions(tokens, block_size):
    """How many next tokens a name's tokens teach: one per position, but positions past
    block_size have no position embedding, so a long name is cut there."""
    return min(block_size, len(tokens) - 1)


def doc_losses(model, tokens, captures=None, dropout=None):
    """-log p(true next token) at each position of one tokenized name: a list of Values.

    captures: a list to which each position's gpt() intermediates are appended (see gpt()).
    dropout: in training with --dropout, the name's masks, one dict per position (gpt()'s).
    """
    keys, values = model.empty_cache()
    losses = []
    for pos_id in range(num_predictions(tokens, model.config.block_size)):
        capture = {} if captures is not None else None
        logits = model.gpt(tokens[pos_id], pos_id, keys, values, capture, dropout and dropout[pos_id])
        losses.append(model.blocks.cross_entropy(logits, tokens[pos_id + 1]))
        if captures is not None:
            captures.append(capture)
    return losses


def mean_loss(model, losses):
    """The mean of a list of per-position losses, as one Value to backward()."""
    return model.blocks.vsum(losses) * (1.0 / len(losses))


def doc_loss(model, tokens):
    """Mean cross-entropy over the positions of one tokenized name (a Value to backward())."""
    return mean_loss(model, doc_losses(model, tokens))


def batch_loss(model, batch, dropout=None):
    """Mean cross-entropy over every predicted token of a batch of tokenized names.

    A long name counts once per token it predicts. For a batch of one name this is doc_loss,
    node for node. dropout: with --dropout, each name's masks (doc_losses').
    """
    dropout = dropout or [None] * len(batch)
    if len(batch) == 1:
        return mean_loss(model, doc_losses(model, batch[0], None, dropout[0]))  # doc_loss's nodes
    return mean_loss(model, [loss for tokens, masks in zip(batch, dropout)
                             for loss in doc_losses(model, tokens, None, masks)])


def learning_rate(lr, step, steps):
    """Linear decay from lr at step 0 towards 0 (lr / steps at the last step; step counted from 0)."""
    return lr * (1 - step / steps)


def train_step(model, optimizer, tokens, lr):
    """Forward one tokenized name, backward, one Adam update (microgpt's step); returns the loss."""
    return batch_step(model, optimizer, [tokens], lr)


def batch_step(model, optimizer, batch, lr, dropout=None):
    """Forward a batch of tokenized names, backward, one Adam update; returns the loss as a float.

    A run that diverged gives an inf or nan loss or gradient: then no weight is changed and nan
    is returned. An exp() too large to compute raises OverflowError before any weight changed;
    train.py's ScalarTrainer turns that into nan too, and decides what to do. dropout: with
    --dropout, each name's masks (doc_losses').
    """
    with collector_paused():
        with Tape() as tape:  # records the graph as it is built: backward needs no search
            loss = batch_loss(model, batch, dropout)
        loss.backward(tape)  # adds to the grad of every weight the batch uses; Adam zeroes them after use
        # the step's one check, as the numpy engine's: a diverged run shows up as an inf or a nan
        # in the loss or in a gradient (and then in their sum); then no weight is changed
        if not math.isfinite(loss.data + sum(p.grad for p in optimizer.params)):
            zero_grad(optimizer.params)
            return math.nan
        optimizer.step(lr)
    return loss.data


@contextmanager
def collector_paused():
    """Python's cycle collector off for a step, then as it was. A graph holds no reference
    cycles (children never point back to parents), so reference counting frees it as soon as the
    next step drops it; the collector would only search the fresh objects in vain (3,419 Values
    for a 7-letter name at the default config, with their tuples about three times as many
    objects: `python bench/train_speed.py --nodes`)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def evaluate(model, docs):
    """Mean loss per predicted token over `docs`, with the scalar engine (slow but simple)."""
    total, count = 0.0, 0
    for doc in docs:
        tokens = doc_tokens(model.tokenizer, doc)
        n = num_predictions(tokens, model.config.block_size)
        total += doc_loss(model, tokens).data * n
        count += n
    return total / count
