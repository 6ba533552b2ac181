"""
The numpy training path against PyTorch's autograd in float64, on a random padded batch.

PyTorch is optional: `.venv/bin/pip install torch==2.13.0` (a local CPU build here) enables it,
otherwise the test is skipped. The oracle is bench/backprop_speed.py's torch_loss: the model
written a second time in torch from its definition (microgpt/model.py): embeddings, rmsnorm,
causal multi-head attention, ReLU MLP, residuals, lm_head, the mean cross-entropy over the real
tokens of a padded batch. torch's autograd then gives every gradient. The benchmark times that
same function against backprop, so this test also proves the two sides it compares equal.
"""

import os
import sys

import numpy as np
import pytest

from microgpt.backprop import loss_and_grads, make_batch
from microgpt.model import GPTConfig, parameter_shapes

pytestmark = pytest.mark.torch

torch = pytest.importorskip("torch")

BENCH_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'bench')
if BENCH_DIR not in sys.path:
    sys.path.insert(0, BENCH_DIR)

from backprop_speed import torch_loss  # noqa: E402  (after the skip, like torch itself)

TORCH_TOL = 1e-10  # both float64; the two differ only in the order of floating-point sums


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
