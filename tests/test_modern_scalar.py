"""
Tests for the modern rungs of the scalar gpt() (issue 45): each rung alone, and all at once.

Each rung is checked against an oracle that does not share its code:
  1. every weight's gradient against central differences of the forward pass, one random
     direction per matrix (on fused.py's blocks, which 2. ties to ops.py's), with negative
     controls: a deliberately wrong backward (SwiGLU's gate, GELU, RoPE's turn) must fail;
  2. ops.py's composed blocks against fused.py's one-node ones: the same logits and gradients;
  3. gelu and silu against their closed forms (math.tanh, math.exp) and their derivatives;
  4. RoPE: a score q_i . k_j depends on the positions only through i - j, so a model without
     wpe reads the same tokens alike wherever they start;
  5. grouped-query attention against the plain model whose heads hold the shared keys twice,
     and tied embeddings against an untied model whose lm_head is a copy of wte;
  6. the lab's Recorder (a Tap on the blocks) still finds each position's sites with a rung on.

Run: .venv/bin/python -m pytest -q tests/test_modern_scalar.py
"""

import math
import random

import pytest

from microgpt import fused, model as model_module, ops
from microgpt.engine import Tape, Value
from microgpt.model import GPT, GPTConfig, is_gain, rotate
from microgpt.programs.taps import Recorder
from microgpt.training import doc_loss

pytestmark = pytest.mark.lesson  # the lesson's own files: `make test-lesson`

GRAD_TOL = 1e-6    # against central differences with step H (observed ~1e-9)
FUSED_TOL = 1e-12  # composed vs fused: the same math in another float order
H = 1e-6
SMALL = dict(vocab_size=7, n_layer=2, n_embd=8, n_head=4, block_size=6)  # head_dim 2: RoPE works
ALL = dict(rope=True, mlp='swiglu', norm_gains=True, qk_norm=True, n_kv_head=2, tie_embeddings=True)
RUNGS = {'rope': dict(rope=True), 'gelu': dict(mlp='gelu'), 'swiglu': dict(mlp='swiglu'),
         'norm_gains': dict(norm_gains=True), 'qk_norm': dict(qk_norm=True), 'gqa': dict(n_kv_head=2),
         'mqa': dict(n_kv_head=1), 'tied': dict(tie_embeddings=True), 'all': ALL,
         'all_gelu': dict(ALL, mlp='gelu')}
TOKENS = [0, 3, 5, 1, 6, 2, 0]  # BOS, five letters, BOS: six predictions fill the block


def make(rung, fused=False, **changes):
    """A small model with the rung on; its gains drawn at random (at 0 they check little)."""
    m = GPT(GPTConfig(**SMALL, **{**RUNGS[rung], **changes}), seed=3, fused=fused)
    rng = random.Random(4)
    for name, matrix in m.state_dict.items():
        for p in matrix[0] if is_gain(name) else ():
            p.data = rng.uniform(-0.5, 0.5)
    return m


def logits_loss_grads(m):
    """(every position's logits, the mean loss, {name: flat gradient}) from one backward()."""
    for p in m.params:
        p.grad = 0.0
    keys, values = m.empty_cache()
    with Tape() as tape:
        logits = [m.gpt(t, pos, keys, values) for pos, t in enumerate(TOKENS[:-1])]
        loss = doc_loss(m, TOKENS)
    loss.backward(tape)
    grads = {name: [p.grad for row in matrix for p in row] for name, matrix in m.state_dict.items()}
    return [[l.data for l in row] for row in logits], loss.data, grads


def gradient_error(m):
    """The largest error of backward()'s gradient over the matrices, each along a random direction
    r of its own: sum(grad * r) against (L(w + H r) - L(w - H r)) / 2H. Every weight counts, with
    a random factor. Absolute below 1, relative above (as helpers.check_grads)."""
    _, _, grads = logits_loss_grads(m)
    rng, error = random.Random(5), 0.0
    for name, matrix in m.state_dict.items():
        ps = [p for row in matrix for p in row]
        w, r = [p.data for p in ps], [rng.gauss(0, 1) for _ in ps]

        def loss_at(t):
            for p, wi, ri in zip(ps, w, r):
                p.data = wi + t * ri
            return doc_loss(m, TOKENS).data
        numeric = (loss_at(H) - loss_at(-H)) / (2 * H)
        loss_at(0.0)
        exact = sum(g * ri for g, ri in zip(grads[name], r))
        error = max(error, abs(exact - numeric) / max(1.0, abs(exact), abs(numeric)))
    return error


@pytest.mark.parametrize('rung', RUNGS)
def test_gradients_match_central_differences(rung):
    assert gradient_error(make(rung, fused=True)) < GRAD_TOL


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
    ('rope', model_module, 'rotate', rotate_with_b_held_constant)])
def test_a_wrong_backward_fails_the_check(rung, module, name, wrong, monkeypatch):
    monkeypatch.setattr(module, name, wrong)
    assert gradient_error(make(rung, fused=True)) > 100 * GRAD_TOL


@pytest.mark.parametrize('rung', RUNGS)
def test_composed_and_fused_blocks_agree(rung):
    composed, one_node = logits_loss_grads(make(rung)), logits_loss_grads(make(rung, fused=True))
    for a, b in zip(composed[0], one_node[0]):
        assert max(abs(x - y) for x, y in zip(a, b)) < FUSED_TOL
    for name, grad in composed[2].items():
        assert max(abs(x - y) for x, y in zip(grad, one_node[2][name])) < FUSED_TOL, name


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


@pytest.mark.parametrize('rung, shifts', [('rope', False), ('all', False), ('gelu', True)])
def test_a_rope_model_reads_the_same_tokens_alike_wherever_they_start(rung, shifts):
    m = make(rung)

    def logits_from(start):
        keys, values = m.empty_cache()
        return [l.data for pos, t in enumerate(TOKENS[:4]) for l in m.gpt(t, start + pos, keys, values)]
    moved = max(abs(a - b) for a, b in zip(logits_from(0), logits_from(2)))
    assert moved > 1e-3 if shifts else moved < 1e-12  # with wpe, a position is a place, not a distance


def test_gqa_with_a_kv_head_per_query_head_is_the_default_model():
    full, default = make('gqa', n_kv_head=4), GPT(GPTConfig(**SMALL), seed=3)
    assert full.config == default.config and logits_loss_grads(full) == logits_loss_grads(default)


@pytest.mark.parametrize('n_kv_head', [1, 2])
def test_gqa_is_the_plain_model_with_each_kv_head_repeated(n_kv_head):
    shared = make('gqa', n_kv_head=n_kv_head)
    plain = GPT(GPTConfig(**SMALL), seed=3)
    weights, group, D = shared.weights(), 4 // n_kv_head, 2
    for name in [n for n in weights if n.endswith(('attn_wk', 'attn_wv'))]:
        rows = weights[name]  # query head h reads kv head h // group: its rows, repeated
        weights[name] = [rows[h // group * D + d] for h in range(4) for d in range(D)]
    plain.load_weights(weights)
    (lg_s, loss_s, g_s), (lg_p, loss_p, g_p) = logits_loss_grads(shared), logits_loss_grads(plain)
    assert max(abs(a - b) for x, y in zip(lg_s, lg_p) for a, b in zip(x, y)) < FUSED_TOL
    for name, grad in g_s.items():  # a shared row's gradient is the sum of its copies'
        if name.endswith(('attn_wk', 'attn_wv')):
            grad_p = [sum(g_p[name][(h * D + d) * 8 + i] for h in range(4) if h // group == kv)
                      for kv in range(n_kv_head) for d in range(D) for i in range(8)]
        else:
            grad_p = g_p[name]
        assert len(grad) == len(grad_p) and max(abs(a - b) for a, b in zip(grad, grad_p)) < FUSED_TOL, name


def test_tied_wte_gradient_is_the_sum_of_its_two_uses():
    tied, untied = make('tied'), GPT(GPTConfig(**SMALL), seed=3)
    weights = tied.weights()
    untied.load_weights({**weights, 'lm_head': weights['wte']})
    (lg_t, _, g_t), (lg_u, _, g_u) = logits_loss_grads(tied), logits_loss_grads(untied)
    assert 'lm_head' not in g_t and max(abs(a - b) for x, y in zip(lg_t, lg_u) for a, b in zip(x, y)) < FUSED_TOL
    assert max(abs(t - (a + b)) for t, a, b in zip(g_t['wte'], g_u['wte'], g_u['lm_head'])) < FUSED_TOL
    assert all(g_t[name] == g_u[name] for name in g_t if name != 'wte')
    assert max(abs(a) for a in g_u['lm_head']) > 1e-3 and max(abs(a) for a in g_u['wte']) > 1e-3


@pytest.mark.parametrize('rung', RUNGS)
def test_the_recorder_finds_each_position_with_the_rung(rung):
    m = make(rung, fused=True)
    m.blocks = recorder = Recorder(m)
    keys, values = m.empty_cache()
    logits = [m.gpt(t, pos, keys, values) for pos, t in enumerate(TOKENS[:-1])]
    assert [c['logits'] for c in recorder.captures] == logits
    assert all(len(c['layer1.attn_weights']) == 4 and len(c['layer1.mlp_in']) == 8 for c in recorder.captures)
