"""
How peaked is one row of attention? Four numbers, for one query.

Given the scores a query gives its visible keys (the softmax input), these say whether the
softmax is still "soft" or has saturated into picking one key:

  spread          the standard deviation of the scores. Without the 1/sqrt(head_dim) factor
                  it grows like sqrt(head_dim); that growth is what the factor removes.
  entropy         -sum_j p_j log2 p_j of the weights, in bits: log2(visible keys) for a
                  uniform row, 0 when one key takes everything.
  max weight      the largest p_j: 1/(visible keys) at the uniform end, 1 when saturated.
  gradient scale  our definition: the largest eigenvalue of the softmax Jacobian
                  J = diag(p) - p p^T (dp_i/dz_j, see fused.softmax). It is the most a small
                  change of the scores can move the weights: 1/n for a uniform row of n keys,
                  at most 1/2 (two keys sharing the weight), and near 0 once saturated, which
                  is why a saturated head stops learning. A row of one key gets 0, not 1/1:
                  its weight is 1 whatever its score.

attention.py computes them for a row of the real model, scaling.py for random rows.
"""

import numpy as np

from microgpt.inference.attention import softmax  # the port's softmax: the lab shows what the model computes


def entropy_bits(p):
    """-sum p log2 p over the last axis, with 0 log 0 = 0 (a key with no weight adds nothing)."""
    p = np.asarray(p, dtype=np.float64)
    logs = np.log2(np.where(p > 0, p, 1.0))  # same shape as p; log2(1) = 0 stands in for 0 log 0
    # 0 - sum, not -sum: a one-hot row sums to 0.0, and -(0.0) would be -0.0
    return 0.0 - (p * logs).sum(axis=-1)


def gradient_scale(p):
    """The largest eigenvalue of diag(p) - p p^T over the last axis: see the module docstring."""
    p = np.asarray(p, dtype=np.float64)                       # (..., n)
    eye = np.eye(p.shape[-1])                                 # (n, n)
    jacobian = p[..., :, None] * eye - p[..., :, None] * p[..., None, :]  # (..., n, n)
    # symmetric and positive semi-definite, so eigvalsh applies; eigenvalues come sorted
    return np.linalg.eigvalsh(jacobian)[..., -1]              # (...)


def row_statistics(scores):
    """The widget's numbers for one row of scores (n,): what enters the softmax."""
    scores = np.asarray(scores, dtype=np.float64)  # (n,)
    p = softmax(scores)                            # (n,)
    return {
        'spread': float(scores.std()),             # population std (ddof 0): the row is all there is
        'entropy': float(entropy_bits(p)),
        'max_entropy': float(np.log2(len(scores))),
        'max_weight': float(p.max()),
        'gradient_scale': float(gradient_scale(p)),
    }


def batch_statistics(scores):
    """The same numbers for many rows at once, scores (draws, n) -> {name: (draws,)}.

    Used by scaling.py's medians over thousands of random draws.
    """
    scores = np.asarray(scores, dtype=np.float64)  # (draws, n)
    p = softmax(scores)                            # (draws, n)
    return {
        'spread': scores.std(axis=-1),             # (draws,)
        'entropy': entropy_bits(p),                # (draws,)
        'max_weight': p.max(axis=-1),              # (draws,)
        'gradient_scale': gradient_scale(p),       # (draws,)
    }
