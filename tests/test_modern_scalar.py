"""
Tests for the modern rungs of the scalar gpt() (docs/modern.md), the oracle the other engines meet.

gpt() composes its rungs from blocks already tested; new are gelu and silu, checked against their
closed forms in ops.py and as fused.py's one node. The whole model's gradient, each rung alone
and all at once, is checked against central differences, and three deliberately wrong
derivatives must fail that check. RoPE's scores depend on the positions only through i - j; the lab's Recorder still finds
each position's sites. test_modern_engines.py ties gpt() to the numpy and torch engines.

Run: .venv/bin/python -m pytest -q tests/test_modern_scalar.py
"""

import math
import random

import pytest

from microgpt import fused, model as model_module, ops
from microgpt.engine import Tape, Value
from microgpt.model import GPT, rotate
from microgpt.programs.taps import Recorder
from microgpt.training import doc_loss
from helpers import RUNGS, rung_setup

pytestmark = pytest.mark.lesson  # the lesson's own files: `make test-lesson`

GRAD_TOL = 1e-6  # against central differences with step H (observed ~1e-9)
H = 1e-6
TOKENS = [0, 3, 5, 1, 6, 2, 0]  # BOS, five letters, BOS: six predictions fill the block
EACH_RUNG = [*RUNGS, 'all_gelu']  # helpers' table, and GELU among all the rest


def make(rung):
    config, weights, _ = rung_setup('all', mlp='gelu') if rung == 'all_gelu' else rung_setup(rung)
    return GPT.from_weights(config, weights, fused=True)


def gradient_error(m):
    """backward()'s gradient along one random direction r of every weight, sum(grad * r), against
    (L(w + H r) - L(w - H r)) / 2H; relative above 1."""
    with Tape() as tape:
        loss = doc_loss(m, TOKENS)
    loss.backward(tape)
    rng = random.Random(5)
    r = [rng.gauss(0, 1) for _ in m.params]
    w = [p.data for p in m.params]

    def loss_at(t):
        for p, wi, ri in zip(m.params, w, r):
            p.data = wi + t * ri
        return doc_loss(m, TOKENS).data
    numeric = (loss_at(H) - loss_at(-H)) / (2 * H)
    exact = sum(p.grad * ri for p, ri in zip(m.params, r))
    return abs(exact - numeric) / max(1.0, abs(exact), abs(numeric))


@pytest.mark.parametrize('rung', EACH_RUNG)
def test_gradients_match_central_differences(rung):
    assert gradient_error(make(rung)) < GRAD_TOL


# Negative controls: one wrong derivative each, which the check above must catch.
def silu_without_the_slope_of_the_sigmoid(u):
    s = fused._sigmoid(u.data)
    return Value(u.data * s, (u,), (s,), 'silu')


def gelu_without_the_cubic(u):
    x = u.data
    s = fused._sigmoid(fused.GELU_C * (x + 0.044715 * x ** 3))
    return Value(x * s, (u,), (s + x * s * (1 - s) * fused.GELU_C,), 'gelu')


def rotate_with_b_held_constant(x, pos_id):
    """The right forward, but no gradient flows to b through its sine."""
    out = []
    for m, freq in enumerate(model_module.rope_frequencies(len(x))):
        c, s = math.cos(pos_id * freq), math.sin(pos_id * freq)
        a, b = x[2 * m], x[2 * m + 1]
        out += [a * c - b.data * s, a * s + b * c]
    return out


@pytest.mark.parametrize('rung, module, name, wrong', [
    ('swiglu', fused, 'silu', silu_without_the_slope_of_the_sigmoid),
    ('all_gelu', fused, 'gelu', gelu_without_the_cubic),
    ('all', model_module, 'rotate', rotate_with_b_held_constant)])
def test_a_wrong_backward_fails_the_check(rung, module, name, wrong, monkeypatch):
    monkeypatch.setattr(module, name, wrong)
    assert gradient_error(make(rung)) > 100 * GRAD_TOL


def gelu_closed_form(u):
    return 0.5 * u * (1 + math.tanh(math.sqrt(2 / math.pi) * (u + 0.044715 * u ** 3)))


def silu_closed_form(u):
    return u / (1 + math.exp(-u)) if u > -700 else 0.0  # exp(700) is about the largest float


@pytest.mark.parametrize('blocks', [ops, fused])
@pytest.mark.parametrize('name, closed_form', [('gelu', gelu_closed_form), ('silu', silu_closed_form)])
def test_gelu_and_silu_are_their_closed_forms(blocks, name, closed_form):
    for u in [-800.0, -30.0, -3.0, -0.7, 0.0, 0.4, 2.5, 30.0, 800.0]:  # far out: no overflow
        leaf = Value(u)
        y = getattr(blocks, name)(leaf)
        y.backward()
        assert y.data == pytest.approx(closed_form(u), rel=1e-12, abs=1e-300)
        assert leaf.grad == pytest.approx((closed_form(u + H) - closed_form(u - H)) / (2 * H), abs=GRAD_TOL)


def test_rope_scores_depend_only_on_the_distance():
    rng = random.Random(6)
    q, k = [rng.gauss(0, 1) for _ in range(8)], [rng.gauss(0, 1) for _ in range(8)]

    def score(i, j):
        return sum(a * b for a, b in zip(rotate(q, i), rotate(k, j)))
    for i, j in [(0, 0), (3, 1), (5, 2), (15, 0)]:
        assert score(i + 7, j + 7) == pytest.approx(score(i, j), abs=1e-12)
    assert abs(score(3, 1) - score(3, 2)) > 1e-3  # and it does depend on the distance
    assert sum(x * x for x in rotate(q, 5)) == pytest.approx(sum(x * x for x in q))  # a turn


@pytest.mark.parametrize('rung', ['all', 'all_gelu'])
def test_the_recorder_finds_each_position_with_every_rung(rung):
    m = make(rung)
    m.blocks = recorder = Recorder(m)
    keys, values = m.empty_cache()
    logits = [m.gpt(t, pos, keys, values) for pos, t in enumerate(TOKENS[:-1])]
    assert [c['logits'] for c in recorder.captures] == logits
    assert all(len(c['layer1.attn_weights']) == 4 and len(c['layer1.mlp_in']) == 8 for c in recorder.captures)
