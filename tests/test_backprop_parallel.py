"""
The numpy engine's quicker paths against its plain ones: the batch split across threads
(backprop/parallel.py, Trainer(workers=2)) against one pass, the in-place and written-in-place
layers against the port's own forward pieces, and malloc's kept memory (backprop/memory.py).

The split computes the same sums in another order (each part's gradient summed over its rows,
then the parts added), so float64 is held to 1e-12 against one pass, step after step, and
float32 to the relative 1e-4 the float32 tests hold it to against float64. The layers that
write in place do the port's operations in the port's order, so they are held to exact
equality. Run: .venv/bin/python -m pytest -q tests/test_backprop_parallel.py
"""

import math

import numpy as np
import pytest

from microgpt import backprop
from microgpt.backprop import layers, memory
from microgpt.backprop.dropout import draw
from microgpt.inference.attention import masked_attention
from microgpt.inference.model import rmsnorm
from microgpt.edge import text
from microgpt.model import GPTConfig, init_weights
from microgpt.tokenizer import CharTokenizer
from microgpt.training import doc_tokens, learning_rate

SPLIT_TOL = 1e-12  # float64: the same sums in another order, over 30 steps (observed ~1e-15)
REL_TOL = 1e-4     # float32 against float64, as tests/test_backprop_float32.py holds it
STEPS = 30
PROSE = ("Now is the winter of our discontent made glorious summer by this sun of York;\n"
         "and all the clouds that lour'd upon our house in the deep bosom of the ocean buried.\n") * 4
NAMES = ['emma', 'olivia', 'ava', 'isabella', 'sophia', 'mia', 'charlotte', 'amelia', 'harper', 'eve']


def trainers(dtype='float64', workers=(1, 2), n_layer=2):
    tok = CharTokenizer.from_docs([PROSE + ''.join(NAMES)])
    config = GPTConfig(tok.vocab_size, n_layer=n_layer, n_embd=32, n_head=4, block_size=16)
    weights = init_weights(config, seed=1)
    return [backprop.Trainer(config, weights, tok, dtype=dtype, workers=w) for w in workers], tok


def batches(tok, kind):
    """STEPS batches of running-text windows (no padding), or of names (padded to the longest)."""
    ids = tok.encode(PROSE)
    for step in range(1, STEPS + 1):
        if kind == 'text':
            yield text.train_windows(ids, 16, 6, seed=0, step=step)
        else:
            yield [doc_tokens(tok, NAMES[(step * 3 + i) % len(NAMES)]) for i in range(5)]  # 5: parts of 2 and 3


@pytest.mark.parametrize('kind, dropout', [('text', 0.0), ('names', 0.0), ('names', 0.3)])
def test_two_workers_give_one_passes_float64_losses(kind, dropout):
    """With dropout, each part takes its names' share of the step's masks."""
    (one, two), tok = trainers()
    assert two.split is not None and one.split is None
    for step, batch in enumerate(batches(tok, kind)):
        lr = learning_rate(0.01, step, STEPS)
        masks = draw(dropout, 42, step + 1, len(batch), one.config) if dropout else None
        a, b = one.step(batch, lr, masks), two.step(batch, lr, masks)
        assert isinstance(b, float) and abs(a - b) <= SPLIT_TOL, (step, a, b)
    assert np.abs(one.flat - two.flat).max() <= SPLIT_TOL
    assert one.optimizer.t == two.optimizer.t == STEPS


@pytest.mark.parametrize('kind', ['text', 'names'])
def test_two_workers_in_float32_follow_float64(kind):
    (t64,), tok = trainers('float64', workers=(1,))
    (t32,), _ = trainers('float32', workers=(2,))
    for step, batch in enumerate(batches(tok, kind)):
        lr = 0.003  # tests/test_backprop_float32.py's: far from the edge of stability
        l64, l32 = t64.step(batch, lr), t32.step(batch, lr)
        assert abs(l32 - l64) <= REL_TOL * abs(l64), (step, l64, l32)
    assert t32.flat.dtype == t32.grad.dtype == t32.optimizer.m.dtype == np.float32


def test_a_batch_smaller_than_the_workers_is_one_part():
    (one, two), tok = trainers()
    batch = [doc_tokens(tok, 'emma')]
    assert one.step(batch, 0.01) == two.step(batch, 0.01)  # one part: the very same computation
    assert np.array_equal(one.flat, two.flat)


def test_split_gradients_are_the_whole_batchs():
    (one, two), tok = trainers(n_layer=1)
    batch = next(batches(tok, 'names'))
    (l1, g1), (l2, g2) = one.loss_and_grads(batch), two.loss_and_grads(batch)
    assert abs(l1 - l2) <= SPLIT_TOL
    for name, g in g1.items():
        assert g2[name].shape == g.shape and np.abs(g2[name] - g).max() <= SPLIT_TOL, name
    # negative control: one part's gradient alone (half the batch) is far from the whole's
    (half,), _ = trainers(n_layer=1, workers=(1,))
    _, g_half = half.loss_and_grads(batch[:2])
    assert np.abs(g_half['lm_head'] - g1['lm_head']).max() > 1e-3


def test_a_non_finite_step_with_workers_changes_nothing():
    (two,), tok = trainers(workers=(2,))
    two.params['lm_head'][0, 0] = np.inf
    before, m_before = two.flat.copy(), two.optimizer.m.copy()
    assert math.isnan(two.step(next(batches(tok, 'text')), 0.01))
    assert np.array_equal(two.flat, before, equal_nan=True) and np.array_equal(two.optimizer.m, m_before)
    assert two.optimizer.t == 0


def test_workers_can_be_changed_between_steps():
    (one, other), tok = trainers(workers=(1, 1))
    other.use_workers(2)
    first = next(batches(tok, 'text'))
    assert abs(one.step(first, 0.01) - other.step(first, 0.01)) <= SPLIT_TOL
    other.use_workers(1)
    assert other.split is None and abs(one.step(first, 0.01) - other.step(first, 0.01)) <= SPLIT_TOL


# ---------------------------------------------------------------------------- layers, in place
@pytest.mark.parametrize('dtype', [np.float64, np.float32])
def test_rmsnorm_forward_is_the_ports_float_for_float(dtype):
    x = np.random.default_rng(0).normal(size=(7, 12)).astype(dtype)  # (R, n_embd)
    y, (y_cached, s) = layers.rmsnorm_forward(x)
    assert np.array_equal(y, rmsnorm(x, layers.RMS_EPS)) and y.dtype == dtype
    assert y_cached is y and s.shape == (7, 1)


@pytest.mark.parametrize('dtype', [np.float64, np.float32])
def test_attention_writes_the_ports_heads_side_by_side(dtype):
    """Windows of one length (no padding): each name's output is the port's masked_attention,
    its heads merged, exactly; the scores written in place, the heads' outputs into their columns."""
    r = np.random.default_rng(1)
    B, T, n_head, n_embd = 3, 5, 2, 8
    q, k, v = (r.normal(size=(B * T, n_embd)).astype(dtype) for _ in range(3))
    out, _ = layers.attention_forward(q, k, v, np.arange(B * T), B, T, n_head)
    for b in range(B):
        rows = slice(b * T, (b + 1) * T)
        heads = [x[rows].reshape(T, n_head, -1).transpose(1, 0, 2) for x in (q, k, v)]  # (n_head, T, head_dim)
        port, _ = masked_attention(*heads)
        assert np.array_equal(out[rows], port.transpose(1, 0, 2).reshape(T, n_embd)), b


def test_attention_backward_writes_dq_dk_dv_into_out():
    r = np.random.default_rng(2)
    B, T, n_head, n_embd = 2, 4, 2, 6
    rows = np.array([0, 1, 2, 3, 4, 5])  # padded: the second name has 2 of 4 positions
    q, k, v, dout = (r.normal(size=(6, n_embd)) for _ in range(4))
    _, cache = layers.attention_forward(q, k, v, rows, B, T, n_head)
    fresh = layers.attention_backward(dout, cache)
    out = np.full((6, 3 * n_embd), np.nan)
    dq, dk, dv = layers.attention_backward(dout, cache, out=out)
    assert all(np.shares_memory(d, out) for d in (dq, dk, dv))
    assert np.array_equal(out, np.concatenate(fresh, axis=1))


def test_freed_memory_is_kept_where_malloc_is_glibcs():
    import platform
    if platform.system() != 'Linux' or platform.libc_ver()[0] != 'glibc':
        pytest.skip("mallopt is glibc's: elsewhere keep_freed_memory changes nothing and says so")
    assert memory.keep_freed_memory() is True
