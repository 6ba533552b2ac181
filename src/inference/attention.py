"""
Attention in numpy: one head for one query, written as an explicit loop over key positions,
and beside it the usual masked, vectorised form for a whole sequence.

`attention_head(q, keys, values)` is the step that microgpt/model.py's gpt() performs inside
its head loop: score the query against every visible key, softmax the scores, average the
values with those weights. It is a function of its own so that a lesson or a test can call it
on hand-made numbers (tests/test_inference_attention.py replays the Czech lesson's example;
docs/lessons.md says what that lesson shows).
model.py's `NumpyGPT.forward` calls it once per head and position, handing it only the keys
and values of positions 0..i: that slice is what makes the model causal.

`masked_attention(q, k, v)` computes the same thing for every position and head at once:
it scores every pair (i, j), then sets the future pairs (j > i) to -inf before the softmax, so
they get weight exactly 0. It is faster and is what real implementations do; it is checked
against the loop version, which stays the reference.

`rope(x, start)` is the RoPE rung (GPTConfig.rope): it turns each head's query and key by
their position before scoring, so that a score depends only on how far apart two positions are.
"""

import numpy as np

from microgpt.model import rope_frequencies


def softmax(z, axis=-1):
    """exp(z) / sum(exp(z)) along `axis`; the max is subtracted first so exp() cannot overflow.

    A -inf entry (a masked position) becomes exactly 0, as long as its row has a finite entry.
    """
    e = np.exp(z - z.max(axis=axis, keepdims=True))  # same shape as z
    return e / e.sum(axis=axis, keepdims=True)       # same shape as z


def attention_head(q, keys, values, scale=True):
    """One head's attention for ONE query over the positions it may see.

    q: (head_dim,) the query of position i.
    keys, values: (t, head_dim), row j holding position j's key and value, for j = 0..i
        (so t = i + 1; the caller leaves the future out).
    scale: divide the scores by sqrt(head_dim), as the model does; False shows what happens
        without it (scores grow with head_dim and the softmax saturates).
    Returns (out (head_dim,), logits (t,), weights (t,)): the weighted average of the values,
    the scores q.k_j (scaled or not) and their softmax, which sums to 1 over j = 0..i.
    """
    q = np.asarray(q, dtype=np.float64)            # (head_dim,)
    keys = np.asarray(keys, dtype=np.float64)      # (t, head_dim)
    values = np.asarray(values, dtype=np.float64)  # (t, head_dim)
    if q.ndim != 1 or keys.ndim != 2 or keys.shape != values.shape or keys.shape[1] != q.shape[0]:
        raise ValueError(f"attention_head wants q (head_dim,) and keys, values (t, head_dim); got "
                         f"q {q.shape}, keys {keys.shape}, values {values.shape}")
    t, head_dim = keys.shape
    if t == 0:
        raise ValueError("attention_head needs at least one visible key: a query always sees itself")

    # 1) One score per visible position j: how well what j offers matches what i looks for.
    #    j runs over 0..i only; a future key is never scored, so it needs no mask.
    logits = np.empty(t)  # (t,)
    for j in range(t):
        logits[j] = q @ keys[j]
    if scale:
        # the same 1/sqrt(head_dim) factor gpt() multiplies by: keeps the scores at unit scale
        logits = logits * head_dim ** -0.5  # (t,)

    # 2) Scores to weights: positive, summing to 1 over the visible positions.
    weights = softmax(logits)  # (t,)

    # 3) The output: out = sum_j weights[j] * values[j], one weighted average per dimension.
    out = weights @ values  # (head_dim,)
    return out, logits, weights


def causal_mask(T, start=0):
    """True where key position j lies in the future of query position i (j > i): T queries at
    positions start .. start + T - 1 against keys 0 .. start + T - 1 (start > 0: the keys of a
    KV cache come first)."""
    return np.triu(np.ones((T, start + T), dtype=bool), k=start + 1)  # (T, start + T)


def masked_attention(q, k, v):
    """Every head at every position at once, causality by masking: the vectorised variant.

    q, k, v: (n_head, T, head_dim). Returns (out (n_head, T, head_dim), weights (n_head, T, T)),
    where weights[h, i, j] is 0 for j > i. Same math as calling attention_head for every head
    h and position i with keys and values 0..i; only the bookkeeping differs.
    """
    n_head, T, head_dim = q.shape
    # all T x T scores per head, the future ones included: they are computed, then discarded
    logits = q @ k.transpose(0, 2, 1) * head_dim ** -0.5    # (n_head, T, T)
    logits = np.where(causal_mask(T), -np.inf, logits)     # (n_head, T, T); exp(-inf) = 0
    weights = softmax(logits)                              # (n_head, T, T)
    out = weights @ v                                      # (n_head, T, head_dim)
    return out, weights


def rope(x, start=0):
    """RoPE: rotate each pair (x[2m], x[2m+1]) of every head's vectors by theta = pos * freq[m].

    x: (..., T, head_dim), rows at positions start .. start + T - 1 (a KV cache's come first).
    Pair m is the complex number a + ib, multiplied by e^(i theta):
        a' = a cos(theta) - b sin(theta),   b' = a sin(theta) + b cos(theta).
    Why it works: a query at i and a key at j, both turned, score
    Re(q e^(i theta_i) conj(k e^(i theta_j))) = Re(q conj(k) e^(i (i - j) freq)) per pair:
    the score sees only the distance i - j, never where the two sit.
    """
    T, D = x.shape[-2:]
    theta = np.arange(start, start + T)[:, None] * np.array(rope_frequencies(D))  # (T, D/2)
    cos, sin = np.cos(theta), np.sin(theta)  # (T, D/2) each
    a, b = x[..., 0::2], x[..., 1::2]        # (..., T, D/2) each: every pair's two numbers
    out = np.empty_like(x)                   # (..., T, D)
    out[..., 0::2] = a * cos - b * sin
    out[..., 1::2] = a * sin + b * cos
    return out
