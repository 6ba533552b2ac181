"""
Exercise 27 (a modern rung, on the numpy rung): RoPE's backward, derived by hand (the real one:
src/backprop/layers.py, rope_backward, for every head of every row at once).

The forward (your exercise 26, on arrays): row r of a (T, head_dim) array of queries or keys sits
at position pos[r], and each of its pairs (x[r, 2m], x[r, 2m + 1]) is turned by the angle
theta[r, m] = pos[r] * 10000 ^ (-2m / head_dim). Given dy = dL/dy for the turned array, this
exercise goes back to dx = dL/dx. Each pair is a 2 x 2 matrix M times (a, b), and nothing else
depends on that pair: your exercise 18's rule for a product by a matrix does the rest.

Reading: docs/modern.md, RoPE; docs/reading-guide.md, section 9, file 1. See it live:
`python -m microgpt.lab step anna --engine numpy` (the backward of each stage).
Then run `python -m microgpt.lab exercises check 27`.
"""

import numpy as np


def rope_backward(dy, pos):
    """dx for y = rope(x), given dy = dL/dy. dy: a float array (T, head_dim), head_dim even;
    pos: an int array (T,), the position of each row. Returns dx, (T, head_dim).

    Write M for pair m of row r's turn by theta = pos[r] * f_m, f_m = 10000 ^ (-2m / head_dim):
      (y[r, 2m], y[r, 2m + 1]) = M (x[r, 2m], x[r, 2m + 1])
    Work out which 2 x 2 matrix takes dy's pair to dx's pair, and which turn that matrix is.
    Leave dy and pos unchanged. `python -m microgpt.lab exercises hint 27` gives the way there.
    """
    # solution
    T, head_dim = dy.shape
    theta = pos[:, None] * 10000.0 ** (-np.arange(0, head_dim, 2) / head_dim)  # (T, head_dim // 2)
    c, s = np.cos(theta), np.sin(theta)                                         # (T, head_dim // 2) each
    a, b = dy[:, 0::2], dy[:, 1::2]                                             # (T, head_dim // 2) each
    dx = np.empty_like(dy)                                                      # (T, head_dim)
    dx[:, 0::2] = a * c + b * s   # the turn back, by -theta: M^T = M(-theta)
    dx[:, 1::2] = b * c - a * s
    return dx
    # end solution
