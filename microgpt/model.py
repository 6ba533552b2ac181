"""
The GPT itself: parameters with microgpt's names, and `gpt()`, which runs ONE position.

Read this after engine.py and ops.py. `gpt(token_id, pos_id, keys, values)` takes one token
and its position and returns vocab_size logits (scores for the next token). It does not see
the earlier tokens directly: it sees their keys and values, which earlier calls appended to
the KV cache `keys` / `values` (one list per layer). So the model is causal by construction:
the future has not been computed yet. train.py calls it once per position of a name;
sample.py calls it once per generated character. src/inference/ computes the same thing for a
whole sequence at once with numpy; tests check that the two agree.

Every parameter matrix is a list of rows, stored [n_out][n_in], so `linear(x, w)` is one dot
product per row. The building blocks (dot, linear, softmax, rmsnorm) come from one of two
files with the same names: fused.py (one hand-differentiated node each, the default, fast
enough to train 1000 steps in about ten seconds) or ops.py (composed from basic ops exactly as
microgpt writes them; `GPT(..., fused=False)`). The logits agree either way, to rounding.
"""

import random
from dataclasses import dataclass, asdict

from . import fused as fused_ops, ops as composed_ops
from .engine import Value
from .errors import UserError
from .limits import check_config_sizes


# ---------------------------------------------------------------------------- configuration
@dataclass
class GPTConfig:
    vocab_size: int      # number of token ids: the characters plus BOS
    n_layer: int = 1     # transformer blocks stacked; 1-2 is plenty for names
    n_embd: int = 16     # width of the residual stream (each token is a vector of n_embd numbers)
    n_head: int = 4      # attention heads per layer; each looks at n_embd / n_head dimensions
    block_size: int = 16  # longest sequence (positions): BOS + the name; names run to ~11-15 letters

    def __post_init__(self):
        for field in ('vocab_size', 'n_layer', 'n_embd', 'n_head', 'block_size'):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UserError(f"{field} must be a positive integer, got {value!r}")
        check_config_sizes(asdict(self))  # a trillion layers is one line, not a hung machine
        if self.n_embd % self.n_head:
            raise UserError(f"n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head}): "
                            "every head gets an equal slice of the embedding")

    @property
    def head_dim(self):
        """Dimensions per attention head."""
        return self.n_embd // self.n_head

    def to_dict(self):
        return asdict(self)


def parameter_shapes(config):
    """Every parameter matrix's name and [n_out, n_in], in microgpt's order."""
    c = config
    shapes = {
        'wte': [c.vocab_size, c.n_embd],      # token embedding: one row per token id
        'wpe': [c.block_size, c.n_embd],      # position embedding: one row per position
        'lm_head': [c.vocab_size, c.n_embd],  # maps the final vector to one logit per token
    }
    for i in range(c.n_layer):
        shapes[f'layer{i}.attn_wq'] = [c.n_embd, c.n_embd]   # queries: what a position looks for
        shapes[f'layer{i}.attn_wk'] = [c.n_embd, c.n_embd]   # keys: what a position offers
        shapes[f'layer{i}.attn_wv'] = [c.n_embd, c.n_embd]   # values: what it hands over
        shapes[f'layer{i}.attn_wo'] = [c.n_embd, c.n_embd]   # mixes the heads' outputs
        shapes[f'layer{i}.mlp_fc1'] = [4 * c.n_embd, c.n_embd]  # MLP widens 4x ...
        shapes[f'layer{i}.mlp_fc2'] = [c.n_embd, 4 * c.n_embd]  # ... and narrows back
    return shapes


# ---------------------------------------------------------------------------- the model
class GPT:
    """A GPT whose every weight is a Value. `GPT(config, seed=42)` makes a fresh one."""

    def __init__(self, config, seed=42, tokenizer=None, init_std=0.08, fused=True):
        self.config = config
        # The building blocks gpt() and the loss use: the fused set (fast) or the composed one
        # (microgpt's own, slower). Same math, the same numbers to rounding (1e-12); only the size
        # of the graph differs.
        self.ops = fused_ops if fused else composed_ops
        self.tokenizer = tokenizer  # set when the model comes from data or a checkpoint
        self.train_state = None     # what --resume needs, when loaded from a checkpoint
        # Let there be parameters: Gaussian with a small std (0.08), so the first logits are
        # near 0 and every token starts out roughly equally likely.
        rng = random.Random(seed)
        self.state_dict = {
            name: [[Value(rng.gauss(0, init_std)) for _ in range(n_in)] for _ in range(n_out)]
            for name, (n_out, n_in) in parameter_shapes(config).items()
        }
        # The flat list the optimizer walks over; it shares the Value objects with state_dict.
        self.params = [p for matrix in self.state_dict.values() for row in matrix for p in row]

    def gpt(self, token_id, pos_id, keys, values):
        """Logits (vocab_size Values) for the token after `token_id` at position `pos_id`.

        keys, values: the KV cache, [n_layer] lists of earlier positions' k and v vectors.
        This call appends its own k and v, so call it for positions 0, 1, 2, ... in order.
        """
        cfg, sd = self.config, self.state_dict
        dot, linear, rmsnorm, softmax = self.ops.dot, self.ops.linear, self.ops.rmsnorm, self.ops.softmax
        if not 0 <= token_id < cfg.vocab_size:
            raise IndexError(f"token_id {token_id} is outside the vocabulary (0..{cfg.vocab_size - 1})")
        if not 0 <= pos_id < cfg.block_size:
            raise IndexError(f"pos_id {pos_id} is outside the block (0..{cfg.block_size - 1})")
        head_dim = cfg.head_dim
        scale = head_dim ** -0.5  # 1/sqrt(head_dim): keeps q.k at unit scale whatever head_dim is

        # 1) The token's meaning plus its position's, as one vector of n_embd numbers.
        tok_emb = sd['wte'][token_id]
        pos_emb = sd['wpe'][pos_id]
        x = [t + p for t, p in zip(tok_emb, pos_emb)]
        # note: not redundant with the block's rmsnorm below. The residual stream carries THIS
        # normalised vector forward; each block normalises only a copy of the stream for itself.
        x = rmsnorm(x)

        for li in range(cfg.n_layer):
            # 2) Attention: this position, the query i = pos_id, gathers from keys j = 0..i.
            x_residual = x
            x = rmsnorm(x)
            q = linear(x, sd[f'layer{li}.attn_wq'])  # what this position is looking for
            k = linear(x, sd[f'layer{li}.attn_wk'])  # what it offers to later positions
            v = linear(x, sd[f'layer{li}.attn_wv'])  # what it hands to whoever attends to it
            keys[li].append(k)      # the cache now holds positions 0..pos_id
            values[li].append(v)
            x_attn = []
            for h in range(cfg.n_head):
                hs = h * head_dim   # this head's slice of the n_embd dimensions
                q_h = q[hs:hs + head_dim]
                k_h = [k_j[hs:hs + head_dim] for k_j in keys[li]]
                v_h = [v_j[hs:hs + head_dim] for v_j in values[li]]
                # one score per visible key j <= i: no future key exists to score
                attn_logits = [dot(q_h, k_j) * scale for k_j in k_h]
                attn_weights = softmax(attn_logits)  # sums to 1 over the visible positions
                # the head's output: the values averaged with those weights, per dimension d
                head_out = [dot(attn_weights, [v_j[d] for v_j in v_h]) for d in range(head_dim)]
                x_attn.extend(head_out)  # heads side by side: back to n_embd numbers
            x = linear(x_attn, sd[f'layer{li}.attn_wo'])
            x = [a + b for a, b in zip(x, x_residual)]  # residual: attention adds to the stream

            # 3) MLP: each position thinks on its own about what it gathered.
            x_residual = x
            x = rmsnorm(x)
            x = linear(x, sd[f'layer{li}.mlp_fc1'])  # (4 * n_embd)
            x = [xi.relu() for xi in x]
            x = linear(x, sd[f'layer{li}.mlp_fc2'])  # (n_embd)
            x = [a + b for a, b in zip(x, x_residual)]

        # 4) One score per token id for what comes next (no final norm, as in microgpt).
        return linear(x, sd['lm_head'])

    def empty_cache(self):
        """A fresh KV cache: no positions seen yet, one list per layer for keys and values."""
        return [[] for _ in range(self.config.n_layer)], [[] for _ in range(self.config.n_layer)]

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
