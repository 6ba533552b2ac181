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
tests/test_torch_model.py proves logits, loss and every gradient equal to both, in float64.
"""

import torch
import torch.nn.functional as F
from torch import nn

from microgpt.model import parameter_shapes
from microgpt.ops import RMS_EPS  # microgpt's rmsnorm epsilon, as every engine's


def rmsnorm(x):
    """x / sqrt(mean(x^2) + eps) along the last axis: no learned scale, as in microgpt."""
    return x * ((x * x).mean(dim=-1, keepdim=True) + RMS_EPS) ** -0.5


class Block(nn.Module):
    """One transformer block's six matrices; registered as `layer{i}`, so they are named
    layer{i}.attn_wq ... layer{i}.mlp_fc2 in the state_dict, as in a microgpt checkpoint."""

    def __init__(self, shapes, i):
        super().__init__()
        for name in ('attn_wq', 'attn_wk', 'attn_wv', 'attn_wo', 'mlp_fc1', 'mlp_fc2'):
            setattr(self, name, nn.Parameter(torch.zeros(shapes[f'layer{i}.{name}'])))


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        shapes = parameter_shapes(config)  # {name: [n_out, n_in]}, in microgpt's order
        self.wte = nn.Parameter(torch.zeros(shapes['wte']))          # (vocab_size, n_embd)
        self.wpe = nn.Parameter(torch.zeros(shapes['wpe']))          # (block_size, n_embd)
        self.lm_head = nn.Parameter(torch.zeros(shapes['lm_head']))  # (vocab_size, n_embd)
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
        H, D = cfg.n_head, cfg.head_dim
        future = torch.ones(T, T, dtype=torch.bool, device=idx.device).triu(diagonal=1)  # (T, T): j > i

        def drop(site, x):  # x times its mask, cut to the batch's T positions (T keys for attention)
            return x if masks is None else x * masks[site][..., :T, :x.shape[-1]]

        # 1) Each token's vector plus its position's, then rmsnorm (not redundant: the residual
        # stream carries this normalised vector).
        x = drop('embedding', rmsnorm(self.wte[idx] + self.wpe[:T]))    # (B, T, n_embd)
        for i, block in enumerate(self.blocks):
            p = f'layer{i}.'
            # 2) Attention: query i gathers from keys j <= i of its own name, every head at once.
            x_residual = x
            x = rmsnorm(x)
            q, k, v = (F.linear(x, w).view(B, T, H, D).transpose(1, 2)  # (B, n_head, T, head_dim)
                       for w in (block.attn_wq, block.attn_wk, block.attn_wv))
            attn_logits = (q @ k.transpose(-1, -2)) * D ** -0.5         # (B, n_head, T, T)
            attn_logits = attn_logits.masked_fill(future, float('-inf'))  # exp(-inf) = 0: no future
            attn_weights = drop(p + 'attn_weights', attn_logits.softmax(dim=-1))  # (B, n_head, T, T)
            x = (attn_weights @ v).transpose(1, 2).reshape(B, T, H * D)  # (B, T, n_embd): heads side by side
            x = drop(p + 'attn_out', F.linear(x, block.attn_wo)) + x_residual  # (B, T, n_embd)

            # 3) MLP: each position on its own, widened 4x, ReLU, narrowed back.
            x_residual = x
            x = F.linear(rmsnorm(x), block.mlp_fc1).relu()              # (B, T, 4 * n_embd)
            x = drop(p + 'mlp_out', F.linear(x, block.mlp_fc2)) + x_residual  # (B, T, n_embd)

        # 4) One score per token id (no final norm, as in microgpt).
        return F.linear(x, self.lm_head)                                # (B, T, vocab_size)

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
