"""
The numpy port (src/inference) against the scalar GPT (microgpt/model.py), its oracle.

On several configs with random weights (microgpt's default, a deeper and wider one with 3
heads, a 41-character Czech vocabulary): the scalar gpt() is called one position at a time with
its KV cache; the port computes the whole sequence in one call.
"""

import json
import random

import numpy as np
import pytest

from microgpt import inference
from helpers import gpt_with_trace
from microgpt.inference.model import merge_heads, split_heads
from microgpt.edge.checkpoint import load_checkpoint as scalar_load_checkpoint
from microgpt.edge.checkpoint import read_checkpoint as scalar_read_checkpoint
from microgpt.edge.errors import UserError
from microgpt.model import GPT, GPTConfig
from microgpt.sampling import sample_names
from microgpt.tokenizer import CharTokenizer
from microgpt.training import doc_loss, doc_tokens, evaluate as scalar_evaluate

AGREE_TOL = 1e-10   # what the port promises; the two paths differ only in summation order
SUM_TOL = 1e-12     # a softmax row sums to 1 up to rounding
INIT_STD = 0.5      # larger than training's 0.08: sharp, far-from-uniform logits and weights

ENGLISH = 'abcdefghijklmnopqrstuvwxyz'
CZECH = ENGLISH + 'áčďéěíňóřšťúůýž'  # 41 characters: a vocabulary of 42 with BOS

CONFIGS = {
    'default': (GPTConfig(vocab_size=len(ENGLISH) + 1), ENGLISH),
    'deep': (GPTConfig(vocab_size=len(ENGLISH) + 1, n_layer=2, n_embd=24, n_head=3, block_size=8),
             ENGLISH),
    'czech': (GPTConfig(vocab_size=len(CZECH) + 1, n_layer=1, n_embd=16, n_head=2, block_size=12),
              CZECH),
}


def random_pair(name, seed=0):
    """A scalar GPT with random weights and its port, sharing config, weights and tokenizer."""
    config, chars = CONFIGS[name]
    model = GPT(config, seed=seed, tokenizer=CharTokenizer(chars), init_std=INIT_STD, fused=True)  # the fast blocks
    return model, inference.NumpyGPT.from_scalar(model)


def random_ids(config, T, seed):
    rng = random.Random(seed)
    return [rng.randrange(config.vocab_size) for _ in range(T)]


def random_names(chars, num, seed, max_len=15):
    """Made-up names, some longer than a block, so the loss's cut at block_size is exercised."""
    rng = random.Random(seed)
    return [''.join(rng.choice(chars) for _ in range(rng.randint(1, max_len))) for _ in range(num)]


def run_scalar(model, token_ids):
    """gpt() once per position: logits (T, vocab_size), each call's trace, and the KV cache."""
    keys, values = model.empty_cache()
    rows, traces = [], []
    for pos_id, token_id in enumerate(token_ids):
        logits, trace = gpt_with_trace(model, token_id, pos_id, keys, values)
        rows.append([l.data for l in logits])
        traces.append(trace)
    return np.array(rows), traces, keys, values  # logits (T, vocab_size)


# ---------------------------------------------------------------------------- the two paths agree
@pytest.mark.parametrize('name', CONFIGS)
def test_logits_attention_and_the_kv_cache_agree_with_scalar_gpt_at_every_position(name):
    """For a whole block, one token and five: the logits (forward's and forward_batch's), each
    head's attention weights over the positions so far (gpt()'s softmax, traced) and the keys
    and values (gpt()'s KV cache, one n_embd vector a position; the capture splits it into heads)."""
    model, port = random_pair(name)
    cfg = model.config
    for seed, T in enumerate([cfg.block_size, 1, 5]):
        token_ids = random_ids(cfg, T, seed)
        expected, traces, keys, values = run_scalar(model, token_ids)
        logits, caps = port.forward(token_ids, capture=['attention_softmax', 'k', 'v'])
        assert logits.shape == (T, cfg.vocab_size)
        assert np.abs(logits - expected).max() < AGREE_TOL
        assert np.abs(port.forward_batch([token_ids])[0] - logits).max() < AGREE_TOL
        for i, trace in enumerate(traces):
            for li in range(cfg.n_layer):
                for h in range(cfg.n_head):
                    weights = trace[f'layer{li}.head{h}']  # gpt()'s weights over positions 0..i
                    assert len(weights) == i + 1
                    assert np.abs(caps['attention_softmax'][li, h, i, :i + 1] - weights).max() < AGREE_TOL
        for cache, captured in ((keys, caps['k']), (values, caps['v'])):
            for li in range(cfg.n_layer):
                cached = np.array([[x.data for x in vec] for vec in cache[li]])  # (T, n_embd)
                assert np.abs(captured[li] - split_heads(cached, cfg.n_head)).max() < AGREE_TOL


@pytest.mark.parametrize('name', CONFIGS)
def test_loss_and_evaluate_agree_with_the_scalar_ones(name):
    model, port = random_pair(name, seed=4)
    # the last name is longer than any block: both paths must cut it at block_size
    for doc in random_names(CONFIGS[name][1], 3, seed=4) + ['x' * 20]:
        tokens = doc_tokens(model.tokenizer, doc)
        assert port.loss(tokens) == pytest.approx(doc_loss(model, tokens).data, abs=AGREE_TOL)
    docs = random_names(CONFIGS[name][1], 8, seed=5)
    assert inference.evaluate(port, docs) == pytest.approx(scalar_evaluate(model, docs), abs=AGREE_TOL)


@pytest.mark.parametrize('name', CONFIGS)
def test_seeded_sampling_gives_the_same_names(name):
    model, port = random_pair(name, seed=6)
    for seed, temperature, prompt in [(42, 0.5, ''), (7, 1.0, 'a'), (3, 2.0, 'ba'), (1, 0.0, 'b')]:  # 0: greedy
        expected = sample_names(model, num=5, temperature=temperature, seed=seed, prompt=prompt)
        names = sample_names(port, num=5, temperature=temperature, seed=seed, prompt=prompt)
        assert names == expected


# ---------------------------------------------------------------------------- captures
def test_captures_have_the_documented_shapes():
    model, port = random_pair('deep')
    cfg = model.config
    L, H, D, T = cfg.n_layer, cfg.n_head, cfg.head_dim, 6
    logits, caps = port.forward(random_ids(cfg, T, seed=0), capture='all')
    assert set(caps) == set(inference.CAPTURE_NAMES)
    assert caps['attention_logits'].shape == caps['attention_softmax'].shape == (L, H, T, T)
    for name in ('q', 'k', 'v', 'head_output'):
        assert caps[name].shape == (L, H, T, D)
    assert caps['mlp_pre_relu'].shape == (L, T, 4 * cfg.n_embd)
    assert caps['logits'].shape == (T, cfg.vocab_size)
    assert np.array_equal(caps['logits'], logits)
    assert port.forward([0], capture=['q'])[1].keys() == {'q'}  # only what was asked for


def test_captures_fit_together():
    # each capture recomputed from the others, the way a lesson would explain it
    model, port = random_pair('deep', seed=8)
    cfg, w = model.config, port.weights
    token_ids = random_ids(cfg, cfg.block_size, seed=8)
    _, caps = port.forward(token_ids, capture='all')
    q, k, v = caps['q'], caps['k'], caps['v']  # (n_layer, n_head, T, head_dim) each
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(cfg.head_dim)  # (n_layer, n_head, T, T)
    visible = ~np.isnan(caps['attention_logits'])                 # (n_layer, n_head, T, T)
    assert np.abs(scores[visible] - caps['attention_logits'][visible]).max() < AGREE_TOL
    mixed = np.nan_to_num(caps['attention_softmax']) @ v          # (n_layer, n_head, T, head_dim)
    assert np.abs(mixed - caps['head_output']).max() < AGREE_TOL
    # layer 0's MLP input: the embeddings plus what attention added, normalised
    def rms(x):
        return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-5)  # (T, n_embd)
    x0 = rms(w['wte'][token_ids] + w['wpe'][:len(token_ids)])           # (T, n_embd)
    heads = merge_heads(caps['head_output'][0])                          # (T, n_embd)
    x_mid = heads @ w['layer0.attn_wo'].T + x0                           # (T, n_embd)
    hidden = rms(x_mid) @ w['layer0.mlp_fc1'].T                          # (T, 4 * n_embd)
    assert np.abs(hidden - caps['mlp_pre_relu'][0]).max() < AGREE_TOL


@pytest.mark.parametrize('name', CONFIGS)
def test_attention_is_causal_future_positions_nan_and_rows_sum_to_one(name):
    model, port = random_pair(name, seed=9)
    cfg = model.config
    token_ids = random_ids(cfg, cfg.block_size, seed=9)
    _, full = port.forward(token_ids, capture='all')
    T = cfg.block_size
    future = np.triu(np.ones((T, T), dtype=bool), k=1)  # (T, T): True where j > i
    for cap in ('attention_logits', 'attention_softmax'):
        assert np.all(np.isnan(full[cap][:, :, future]))
        assert not np.any(np.isnan(full[cap][:, :, ~future]))
    row_sums = np.nansum(full['attention_softmax'], axis=-1)  # (n_layer, n_head, T): j <= i only
    assert np.abs(row_sums - 1.0).max() < SUM_TOL
    # growing the sequence leaves every capture of the earlier positions unchanged
    t = cfg.block_size // 2
    _, prefix = port.forward(token_ids[:t], capture='all')
    for cap in inference.CAPTURE_NAMES:
        if cap.startswith('attention'):
            first_t = full[cap][:, :, :t, :t]  # (n_layer, n_head, t, t)
        elif cap == 'mlp_pre_relu':
            first_t = full[cap][:, :t]         # (n_layer, t, 4 * n_embd)
        elif cap == 'logits':
            first_t = full[cap][:t]            # (t, vocab_size)
        else:
            first_t = full[cap][:, :, :t]      # (n_layer, n_head, t, head_dim)
        assert np.allclose(prefix[cap], first_t, rtol=0, atol=AGREE_TOL, equal_nan=True), cap


# ---------------------------------------------------------------------------- checkpoints
def test_load_checkpoint_gives_the_scalar_model_as_arrays(tiny_ckpt):
    scalar = scalar_read_checkpoint(tiny_ckpt).model(fused=True)
    port = inference.load_checkpoint(tiny_ckpt)
    assert port.config == scalar.config
    assert port.tokenizer.chars == scalar.tokenizer.chars
    for name, matrix in scalar.weights().items():
        assert port.weights[name].dtype == np.float64
        assert port.weights[name].tolist() == matrix  # bit for bit


def test_a_bad_checkpoint_gives_the_scalar_readers_one_line_error(tiny_ckpt, tmp_path):
    """The port reads through the one reader (edge/checkpoint.py, tested in test_checkpoint.py)."""
    with open(tiny_ckpt, encoding='utf-8') as f:
        bad = json.load(f)
    bad['state_dict']['wte'] = bad['state_dict']['wte'][:-1]
    path = tmp_path / 'wrong_shape.json'
    path.write_text(json.dumps(bad), encoding='utf-8')
    with pytest.raises(UserError) as scalar_error:
        scalar_load_checkpoint(str(path))
    with pytest.raises(UserError) as port_error:
        inference.load_checkpoint(str(path))
    assert str(port_error.value) == str(scalar_error.value) and 'wte should be' in str(port_error.value)
