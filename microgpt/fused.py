"""
Why training is fast: the model's building blocks as ONE node each, gradients derived by hand.

Read this after training.py. ops.py composes dot, softmax, rmsnorm and cross-entropy from basic
ops, and autograd differentiates them node by node. Here each block is a single node (or one per
output) whose local gradients are derived once, in its docstring, and stored as numbers: the same
math (tests/test_fused.py checks values and gradients to 1e-12) with a small fraction of the
nodes (`python bench/train_speed.py --nodes` counts both), each of whose sums runs in C. train.py
and sample.py use this set (`GPT(..., fused=True)`); `train.py --unfused` trains with ops.py
instead and logs the same losses, only slower. The modern MLP's gelu and silu are here too, one
node per number where ops.py composes each from exp and ** (tests/test_modern_scalar.py).
"""

import math
from operator import mul

from .engine import Value
from .ops import GELU_C, RMS_EPS


def dot(ws, xs):
    """s = sum_i w_i * x_i as one node with 2n children.

    ds/dw_i = x_i and ds/dx_i = w_i: each factor's gradient is its partner's value.
    """
    w_data = [w.data for w in ws]
    x_data = [x.data for x in xs]
    s = sum(map(mul, w_data, x_data))  # the loop runs in C: this is where the speed is
    return Value(s, (*ws, *xs), (*x_data, *w_data), 'dot')


def linear(x, w):
    """The matrix-vector product w @ x, w stored [n_out][n_in]: one dot node per row.

    Exactly [dot(row, x) for row in w], with the input's numbers read once rather than
    once per row (a linear layer is where nearly all of a step's time goes).
    """
    x_data = [xi.data for xi in x]
    x = tuple(x)
    out = []
    for row in w:
        w_data = [wi.data for wi in row]
        out.append(Value(sum(map(mul, w_data, x_data)), (*row, *x), (*x_data, *w_data), 'dot'))
    return out


def vsum(xs):
    """s = sum_i x_i as one node: ds/dx_i = 1 for every i."""
    xs = tuple(xs)
    return Value(sum(x.data for x in xs), xs, (1.0,) * len(xs), 'sum')


def softmax(logits):
    """p_i = exp(z_i) / sum_j exp(z_j) = exp(z_i - L), with L = log sum_j exp(z_j).

    Built from n + 1 nodes rather than n nodes of n children each: one node for L, with
    dL/dz_j = exp(z_j) / sum exp = p_j, then one node per p_i with two children, z_i and L:
    dp_i/dz_i = p_i and dp_i/dL = -p_i. The chain rule through L gives back the full
    Jacobian dp_i/dz_j = p_i (delta_ij - p_j) without storing its n^2 entries.
    The max logit is subtracted before exp(): it cancels in the ratio and prevents overflow.
    """
    z = [v.data for v in logits]
    zmax = max(z)
    e = [math.exp(zi - zmax) for zi in z]
    total = sum(e)
    p = [ei / total for ei in e]
    lse = Value(zmax + math.log(total), tuple(logits), p, 'logsumexp')
    return [Value(pi, (zi, lse), (pi, -pi), 'softmax') for zi, pi in zip(logits, p)]


def rmsnorm(xs, eps=RMS_EPS):
    """y_i = x_i * s with s = (mean_j x_j^2 + eps)^(-1/2): x rescaled to root-mean-square ~1.

    Built from n + 1 nodes: one node for the scale s, with every x_j as a child,
    ds/dx_j = -1/2 (ms + eps)^(-3/2) * 2 x_j / n = -x_j s^3 / n; then one product node per
    output, y_i = x_i * s, with dy_i/dx_i = s and dy_i/ds = x_i. Through s, the chain rule
    gives the full Jacobian dy_i/dx_j = s delta_ij - x_i x_j s^3 / n with 3n stored numbers.
    """
    x = [v.data for v in xs]
    n = len(x)
    # note: xi ** 2, not xi * xi. A float's * overflows to inf, and s would then be a plausible
    # 0; its ** raises OverflowError instead, so a diverged model stops here, as the numpy port
    # stops under its np.errstate(over='raise'); ops.rmsnorm does the same
    ms = sum(xi ** 2 for xi in x) / n
    s = (ms + eps) ** -0.5
    c = -s ** 3 / n
    scale = Value(s, tuple(xs), [c * xj for xj in x], 'rms_scale')
    return [Value(xi * s, (xv, scale), (s, xi), 'rmsnorm') for xv, xi in zip(xs, x)]


def cross_entropy(logits, target):
    """L = -log softmax(z)[t] = logsumexp(z) - z_t as one node.

    dL/dz_j = p_j - delta_jt, with p = softmax(z): the gradient pushes the target's logit up
    and every logit down in proportion to the probability the model gave it.
    """
    z = [v.data for v in logits]
    zmax = max(z)
    e = [math.exp(zi - zmax) for zi in z]
    total = sum(e)
    local = [ei / total for ei in e]
    local[target] -= 1.0
    return Value(zmax + math.log(total) - z[target], tuple(logits), local, 'cross_entropy')


def _sigmoid(z):
    """1 / (1 + e^-z) on a float, with exp() of a number <= 0 only (as ops.sigmoid)."""
    e = math.exp(-abs(z))
    return 1 / (1 + e) if z >= 0 else e / (1 + e)


def silu(u):
    """y = u s with s = sigmoid(u), as one node.

    ds/du = s (1 - s), so dy/du = s + u s (1 - s).
    """
    s = _sigmoid(u.data)
    return Value(u.data * s, (u,), (s + u.data * s * (1 - s),), 'silu')


def gelu(u):
    """y = u s with s = sigmoid(z), z = GELU_C (u + 0.044715 u^3), as one node.

    dz/du = GELU_C (1 + 3 * 0.044715 u^2), so dy/du = s + u s (1 - s) dz/du.
    """
    x = u.data
    s = _sigmoid(GELU_C * (x + 0.044715 * x ** 3))
    return Value(x * s, (u,), (s + x * s * (1 - s) * GELU_C * (1 + 3 * 0.044715 * x ** 2),), 'gelu')
