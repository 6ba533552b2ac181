"""
Exercise 8: the dot product of two vectors of Values (the real one: microgpt/ops.py, dot).

From here on you compose the model's building blocks from the engine's ops, as microgpt does
(microgpt/ops.py): autograd then derives their gradients for free. A dot product is an
attention score (q . k) and every output of a linear layer.

What a Value offers (microgpt/engine.py): .data (its number) and .grad; the arithmetic
a + b, a - b, a * b, a / b, -a (with a number on either side, 2 * a or a + 1.0 too); a ** n for
a constant n; and .exp(), .log(), .relu(). Each builds a new Value that remembers its inputs.

Reading: docs/reading-guide.md, section 1, file 5 (ops.py). See it live:
`python -m microgpt.lab attention anna`, section 1: one product per dimension, summed.
Then run `python -m microgpt.lab exercises check 8`.
"""


def dot(a, b):
    """sum_i a[i] * b[i], as ONE Value.

    a, b: lists of Values of the same length. Returns a Value built from them with the
    engine's * and +, so that backward() reaches every a[i] and b[i]. (Computing with their
    .data would give the right number and no gradient at all.)
    """
    # solution
    return sum(ai * bi for ai, bi in zip(a, b))
    # end solution
