"""
The model's building blocks, composed from the engine's basic ops, as microgpt composes them.

Read this with model.py, after engine.py. Each block is a few lines of +, *, **, exp and log
on Values, so autograd derives its gradient for free: nothing here has a backward of its own.
That is the point of an autograd engine. The price is size: softmax over n logits builds 6n + 1
nodes and a linear layer two nodes per weight (`python bench/train_speed.py --nodes` counts a
whole step's).

fused.py computes the same functions as one hand-differentiated node each (tests check they
agree to 1e-12). gpt() uses this file's unless told otherwise: train.py and sample.py ask for
fused.py's, for speed (`GPT(..., fused=True)`; `train.py --unfused` keeps these). Both files
offer the same names: dot, linear, vsum, softmax, rmsnorm, cross_entropy, and the modern MLP's
gelu and silu.
"""

import math


def dot(a, b):
    """sum_i a_i * b_i: an attention score q.k, or one weighted sum of values."""
    return sum(ai * bi for ai, bi in zip(a, b))


def linear(x, w):
    """w @ x, with w stored [n_out][n_in]: one dot product per row (per output)."""
    return [dot(w_row, x) for w_row in w]


def vsum(xs):
    """x_0 + x_1 + ...: Python's sum(), one + node per term."""
    return sum(xs)


def softmax(logits):
    """exp(z_i) / sum_j exp(z_j). The max is subtracted first: it cancels in the ratio and keeps
    exp() from overflowing. It is a plain float, so no gradient flows through it, but `z - max_val`
    still makes a constant leaf for it per logit: with the -, exp, sum and division, 6n + 1 nodes."""
    max_val = max(z.data for z in logits)
    exps = [(z - max_val).exp() for z in logits]
    total = sum(exps)
    return [e / total for e in exps]


RMS_EPS = 1e-5  # microgpt's rmsnorm epsilon: every engine's rmsnorm takes it from here


def rmsnorm(x, eps=RMS_EPS):
    """x rescaled to root-mean-square ~1: x_i / sqrt(mean_j x_j^2 + eps). No learned gain."""
    ms = sum(xi ** 2 for xi in x) / len(x)  # ** raises on overflow, as fused.rmsnorm's (see there)
    scale = (ms + eps) ** -0.5
    return [xi * scale for xi in x]


def cross_entropy(logits, target):
    """-log p(target): the loss at one position, small when the model expected the target."""
    return -softmax(logits)[target].log()


def sigmoid(z):
    """1 / (1 + e^-z): a smooth step from 0 to 1. For z < 0 it is written e^z / (e^z + 1), the
    same number, so that exp() only ever sees a number <= 0 and cannot overflow."""
    if z.data < 0:
        e = z.exp()
        return e / (e + 1)
    return ((-z).exp() + 1) ** -1


GELU_C = 2 * (2 / math.pi) ** 0.5  # as tanh(y) = 2 sigmoid(2y) - 1: GPT-2's 0.5 u (1 + tanh(y)) = u sigmoid(2y)


def gelu(u):
    """GELU (GPT-2's tanh form): u * sigmoid(GELU_C (u + 0.044715 u^3)). Like relu, it passes a
    large u and stops a very negative one, but smoothly, with a small dip below 0."""
    return u * sigmoid(GELU_C * (u + 0.044715 * u ** 3))


def silu(u):
    """SiLU: u * sigmoid(u), the gate of SwiGLU (and GELU's close cousin)."""
    return u * sigmoid(u)
