"""
The engine against PyTorch: the same expressions in float64, values and gradients to ~1e-12.

PyTorch is an oracle written by other people, differentiated by other code: if both agree, a
shared misunderstanding is unlikely. It is optional (not a dependency of microgpt), so this file
is skipped when torch is not installed. To run it: .venv/bin/pip install torch, then
.venv/bin/python -m pytest -q tests/test_engine_torch.py

Each basic-op expression is written ONCE and run on both: a list of Values and a 1-D float64
tensor both support v[i], + - * / **, and .exp() .log() .relu(). The fused primitives are
compared with torch's own functions (torch.dot, torch.softmax, rms_norm, cross_entropy).
"""

import math
import random

import pytest

pytestmark = pytest.mark.torch

torch = pytest.importorskip("torch")
F = torch.nn.functional

from helpers import backprop_grads  # noqa: E402  (after the skip, like torch itself)
from microgpt.engine import Value  # noqa: E402
from microgpt.fused import cross_entropy, dot, rmsnorm, softmax, vsum  # noqa: E402

TORCH_TOL = 1e-12  # relative above 1, absolute below: float64 rounding in a different order
SEEDS = range(4)


def torch_grads(build, xs):
    """(output value, gradient of every input) from torch's autograd, in float64."""
    t = torch.tensor(xs, dtype=torch.float64, requires_grad=True)
    out = build(t)
    out.backward()
    return out.item(), t.grad.tolist()


def assert_close(a, b):
    assert abs(a - b) <= TORCH_TOL * max(1.0, abs(a), abs(b)), (a, b)


def weighted_sum(ys, cs):
    """sum_i c_i * y_i: works on a list of Values and on a 1-D tensor alike."""
    return sum(c * y for c, y in zip(cs, ys))


def assert_same_value_and_grads(engine_build, torch_build, xs):
    value, grads = backprop_grads(engine_build, xs)
    value_ref, grads_ref = torch_grads(torch_build, xs)
    assert_close(value, value_ref)
    assert len(grads) == len(grads_ref)
    for g, g_ref in zip(grads, grads_ref):
        assert_close(g, g_ref)


# ---------------------------------------------------------------------------- basic ops, diamonds
def _cube_of_shared(v):
    b = v[0] + 1  # b feeds the product three times
    return b * b * b


EXPRESSIONS = [
    ('add', lambda v: v[0] + v[1], [0.7, -1.3]),
    ('radd', lambda v: 2.5 + v[0], [0.7]),
    ('sub', lambda v: v[0] - v[1], [0.7, -1.3]),
    ('rsub', lambda v: 2.5 - v[0], [0.7]),
    ('mul', lambda v: v[0] * v[1], [0.7, -1.3]),
    ('rmul', lambda v: -3.0 * v[0], [0.7]),
    ('div', lambda v: v[0] / v[1], [0.7, -1.3]),
    ('rdiv', lambda v: 4.0 / v[0], [0.7]),
    ('pow_3', lambda v: v[0] ** 3, [-1.3]),
    ('pow_half', lambda v: v[0] ** 0.5, [1.7]),
    ('pow_minus_1.5', lambda v: v[0] ** -1.5, [1.7]),
    ('neg', lambda v: -v[0], [0.7]),
    ('exp', lambda v: v[0].exp(), [0.7]),
    ('log', lambda v: v[0].log(), [0.7]),
    ('relu_positive', lambda v: v[0].relu(), [0.7]),
    ('relu_negative', lambda v: v[0].relu(), [-0.7]),
    ('relu_at_zero', lambda v: v[0].relu(), [0.0]),  # both choose slope 0 at the kink
    ('diamond_reused', lambda v: v[0] * v[0] + v[0], [1.5]),
    ('diamond_shared', _cube_of_shared, [0.5]),
    ('compound', lambda v: (v[0] * v[1] + v[1].exp()).relu() / (v[0] ** 2 + 1).log()
     - (v[2] / v[0]) ** 2, [0.7, -1.3, 0.4]),
]


@pytest.mark.parametrize('build, xs', [e[1:] for e in EXPRESSIONS], ids=[e[0] for e in EXPRESSIONS])
def test_expression_matches_torch(build, xs):
    assert_same_value_and_grads(build, build, xs)


# ---------------------------------------------------------------------------- fused primitives
def _fused_cases():
    """(id, engine build over a list of Values, torch build over a 1-D tensor, inputs)."""
    cases = []
    for seed in SEEDS:
        rng = random.Random(seed)
        n = rng.randint(2, 6)
        xs = [rng.uniform(-2.0, 2.0) for _ in range(n)]
        ws = [rng.uniform(-2.0, 2.0) for _ in range(n)]
        cs = [rng.uniform(-1.0, 1.0) for _ in range(n)]  # weights of the outputs of a vector op
        target = rng.randrange(n)
        cases += [
            (f'dot-{seed}', lambda v, n=n: dot(v[:n], v[n:]),
             lambda t, n=n: torch.dot(t[:n], t[n:]), ws + xs),
            (f'vsum-{seed}', vsum, torch.sum, xs),
            (f'softmax-{seed}', lambda v, cs=cs: weighted_sum(softmax(v), cs),
             lambda t, cs=cs: weighted_sum(torch.softmax(t, 0), cs), xs),
            (f'rmsnorm-{seed}', lambda v, cs=cs: weighted_sum(rmsnorm(v, 1e-5), cs),
             lambda t, cs=cs, n=n: weighted_sum(F.rms_norm(t, (n,), eps=1e-5), cs), xs),
            (f'cross_entropy-{seed}', lambda v, t=target: cross_entropy(v, t),
             lambda t, target=target: F.cross_entropy(t[None], torch.tensor([target])), xs),
        ]
    return cases


FUSED = _fused_cases()


@pytest.mark.parametrize('engine_build, torch_build, xs', [c[1:] for c in FUSED],
                         ids=[c[0] for c in FUSED])
def test_fused_matches_torch(engine_build, torch_build, xs):
    # softmax and rmsnorm go through sum_i c_i y_i, so the whole Jacobian takes part
    assert_same_value_and_grads(engine_build, torch_build, xs)


@pytest.mark.parametrize('seed', SEEDS)
def test_vector_outputs_match_torch(seed):
    rng = random.Random(seed)
    xs = [rng.uniform(-2.0, 2.0) for _ in range(rng.randint(2, 6))]
    t = torch.tensor(xs, dtype=torch.float64)
    for ours, theirs in ((softmax([Value(x) for x in xs]), torch.softmax(t, 0)),
                         (rmsnorm([Value(x) for x in xs]), F.rms_norm(t, (len(xs),), eps=1e-5))):
        for y, y_ref in zip(ours, theirs.tolist()):
            assert_close(y.data, y_ref)


def test_large_logits_match_torch():
    # both subtract the max logit; neither may overflow on exp(1000)
    xs = [1000.0, 999.0, -5.0]
    assert_same_value_and_grads(lambda v: cross_entropy(v, 1),
                                lambda t: F.cross_entropy(t[None], torch.tensor([1])), xs)
    cs = [0.3, -0.8, 0.5]
    assert_same_value_and_grads(lambda v: weighted_sum(softmax(v), cs),
                                lambda t: weighted_sum(torch.softmax(t, 0), cs), xs)
    assert all(math.isfinite(g) for g in backprop_grads(lambda v: cross_entropy(v, 1), xs)[1])
