"""
microgpt's GPT as a PyTorch nn.Module: the same numbered steps, the same names, autograd on tensors.

Read this after src/backprop/model.py. `GPT(config)` holds microgpt's parameters under
microgpt's names (its state_dict keys are wte, wpe, lm_head, layer0.attn_wq, ...), every
matrix [n_out, n_in] as nn.Linear stores its weight, so F.linear(x, w) = x @ w.T as the
port's linear. `forward(idx)` runs gpt()'s steps 1 to 4 on a padded batch of names (B, T) at
once, as src/inference does for one name; `loss(...)` is the mean cross-entropy over the
batch's real tokens, as src/backprop's. There is no backward here: loss.backward() records
every operation of the forward and walks them in reverse, which is what src/backprop/layers.py
writes out by hand layer by layer and what microgpt/engine.py does for single numbers.
The modern rungs (RoPE, GELU, SwiGLU, norm gains, QK-norm, grouped-query attention, tied
embeddings) are the config's flags, each a few lines below; the pieces are written from their
formulas, and tests/test_modern_torch.py checks them against PyTorch's own functions.
tests/test_torch_model.py and tests/test_modern_engines.py prove logits, loss and every
gradient equal to the other engines', in float64.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from microgpt.model import parameter_shapes, rope_frequencies
from microgpt.ops import RMS_EPS  # microgpt's rmsnorm epsilon, as every engine's


def rmsnorm(x, gain=None):
    """x / sqrt(mean(x^2) + eps) along the last axis; with norm gains, times (1 + gain), the
    gain (1, n_embd) stored as its difference from 1. None: no gain, as in microgpt."""
    x = x * ((x * x).mean(dim=-1, keepdim=True) + RMS_EPS) ** -0.5
    return x if gain is None else x * (1 + gain)


def rope(x):
    """RoPE: x (B, heads, T, head_dim) with each pair (2m, 2m+1) of position t turned by the angle
    t * rope_frequencies(head_dim)[m], as a point (a, b) of the plane is turned."""
    T, D = x.shape[-2:]
    theta = torch.outer(torch.arange(T, dtype=torch.float64),
                        torch.tensor(rope_frequencies(D), dtype=torch.float64))  # (T, D/2), on the CPU
    cos, sin = (f(theta).to(x.device, x.dtype) for f in (torch.cos, torch.sin))  # (T, D/2) each
    a, b = x[..., 0::2], x[..., 1::2]                                  # (B, heads, T, D/2) each
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)  # (B, heads, T, D)


def gelu(u):
    """GPT-2's GELU, its tanh form: 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3)))."""
    return 0.5 * u * (1 + torch.tanh(math.sqrt(2 / math.pi) * (u + 0.044715 * u ** 3)))


def silu(u):
    """SiLU, SwiGLU's gate: u * sigmoid(u)."""
    return u * torch.sigmoid(u)


def attention(q, k, v, drop=lambda w: w):
    """Causal attention, each query head over its own kv head: q (B, n_head, T, D), k and v
    (B, n_kv_head, T, D); query head h reads kv head h // (n_head // n_kv_head). drop: the
    attention weights' dropout. Returns (B, n_head, T, D)."""
    T, D = q.shape[-2:]
    group = q.shape[1] // k.shape[1]  # query heads per kv head: 1 unless heads share them
    if group > 1:  # each kv head repeated for the query heads that share it: [k0, k0, k1, k1]
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # (B, n_head, T, D)
    future = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(diagonal=1)  # (T, T): j > i
    attn_logits = (q @ k.transpose(-1, -2)) * D ** -0.5                 # (B, n_head, T, T)
    attn_logits = attn_logits.masked_fill(future, float('-inf'))        # exp(-inf) = 0: no future
    return drop(attn_logits.softmax(dim=-1)) @ v                        # (B, n_head, T, D)


class Block(nn.Module):
    """One transformer block's matrices; registered as `layer{i}`, so they are named
    layer{i}.attn_wq ... layer{i}.mlp_fc2 in the state_dict, as in a microgpt checkpoint
    (and layer{i}.attn_norm, mlp_norm, mlp_gate where a rung adds them)."""

    def __init__(self, shapes, i):
        super().__init__()
        for name, shape in shapes.items():  # in parameter_shapes' order: Adam's flat order
            if name.startswith(f'layer{i}.'):
                setattr(self, name.split('.')[1], nn.Parameter(torch.zeros(shape)))


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        shapes = parameter_shapes(config)  # {name: [n_out, n_in]}, in microgpt's order
        for name, shape in shapes.items():  # wte (vocab_size, n_embd), wpe (block_size, n_embd), ...
            if not name.startswith('layer'):
                setattr(self, name, nn.Parameter(torch.zeros(shape)))
        self.blocks = []  # the layers in order; each is registered under its microgpt name
        for i in range(config.n_layer):
            self.add_module(f'layer{i}', Block(shapes, i))
            self.blocks.append(getattr(self, f'layer{i}'))

    def forward(self, idx, masks=None):
        """Logits (B, T, vocab_size) for token ids idx (B, T): position t scores what follows it.

        masks: in training with --dropout, {site: tensor} of backprop's dropout.Masks (B names,
        block_size positions), the factors each site is multiplied by; None drops nothing.
        """
        cfg = self.config
        B, T = idx.shape
        H, KV, D = cfg.n_head, cfg.n_kv_head, cfg.head_dim

        def gain(module, name):  # a norm's gain with norm gains; None (no gain) without
            return getattr(module, name) if cfg.norm_gains else None

        def drop(site, x):  # x times its mask, cut to the batch's T positions (T keys for attention)
            return x if masks is None else x * masks[site][..., :T, :x.shape[-1]]

        # 1) Each token's vector (plus its position's, unless RoPE turns q and k instead), then
        # rmsnorm (not redundant: the residual stream carries this normalised vector).
        x = self.wte[idx] if cfg.rope else self.wte[idx] + self.wpe[:T]   # (B, T, n_embd)
        x = drop('embedding', rmsnorm(x, gain(self, 'norm_in')))          # (B, T, n_embd)
        for i, block in enumerate(self.blocks):
            p = f'layer{i}.'
            # 2) Attention: query i gathers from keys j <= i of its own name, every head at once.
            x_residual = x
            x = rmsnorm(x, gain(block, 'attn_norm'))
            q = F.linear(x, block.attn_wq).view(B, T, H, D).transpose(1, 2)   # (B, n_head, T, head_dim)
            k, v = (F.linear(x, w).view(B, T, KV, D).transpose(1, 2)         # (B, n_kv_head, T, head_dim)
                    for w in (block.attn_wk, block.attn_wv))
            if cfg.qk_norm:  # each head's q and k to unit scale: their product cannot blow up
                q, k = rmsnorm(q), rmsnorm(k)
            if cfg.rope:  # a turn keeps a head's length: before or after QK-norm, the same math
                q, k = rope(q), rope(k)
            x = attention(q, k, v, lambda w: drop(p + 'attn_weights', w))  # (B, n_head, T, head_dim)
            x = x.transpose(1, 2).reshape(B, T, H * D)                   # (B, T, n_embd): heads side by side
            x = drop(p + 'attn_out', F.linear(x, block.attn_wo)) + x_residual  # (B, T, n_embd)

            # 3) MLP: each position on its own, widened (mlp_hidden), a nonlinearity, narrowed back.
            x_residual = x
            x = rmsnorm(x, gain(block, 'mlp_norm'))
            h = F.linear(x, block.mlp_fc1)                               # (B, T, mlp_hidden)
            if cfg.mlp == 'swiglu':  # a second widening, through silu, opens or closes each unit
                h = silu(F.linear(x, block.mlp_gate)) * h                # (B, T, mlp_hidden)
            else:
                h = gelu(h) if cfg.mlp == 'gelu' else h.relu()           # (B, T, mlp_hidden)
            x = drop(p + 'mlp_out', F.linear(h, block.mlp_fc2)) + x_residual  # (B, T, n_embd)

        # 3b) With norm gains, a final rmsnorm (microgpt has none).
        if cfg.norm_gains:
            x = rmsnorm(x, self.norm_f)
        # 4) One score per token id: by lm_head, or by wte itself with tied embeddings.
        return F.linear(x, self.wte if cfg.tie_embeddings else self.lm_head)  # (B, T, vocab_size)

    def loss(self, idx, targets, mask, n_tokens=None, masks=None):
        """The sum of the real tokens' cross-entropies over n_tokens (default: their number).

        idx (B, T), targets and mask (B*T,): backprop.make_batch's padded batch, as tensors.
        n_tokens: the token count of the whole batch, when this is one rank's share of it
        (torchgpt.distributed), so the shares' losses and gradients add up to the batch's.
        masks: forward's, with --dropout.
        """
        logits = self(idx, masks)                                          # (B, T, vocab_size)
        losses = F.cross_entropy(logits.flatten(0, 1), targets, reduction='none')  # (B*T,)
        return (losses * mask).sum() / (mask.sum() if n_tokens is None else n_tokens)
