"""
Decoupled weight decay (train.py --weight-decay, microgpt/optim.py): AdamW's, in all three engines.

Checked against PyTorch's torch.optim.AdamW (float64, microgpt's betas and eps) on the same
gradients, and the decay against its closed form (a weight with no gradient shrinks by exactly
(1 - lr * wd) a step). The array Adam is the scalar one float for float, decay on or off
(tests/test_backprop_trainer.py). tests/test_dropout.py runs the engines, and a resume, with decay on.
"""

import random

import pytest

from microgpt.engine import Value
from microgpt.optim import Adam

WD = 0.1


def gradients(n, steps, seed=0):
    rng = random.Random(seed)
    return [[rng.gauss(0, 1) for _ in range(n)] for _ in range(steps)]


def scalar_adam_run(start, grads, lrs, weight_decay):
    params = [Value(x) for x in start]
    opt = Adam(params, weight_decay=weight_decay)
    for g, lr in zip(grads, lrs):
        for p, gi in zip(params, g):
            p.grad = gi
        opt.step(lr)
    return [p.data for p in params], opt


def test_a_weight_without_gradient_shrinks_by_the_closed_form():
    """With g = 0 Adam's step is 0, so decay alone acts: w_t = w_0 * prod(1 - lr_t * wd)."""
    lrs = [0.01, 0.005, 0.02]
    final, _ = scalar_adam_run([2.0], [[0.0]] * 3, lrs, WD)
    expected = 2.0
    for lr in lrs:
        expected *= 1 - lr * WD
    assert final[0] == pytest.approx(expected, rel=1e-15)


@pytest.mark.torch
def test_one_step_with_decay_is_pytorchs_adamw():
    import torch
    start, grads, lrs = [0.3, -0.2, 0.05, 1.5, -0.7], gradients(5, 4, seed=3), [0.01, 0.007, 0.004, 0.001]
    scalar, opt = scalar_adam_run(start, grads, lrs, WD)
    w = torch.tensor(start, dtype=torch.float64, requires_grad=True)
    adamw = torch.optim.AdamW([w], lr=0.0, betas=(0.85, 0.99), eps=1e-8, weight_decay=WD)
    for g, lr in zip(grads, lrs):
        w.grad = torch.tensor(g, dtype=torch.float64)
        adamw.param_groups[0]['lr'] = lr
        adamw.step()
    assert max(abs(a - b) for a, b in zip(w.tolist(), scalar)) < 1e-14
    state = adamw.state[w]
    assert max(abs(a - b) for a, b in zip(state['exp_avg'].tolist(), opt.m)) < 1e-15  # moments never see the decay
