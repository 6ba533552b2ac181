"""
Exercise 17 (the numpy rung): causal attention of one head over a whole sequence at once (the
real one: src/inference/attention.py, masked_attention, for every head at once).

gpt() computes one position per call, and the KV cache keeps the future out. On arrays every
position is computed at once: every query scores every key, and the future pairs are masked.
The three tokens worked by hand (docs/reading-guide.md, section 3) give row 3 of the weights as
[0.309, 0.297, 0.395], and row 1 as [1, 0, 0]: the first token sees only itself, so out1 = v1.

Reading: docs/reading-guide.md, section 1, file 13 (src/inference/attention.py). See it live:
`python -m microgpt.lab attention anna --query 2` (the masked keys), the web lab's Attention page.
Then run `python -m microgpt.lab exercises check 17`.
"""

import numpy as np


def masked_attention(q, k, v):
    """(out, weights) of one causal head. q, k, v: float arrays of shape (T, head_dim).

      scores = q @ k.T / sqrt(head_dim)             (T, T): scores[i, j] = q_i . k_j, scaled
      scores[i, j] = -inf wherever j > i            the causal mask, BEFORE the softmax
      weights = softmax(scores) along each row      (T, T): row i sums to 1 over j <= i
      out = weights @ v                             (T, head_dim)
    exp(-inf) is exactly 0, so the softmax itself gives the future weight 0 and normalises over
    the visible keys only. Subtract each row's max before exp() (a row's max is finite: the
    diagonal is never masked). Leave the input arrays unchanged.
    """
    # solution
    T, head_dim = q.shape
    scores = q @ k.T * head_dim ** -0.5                           # (T, T)
    scores[np.triu(np.ones((T, T), dtype=bool), k=1)] = -np.inf   # (T, T): the future, j > i
    scores -= scores.max(axis=-1, keepdims=True)                  # (T, T)
    weights = np.exp(scores)                                      # (T, T)
    weights /= weights.sum(axis=-1, keepdims=True)                # (T, T), rows sum to 1
    return weights @ v, weights                                   # (T, head_dim), (T, T)
    # end solution
