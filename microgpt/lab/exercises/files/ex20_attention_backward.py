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

    q, k, v, dout: (T, head_dim). The forward has three steps, with a = the weights (T, T),
    z = the scaled scores (T, T) and s = 1 / sqrt(head_dim):
      out = a @ v,   a = softmax(z) row by row (masked),   z = (q @ k.T) * s
    Go back through them in reverse, each with the rule of a matrix product (your exercise 18's:
    for Y = A @ B, dA = dY @ B.T and dB = A.T @ dY) or of a softmax (your exercise 19). A masked
    entry has a = 0, so it passes no gradient on: nothing more to mask.
    Returns dq, dk, dv, each (T, head_dim).
    `python -m microgpt.lab exercises hint 20` gives the way there, one level at a time.
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
