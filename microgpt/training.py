"""
One training step, and the loss it minimises, as microgpt defines them.

A name is trained as tokens [BOS] + name + [BOS]. At every position the model predicts the
next token, and the loss is the mean over positions of -log(probability of the true next
token): 0 for a model that is always certain and right, log(vocab_size) (about 3.3 for 27
tokens) for one that guesses uniformly. A step may take several names at once (a batch): its
loss is then the mean over every predicted token of the batch, which for one name is exactly
microgpt's per-name mean.

`ScalarTrainer` is what train.py drives: step(batch, lr) runs forward, backward() and one Adam
update on the Value engine. The numpy training path (src/backprop) offers the same methods,
so train.py's loop is the same for both engines. The scalar `evaluate` here is the reference
for the numpy port's faster validation loss.
"""

import gc

from .engine import NonFiniteError, Tape


def doc_tokens(tokenizer, doc):
    """[BOS] + the name's ids + [BOS]: the start marker, the letters, the end marker."""
    return [tokenizer.bos] + tokenizer.encode(doc) + [tokenizer.bos]


def num_predictions(tokens, block_size):
    """How many next tokens a name's tokens teach: one per position, but positions past
    block_size have no position embedding, so a long name is cut there."""
    return min(block_size, len(tokens) - 1)


def doc_losses(model, tokens):
    """-log p(true next token) at each position of one tokenized name: a list of Values."""
    cross_entropy = model.ops.cross_entropy
    keys, values = model.empty_cache()
    losses = []
    for pos_id in range(num_predictions(tokens, model.config.block_size)):
        logits = model.gpt(tokens[pos_id], pos_id, keys, values)
        losses.append(cross_entropy(logits, tokens[pos_id + 1]))
    return losses


def doc_loss(model, tokens):
    """Mean cross-entropy over the positions of one tokenized name (a Value to backward())."""
    losses = doc_losses(model, tokens)
    return model.ops.vsum(losses) * (1.0 / len(losses))


def batch_loss(model, batch):
    """Mean cross-entropy over every predicted token of a batch of tokenized names.

    A long name counts once per token it predicts. For a batch of one name this is doc_loss,
    node for node.
    """
    if len(batch) == 1:
        return doc_loss(model, batch[0])
    losses = [loss for tokens in batch for loss in doc_losses(model, tokens)]
    return model.ops.vsum(losses) * (1.0 / len(losses))


def learning_rate(lr, step, steps):
    """Linear decay from lr at step 0 towards 0 (lr / steps at the last step; step counted from 0)."""
    return lr * (1 - step / steps)


def train_step(model, optimizer, tokens, lr):
    """Forward one tokenized name, backward, one Adam update (microgpt's step); returns the loss."""
    return batch_step(model, optimizer, [tokens], lr)


def batch_step(model, optimizer, batch, lr):
    """Forward a batch of tokenized names, backward, one Adam update; returns the loss as a float."""
    # note: Python's cycle collector is paused for the step. A graph holds no reference cycles
    # (children never point back to parents), so reference counting frees it as soon as the
    # next step drops it; the collector would only search the ~20k fresh objects in vain.
    collector_was_on = gc.isenabled()
    gc.disable()
    try:
        with Tape() as tape:  # records the graph as it is built: backward needs no search
            loss = batch_loss(model, batch)
        loss.backward(tape)  # sets the grad of every weight the batch uses; Adam clears them after use
        optimizer.step(lr)
    finally:
        if collector_was_on:
            gc.enable()
    return loss.data


class ScalarTrainer:
    """The Value engine behind train.py's loop: a GPT of Values and its Adam.

    The numpy engine (backprop.Trainer) has the same methods, so the loop does not care which
    one it drives: step(batch, lr) -> loss; weights() and optimizer_state() for the checkpoint.
    """

    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer
        self.config, self.tokenizer = model.config, model.tokenizer

    def step(self, batch, lr):
        """One update on a batch of tokenized names; nan if an op overflowed (divergence)."""
        try:
            return batch_step(self.model, self.optimizer, batch, lr)
        except NonFiniteError:  # raised in the forward pass, before any weight changed
            return float('nan')

    def weights(self):
        return self.model.weights()

    def load_weights(self, weights):
        self.model.load_weights(weights)

    def optimizer_state(self):
        return self.optimizer.state()

    def load_optimizer_state(self, state):
        self.optimizer.load_state(state)


def evaluate(model, docs):
    """Mean loss per predicted token over `docs`, with the scalar engine (slow but simple)."""
    total, count = 0.0, 0
    for doc in docs:
        tokens = doc_tokens(model.tokenizer, doc)
        n = num_predictions(tokens, model.config.block_size)
        total += doc_loss(model, tokens).data * n
        count += n
    return total / count
