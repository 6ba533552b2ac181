"""
One training step, and the loss it minimises, as microgpt defines them.

A name is trained as tokens [BOS] + name + [BOS]. At every position the model predicts the
next token, and the loss is the mean over positions of -log(probability of the true next
token): 0 for a model always certain and right, log(vocab_size) (3.3 for 27 tokens) for one
that guesses uniformly. A step may take a batch of names: its loss is then the mean over every
predicted token of the batch, which for one name is exactly microgpt's per-name mean.

train.py runs the same step through ScalarTrainer (microgpt/programs/train.py), which adds what
a long run needs and a lesson does not: speed, and a guard against a diverged run. The scalar
`evaluate` here is the reference for the numpy port's faster validation loss.
"""


def doc_tokens(tokenizer, doc):
    """[BOS] + the name's ids + [BOS]: the start marker, the letters, the end marker."""
    return [tokenizer.bos] + tokenizer.encode(doc) + [tokenizer.bos]


def num_predictions(tokens, block_size):
    """How many next tokens a name's tokens teach: one per position, but positions past
    block_size have no position embedding, so a long name is cut there."""
    return min(block_size, len(tokens) - 1)


def doc_losses(model, tokens):
    """-log p(true next token) at each position of one tokenized name: a list of Values."""
    keys, values = model.empty_cache()
    losses = []
    for pos_id in range(num_predictions(tokens, model.config.block_size)):
        logits = model.gpt(tokens[pos_id], pos_id, keys, values)
        losses.append(model.blocks.cross_entropy(logits, tokens[pos_id + 1]))
    return losses


def mean_loss(model, losses):
    """The mean of a list of per-position losses, as one Value to backward()."""
    return model.blocks.vsum(losses) * (1.0 / len(losses))


def doc_loss(model, tokens):
    """Mean cross-entropy over the positions of one tokenized name (a Value to backward())."""
    return mean_loss(model, doc_losses(model, tokens))


def batch_loss(model, batch):
    """Mean cross-entropy over every predicted token of a batch of tokenized names. A long name
    counts once per token it predicts; for a batch of one name this is doc_loss, node for node."""
    return mean_loss(model, [loss for tokens in batch for loss in doc_losses(model, tokens)])


def learning_rate(lr, step, steps):
    """Linear decay from lr at step 0 towards 0 (lr / steps at the last step; step counted from 0)."""
    return lr * (1 - step / steps)


def train_step(model, optimizer, tokens, lr):
    """Forward one tokenized name, backward, one Adam update (microgpt's step); returns the loss."""
    return batch_step(model, optimizer, [tokens], lr)


def batch_step(model, optimizer, batch, lr):
    """Forward a batch of tokenized names, backward, one Adam update; returns the loss as a float."""
    loss = batch_loss(model, batch)           # forward: the graph from the weights to the loss
    loss.backward()                           # every weight's grad: how the loss moves with it
    optimizer.step(lr)                        # Adam moves each weight, then zeroes its grad
    return loss.data


def evaluate(model, docs):
    """Mean loss per predicted token over `docs`, with the scalar engine (slow but simple)."""
    total, count = 0.0, 0
    for doc in docs:
        tokens = doc_tokens(model.tokenizer, doc)
        n = num_predictions(tokens, model.config.block_size)
        total += doc_loss(model, tokens).data * n
        count += n
    return total / count
