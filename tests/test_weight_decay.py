"""
Decoupled weight decay (train.py --weight-decay, microgpt/optim.py): AdamW's, in all three engines.

Checked against independent oracles: the scalar Adam's update against the numpy engine's array
Adam float for float; against PyTorch's torch.optim.AdamW (float64, microgpt's betas and eps) on
the same gradients; the three engines' losses with decay on against each other; and the decay
against its closed form (a weight with no gradient shrinks by exactly (1 - lr * wd) a step).
A run with decay resumes exactly and keeps its decay; bad values are one line.
"""

import importlib.util
import random

import numpy as np
import pytest

from microgpt.backprop.optim import AdamArrays
from microgpt.engine import Value
from microgpt.optim import Adam
from microgpt.programs import train
from helpers import TINY, assert_one_line_error, log_of, losses, run

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


def test_the_scalar_and_array_adams_decay_alike_float_for_float():
    start, grads, lrs = [0.3, -0.2, 0.05, 1.5, -0.7], gradients(5, 6), [0.01, 0.008, 0.006, 0.004, 0.002, 0.001]
    scalar, _ = scalar_adam_run(start, grads, lrs, WD)
    flat, arrays = np.array(start), AdamArrays(5, weight_decay=WD)
    for g, lr in zip(grads, lrs):
        arrays.step(flat, np.array(g), lr)
    assert flat.tolist() == scalar  # the same operations in the same order: the same floats
    plain, _ = scalar_adam_run(start, grads, lrs, 0.0)
    assert max(abs(a - b) for a, b in zip(plain, scalar)) > 1e-4  # and the decay did something


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


def test_the_three_engines_agree_with_decay_on(tmp_path, names_file, capsys):
    engines = ['scalar', 'numpy'] + (['torch'] if importlib.util.find_spec('torch') else [])
    logs = {}
    for engine in engines:
        out = tmp_path / f'{engine}.json'
        code, _, err = run(train.main, ['--data', names_file, '--out', str(out), '--steps', '20', '--batch-size', '2',
                                        '--weight-decay', '0.5', '--lr', '0.02', '--engine', engine,
                                        '--num-samples', '0', '--eval-every', '0', *TINY], capsys)
        assert code == 0, err
        logs[engine] = [e['loss'] for e in losses(log_of(out))]
    for engine in engines[1:]:
        assert max(abs(a - b) for a, b in zip(logs['scalar'], logs[engine])) < 1e-10, engine
    plain = tmp_path / 'plain.json'
    run(train.main, ['--data', names_file, '--out', str(plain), '--steps', '20', '--batch-size', '2', '--lr', '0.02',
                     '--engine', 'numpy', '--num-samples', '0', '--eval-every', '0', *TINY], capsys)
    assert max(abs(a - b['loss']) for a, b in zip(logs['numpy'], losses(log_of(plain)))) > 1e-6


def test_a_run_with_decay_resumes_with_it_and_refuses_another(tmp_path, names_file, capsys):
    """The decay is one of the settings that decide the losses (ON_RESUME's 'kept'): a resumed
    run takes it unasked, and the same steps taken with it given are the same losses."""
    common = ['--data', names_file, '--num-samples', '0', '--eval-every', '0', *TINY]
    parts, given = tmp_path / 'parts.json', tmp_path / 'given.json'
    for out in (parts, given):
        assert run(train.main, ['--out', str(out), '--steps', '5', '--weight-decay', str(WD), *common], capsys)[0] == 0
    code, out, _ = run(train.main, ['--out', str(parts), '--resume', '--steps', '12'], capsys)  # its decay, unasked
    assert code == 0 and f'weight_decay={WD:g}' in out
    assert run(train.main, ['--out', str(given), '--resume', '--steps', '12', '--weight-decay', str(WD)], capsys)[0] == 0
    assert losses(log_of(parts)) == losses(log_of(given))
    code, _, err = run(train.main, ['--out', str(parts), '--resume', '--steps', '14', '--weight-decay', '0'], capsys)
    assert_one_line_error(code, err, '--weight-decay 0.0 differs from the run being resumed (0.1)')


@pytest.mark.parametrize('value, fragment', [
    ('-1', '-1 is out of range: give a number from 0 to 10'),
    ('nan', 'nan is out of range'),
    ('11', '11 is out of range'),
    ('lots', "lots"),
])
def test_a_bad_weight_decay_is_one_line(tmp_path, names_file, capsys, value, fragment):
    code, _, err = run(train.main, ['--data', names_file, '--out', str(tmp_path / 'm.json'), '--weight-decay', value],
                       capsys)
    assert code == 2
    assert_one_line_error(code, err, fragment)


def test_the_originals_run_has_no_decay(tmp_path, names_file, capsys):
    code, _, err = run(train.main, ['--reproduce-original', '--data', names_file, '--out', str(tmp_path / 'o.json'),
                                    '--weight-decay', '0.1'], capsys)
    assert_one_line_error(code, err, "--weight-decay 0.1 would change the original's run")
