"""
Exercise 19 (the numpy rung): the backward of a softmax, derived by hand (the real one: inside
src/backprop/layers.py, attention_backward, whose docstring derives it).

Reading: docs/reading-guide.md, section 9, file 1; fused.py's softmax docstring derives the same
Jacobian for the scalar engine. See it live: `python -m microgpt.lab scaling`, the gradient scale
of a saturated row.
Then run `python -m microgpt.lab exercises check 19`.
"""

import numpy as np


def softmax_backward(dp, p):
    """dz for p = softmax(z) along the last axis, given dp = dL/dp and p itself.

    p, dp: arrays of the same shape (..., n); each row of p sums to 1.
    The idea: every p_j of a row depends on every z_i of that row, through the sum in the
    softmax's denominator. Find d p_j / d z_i (two cases: i = j, and i != j), then the chain
    rule sums dp_j times it over j. Rows never mix: anything summed is summed per row.
    Returns dz, the shape of p.
    """
    # solution
    return p * (dp - (dp * p).sum(axis=-1, keepdims=True))  # (..., n)
    # end solution
