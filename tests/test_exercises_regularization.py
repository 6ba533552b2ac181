"""
Exercises 21 and 22 (checks_regularization.py), decoupled weight decay and inverted dropout: each
usual slip fails with the hint that names it, the check's AdamW and L2 slip are PyTorch's AdamW
and Adam, and the exact mask keeps 1 - p of each column.
"""

import random

import pytest

from microgpt.lab.exercises import catalog, checker
from microgpt.lab.exercises.checks_model import float_adam
from microgpt.lab.exercises.checks_regularization import ADAMW_SLIPS, DROPOUT_HINTS, exactly_kept
from helpers import make_workspace, replaced

SHRINK = "        p.data *= 1 - lr * weight_decay  # decoupled: the weight shrinks, Adam's m and v never see it\n"
ADAM = "    adam_step(params, m, v, t, lr, beta1, beta2, eps)"
FACTOR, RETURN = 'factor = kept / (1.0 - p)', 'return x * factor, dy * factor'

# (exercise, the slip's name in the check, the wrong file, the case it fails on, words of its hint)
NAMED = [
    (21, 'L2', replaced(21, 'p.data *= 1 - lr * weight_decay', 'p.grad += weight_decay * p.data'), "no gradient", None),
    (21, 'after', replaced(21, f"    for p in params:\n{SHRINK}{ADAM}", f"{ADAM}\n    for p in params:\n{SHRINK}"),
     "one weight, lr 0.1", None),
    (21, 'no lr', replaced(21, 'p.data *= 1 - lr * weight_decay', 'p.data *= 1 - weight_decay'), "no gradient", None),
    (21, 'constant', replaced(21, 'p.data *= 1 - lr * weight_decay', 'p.data -= lr * weight_decay'), "no gradient", None),
    (21, 'no decay', replaced(21, SHRINK, '        pass\n'), "no gradient", None),
    (21, 'defaults', replaced(21, ADAM, '    adam_step(params, m, v, t, lr)'), "betas (0.9, 0.999)",
     "pass them on to your adam_step"),
    (22, 'plain dropout', replaced(22, FACTOR, 'factor = kept * 1.0'), "p = 0.1", None),
    (22, 'times 1 - p', replaced(22, FACTOR, 'factor = kept * (1.0 - p)'), "p = 0.1", None),
    (22, 'divided by p', replaced(22, FACTOR, 'factor = kept / p'), "p = 0.1", None),
    (22, 'the dropped kept', replaced(22, FACTOR, 'factor = ~kept / (1.0 - p)'), "p = 0.1", None),
    (22, 'backward not masked', replaced(22, RETURN, 'return x * factor, dy / (1.0 - p)'), "p = 0.1", None),
    (22, 'backward unscaled', replaced(22, RETURN, 'return x * factor, dy * kept'), "p = 0.1", None),
    (22, 'backward is y', replaced(22, RETURN, 'return x * factor, x * factor'), "p = 0.1", None),
]


@pytest.fixture(scope='module')
def named_results(tmp_path_factory):
    """Each named slip in a workspace of its own, all checked by one subprocess."""
    jobs, names = [], {}
    for n, slip, text, _, _ in NAMED:
        ws = make_workspace(tmp_path_factory.mktemp(f'{n}-{slip.replace(" ", "-")}'), files={n: text})
        jobs.append((ws, [n], True))
        names[ws] = slip
    return {names[w]: r for (w, _), r in checker.check(jobs).items()}


@pytest.mark.parametrize('n, slip, text, case, words', NAMED, ids=[f'{n}-{s}' for n, s, *_ in NAMED])
def test_each_named_slip_fails_with_its_own_hint(named_results, n, slip, text, case, words):
    result = named_results[slip]
    assert result['status'] == 'fail', result
    assert case in result['line'].split(':')[0], result['line']
    hint = words or (ADAMW_SLIPS if n == 21 else DROPOUT_HINTS)[slip]
    assert hint in result['hint'], (slip, result['line'], result['hint'])


@pytest.mark.torch
def test_the_checks_adamw_and_l2_slip_are_pytorchs_adamw_and_adam():
    """torch.optim.AdamW decays decoupled; torch.optim.Adam's weight_decay adds wd * w to the
    gradient: the independent oracles of what the check calls right and what it calls L2."""
    import torch
    rng = random.Random(5)
    data = [rng.uniform(-1, 1) for _ in range(4)]
    grads = [[rng.uniform(-1, 1) for _ in range(4)] for _ in range(5)]
    lr, wd = 0.05, 0.3
    for slip, make in ((None, torch.optim.AdamW), ('L2', torch.optim.Adam)):
        w = torch.tensor(data, dtype=torch.float64, requires_grad=True)
        opt = make([w], lr=lr, betas=(0.85, 0.99), eps=1e-8, weight_decay=wd)
        ours = float_adam(data, grads, [lr] * 5, 0.85, 0.99, 1e-8, wd, slip)
        for step, g in enumerate(grads):
            w.grad = torch.tensor(g, dtype=torch.float64)
            opt.step()
            assert max(abs(a - b) for a, b in zip(w.tolist(), ours[step][0])) < 1e-13, (slip, step)
    decoupled = float_adam(data, grads, [lr] * 5, 0.85, 0.99, 1e-8, wd)[-1][0]
    l2 = float_adam(data, grads, [lr] * 5, 0.85, 0.99, 1e-8, wd, 'L2')[-1][0]
    assert max(abs(a - b) for a, b in zip(decoupled, l2)) > 1e-3  # negative control: L2 is not AdamW


def test_decay_after_the_move_differs_by_lr_wd_s():
    """The stub's claim: (w - s)(1 - lr wd) = w (1 - lr wd) - s + lr wd s, on a first step."""
    w, g, lr, wd = 0.8, 0.3, 0.1, 0.5
    right = float_adam([w], [[g]], [lr], 0.85, 0.99, 1e-8, wd)[0][0][0]
    after = float_adam([w], [[g]], [lr], 0.85, 0.99, 1e-8, wd, 'after')[0][0][0]
    s = lr * g / (abs(g) + 1e-8)  # a fresh Adam's first step
    assert after - right == pytest.approx(lr * wd * s, rel=1e-9) and after != right


@pytest.mark.parametrize('p, rows', [(0.25, 8), (0.5, 4), (0.1, 10)])
def test_the_exact_mask_keeps_one_minus_p_of_every_column(p, rows):
    kept = exactly_kept(random.Random(0), (rows, 3, 2), p, rows)
    assert kept.shape == (rows, 3, 2) and kept.dtype == bool
    assert (kept.sum(axis=0) == round((1 - p) * rows)).all()
    assert len({kept[:, i, j].tobytes() for i in range(3) for j in range(2)}) > 1  # not one column repeated


def test_both_exercises_are_off_trains_path():
    """train.py's defaults have no decay and no dropout: `train` needs 1 to 16, not these."""
    assert catalog.get(21).uses == (15,) and 21 not in catalog.TRAIN_USES and 22 not in catalog.TRAIN_USES
    assert not catalog.get(21).needs_numpy and catalog.get(22).needs_numpy
