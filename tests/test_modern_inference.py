"""
The numpy port's modern rungs (issue 45), each alone and all at once, on the spec's small config.

forward() (the loops over j <= i), forward_batch() (one masked softmax) and the cached
generation path give the same logits, which are the scalar gpt()'s; grouped-query attention caches n_kv_head heads and query
head h reads kv head h // (n_head // n_kv_head); RoPE is a complex rotation whose scores depend
only on i - j; GELU and SiLU's sigmoid are the spec's other forms.
"""

import random

import numpy as np
import pytest

from microgpt.inference import NumpyGPT
from microgpt.inference.attention import rope
from microgpt.inference.model import KVCache, gelu, sigmoid
from microgpt.model import GPT, ROPE_BASE, GPTConfig, init_weights, is_gain

TOL = 1e-10  # the spec's: every engine, every rung, float64

RUNGS = {
    'microgpt': {},
    'rope': dict(rope=True),
    'gelu': dict(mlp='gelu'),
    'swiglu': dict(mlp='swiglu'),
    'norm_gains': dict(norm_gains=True),
    'qk_norm': dict(qk_norm=True),
    'gqa': dict(n_kv_head=2),
    'multi_query': dict(n_kv_head=1),
    'tied': dict(tie_embeddings=True),
    'all': dict(rope=True, mlp='swiglu', norm_gains=True, qk_norm=True, n_kv_head=2, tie_embeddings=True),
}


def small_config(**rung):
    """The spec's small config: head_dim 2 is even, so RoPE works; 4 heads share 2 kv heads."""
    return GPTConfig(vocab_size=7, n_layer=2, n_embd=8, n_head=4, block_size=6, **rung)


def random_weights(config, seed=0):
    """Weights at a large std (sharp logits), and the gains small random numbers rather than
    init's 0, so that a gain applied wrongly (or not at all) changes the logits."""
    rng = random.Random(seed)
    weights = init_weights(config, seed, init_std=0.5)
    return {name: [[rng.gauss(0, 0.3) for _ in row] for row in matrix] if is_gain(name) else matrix
            for name, matrix in weights.items()}


def random_port(seed=0, **rung):
    config = small_config(**rung)
    return NumpyGPT(config, random_weights(config, seed))


@pytest.mark.parametrize('rung', RUNGS)
def test_forward_forward_batch_and_the_kv_cache_give_the_same_logits(rung):
    port = random_port(**RUNGS[rung])
    cfg = port.config
    ids = np.random.default_rng(1).integers(0, cfg.vocab_size, size=(2, cfg.block_size))  # (2, T)
    logits, caps = zip(*(port.forward(row, capture='all') for row in ids))
    logits = np.stack(logits)                                                             # (2, T, vocab_size)
    assert caps[0]['mlp_pre_relu'].shape == (cfg.n_layer, cfg.block_size, cfg.mlp_hidden)
    assert np.abs(port.forward_batch(ids) - logits).max() < TOL
    # the cache, batched: a prompt of three positions at once, then one position at a time
    cache = KVCache(cfg.n_layer, cfg.block_size)
    steps = [port.forward_batch(ids[:, :3], cache)] + [port.forward_batch(ids[:, t:t + 1], cache)
                                                       for t in range(3, cfg.block_size)]
    assert np.abs(np.concatenate(steps, axis=1) - logits).max() < TOL
    # and sampling's next_logits, which keeps its own cache
    next_logits = port.next_logits_fn()
    cached = [next_logits(ids[0, :t].tolist()) for t in range(1, cfg.block_size + 1)]    # (T, vocab_size)
    assert np.abs(np.array(cached) - logits[0]).max() < TOL


@pytest.mark.parametrize('rung', RUNGS)
def test_the_port_gives_the_scalar_gpts_logits(rung):
    """gpt() one position at a time with its KV cache, with the lesson's blocks and the fused ones."""
    config = small_config(**RUNGS[rung])
    weights = random_weights(config, seed=5)
    ids = [6, 0, 3, 3, 2, 5]
    logits = NumpyGPT(config, weights).forward(ids)[0]  # (T, vocab_size)
    for fused in (False, True):
        model = GPT.from_weights(config, weights, fused=fused)
        keys, values = model.empty_cache()
        expected = [[l.data for l in model.gpt(t, pos, keys, values)] for pos, t in enumerate(ids)]  # (T, vocab_size)
        assert np.abs(logits - np.array(expected)).max() < TOL


@pytest.mark.parametrize('n_kv_head', [1, 2, 4])
def test_grouped_query_attention_caches_n_kv_head_heads_that_query_heads_share(n_kv_head):
    port = random_port(seed=2, n_kv_head=n_kv_head, rope=True, qk_norm=True)
    cfg = port.config
    L, H, D, T = cfg.n_layer, cfg.n_head, cfg.head_dim, cfg.block_size
    ids = [3, 1, 4, 1, 5, 6]
    cache = KVCache(L, T)
    port.forward_batch([ids], cache)
    _, caps = port.forward(ids, capture='all')
    assert caps['k'].shape == caps['v'].shape == (L, n_kv_head, T, D)
    for li in range(L):
        assert cache.keys[li].shape == cache.values[li].shape == (1, n_kv_head, T, D)
        # the cache holds the keys as scored: after QK-norm and RoPE
        assert np.abs(cache.keys[li][0] - caps['k'][li]).max() < TOL
        assert np.abs(cache.values[li][0] - caps['v'][li]).max() < TOL
    # query head h scores against kv head h // (H // n_kv_head), not h % n_kv_head
    shared = np.repeat(caps['k'], H // n_kv_head, axis=1)                          # (L, H, T, D)
    scores = caps['q'] @ shared.swapaxes(-1, -2) * D ** -0.5                       # (L, H, T, T)
    visible = ~np.isnan(caps['attention_logits'])                                 # (L, H, T, T)
    assert np.abs(scores[visible] - caps['attention_logits'][visible]).max() < TOL


def test_rope_turns_each_pair_as_a_complex_number():
    x = np.random.default_rng(3).normal(size=(3, 5, 6))               # (heads, T, head_dim)
    positions = np.arange(4, 9)                                       # (T,): a cache of 4 came first
    freqs = ROPE_BASE ** (-np.arange(0, 6, 2) / 6)                    # (head_dim / 2,)
    z = (x[..., 0::2] + 1j * x[..., 1::2]) * np.exp(1j * positions[:, None] * freqs)  # (3, 5, 3)
    turned = rope(x, start=4)                                         # (3, 5, 6)
    assert np.abs(turned[..., 0::2] - z.real).max() < TOL
    assert np.abs(turned[..., 1::2] - z.imag).max() < TOL


@pytest.mark.parametrize('use_rope', [True, False])
def test_with_rope_the_score_of_i_and_j_depends_only_on_i_minus_j(use_rope):
    """One token repeated: before RoPE every position's q and k in layer 0 are the same, so
    with RoPE the score of (i, j) is a function of i - j: each diagonal of the score matrix is
    one number. Without RoPE, wpe makes them differ: the negative control."""
    port = random_port(seed=4, rope=use_rope)
    T = port.config.block_size
    _, caps = port.forward([5] * T, capture=['attention_logits'])
    scores = caps['attention_logits'][0]                                          # (n_head, T, T)
    spread = max(np.ptp(np.diagonal(scores, -d, axis1=1, axis2=2), axis=-1).max() for d in range(T))
    assert (spread < TOL) == use_rope


def test_gelu_and_sigmoid_are_the_specs_other_forms_and_never_overflow():
    u = np.linspace(-10, 10, 201)                                                  # (201,)
    c = np.sqrt(2 / np.pi)
    assert np.abs(gelu(u) - u / (1 + np.exp(-2 * c * (u + 0.044715 * u ** 3)))).max() < TOL
    assert np.abs(sigmoid(u) - 1 / (1 + np.exp(-u))).max() < TOL
    with np.errstate(all='raise'):  # the forwards' setting, where an overflow means a diverged model
        assert sigmoid(np.array([-1000.0, 1000.0])).tolist() == [0.0, 1.0]
