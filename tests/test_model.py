"""
Tests for microgpt/model.py: the configuration, the parameters, and gpt() itself.

gpt() is checked against an independent oracle written here in plain floats: a whole-sequence
forward pass (every position at once, layer by layer, with an explicit causal mask) on small fixed
weights that no random generator made. The model's own path is different in shape (one position
per call, a KV cache, fused Value nodes), so agreement to 1e-12 means both compute the same math.

Run: .venv/bin/python -m pytest -q tests/test_model.py
"""

import hashlib
import json
import math
import random

import pytest

from helpers import gpt_with_trace
from microgpt.edge.errors import UserError
from microgpt.model import GPT, GPTConfig, init_weights, parameter_shapes
from microgpt.tokenizer import CharTokenizer

pytestmark = pytest.mark.lesson  # the lesson's own files: `make test-lesson`

LOGIT_TOL = 1e-12   # same math in a different order: only float rounding may differ
SUM_TOL = 1e-12     # attention weights are a softmax, so they sum to 1 up to rounding
INIT_STD_TOL = 0.004  # the sample std of ~4000 Gaussians is within ~0.001 of the true std


# ---------------------------------------------------------------------------- the oracle
def ref_linear(w, x):
    """w @ x for w stored [n_out][n_in]."""
    return [sum(w_ij * x_j for w_ij, x_j in zip(row, x)) for row in w]


def ref_rmsnorm(x, eps=1e-5):
    scale = 1.0 / math.sqrt(sum(v * v for v in x) / len(x) + eps)
    return [v * scale for v in x]


def ref_softmax(z):
    m = max(z)
    e = [math.exp(v - m) for v in z]
    return [v / sum(e) for v in e]


def ref_forward(w, cfg, tokens):
    """Logits for every position of `tokens` at once: [T][vocab_size] plain floats.

    Written from the GPT-2-style recipe microgpt follows (embeddings summed then normed; per
    block pre-norm attention and a ReLU MLP, each with a residual; no final norm), not from
    model.py: it keeps the whole sequence per layer and masks the future explicitly.
    """
    T, hd = len(tokens), cfg.n_embd // cfg.n_head
    xs = [ref_rmsnorm([a + b for a, b in zip(w['wte'][tok], w['wpe'][t])])
          for t, tok in enumerate(tokens)]  # (T, n_embd)
    for li in range(cfg.n_layer):
        p = f'layer{li}.'
        normed = [ref_rmsnorm(x) for x in xs]
        q = [ref_linear(w[p + 'attn_wq'], x) for x in normed]  # (T, n_embd)
        k = [ref_linear(w[p + 'attn_wk'], x) for x in normed]
        v = [ref_linear(w[p + 'attn_wv'], x) for x in normed]
        mixed = [[0.0] * cfg.n_embd for _ in range(T)]
        for h in range(cfg.n_head):
            lo, hi = h * hd, (h + 1) * hd
            for t in range(T):
                scores = [sum(a * b for a, b in zip(q[t][lo:hi], k[s][lo:hi])) / math.sqrt(hd)
                          if s <= t else -math.inf for s in range(T)]  # the causal mask
                att = ref_softmax(scores)  # exp(-inf) = 0: the future gets no weight
                for j in range(lo, hi):
                    mixed[t][j] = sum(att[s] * v[s][j] for s in range(T))
        xs = [[a + b for a, b in zip(ref_linear(w[p + 'attn_wo'], m), x)] for m, x in zip(mixed, xs)]
        hidden = [[max(0.0, u) for u in ref_linear(w[p + 'mlp_fc1'], ref_rmsnorm(x))] for x in xs]
        xs = [[a + b for a, b in zip(ref_linear(w[p + 'mlp_fc2'], hid), x)] for hid, x in zip(hidden, xs)]
    return [ref_linear(w['lm_head'], x) for x in xs]


def fixed_weights(cfg):
    """Deterministic weights from a formula: no RNG, so the test does not lean on GPT's init.

    The sines give every entry a different value of a few tenths in size, with both signs, so
    that the ReLU both passes and blocks and attention is far from uniform.
    """
    weights = {}
    for m, (name, (n_out, n_in)) in enumerate(parameter_shapes(cfg).items()):
        weights[name] = [[0.5 * math.sin(1.0 + 0.37 * m + 1.3 * i + 0.71 * j) for j in range(n_in)]
                         for i in range(n_out)]
    return weights


def model_with_fixed_weights(cfg):
    model = GPT(cfg)
    model.load_weights(fixed_weights(cfg))
    return model


def cached_logits(model, tokens):
    """Logits for every position, one gpt() call per position with one shared KV cache."""
    keys, values = model.empty_cache()
    return [[l.data for l in model.gpt(tok, t, keys, values)] for t, tok in enumerate(tokens)]


SMALL = GPTConfig(vocab_size=5, n_layer=2, n_embd=4, n_head=2, block_size=6)
TOKENS = [4, 0, 2, 2, 1, 3]  # a full block, a repeated token, BOS (4) at the start


# ---------------------------------------------------------------------------- gpt() vs the oracle
@pytest.mark.parametrize('cfg', [
    SMALL,
    GPTConfig(vocab_size=7, n_layer=1, n_embd=6, n_head=3, block_size=5),
    GPTConfig(vocab_size=4, n_layer=1, n_embd=4, n_head=1, block_size=4),
], ids=['2layers-2heads', '1layer-3heads', '1head'])
def test_gpt_matches_an_independent_whole_sequence_forward(cfg):
    model = model_with_fixed_weights(cfg)
    tokens = [(3 * t + 1) % cfg.vocab_size for t in range(cfg.block_size)]
    expected = ref_forward(fixed_weights(cfg), cfg, tokens)
    got = cached_logits(model, tokens)
    for t, (g_row, e_row) in enumerate(zip(got, expected)):
        assert len(g_row) == cfg.vocab_size
        for g, e in zip(g_row, e_row):
            assert abs(g - e) <= LOGIT_TOL, f"position {t}: {g} vs {e}"


def test_the_oracle_notices_a_changed_weight():
    """Negative control: the comparison above is not vacuous (one weight changes the logits)."""
    cfg = SMALL
    weights = fixed_weights(cfg)
    weights['layer1.attn_wk'][2][1] += 1e-3  # a key weight: only matters through attention
    changed = ref_forward(weights, cfg, TOKENS)
    got = cached_logits(model_with_fixed_weights(cfg), TOKENS)
    assert max(abs(g - c) for gr, cr in zip(got, changed) for g, c in zip(gr, cr)) > 1e3 * LOGIT_TOL


def test_position_zero_depends_only_on_its_own_token_and_position():
    """With a single visible position attention is the identity: later tokens cannot leak back."""
    model = model_with_fixed_weights(SMALL)
    a = cached_logits(model, [1, 2, 3])
    b = cached_logits(model, [1, 0, 4])
    assert a[0] == b[0]
    assert a[1] != b[1]


# ---------------------------------------------------------------------------- the KV cache
@pytest.mark.parametrize('model, tokens', [(model_with_fixed_weights(SMALL), TOKENS),
                                           (GPT(GPTConfig(vocab_size=27), seed=3), [26, 4, 12, 12, 0, 26])],
                         ids=['fixed', 'default-random-init'])
def test_kv_cache_equals_recomputing_every_prefix_from_scratch(model, tokens):
    incremental = cached_logits(model, tokens)
    for t in range(len(tokens)):
        fresh = cached_logits(model, tokens[:t + 1])  # a fresh cache, the prefix replayed
        # the same float operations in the same order: bit-for-bit equal, not just close
        assert fresh[-1] == incremental[t]


def test_each_call_appends_one_key_and_value_per_layer():
    model = model_with_fixed_weights(SMALL)
    keys, values = model.empty_cache()
    assert keys == [[], []] and values == [[], []]
    for t, tok in enumerate(TOKENS[:3]):
        model.gpt(tok, t, keys, values)
        assert [len(k) for k in keys] == [t + 1] * SMALL.n_layer
        assert [len(v) for v in values] == [t + 1] * SMALL.n_layer
        assert all(len(k[-1]) == SMALL.n_embd for k in keys)


def test_the_edge_refuses_characters_outside_the_vocabulary():
    # gpt() trusts its arguments (a negative id would quietly index from the end); what a user
    # hands in is checked at the edge: text through checks.encode, a checkpoint by its reader
    from microgpt.edge.checks import encode
    tok = CharTokenizer('abcd')
    with pytest.raises(UserError, match="'z' is not in the vocabulary"):
        encode(tok, 'abz')
    assert encode(tok, 'dab') == [3, 0, 1]


def test_a_recorder_holds_each_positions_intermediates_and_changes_nothing():
    """programs/taps.py's Recorder on gpt()'s blocks: gpt()'s own Values, by name, at each
    position, and the same logits as gpt() without it."""
    from microgpt.programs.taps import Recorder
    model = model_with_fixed_weights(SMALL)
    plain = model.blocks
    keys, values = model.empty_cache()
    keys2, values2 = model.empty_cache()
    model.blocks = recorder = Recorder(model)
    for t, tok in enumerate(TOKENS):
        model.blocks = recorder
        logits = model.gpt(tok, t, keys, values)
        capture = recorder.captures[t]
        model.blocks = plain
        traced, trace = gpt_with_trace(model, tok, t, keys2, values2)
        assert [l.data for l in logits] == [l.data for l in traced]
        assert capture['logits'] is logits
        for li in range(SMALL.n_layer):
            assert capture[f'layer{li}.k'] is keys[li][-1] and capture[f'layer{li}.v'] is values[li][-1]
            for h in range(SMALL.n_head):  # the softmax gpt() ran, node for node
                assert [w.data for w in capture[f'layer{li}.attn_weights'][h]] == trace[f'layer{li}.head{h}']
                assert len(capture[f'layer{li}.attn_logits'][h]) == t + 1
            assert len(capture[f'layer{li}.mlp_hidden']) == 4 * SMALL.n_embd
            # the stream: what attention added plus what entered, then the same for the MLP
            mlp_in = [a.data + b.data for a, b in zip(capture[f'layer{li}.attn_out'], capture[f'layer{li}.attn_in'])]
            assert [x.data for x in capture[f'layer{li}.mlp_in']] == mlp_in
        last = SMALL.n_layer - 1
        lm_head_in = [a.data + b.data for a, b in zip(capture[f'layer{last}.mlp_out'], capture[f'layer{last}.mlp_in'])]
        assert [x.data for x in capture['lm_head_in']] == lm_head_in
        wte, wpe = model.state_dict['wte'][tok], model.state_dict['wpe'][t]
        assert [x.data for x in capture['embedding']] == [a.data + b.data for a, b in zip(wte, wpe)]


# ---------------------------------------------------------------------------- attention trace
def test_trace_holds_attention_weights_that_sum_to_one():
    model = model_with_fixed_weights(SMALL)
    keys, values = model.empty_cache()
    for t, tok in enumerate(TOKENS):
        _, trace = gpt_with_trace(model, tok, t, keys, values)
        assert sorted(trace) == sorted(f'layer{li}.head{h}' for li in range(SMALL.n_layer)
                                       for h in range(SMALL.n_head))
        for name, weights in trace.items():
            assert len(weights) == t + 1, name  # one weight per visible position, none for the future
            assert all(0.0 <= w <= 1.0 for w in weights)
            assert abs(sum(weights) - 1.0) <= SUM_TOL
    # position 0 can only look at itself
    _, trace = gpt_with_trace(model, TOKENS[0], 0, *model.empty_cache())
    assert all(w == [1.0] for w in trace.values())


def test_trace_does_not_change_the_logits():
    model = model_with_fixed_weights(SMALL)
    keys, values = model.empty_cache()
    traced = []
    for t, tok in enumerate(TOKENS):
        traced.append([l.data for l in gpt_with_trace(model, tok, t, keys, values)[0]])
    assert traced == cached_logits(model, TOKENS)


# ---------------------------------------------------------------------------- configuration
def test_config_defaults_and_head_dim():
    cfg = GPTConfig(vocab_size=27)
    assert (cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.block_size) == (1, 16, 4, 16)
    assert cfg.head_dim == 4
    assert cfg.to_dict() == {'vocab_size': 27, 'n_layer': 1, 'n_embd': 16, 'n_head': 4, 'block_size': 16}


@pytest.mark.parametrize('field, value', [
    ('vocab_size', 0), ('n_layer', 0), ('n_embd', -8), ('n_head', 0), ('block_size', 0),
    ('n_embd', 16.0), ('n_layer', True), ('block_size', '16'), ('n_head', None),
])
def test_config_rejects_non_positive_or_non_integer_sizes(field, value):
    # GPTConfig trusts its fields; the edges build one through checks.make_config
    from microgpt.edge.checks import make_config
    fields = {'vocab_size': 27, 'n_layer': 1, 'n_embd': 16, 'n_head': 4, 'block_size': 16}
    assert make_config(**fields) == GPTConfig(**fields)
    fields[field] = value
    with pytest.raises(UserError, match=field):
        make_config(**fields)


def test_config_requires_n_embd_divisible_by_n_head():
    from microgpt.edge.checks import make_config
    with pytest.raises(UserError, match='divisible'):
        make_config(vocab_size=27, n_layer=1, n_embd=10, n_head=4, block_size=16)
    assert make_config(vocab_size=27, n_layer=1, n_embd=12, n_head=4, block_size=16).head_dim == 3


# ---------------------------------------------------------------------------- parameters
def test_parameter_names_and_shapes_follow_microgpt():
    cfg = GPTConfig(vocab_size=27, n_layer=2, n_embd=8, n_head=2, block_size=12)
    shapes = parameter_shapes(cfg)
    per_layer = ['attn_wq', 'attn_wk', 'attn_wv', 'attn_wo', 'mlp_fc1', 'mlp_fc2']
    assert list(shapes) == (['wte', 'wpe', 'lm_head']
                            + [f'layer{i}.{n}' for i in range(2) for n in per_layer])
    assert shapes['wte'] == [27, 8] and shapes['lm_head'] == [27, 8]
    assert shapes['wpe'] == [12, 8]
    for i in range(2):
        for n in ('attn_wq', 'attn_wk', 'attn_wv', 'attn_wo'):
            assert shapes[f'layer{i}.{n}'] == [8, 8]
        assert shapes[f'layer{i}.mlp_fc1'] == [32, 8]  # [n_out][n_in]: widens 8 -> 32
        assert shapes[f'layer{i}.mlp_fc2'] == [8, 32]

    model = GPT(cfg)
    for name, (n_out, n_in) in shapes.items():
        matrix = model.state_dict[name]
        assert len(matrix) == n_out and all(len(row) == n_in for row in matrix), name
    assert len(model.params) == sum(n_out * n_in for n_out, n_in in shapes.values())
    # the optimizer's flat list holds the very Values of state_dict, not copies
    assert model.params[0] is model.state_dict['wte'][0][0]
    assert model.params[-1] is model.state_dict['layer1.mlp_fc2'][-1][-1]


def test_init_is_gaussian_with_std_0_08_from_the_seed():
    cfg = GPTConfig(vocab_size=27)  # the default model: 4192 parameters
    data = [p.data for p in GPT(cfg, seed=42).params]
    mean = sum(data) / len(data)
    std = math.sqrt(sum((x - mean) ** 2 for x in data) / len(data))
    assert abs(std - 0.08) <= INIT_STD_TOL
    assert abs(mean) <= INIT_STD_TOL
    # the same seed gives the same weights, another seed others
    assert [p.data for p in GPT(cfg, seed=42).params] == data
    assert [p.data for p in GPT(cfg, seed=43).params] != data
    # and they are the stdlib generator's gauss(0, 0.08) draws, in state_dict order
    rng = random.Random(42)
    assert data[:50] == [rng.gauss(0, 0.08) for _ in range(50)]


def test_weights_and_load_weights_round_trip():
    a = GPT(SMALL, seed=1)
    b = GPT(SMALL, seed=2)
    assert a.weights() != b.weights()
    b.load_weights(a.weights())
    assert b.weights() == a.weights()
    assert cached_logits(a, TOKENS) == cached_logits(b, TOKENS)


# The default model's initial weights, sha256 of their JSON: microgpt's gauss(0, 0.08) draws.
# Pinned so the width rule below can never move them (every pinned number depends on them).
DEFAULT_INIT_SHA256 = 'dee1e23610475c847f17e9e7be57c2ec806b4d02607af301bcb87155be1527d3'
FIRST_LOSS_TOL = 0.05  # the first loss of a batch within 5% of ln(vocab_size), uniform guessing


def width_rule(n_embd):
    """model.py's initial std: 0.08 * sqrt(16 / n_embd) (the test below checks GPT draws with it)."""
    return 0.08 * (16 / n_embd) ** 0.5


def init_rule(name, n_embd, n_layer):
    """model.py's std for one matrix: the width rule, and / sqrt(n_layer) for the two matrices whose
    outputs a block adds to the residual stream (checked against GPT's draws below)."""
    return width_rule(n_embd) * (n_layer ** -0.5 if name.endswith(('attn_wo', 'mlp_fc2')) else 1)


def test_the_default_models_initial_weights_are_unchanged():
    weights = GPT(GPTConfig(vocab_size=27), seed=42).weights()
    assert hashlib.sha256(json.dumps(weights).encode()).hexdigest() == DEFAULT_INIT_SHA256
    assert hashlib.sha256(json.dumps(init_weights(GPTConfig(vocab_size=27), 42)).encode()).hexdigest() == DEFAULT_INIT_SHA256
    assert width_rule(16) == 0.08 and init_rule('layer0.attn_wo', 16, 1) == 0.08


@pytest.mark.parametrize('n_embd, n_layer', [(16, 1), (16, 12), (64, 4), (256, 8), (512, 1), (512, 12)])
def test_the_first_loss_is_about_uniform_guessing_at_every_width_and_depth(n_embd, n_layer):
    """Gaussian weights with GPT's std for each matrix (drawn with numpy here: a 512 x 12 model has
    38 million weights, too many to make as Values in a test), the loss of one batch of text: the
    corners of the grid bench/init_loss.py measures whole (16 to 512 wide, 1 to 12 deep)."""
    np = pytest.importorskip('numpy')
    from microgpt import backprop
    chars = 'abcdefghijklmnopqrstuvwxyz ,.\n'
    tok = CharTokenizer(list(chars))
    cfg = GPTConfig(tok.vocab_size, n_layer=n_layer, n_embd=n_embd, n_head=4, block_size=32)
    r = np.random.default_rng(n_embd * 10 + n_layer)
    weights = {name: r.standard_normal(shape, dtype=np.float32) * np.float32(init_rule(name, n_embd, n_layer))
               for name, shape in parameter_shapes(cfg).items()}  # float32: 38 million numbers drawn quickly
    batch = [list(r.integers(0, len(chars), 33)) for _ in range(8)]
    loss, _ = backprop.loss_and_grads(weights, cfg, batch)
    assert abs(loss - math.log(tok.vocab_size)) <= FIRST_LOSS_TOL * math.log(tok.vocab_size), loss
    if n_embd == 256 and n_layer == 8:  # negative control: microgpt's fixed 0.08 at this size
        fixed = {name: r.standard_normal(shape, dtype=np.float32) * np.float32(0.08) for name, shape in parameter_shapes(cfg).items()}
        assert backprop.loss_and_grads(fixed, cfg, batch)[0] > 2 * math.log(tok.vocab_size)


@pytest.mark.parametrize('config', [GPTConfig(vocab_size=27), GPTConfig(11, n_layer=2, n_embd=8, n_head=2),
                                    GPTConfig(30, n_layer=3, n_embd=32, n_head=4, block_size=8)])
def test_init_weights_are_gpts_weights_without_a_value(config):
    """init_weights draws the very numbers GPT(config, seed) holds, for engines that need no Values."""
    for seed in (42, 7):
        assert init_weights(config, seed) == GPT(config, seed=seed).weights()
    assert init_weights(config, 42, init_std=0.3) == GPT(config, seed=42, init_std=0.3).weights()
    assert init_weights(config, 42) != init_weights(config, 43)


@pytest.mark.parametrize('n_embd, n_layer', [(16, 4), (64, 1)])
def test_models_draw_with_the_width_and_depth_rules(n_embd, n_layer):
    """attn_wo and mlp_fc2 draw with std / sqrt(n_layer), the rest with the width rule, in state_dict
    order from one generator: the numbers are those gauss() calls, matrix after matrix."""
    cfg = GPTConfig(vocab_size=11, n_layer=n_layer, n_embd=n_embd, n_head=4, block_size=8)
    weights, rng = init_weights(cfg, 3), random.Random(3)
    for name, (n_out, n_in) in parameter_shapes(cfg).items():
        std = init_rule(name, n_embd, n_layer)
        assert weights[name] == [[rng.gauss(0, std) for _ in range(n_in)] for _ in range(n_out)], name
    assert init_rule('layer3.mlp_fc2', 16, 4) == 0.04 and init_rule('layer3.mlp_fc1', 16, 4) == 0.08
    assert width_rule(64) == 0.04
