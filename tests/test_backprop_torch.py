"""
The numpy training path against PyTorch's autograd in float64, on a random padded batch.

PyTorch is optional: `.venv/bin/pip install torch==2.13.0` (a local CPU build here) enables it,
otherwise the test is skipped. The model is written a second time in torch from its definition
(microgpt/model.py): embeddings, rmsnorm, causal multi-head attention, ReLU MLP, residuals,
lm_head, the masked mean cross-entropy. torch's autograd then gives every gradient.
"""

import numpy as np
import pytest

from backprop import loss_and_grads, make_batch
from microgpt.model import GPTConfig, parameter_shapes

torch = pytest.importorskip("torch")

TORCH_TOL = 1e-10  # both float64; the two differ only in the order of floating-point sums


def torch_loss(w, config, idx, targets, mask):
    """microgpt's GPT in torch over a padded batch: the mean loss over the real tokens."""
    F = torch.nn.functional
    B, T = idx.shape
    H, D = config.n_head, config.head_dim

    def rmsnorm(x):
        return x * ((x * x).mean(dim=-1, keepdim=True) + 1e-5) ** -0.5

    x = rmsnorm(w['wte'][idx] + w['wpe'][:T])                        # (B, T, n_embd)
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # (T, T)
    for li in range(config.n_layer):
        p = f'layer{li}.'
        h = rmsnorm(x)
        q, k, v = (F.linear(h, w[p + n]).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
                   for n in ('attn_wq', 'attn_wk', 'attn_wv'))
        att = (q @ k.transpose(-1, -2)) * D ** -0.5                  # (B, H, T, T)
        att = torch.softmax(att.masked_fill(future, float('-inf')), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, H * D)           # (B, T, n_embd)
        x = x + F.linear(y, w[p + 'attn_wo'])
        x = x + F.linear(torch.relu(F.linear(rmsnorm(x), w[p + 'mlp_fc1'])), w[p + 'mlp_fc2'])
    logits = F.linear(x, w['lm_head']).view(B * T, -1)               # (B*T, vocab_size)
    losses = F.cross_entropy(logits, targets, reduction='none')      # (B*T,)
    return (losses * mask).sum() / mask.sum()


def test_loss_and_every_gradient_match_pytorch_float64():
    config = GPTConfig(vocab_size=11, n_layer=2, n_embd=12, n_head=3, block_size=9)
    rng = np.random.default_rng(1)
    weights = {name: rng.normal(0, 0.3, size=shape) for name, shape in parameter_shapes(config).items()}
    # five names of different lengths, one longer than the block (cut), so the batch is padded
    batch = [[10] + list(rng.integers(0, 10, size=n)) + [10] for n in (1, 4, 7, 2, 12)]
    loss, grads = loss_and_grads(weights, config, batch)

    idx, targets, mask = make_batch(batch, config.block_size, config.vocab_size)
    w = {name: torch.tensor(a, dtype=torch.float64, requires_grad=True) for name, a in weights.items()}
    t_loss = torch_loss(w, config, torch.from_numpy(idx), torch.from_numpy(targets),
                        torch.from_numpy(mask))
    t_loss.backward()
    assert abs(loss - t_loss.item()) < TORCH_TOL
    for name in weights:
        assert np.abs(grads[name] - w[name].grad.numpy()).max() < TORCH_TOL, name
