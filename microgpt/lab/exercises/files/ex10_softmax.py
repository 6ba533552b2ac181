"""
Exercise 10: softmax, scores to probabilities (the real one: microgpt/ops.py, softmax).

softmax turns attention scores into weights, and the final logits into the probabilities of
the next character. One worked by hand: softmax([0.485, 0.445, 0.730]) = [0.309, 0.297, 0.395]
(docs/reading-guide.md, section 3; `python -m microgpt.lab scaling`, section 3).

What a Value offers (microgpt/engine.py): .data (its number) and .grad; the arithmetic
a + b, a - b, a * b, a / b, -a (with a number on either side, 2 * a or a + 1.0 too); a ** n for
a constant n; and .exp(), .log(), .relu(). Each builds a new Value that remembers its inputs.

Reading: docs/reading-guide.md, section 1, file 5. See it live: the web lab's By hand page.
Then run `python -m microgpt.lab exercises check 10`.
"""


def softmax(logits):
    """p_i = exp(z_i) / sum_j exp(z_j), for a list of Values z: a list of Values that sums to 1.

    Subtract the largest logit first: exp(z_i - max) / sum_j exp(z_j - max) is the same ratio
    (the e^-max cancels), but exp() of a large score such as 1000 overflows, and exp(-1000)
    is 0 for every score of a very negative row, which then divides 0 by 0. Subtract the max
    as a plain number (max(z.data for z in logits)): a constant has no gradient to carry.
    """
    # solution
    max_val = max(z.data for z in logits)
    exps = [(z - max_val).exp() for z in logits]
    total = sum(exps)
    return [e / total for e in exps]
    # end solution
