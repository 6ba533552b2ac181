"""
Exercise 18 (the numpy rung): the backward of a linear layer, derived by hand (the real one:
src/backprop/layers.py, linear_backward).

On the numpy rung there is no graph of Values: each layer's backward is written out once. It
takes dL/d(output), the gradient handed back from the layer above, and returns the gradients of
its inputs. A gradient always has the shape of what it is the gradient of.

Reading: docs/reading-guide.md, section 9, file 1 (src/backprop/layers.py). See it live:
`python -m microgpt.lab step anna --engine numpy` (the same gradients as the scalar engine).
Then run `python -m microgpt.lab exercises check 18`.
"""

import numpy as np


def linear_backward(dy, x, w):
    """(dx, dw) for y = x @ w.T, with w stored [n_out, n_in] as everywhere in microgpt.

    x: (R, n_in), one row per position. w: (n_out, n_in). dy: (R, n_out), dL/dy.
    y[r, o] = sum_i x[r, i] * w[o, i]. The idea: ask which outputs each x[r, i] and each w[o, i]
    reaches, and with what slope; the chain rule then sums dy over those outputs. A weight is used
    at every row r, so its gradient sums over the rows.
    Returns dx (R, n_in) and dw (n_out, n_in).
    """
    # solution
    return dy @ w, dy.T @ x  # (R, n_in), (n_out, n_in)
    # end solution
