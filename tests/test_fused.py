"""
Tests for the fused primitives of microgpt/fused.py: dot, vsum, softmax, rmsnorm, cross_entropy.

A fused primitive is one node whose local gradients were derived by hand, so each is checked
against two independent oracles:
  1. its UNFUSED composition, written here from the basic ops (+ * / ** exp log), which
     backward() differentiates node by node: values and every gradient must agree to 1e-12;
  2. central finite differences (tests/helpers.py), with a negative control per primitive:
     the same node with one typical derivation mistake must fail the same check.
softmax and rmsnorm have a vector output, so their gradients are checked through a random
weighted sum of the outputs, sum_i c_i * y_i, which exercises every entry of the Jacobian.

Run: .venv/bin/python -m pytest -q tests/test_fused.py
"""

import math
import random

import pytest

from helpers import backprop_grads, check_grads
from microgpt.engine import Value, topological_order
from microgpt.fused import cross_entropy, dot, rmsnorm, softmax, vsum

pytestmark = pytest.mark.lesson  # the lesson's own files: `make test-lesson`

FUSED_TOL = 1e-12  # fused vs unfused: the same math in a different float order, so ~1e-15 apart
GRAD_TOL = 1e-6    # against central differences with h = 1e-6 (good to ~1e-9 at these scales)
SEEDS = range(6)   # each seed draws a new size and new inputs


# ---------------------------------------------------------------------------- unfused versions
# The textbook formulas, one basic node per operation. No max-subtraction in softmax and
# cross-entropy: the inputs below are small, and the fused versions must match the plain math.

def dot_unfused(ws, xs):
    s = ws[0] * xs[0]
    for w, x in zip(ws[1:], xs[1:]):
        s = s + w * x
    return s


def vsum_unfused(xs):
    s = xs[0]
    for x in xs[1:]:
        s = s + x
    return s


def softmax_unfused(logits):
    e = [z.exp() for z in logits]
    total = vsum_unfused(e)
    return [ei / total for ei in e]


def rmsnorm_unfused(xs, eps=1e-5):
    ms = vsum_unfused([x * x for x in xs]) / len(xs)
    s = (ms + eps) ** -0.5
    return [x * s for x in xs]


def cross_entropy_unfused(logits, target):
    return vsum_unfused([z.exp() for z in logits]).log() - logits[target]


def weighted_sum(ys, cs):
    """sum_i c_i * y_i in basic ops: a scalar whose gradient involves every output y_i."""
    return vsum_unfused([c * y for c, y in zip(cs, ys)])


# ---------------------------------------------------------------------------- random cases
def _cases():
    """(id, fused build, unfused build, inputs): each build maps a list of leaf Values to a scalar."""
    cases = []
    for seed in SEEDS:
        rng = random.Random(seed)
        n = rng.randint(1, 6)
        xs = [rng.uniform(-2.0, 2.0) for _ in range(n)]
        ws = [rng.uniform(-2.0, 2.0) for _ in range(n)]
        cs = [rng.uniform(-1.0, 1.0) for _ in range(n)]
        target = rng.randrange(n)
        eps = rng.choice([1e-5, 0.1])
        cases += [
            (f'dot-{seed}', lambda v, n=n: dot(v[:n], v[n:]),
             lambda v, n=n: dot_unfused(v[:n], v[n:]), ws + xs),
            # the same vector on both sides: each leaf is two children of one node
            (f'dot_shared-{seed}', lambda v: dot(v, v), lambda v: dot_unfused(v, v), xs),
            (f'vsum-{seed}', vsum, vsum_unfused, xs),
            (f'softmax-{seed}', lambda v, cs=cs: weighted_sum(softmax(v), cs),
             lambda v, cs=cs: weighted_sum(softmax_unfused(v), cs), xs),
            (f'rmsnorm-{seed}', lambda v, cs=cs, eps=eps: weighted_sum(rmsnorm(v, eps), cs),
             lambda v, cs=cs, eps=eps: weighted_sum(rmsnorm_unfused(v, eps), cs), xs),
            (f'cross_entropy-{seed}', lambda v, t=target: cross_entropy(v, t),
             lambda v, t=target: cross_entropy_unfused(v, t), xs),
        ]
    return cases


CASES = _cases()


def _close(a, b, tol):
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


@pytest.mark.parametrize('fused, unfused, inputs', [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_fused_equals_unfused_in_value_and_every_grad(fused, unfused, inputs):
    value, grads = backprop_grads(fused, inputs)
    value_ref, grads_ref = backprop_grads(unfused, inputs)
    assert _close(value, value_ref, FUSED_TOL)
    for g, g_ref in zip(grads, grads_ref):
        assert _close(g, g_ref, FUSED_TOL)


@pytest.mark.parametrize('fused, inputs', [(c[1], c[3]) for c in CASES], ids=[c[0] for c in CASES])
def test_fused_grads_match_finite_differences(fused, inputs):
    assert check_grads(fused, inputs) < GRAD_TOL


@pytest.mark.parametrize('seed', SEEDS)
def test_vector_outputs_each_equal_unfused(seed):
    # the weighted sum could hide two errors that cancel; compare every output on its own too
    rng = random.Random(seed)
    xs = [Value(rng.uniform(-2.0, 2.0)) for _ in range(rng.randint(1, 6))]
    for fused, unfused in ((softmax, softmax_unfused), (rmsnorm, rmsnorm_unfused)):
        for y, y_ref in zip(fused(xs), unfused(xs)):
            assert _close(y.data, y_ref.data, FUSED_TOL)


def test_fused_is_one_node():
    # the point of fusing: n inputs, one node on top (the unfused dot needs 2n - 1 more)
    ws, xs = [Value(0.5)] * 4, [Value(1.5) for _ in range(4)]
    assert len(topological_order(dot(ws, xs))) == 1 + 1 + 4   # one shared w, four x's
    assert len(topological_order(cross_entropy(xs, 2))) == 1 + 4


# ---------------------------------------------------------------------------- negative controls
# Each is the real primitive's forward value with one plausible mistake in its local gradients.

def bad_dot(ws, xs):
    """Partners swapped back: ds/dw_i = w_i instead of x_i."""
    w, x = [v.data for v in ws], [v.data for v in xs]
    return Value(sum(a * b for a, b in zip(w, x)), (*ws, *xs), (*w, *x), 'bad_dot')


def bad_vsum(xs):
    """One local gradient short: zip() then silently drops the last child."""
    return Value(sum(v.data for v in xs), tuple(xs), (1.0,) * (len(xs) - 1), 'bad_sum')


def bad_softmax(logits):
    """Only the diagonal dp_i/dz_i = p_i (1 - p_i): forgets that z_j moves every p_i."""
    e = [math.exp(v.data) for v in logits]
    p = [ei / sum(e) for ei in e]
    out = []
    for i, pi in enumerate(p):
        local = [0.0] * len(p)
        local[i] = pi * (1 - pi)
        out.append(Value(pi, tuple(logits), local, 'bad_softmax'))
    return out


def bad_rmsnorm(xs, eps=1e-5):
    """Treats the scale s as a constant: dy_i/dx_j = s delta_ij, missing -x_i x_j s^3 / n."""
    x = [v.data for v in xs]
    s = (sum(xi * xi for xi in x) / len(x) + eps) ** -0.5
    out = []
    for i, xi in enumerate(x):
        local = [0.0] * len(x)
        local[i] = s
        out.append(Value(xi * s, tuple(xs), local, 'bad_rmsnorm'))
    return out


def bad_cross_entropy(logits, target):
    """dL/dz_j = p_j: forgets the -1 at the target."""
    e = [math.exp(v.data) for v in logits]
    p = [ei / sum(e) for ei in e]
    loss = math.log(sum(e)) - logits[target].data
    return Value(loss, tuple(logits), p, 'bad_cross_entropy')


XS = [0.3, -1.2, 0.8, 1.9]
CS = [0.7, -0.4, 0.2, -0.9]
# (id, real primitive, broken primitive, unfused composition), each a build over XS
NEGATIVE_CONTROLS = [
    ('dot', lambda v: dot(v[:2], v[2:]), lambda v: bad_dot(v[:2], v[2:]),
     lambda v: dot_unfused(v[:2], v[2:])),
    ('vsum', vsum, bad_vsum, vsum_unfused),
    ('softmax', lambda v: weighted_sum(softmax(v), CS), lambda v: weighted_sum(bad_softmax(v), CS),
     lambda v: weighted_sum(softmax_unfused(v), CS)),
    ('rmsnorm', lambda v: weighted_sum(rmsnorm(v), CS), lambda v: weighted_sum(bad_rmsnorm(v), CS),
     lambda v: weighted_sum(rmsnorm_unfused(v), CS)),
    ('cross_entropy', lambda v: cross_entropy(v, 1), lambda v: bad_cross_entropy(v, 1),
     lambda v: cross_entropy_unfused(v, 1)),
]


@pytest.mark.parametrize('good, bad, unfused', [c[1:] for c in NEGATIVE_CONTROLS],
                         ids=[c[0] for c in NEGATIVE_CONTROLS])
def test_negative_control_wrong_fused_grad_is_caught(good, bad, unfused):
    # same inputs, same forward value: only the local gradients differ
    assert abs(good([Value(x) for x in XS]).data - bad([Value(x) for x in XS]).data) < FUSED_TOL
    # oracle 1, finite differences: passes the real primitive, fails the broken one
    assert check_grads(good, XS) < GRAD_TOL
    assert check_grads(bad, XS) > 1000 * GRAD_TOL
    # oracle 2, the unfused composition: disagrees with the broken one
    _, grads_bad = backprop_grads(bad, XS)
    _, grads_ref = backprop_grads(unfused, XS)
    assert not all(_close(g, g_ref, FUSED_TOL) for g, g_ref in zip(grads_bad, grads_ref))


# ---------------------------------------------------------------------------- edge cases
def test_softmax_with_large_logits_stays_finite():
    # exp(1000) overflows a float; subtracting the max logit first makes it exp(0) and exp(-1)
    logits = [Value(1000.0), Value(999.0)]
    p = softmax(logits)
    assert _close(p[0].data, 1 / (1 + math.exp(-1)), FUSED_TOL)
    assert _close(p[1].data, 1 / (1 + math.exp(1)), FUSED_TOL)
    weighted_sum(p, [1.0, -1.0]).backward()
    assert all(math.isfinite(z.grad) for z in logits)
    # the textbook formula cannot do this: it is why the fused version subtracts the max
    with pytest.raises(OverflowError):
        softmax_unfused(logits)


def test_cross_entropy_with_large_logits_stays_finite():
    logits = [Value(1000.0), Value(999.0)]
    loss = cross_entropy(logits, 1)
    assert _close(loss.data, 1 + math.log(1 + math.exp(-1)), FUSED_TOL)  # logsumexp - z_1
    loss.backward()
    p0 = 1 / (1 + math.exp(-1))
    assert _close(logits[0].grad, p0, FUSED_TOL) and _close(logits[1].grad, -p0, FUSED_TOL)


def test_rmsnorm_of_zeros_is_zeros_with_slope_one_over_sqrt_eps():
    # eps is what keeps this finite: s = eps^(-1/2) and dy_i/dx_i = s at x = 0
    eps = 1e-4
    xs = [Value(0.0) for _ in range(3)]
    ys = rmsnorm(xs, eps)
    assert all(y.data == 0.0 for y in ys)
    ys[0].backward()
    assert _close(xs[0].grad, eps ** -0.5, FUSED_TOL)
    assert xs[1].grad == 0.0


def test_fused_blocks_compute_what_floats_compute_and_check_nothing():
    # like the engine, the fused blocks trust their arguments: an overflow is an inf (or an
    # OverflowError from math), and training's one check on the loss catches the divergence
    assert dot([Value(1e200)], [Value(1e200)]).data == math.inf
    with pytest.raises(OverflowError):  # float's **: the mean square never becomes inf and s 0
        rmsnorm([Value(1e200), Value(1e200)])
