"""
Exercise 20 (the numpy rung): the backward of one causal attention head, derived by hand (the
real one: src/backprop/layers.py, attention_backward, for every head and name at once).

It uses your masked_attention (17) for the forward and your softmax_backward (19).

Reading: docs/reading-guide.md, section 9, file 1. See it live: `python -m microgpt.lab step
anna --engine numpy`, section 3 (the gradient at each stage).
Then run `python -m microgpt.lab exercises check 20`.
"""

import numpy as np

from ex17_masked_attention import masked_attention
from ex19_softmax_backward import softmax_backward


def attention_backward(dout, q, k, v):
    """(dq, dk, dv) for out = masked_attention(q, k, v)[0], given dout = dL/dout.

    q, k, v, dout: (T, head_dim). With a = the weights (T, T), z = the scaled scores and
    s = 1 / sqrt(head_dim), go back through the forward's three steps:
      out = a @ v            dv = a.T @ dout            da = dout @ v.T
      a = softmax(z)         dz = softmax_backward(da, a), row by row (a masked entry has
                             a = 0, so it passes no gradient on: nothing more to mask)
      z = (q @ k.T) * s      dq = (dz @ k) * s          dk = (dz.T @ q) * s
    Returns dq, dk, dv, each (T, head_dim).
    """
    # solution
    head_dim = q.shape[1]
    s = head_dim ** -0.5
    out, a = masked_attention(q, k, v)   # (T, head_dim), (T, T)
    dv = a.T @ dout                      # (T, head_dim)
    da = dout @ v.T                      # (T, T)
    dz = softmax_backward(da, a)         # (T, T)
    dq = dz @ k * s                      # (T, head_dim)
    dk = dz.T @ q * s                    # (T, head_dim)
    return dq, dk, dv
    # end solution
