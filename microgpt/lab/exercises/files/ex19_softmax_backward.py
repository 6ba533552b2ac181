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
    d p_j / d z_i = p_j * (delta_ij - p_i), so
      dz_i = sum_j dp_j * p_j * (delta_ij - p_i) = p_i * (dp_i - sum_j dp_j * p_j)
    The sum is over each row's own n entries: keep it per row (axis=-1, keepdims=True).
    Returns dz, the shape of p.
    """
    # solution
    return p * (dp - (dp * p).sum(axis=-1, keepdims=True))  # (..., n)
    # end solution
