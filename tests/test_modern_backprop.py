"""
The modern rungs on the numpy trainer (src/backprop): each new backward alone, then the trainer.

Each new layer's hand-derived backward (the norm gains, QK-norm, RoPE, GELU, SwiGLU's gate, the
shared heads of grouped-query attention, the tied matrix's two uses) is checked against central
finite differences of L = sum(R * y), R a fixed random array shaped like the output (dL/dy = R);
beside it a negative control, a plausible mistake, must FAIL the same check. Then, every rung on:
dropout's masks fall where the scalar engine drops, and float32 stays float32. The whole model
against the scalar engine: test_modern_engines.py.
"""

import numpy as np
import pytest

from microgpt.backprop import Trainer, layers
from microgpt.backprop.dropout import draw
from microgpt.backprop.model import loss_and_grads
from microgpt.engine import Tape
from microgpt.model import GPT
from microgpt.programs.taps import dropout_batch_loss
from microgpt.training import doc_tokens, num_predictions
from helpers import FD_TOL, GRAD_TOL, RUNG_DOCS, max_diff, numeric_grad_array, rung_setup

WRONG_MIN = 1e-3  # a wrong backward must miss by at least this much


def rng():
    return np.random.default_rng(0)


def check(backward, forward, x, R, wrong):
    """backward's dL/dx within FD_TOL of finite differences of sum(R * forward()); wrong's not."""
    numeric = numeric_grad_array(lambda: float((R * forward()).sum()), x)
    assert max_diff(backward, numeric) < FD_TOL
    assert max_diff(wrong, numeric) > WRONG_MIN


# ---------------------------------------------------------------------------- layer by layer
def test_gain_backward_sums_the_rows():
    r = rng()
    x, g, R = r.normal(size=(5, 6)), r.normal(0, 0.3, size=(1, 6)), r.normal(size=(5, 6))
    dx, dg = layers.gain_backward(R, layers.gain_forward(x, g)[1])
    assert dg.shape == g.shape
    forward = lambda: layers.gain_forward(x, g)[0]  # noqa: E731
    check(dx, forward, x, R, wrong=R * g)               # forgets the 1 of (1 + g)
    check(dg, forward, g, R, wrong=R.sum(axis=0, keepdims=True))  # forgets x


def test_qk_norm_backward_norms_each_head_alone():
    r = rng()
    head_dim, x, R = 4, r.normal(size=(5, 12)), r.normal(size=(5, 12))  # 3 heads of 4
    dx = layers.head_rmsnorm_backward(R, layers.head_rmsnorm_forward(x, head_dim)[1])
    wrong = layers.rmsnorm_backward(R, layers.rmsnorm_forward(x)[1])  # the whole row as one norm
    check(dx, lambda: layers.head_rmsnorm_forward(x, head_dim)[0], x, R, wrong)


def test_rope_backward_turns_back():
    r = rng()
    pos, x, R = np.array([0, 1, 2, 3, 0, 1]), r.normal(size=(6, 8)), r.normal(size=(6, 8))  # 2 heads of 4
    cos, sin = layers.rope_angles(pos, 4, x.dtype)
    check(layers.rope_backward(R, cos, sin), lambda: layers.rope_forward(x, cos, sin), x, R,
          wrong=layers.rope_forward(R, cos, sin))  # turns the gradient on by +theta, not back
    assert max_diff(layers.rope_forward(x, cos, sin)[pos == 0], x[pos == 0]) == 0.0  # position 0 stays
    norms = lambda a: np.linalg.norm(a.reshape(6, -1, 2), axis=-1)  # noqa: E731: each pair's length
    assert max_diff(norms(layers.rope_forward(x, cos, sin)), norms(x)) < 1e-12  # a turn keeps it


def test_gelu_backward():
    r = rng()
    u, R = r.normal(size=(4, 6)) * 2, r.normal(size=(4, 6))
    t = np.tanh(layers.GELU_C * (u + 0.044715 * u ** 3))
    check(layers.gelu_backward(R, u), lambda: layers.gelu_forward(u)[0], u, R,
          wrong=R * 0.5 * (1 + t))  # forgets the product rule's second term


def test_swiglu_backward():
    r = rng()
    a, b, R = r.normal(size=(4, 6)) * 2, r.normal(size=(4, 6)), r.normal(size=(4, 6))
    da, db = layers.swiglu_backward(R, layers.swiglu_forward(a, b)[1])
    s = 1 / (1 + np.exp(-a))
    forward = lambda: layers.swiglu_forward(a, b)[0]  # noqa: E731
    check(da, forward, a, R, wrong=R * b * s)   # takes silu's derivative for sigmoid
    check(db, forward, b, R, wrong=R * s)       # the gate's sigmoid, not its silu


@pytest.mark.parametrize('n_kv_head', [1, 2])
def test_shared_heads_gradient_is_the_sum_over_their_query_heads(n_kv_head):
    r = rng()
    B, T, n_head, head_dim = 2, 4, 4, 2
    rows = np.array([0, 1, 2, 3, 4, 5])  # name 0 at 0..3, name 1 at 4, 5 (6, 7 are padding)
    q, R = r.normal(size=(6, n_head * head_dim)), r.normal(size=(6, n_head * head_dim))
    k, v = r.normal(size=(6, n_kv_head * head_dim)), r.normal(size=(6, n_kv_head * head_dim))
    dq, dk, dv = layers.attention_backward(R, layers.attention_forward(q, k, v, rows, B, T, n_head)[1])
    # the same attention with each kv head copied out for its query heads: a gradient per copy
    group = n_head // n_kv_head
    copies = lambda a: np.repeat(a.reshape(6, n_kv_head, 1, head_dim), group, axis=2).reshape(6, -1)  # noqa: E731
    _, cache = layers.attention_forward(q, copies(k), copies(v), rows, B, T, n_head)
    _, dk_each, _ = layers.attention_backward(R, cache)                 # (6, n_head * head_dim)
    dk_first = dk_each.reshape(6, n_kv_head, group, head_dim)[:, :, 0].reshape(6, -1)  # one copy's
    forward = lambda: layers.attention_forward(q, k, v, rows, B, T, n_head)[0]  # noqa: E731
    check(dk, forward, k, R, wrong=dk_first)  # a copy's gradient, not the sum of the copies'
    for d, x in ((dq, q), (dv, v)):
        assert max_diff(d, numeric_grad_array(lambda: float((R * forward()).sum()), x)) < FD_TOL


def test_tied_matrix_gets_both_uses_gradients():
    r = rng()
    vocab_size, n_embd = 5, 3
    wte, x = r.normal(size=(vocab_size, n_embd)), r.normal(size=(4, n_embd))
    ids, R_in, R_out = np.array([1, 3, 1, 0]), r.normal(size=(4, n_embd)), r.normal(size=(4, vocab_size))

    def loss():  # wte read twice: rows in, as the embedding; the scores out, as the output matrix
        return float((R_in * layers.embedding_forward(wte, None, ids, None)[0]).sum()
                     + (R_out * layers.linear_forward(x, wte)[0]).sum())
    d_in, none = layers.embedding_backward(R_in, (ids, None), vocab_size, None)
    _, d_out = layers.linear_backward(R_out, x, wte)
    assert none is None  # RoPE's embedding has no wpe
    numeric = numeric_grad_array(loss, wte)
    assert max_diff(d_in + d_out, numeric) < FD_TOL
    assert max_diff(d_out, numeric) > WRONG_MIN  # the output matrix's gradient alone


# ---------------------------------------------------------------------------- the trainer, every rung on
def test_dropout_masks_fall_where_the_scalar_engine_drops():
    config, weights, tokenizer = rung_setup('all')
    model = GPT.from_weights(config, weights, fused=True)
    batch = [doc_tokens(tokenizer, d) for d in RUNG_DOCS[2:]]
    masks = draw(0.3, 9, 4, len(batch), config)
    loss, grads = loss_and_grads({n: np.array(w) for n, w in weights.items()}, config, batch, dropout=masks)
    dropout = [masks.positions(b, num_predictions(t, config.block_size)) for b, t in enumerate(batch)]
    with Tape() as tape:  # the scalar engine, its blocks tapped to apply the same masks
        scalar = dropout_batch_loss(model, batch, dropout)
    scalar.backward(tape)
    assert abs(loss - scalar.data) < GRAD_TOL
    for name, matrix in model.state_dict.items():
        assert max_diff(grads[name], np.array([[p.grad for p in row] for row in matrix])) < GRAD_TOL, name


def test_float32_stays_float32_and_follows_float64():
    config, weights, tokenizer = rung_setup('all')
    batch = [doc_tokens(tokenizer, d) for d in RUNG_DOCS]
    trainers = [Trainer(config, weights, None, dtype=dtype) for dtype in ('float32', 'float64')]
    _, grads = trainers[0].loss_and_grads(batch)
    assert {g.dtype for g in grads.values()} == {np.dtype('float32')}  # RoPE's angles included
    gaps = [abs(a - b) / b for a, b in ((t.step(batch, 0.01) for t in trainers) for _ in range(10))]
    assert 0 < max(gaps) < 1e-5  # near, and not equal: it really computed in float32
