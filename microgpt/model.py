"""
The GPT itself: parameters with microgpt's names, and `gpt()`, which runs ONE position.

`gpt(token_id, pos_id, keys, values)` takes one token and its position and returns vocab_size
logits (scores for the next token). It does not see the earlier tokens directly: it sees their
keys and values, which earlier calls appended to the KV cache (one list per layer), so the
model is causal by construction: the future has not been computed yet. train.py calls it once
per position of a name, sample.py once per generated token; src/inference/ computes the
same for a whole sequence at once with numpy, and tests check that the two agree.

Every parameter matrix is a list of rows, stored [n_out][n_in], so `linear(x, w)` is one dot
product per row. The building blocks (dot, linear, softmax, rmsnorm) come from ops.py (composed
from basic ops, the default) or fused.py (one hand-differentiated node each, for speed:
`GPT(..., fused=True)`, what train.py and sample.py use); the logits agree either way, to
rounding.

The config's modern rungs (RoPE, GELU or SwiGLU, norm gains, QK-norm, grouped-query attention,
tied embeddings) each change a few lines of gpt(), marked with the rung's name; with all of them
off, gpt() is microgpt's. tests/test_modern_scalar.py checks each rung's gradients.
"""

import math
import random
from dataclasses import dataclass, asdict

from . import fused as fused_blocks, ops as composed_blocks
from .engine import Value


# ---------------------------------------------------------------------------- configuration
SIZE_FIELDS = ('vocab_size', 'n_layer', 'n_embd', 'n_head', 'block_size')  # every config records these

@dataclass(frozen=True)  # one model's size and shape, passed on and never changed
class GPTConfig:
    vocab_size: int      # number of token ids: the characters plus BOS
    n_layer: int = 1     # transformer blocks stacked; 1-2 is plenty for names
    n_embd: int = 16     # width of the residual stream (each token is a vector of n_embd numbers)
    n_head: int = 4      # attention heads per layer; n_embd must divide by it (equal slices)
    block_size: int = 16  # longest sequence (positions): BOS + the name; names run to ~11-15 letters
    # The modern rungs (docs/modern.md): each off by default, which is microgpt's model exactly.
    rope: bool = False         # rotate q and k by their position (RoPE) instead of adding wpe
    mlp: str = 'relu'          # the MLP's nonlinearity: 'relu' (microgpt), 'gelu' (GPT-2), 'swiglu' (Llama)
    norm_gains: bool = False   # a learned gain on every rmsnorm, and a final norm before lm_head
    qk_norm: bool = False      # rmsnorm each head's q and k before their product (Gemma, nanochat)
    n_kv_head: int = None      # heads of keys and values; n_head divides by it (None: n_head, as microgpt)
    tie_embeddings: bool = False  # lm_head is wte: one matrix reads tokens in and scores them out

    def __post_init__(self):
        if self.n_kv_head is None:  # the dataclass is frozen: this is how a default from n_head is set
            object.__setattr__(self, 'n_kv_head', self.n_head)

    @property
    def head_dim(self):
        """Dimensions per attention head."""
        return self.n_embd // self.n_head

    @property
    def mlp_hidden(self):
        """The MLP's width: 4 * n_embd; SwiGLU's three matrices are 8/3 * n_embd wide instead, so
        that they hold about the two matrices' 8 * n_embd^2 numbers (Llama's rule)."""
        return 8 * self.n_embd // 3 if self.mlp == 'swiglu' else 4 * self.n_embd

    def to_dict(self):
        """The fields a checkpoint records: the sizes, and each rung only where it is switched on,
        so that microgpt's own checkpoints stay as they were (a missing rung reads as off)."""
        fields, plain = asdict(self), GPTConfig(self.vocab_size, n_head=self.n_head)
        return {name: value for name, value in fields.items()
                if name in SIZE_FIELDS or value != getattr(plain, name)}


def parameter_shapes(config):
    """Every parameter matrix's name and [n_out, n_in], in microgpt's order.

    With every rung off these are microgpt's matrices. A rung adds or removes some: RoPE has no
    wpe, tied embeddings no lm_head; norm gains are [1, n_embd] rows; SwiGLU adds mlp_gate;
    grouped-query attention makes attn_wk and attn_wv n_kv_head * head_dim rows tall.
    """
    c = config
    kv = c.n_kv_head * c.head_dim  # the keys' (and values') width: n_embd unless heads share them
    shapes = {'wte': [c.vocab_size, c.n_embd]}      # token embedding: one row per token id
    if not c.rope:
        shapes['wpe'] = [c.block_size, c.n_embd]    # position embedding: one row per position
    if not c.tie_embeddings:
        shapes['lm_head'] = [c.vocab_size, c.n_embd]  # maps the final vector to one logit per token
    if c.norm_gains:
        shapes['norm_in'] = [1, c.n_embd]  # the gain of the rmsnorm after the embeddings
        shapes['norm_f'] = [1, c.n_embd]   # the gain of the final rmsnorm, before lm_head
    for i in range(c.n_layer):
        if c.norm_gains:
            shapes[f'layer{i}.attn_norm'] = [1, c.n_embd]  # gain of the rmsnorm before attention
        shapes[f'layer{i}.attn_wq'] = [c.n_embd, c.n_embd]   # queries: what a position looks for
        shapes[f'layer{i}.attn_wk'] = [kv, c.n_embd]         # keys: what a position offers
        shapes[f'layer{i}.attn_wv'] = [kv, c.n_embd]         # values: what it hands over
        shapes[f'layer{i}.attn_wo'] = [c.n_embd, c.n_embd]   # mixes the heads' outputs
        if c.norm_gains:
            shapes[f'layer{i}.mlp_norm'] = [1, c.n_embd]   # gain of the rmsnorm before the MLP
        shapes[f'layer{i}.mlp_fc1'] = [c.mlp_hidden, c.n_embd]  # MLP widens 4x ...
        if c.mlp == 'swiglu':
            shapes[f'layer{i}.mlp_gate'] = [c.mlp_hidden, c.n_embd]  # SwiGLU's gate, silu(x) of it
        shapes[f'layer{i}.mlp_fc2'] = [c.n_embd, c.mlp_hidden]  # ... and narrows back
    return shapes


def is_gain(name):
    """A norm's gain, stored as its difference from 1 (as Gemma does): 0 at the start, so a fresh
    model's norms are microgpt's plain rmsnorm, and weight decay pulls them back there."""
    return name.endswith(('norm_in', 'norm_f', 'attn_norm', 'mlp_norm'))


ROPE_BASE = 10000.0  # RoPE's base (the RoFormer paper's and Llama's): sets how slowly the last pairs turn


def rope_frequencies(head_dim):
    """RoPE's turning rates, head_dim // 2 of them: pair m of a head (dimensions 2m and 2m + 1)
    turns by pos * ROPE_BASE ** (-2m / head_dim) radians at position pos. Pair 0 turns a radian
    per position; the last pairs barely turn, so they carry the distance of far positions."""
    return [ROPE_BASE ** (-2 * m / head_dim) for m in range(head_dim // 2)]


def init_weights(config, seed=42, init_std=None):
    """The initial weights, {name: [[float]]}: Gaussian numbers from random.Random(seed), matrix
    by matrix in parameter_shapes order, row by row. GPT() makes each a Value; the numpy and
    torch engines take the floats as they are, and make no Value at all.

    std: microgpt's 0.08 at its width 16, 0.08 * sqrt(16 / n_embd) at others: a linear's outputs
    grow as std * sqrt(n_in), and this keeps the first loss near ln(vocab_size). What each block
    adds to the residual stream (attn_wo's and mlp_fc2's outputs) is also divided by
    sqrt(n_layer). The stream sums 2 * n_layer of them, so their variances add up to 2 * n_layer
    * std^2 / n_layer = 2 * std^2 at every depth: what microgpt's one layer adds (GPT-2 divides
    by sqrt(2 * n_layer) instead, which would change microgpt's own one-layer weights).
    At the default config (16 wide, 1 layer) both factors are 1: exactly microgpt's weights.
    init_std: one std for every matrix instead (the original microgpt.py's recipe).
    Norm gains start at 0 (a gain of 1: see is_gain) and draw no numbers.
    """
    rng = random.Random(seed)
    stds = init_stds(config, init_std)
    return {name: [[0.0 if is_gain(name) else rng.gauss(0, stds[name]) for _ in range(n_in)] for _ in range(n_out)]
            for name, (n_out, n_in) in parameter_shapes(config).items()}


def init_stds(config, init_std=None):
    """{name: the std init_weights draws that matrix with}, by the rule above."""
    std = init_std or 0.08 * (16 / config.n_embd) ** 0.5
    depth = 1.0 if init_std else config.n_layer ** -0.5
    return {name: std * depth if name.endswith(('attn_wo', 'mlp_fc2')) else std for name in parameter_shapes(config)}


def per_head(f, x, head_dim, *args):
    """f applied to each head's slice of x (head_dim numbers each), the results side by side."""
    return [y for s in range(0, len(x), head_dim) for y in f(x[s:s + head_dim], *args)]


def rotate(x, pos_id):
    """RoPE: one head's q or k turned pair by pair, pair m by the angle pos_id * frequency m.
    A turn keeps the length, and q_i . k_j then depends on the positions only through i - j:
    turning both by the same angle leaves their product unchanged."""
    out = []
    for m, freq in enumerate(rope_frequencies(len(x))):
        c, s = math.cos(pos_id * freq), math.sin(pos_id * freq)
        a, b = x[2 * m], x[2 * m + 1]
        out += [a * c - b * s, a * s + b * c]
    return out


# ---------------------------------------------------------------------------- the model
class GPT:
    """A GPT whose every weight is a Value. `GPT(config, seed=42)` makes a fresh one."""

    def __init__(self, config, seed=42, tokenizer=None, init_std=None, fused=False):
        self.config = config
        # The building blocks gpt() and the loss call: ops.py's (composed from basic ops, the ones
        # you read) or, with fused=True, fused.py's (one node each, for speed; train.py's choice).
        # Same math, the same numbers to rounding.
        self.blocks = fused_blocks if fused else composed_blocks
        self.tokenizer = tokenizer  # set when the model comes from data or a checkpoint
        # Let there be parameters: init_weights' numbers, each one a Value.
        self.state_dict = {name: [[Value(x) for x in row] for row in matrix]
                           for name, matrix in init_weights(config, seed, init_std).items()}
        # The flat list the optimizer walks over; it shares the Value objects with state_dict.
        self.params = [p for matrix in self.state_dict.values() for row in matrix for p in row]

    def gpt(self, token_id, pos_id, keys, values):
        """Logits (vocab_size Values) for the token after `token_id` at position `pos_id`.

        keys, values: the KV cache, [n_layer] lists of earlier positions' k and v vectors.
        This call appends its own k and v, so call it for positions 0, 1, 2, ... in order.
        """
        cfg, sd, blocks = self.config, self.state_dict, self.blocks
        head_dim, group = cfg.head_dim, cfg.n_head // cfg.n_kv_head  # group: query heads sharing a kv head

        # 1) The token's meaning plus its position's, as one vector of n_embd numbers.
        #    (RoPE: no position vector, zeros here; the position turns q and k in each layer instead.)
        tok_emb = sd['wte'][token_id]
        pos_emb = [0.0] * cfg.n_embd if cfg.rope else sd['wpe'][pos_id]
        x = [t + p for t, p in zip(tok_emb, pos_emb)]
        # note: not redundant with the block's rmsnorm below. The residual stream carries THIS
        # normalised vector forward; each block normalises only a copy of the stream for itself.
        x = self.norm(x, 'norm_in')

        for li in range(cfg.n_layer):
            # 2) Attention: this position, the query i = pos_id, gathers from keys j = 0..i.
            x_residual = x
            x = self.norm(x, f'layer{li}.attn_norm')
            q = blocks.linear(x, sd[f'layer{li}.attn_wq'])  # what this position is looking for
            k = blocks.linear(x, sd[f'layer{li}.attn_wk'])  # what it offers to later positions
            v = blocks.linear(x, sd[f'layer{li}.attn_wv'])  # what it hands to whoever attends to it
            if cfg.qk_norm:  # QK-norm: each head's q and k at unit scale, so no score can blow up
                q, k = per_head(blocks.rmsnorm, q, head_dim), per_head(blocks.rmsnorm, k, head_dim)
            if cfg.rope:  # RoPE: each head's q and k turned by this position (see rotate)
                q, k = per_head(rotate, q, head_dim, pos_id), per_head(rotate, k, head_dim, pos_id)
            keys[li].append(k)      # the cache now holds positions 0..pos_id
            values[li].append(v)
            x_attn = []
            for h in range(cfg.n_head):
                hs = h * head_dim   # this head's slice of the n_embd dimensions
                ks = h // group * head_dim  # its keys' and values' slice (hs, unless heads share them)
                q_h = q[hs:hs + head_dim]
                k_h = [k_j[ks:ks + head_dim] for k_j in keys[li]]
                v_h = [v_j[ks:ks + head_dim] for v_j in values[li]]
                # one score per visible key j <= i (no future key exists to score), scaled by
                # 1/sqrt(head_dim) so that q.k stays at unit scale whatever head_dim is
                attn_logits = [blocks.dot(q_h, k_j) * head_dim ** -0.5 for k_j in k_h]
                attn_weights = blocks.softmax(attn_logits)  # sums to 1 over the visible positions
                # the head's output: the values averaged with those weights, per dimension d
                head_out = [blocks.dot(attn_weights, [v_j[d] for v_j in v_h]) for d in range(head_dim)]
                x_attn.extend(head_out)  # heads side by side: back to n_embd numbers
            x = blocks.linear(x_attn, sd[f'layer{li}.attn_wo'])
            x = [a + b for a, b in zip(x, x_residual)]  # residual: attention adds to the stream

            # 3) MLP: each position thinks on its own about what it gathered.
            x_residual = x
            x = self.norm(x, f'layer{li}.mlp_norm')
            hidden = blocks.linear(x, sd[f'layer{li}.mlp_fc1'])  # 4 * n_embd numbers (SwiGLU: 8/3)
            if cfg.mlp == 'swiglu':  # SwiGLU: a second linear, through silu, says how much of each passes
                gate = blocks.linear(x, sd[f'layer{li}.mlp_gate'])
                hidden = [blocks.silu(g) * u for g, u in zip(gate, hidden)]
            else:  # relu, microgpt's, or GELU, GPT-2's smooth relu
                hidden = [u.relu() if cfg.mlp == 'relu' else blocks.gelu(u) for u in hidden]
            x = blocks.linear(hidden, sd[f'layer{li}.mlp_fc2'])  # back to n_embd
            x = [a + b for a, b in zip(x, x_residual)]

        # 4) One score per token id for what comes next. microgpt has no final norm; with norm
        #    gains there is one. Tied embeddings: each token's score is x . its own wte row.
        if cfg.norm_gains:
            x = self.norm(x, 'norm_f')
        return blocks.linear(x, sd['wte' if cfg.tie_embeddings else 'lm_head'])

    def norm(self, x, gain):
        """rmsnorm(x); with norm gains, each number then times (1 + its learned gain): a gain is
        stored as its difference from 1 (see is_gain), so a fresh model's norms are plain."""
        x = self.blocks.rmsnorm(x)
        if self.config.norm_gains:
            x = [xi * (1 + g) for xi, g in zip(x, self.state_dict[gain][0])]
        return x

    def empty_cache(self):
        """A fresh KV cache: no positions seen yet, one list per layer for keys and values."""
        return [[] for _ in range(self.config.n_layer)], [[] for _ in range(self.config.n_layer)]

    def next_logits_fn(self):
        """A fresh next_logits(token_ids) -> vocab_size floats, for sampling.py. It keeps its own
        KV cache and feeds gpt() only the positions it has not seen yet (after a prompt, several).
        Ids that do not continue what it was fed (the sampler's window jumped on, so every token
        sits at a new position) start a fresh cache."""
        fed, (keys, values), last = [], self.empty_cache(), None

        def next_logits(token_ids):
            nonlocal fed, keys, values, last
            if token_ids[:len(fed)] != fed:
                fed, (keys, values) = [], self.empty_cache()
            for pos_id in range(len(fed), len(token_ids)):
                last = [l.data for l in self.gpt(token_ids[pos_id], pos_id, keys, values)]
                fed.append(token_ids[pos_id])
            return last
        return next_logits

    def weights(self):
        """The parameters as plain floats, {name: [[float]]}: what a checkpoint stores."""
        return {name: [[p.data for p in row] for row in matrix]
                for name, matrix in self.state_dict.items()}

    def load_weights(self, weights):
        """Copy {name: [[float]]} (already validated against the config) into the parameters."""
        for name, matrix in self.state_dict.items():
            for row, new_row in zip(matrix, weights[name]):
                for p, x in zip(row, new_row):
                    p.data = float(x)

    @classmethod
    def from_weights(cls, config, weights, tokenizer=None, fused=False):
        """A GPT holding trained weights (a checkpoint's) in place of freshly drawn ones."""
        model = cls(config, tokenizer=tokenizer, fused=fused)
        model.load_weights(weights)
        return model

