"""
Exercise 11: rmsnorm, a vector rescaled to root-mean-square 1 (the real one: microgpt/ops.py,
rmsnorm).

gpt() normalises the stream once after the embedding and again at the start of every
attention and MLP block, so that each block sees numbers of the same size however large the
stream has grown. microgpt's rmsnorm has no learned gain.

What a Value offers (microgpt/engine.py): .data (its number) and .grad; the arithmetic
a + b, a - b, a * b, a / b, -a (with a number on either side, 2 * a or a + 1.0 too); a ** n for
a constant n; and .exp(), .log(), .relu(). Each builds a new Value that remembers its inputs.

Reading: docs/reading-guide.md, section 1, files 5 and 6 (step 1 of gpt() and its note).
Then run `python -m microgpt.lab exercises check 11`.
"""


def rmsnorm(x, eps=1e-5):
    """y_i = x_i / sqrt(mean_j x_j ** 2 + eps): n Values for n Values.

    The mean is over the n numbers of x (divide the sum of squares by n). eps keeps the
    division finite for a vector of zeros. Use the engine's ops throughout (** -0.5 is a
    power, your exercise 2), so the gradient flows through the scale too: each output depends
    on every input, not only its own.
    """
    # solution
    ms = sum(xi * xi for xi in x) / len(x)
    scale = (ms + eps) ** -0.5
    return [xi * scale for xi in x]
    # end solution
