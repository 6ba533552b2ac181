"""
One training step, and the loss it minimises, as microgpt defines them.

A name is trained as tokens [BOS] + name + [BOS]. At every position the model predicts the
next token, and the loss is the mean over positions of -log(probability of the true next
token): 0 for a model that is always certain and right, log(vocab_size) (about 3.3 for 27
tokens) for one that guesses uniformly. train.py calls `train_step` once per name; the
scalar `evaluate` here is the reference for the numpy port's faster validation loss.
"""

import gc

from .engine import Tape, cross_entropy, vsum


def doc_tokens(tokenizer, doc):
    """[BOS] + the name's ids + [BOS]: the start marker, the letters, the end marker."""
    return [tokenizer.bos] + tokenizer.encode(doc) + [tokenizer.bos]


def doc_loss(model, tokens):
    """Mean cross-entropy over the positions of one tokenized name (a Value to backward())."""
    # Positions past block_size have no position embedding, so a long name is cut there.
    n = min(model.config.block_size, len(tokens) - 1)
    keys, values = model.empty_cache()
    losses = []
    for pos_id in range(n):
        logits = model.gpt(tokens[pos_id], pos_id, keys, values)
        losses.append(cross_entropy(logits, tokens[pos_id + 1]))  # -log p(next token)
    return vsum(losses) * (1.0 / n)


def learning_rate(lr, step, steps):
    """Linear decay from lr at step 0 towards 0 (lr / steps at the last step; step counted from 0)."""
    return lr * (1 - step / steps)


def train_step(model, optimizer, tokens, lr):
    """Forward one name, backward, one Adam update; returns the loss as a float."""
    # note: Python's cycle collector is paused for the step. A graph holds no reference cycles
    # (children never point back to parents), so reference counting frees it as soon as the
    # next step drops it; the collector would only search the ~20k fresh objects in vain.
    collector_was_on = gc.isenabled()
    gc.disable()
    try:
        with Tape() as tape:  # records the graph as it is built: backward needs no search
            loss = doc_loss(model, tokens)
        loss.backward(tape)  # sets the grad of every weight this name uses; Adam clears them after use
        optimizer.step(lr)
    finally:
        if collector_was_on:
            gc.enable()
    return loss.data


def evaluate(model, docs):
    """Mean loss per predicted token over `docs`, with the scalar engine (slow but simple)."""
    total, count = 0.0, 0
    for doc in docs:
        tokens = doc_tokens(model.tokenizer, doc)
        n = min(model.config.block_size, len(tokens) - 1)
        total += doc_loss(model, tokens).data * n
        count += n
    return total / count
