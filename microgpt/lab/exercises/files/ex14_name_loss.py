"""
Exercise 14: the loss of one name, the mean cross-entropy over its positions (the real one:
microgpt/training.py, doc_loss, with ops.cross_entropy).

A name is trained as [BOS] + its letters + [BOS]. At each position the model predicts the
next token, and the loss there is -ln p(the true next token): 0 for a model certain and
right, ln(vocab_size) for a uniform guess. The name's loss is the mean over its positions.

What a Value offers (microgpt/engine.py): .data (its number) and .grad; the arithmetic
a + b, a - b, a * b, a / b, -a (with a number on either side, 2 * a or a + 1.0 too); a ** n for
a constant n; and .exp(), .log(), .relu(). Each builds a new Value that remembers its inputs.

Reading: docs/reading-guide.md, section 1, file 7 (training.py). See it live:
`python -m microgpt.lab overview anna` prints each position's -ln p and the mean; the web
lab's Overview page.
Then run `python -m microgpt.lab exercises check 14`.
"""

from ex10_softmax import softmax
from ex13_gpt import gpt


def name_loss(tokens, state_dict, config):
    """The mean of -ln p(tokens[i + 1]) over the positions i of one tokenized name: a Value.

    tokens: token ids, [BOS] + the name's ids + [BOS]. state_dict, config: as in gpt()
    (config also has .block_size). Each name starts from an empty KV cache (one list per
    layer for keys, one for values), and position i predicts tokens[i + 1]:
    loss_i = -ln p_i(tokens[i + 1]), with p_i the softmax of gpt()'s logits at position i.
    How many positions: len(tokens) - 1 (the last BOS is only a target), but never more than
    block_size: a position past block_size has no row in wpe, so a long name is cut there.
    Return the mean as a Value, so backward() starts from it.
    """
    # solution
    keys = [[] for _ in range(config.n_layer)]
    values = [[] for _ in range(config.n_layer)]
    n = min(config.block_size, len(tokens) - 1)
    losses = []
    for pos_id in range(n):
        logits = gpt(tokens[pos_id], pos_id, keys, values, state_dict, config)
        probs = softmax(logits)
        losses.append(-probs[tokens[pos_id + 1]].log())
    return sum(losses) * (1.0 / n)
    # end solution
