"""
Every layer's hand-derived backward (src/backprop/layers.py) against central finite differences.

For a layer y = f(x) and a fixed random array R shaped like y, the scalar L = sum(R * y) has
dL/dy = R, so backward(R) must return dL/dx; finite differences of L, one input entry at a time,
are the independent oracle. Everything is float64 and tiny. The negative controls feed the same
check a deliberately wrong backward and require it to FAIL, so the check can catch a mistake.
"""

import numpy as np
import pytest

from microgpt.backprop import layers
from microgpt.backprop.dropout import draw
from microgpt.backprop.model import loss_and_grads, make_batch, model_forward
from microgpt.inference.model import merge_heads
from microgpt.model import GPTConfig, parameter_shapes
from microgpt.training import num_predictions
from helpers import FD_TOL, max_diff, numeric_grad_array

H = 1e-6          # finite-difference step
WRONG_MIN = 1e-3  # a wrong backward must miss by at least this much


def rng():
    return np.random.default_rng(0)


# ---------------------------------------------------------------------------- layer by layer
def test_embedding_backward_adds_up_repeated_tokens():
    r = rng()
    vocab_size, block_size, n_embd = 5, 6, 3
    wte, wpe = r.normal(size=(vocab_size, n_embd)), r.normal(size=(block_size, n_embd))
    ids = np.array([1, 3, 1, 1, 0, 3, 2])  # token 1 three times, token 4 never
    pos = np.array([0, 1, 2, 3, 0, 1, 2])  # two names, of 4 and 3 positions
    R = r.normal(size=(len(ids), n_embd))  # (R, n_embd)

    def loss():
        return float((R * layers.embedding_forward(wte, wpe, ids, pos)[0]).sum())
    dwte, dwpe = layers.embedding_backward(R, (ids, pos), vocab_size, block_size)
    assert max_diff(dwte, numeric_grad_array(loss, wte)) < FD_TOL
    assert max_diff(dwpe, numeric_grad_array(loss, wpe)) < FD_TOL
    assert np.all(dwte[4] == 0) and np.all(dwpe[4:] == 0)  # unused rows get exactly nothing
    dwte_wrong = np.zeros_like(wte)
    dwte_wrong[ids] += R  # the negative control, buffered: a repeated id keeps only its last gradient
    assert max_diff(dwte_wrong, numeric_grad_array(loss, wte)) > WRONG_MIN


def test_rmsnorm_backward():
    r = rng()
    x = r.normal(size=(4, 6))
    R = r.normal(size=(4, 6))
    _, cache = layers.rmsnorm_forward(x)
    numeric = numeric_grad_array(lambda: float((R * layers.rmsnorm_forward(x)[0]).sum()), x)
    assert max_diff(layers.rmsnorm_backward(R, cache), numeric) < FD_TOL
    s = ((x * x).mean(axis=-1, keepdims=True) + layers.RMS_EPS) ** -0.5  # (4, 1)
    assert max_diff(s * R, numeric) > WRONG_MIN  # the negative control forgets that s depends on x


def test_linear_backward():
    r = rng()
    x, w = r.normal(size=(5, 4)), r.normal(size=(4, 4))  # w stored [n_out, n_in]; square, so a transpose fits
    R = r.normal(size=(5, 4))

    def loss():
        return float((R * layers.linear_forward(x, w)[0]).sum())
    dx, dw = layers.linear_backward(R, x, w)
    assert dw.shape == w.shape
    assert max_diff(dx, numeric_grad_array(loss, x)) < FD_TOL
    assert max_diff(dw, numeric_grad_array(loss, w)) < FD_TOL
    assert max_diff(x.T @ R, numeric_grad_array(loss, w)) > WRONG_MIN  # the negative control: [n_in, n_out]


def test_relu_backward():
    r = rng()
    x = r.normal(size=(4, 5))
    x[np.abs(x) < 0.01] = 0.5  # keep finite differences away from the kink at 0
    R = r.normal(size=(4, 5))
    dx = layers.relu_backward(R.copy(), layers.relu_forward(x)[1])  # a copy: it writes into its dy
    assert max_diff(dx, numeric_grad_array(lambda: float((R * layers.relu_forward(x)[0]).sum()), x)) < FD_TOL


def test_residual_backward():
    r = rng()
    a, b, R = r.normal(size=(3, 4)), r.normal(size=(3, 4)), r.normal(size=(3, 4))

    def loss():
        return float((R * layers.residual_forward(a, b)).sum())
    da, db = layers.residual_backward(R)
    assert max_diff(da, numeric_grad_array(loss, a)) < FD_TOL
    assert max_diff(db, numeric_grad_array(loss, b)) < FD_TOL


def attention_case():
    """Two names of 4 and 2 positions: 6 rows, padded to T = 4 inside attention."""
    r = rng()
    B, T, n_head, n_embd = 2, 4, 2, 6
    rows = np.array([0, 1, 2, 3, 4, 5])  # name 0 at 0..3, name 1 at 4, 5 (6, 7 are padding)
    q, k, v = (r.normal(size=(len(rows), n_embd)) for _ in range(3))
    R = r.normal(size=(len(rows), n_embd))
    return rows, B, T, n_head, q, k, v, R


@pytest.mark.parametrize('dropped', [False, True])
def test_attention_backward(dropped):
    """Also with half the attention weights dropped (a fixed mask, kept ones scaled by 2)."""
    rows, B, T, n_head, q, k, v, R = attention_case()
    drop = (np.random.default_rng(1).random((n_head, B, T, T)) >= 0.5) * 2.0 if dropped else None

    def loss():
        return float((R * layers.attention_forward(q, k, v, rows, B, T, n_head, drop)[0]).sum())
    _, cache = layers.attention_forward(q, k, v, rows, B, T, n_head, drop)
    dq, dk, dv = layers.attention_backward(R, cache)
    for d, x in ((dq, q), (dk, k), (dv, v)):
        assert max_diff(d, numeric_grad_array(loss, x)) < FD_TOL
    _, plain = layers.attention_forward(q, k, v, rows, B, T, n_head)
    assert (max_diff(layers.attention_backward(R, plain)[2], dv) > 1e-3) == dropped  # the mask mattered


def test_attention_is_causal_and_keeps_the_names_apart():
    rows, B, T, n_head, q, k, v, R = attention_case()
    out, _ = layers.attention_forward(q, k, v, rows, B, T, n_head)
    k2, v2 = k.copy(), v.copy()
    k2[T - 1] += 5.0  # the key and value of name 0's last position
    v2[T - 1] += 5.0
    out2, _ = layers.attention_forward(q, k2, v2, rows, B, T, n_head)
    assert max_diff(out[:T - 1], out2[:T - 1]) == 0.0  # its earlier positions never see them
    assert max_diff(out[T - 1], out2[T - 1]) > WRONG_MIN  # the position itself does
    k2[:T] += 5.0  # every key and value of name 0, which precedes name 1 in the rows: one causal
    v2[:T] += 5.0  # mask over all B * T rows, instead of one per name, would let name 1 see them
    out2, _ = layers.attention_forward(q, k2, v2, rows, B, T, n_head)
    assert max_diff(out[T:], out2[T:]) == 0.0


def heads_to_rows(h, rows):
    """(n_head, B, T, head_dim) -> (R, n_embd): the heads side by side again, real rows only."""
    n_head, B, T, head_dim = h.shape
    return merge_heads(h.reshape(n_head, B * T, head_dim))[rows]  # (R, n_embd)


def test_attention_negative_control_without_softmax_correction_is_caught():
    rows, B, T, n_head, q, k, v, R = attention_case()
    _, (qh, kh, vh, att, *_) = layers.attention_forward(q, k, v, rows, B, T, n_head)
    dout = layers.rows_to_heads(R, rows, B, T, n_head)  # (n_head, B, T, head_dim)
    datt = dout @ vh.swapaxes(-1, -2)                   # (n_head, B, T, T)
    dz_wrong = att * datt * qh.shape[-1] ** -0.5  # forgets the softmax's "- sum_j' da_ij' a_ij'"
    dq_wrong = heads_to_rows(dz_wrong @ kh, rows)  # (R, n_embd)

    def loss():
        return float((R * layers.attention_forward(q, k, v, rows, B, T, n_head)[0]).sum())
    assert max_diff(dq_wrong, numeric_grad_array(loss, q)) > WRONG_MIN


def test_cross_entropy_backward():
    r = rng()
    logits = r.normal(size=(6, 5))           # (R, vocab_size)
    targets = np.array([1, 4, 0, 2, 0, 0])  # (R,)
    numeric = numeric_grad_array(lambda: float(layers.cross_entropy_forward(logits, targets)[0]), logits)
    dlogits = layers.cross_entropy_backward(layers.cross_entropy_forward(logits, targets)[1])
    assert max_diff(dlogits, numeric) < FD_TOL
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)  # (R, vocab_size)
    assert max_diff(p / len(targets), numeric) > WRONG_MIN  # the negative control forgets "- delta(k, t_r)"


# ---------------------------------------------------------------------------- the whole model
@pytest.mark.parametrize('dropout', [0.0, 0.3])
def test_whole_model_gradient_against_finite_differences(tiny_config, dropout):
    """With dropout, on one step's fixed masks (src/backprop/dropout.py)."""
    config, batch = tiny_config
    r = rng()
    weights = {name: r.normal(0, 0.3, size=shape) for name, shape in _shapes(config).items()}
    masks = draw(dropout, 5, 2, len(batch), config) if dropout else None
    _, grads = loss_and_grads(weights, config, batch, dropout=masks)
    for name, w in weights.items():
        for _ in range(3):  # three entries of every matrix
            i = tuple(r.integers(0, n) for n in w.shape)
            old = w[i]
            w[i] = old + H
            up = loss_and_grads(weights, config, batch, dropout=masks)[0]
            w[i] = old - H
            down = loss_and_grads(weights, config, batch, dropout=masks)[0]
            w[i] = old
            assert abs(grads[name][i] - (up - down) / (2 * H)) < FD_TOL, name


def test_padding_rows_are_masked_out_of_the_loss(tiny_config):
    config, batch = tiny_config
    idx, targets, mask = make_batch(batch, config.block_size, config.vocab_size)
    assert idx.shape == (len(batch), max(num_predictions(t, config.block_size) for t in batch))
    assert mask.sum() == sum(num_predictions(t, config.block_size) for t in batch)
    r = rng()
    weights = {name: r.normal(0, 0.3, size=shape) for name, shape in _shapes(config).items()}
    targets2 = targets.copy()
    targets2[mask == 0] = 1  # a different token on every padded position
    loss1 = model_forward(weights, config, idx, targets, mask)[0]
    loss2 = model_forward(weights, config, idx, targets2, mask)[0]
    assert loss1 == loss2


def _shapes(config):
    return {name: tuple(shape) for name, shape in parameter_shapes(config).items()}


@pytest.fixture
def tiny_config():
    """A 2-layer config small enough for finite differences, and a batch of 3 token lists."""
    config = GPTConfig(vocab_size=6, n_layer=2, n_embd=4, n_head=2, block_size=5)
    batch = [[0, 1, 2, 0], [0, 3, 0], [0, 4, 5, 5, 1, 2, 0]]  # the last is cut at block_size
    return config, batch
