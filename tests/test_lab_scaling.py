"""
The scaling numbers (microgpt/lab/scaling.py) and row statistics (rowstats.py) against closed
forms, sampling (within its standard error) and the lesson's three-token example.
"""

import math

import numpy as np
import pytest

from microgpt.lab import example, scaling
from microgpt.lab.__main__ import main
from microgpt.lab.rowstats import batch_statistics, entropy_bits, gradient_scale, row_statistics, softmax

EXACT_TOL = 1e-12
SAMPLES = 20_000     # per d: standard error of the variance about 1% of d
N_SE = 5             # a correct sampler misses by more than 5 standard errors with p < 1e-6
FD_STEP = 1e-6
JACOBIAN_TOL = 1e-8  # central differences of the softmax


# ---------------------------------------------------------------------------- row statistics
@pytest.mark.parametrize('n', [1, 2, 3, 8, 17])
def test_uniform_row_has_entropy_log2_n(n):
    s = row_statistics(np.full(n, 0.7))  # equal scores: a uniform row
    assert abs(s['entropy'] - math.log2(n)) < EXACT_TOL
    assert abs(s['max_entropy'] - math.log2(n)) < EXACT_TOL
    assert abs(s['max_weight'] - 1 / n) < EXACT_TOL
    assert abs(s['gradient_scale'] - (1 / n if n > 1 else 0.0)) < EXACT_TOL
    assert s['spread'] < EXACT_TOL


def test_entropy_in_bits_by_hand():
    assert abs(entropy_bits([0.5, 0.25, 0.25]) - 1.5) < EXACT_TOL
    assert entropy_bits([1.0, 0.0, 0.0]) == 0  # 0 log 0 counts as 0


def test_gradient_scale_is_the_top_eigenvalue_of_the_softmax_jacobian():
    z = np.array([0.3, -1.2, 2.0, 0.5])
    # oracle: the Jacobian by central differences, no formula shared with rowstats
    J = np.empty((4, 4))
    for j in range(4):
        e = np.zeros(4)
        e[j] = FD_STEP
        J[:, j] = (softmax(z + e) - softmax(z - e)) / (2 * FD_STEP)
    assert abs(gradient_scale(softmax(z)) - np.linalg.eigvalsh((J + J.T) / 2)[-1]) < JACOBIAN_TOL
    assert abs(gradient_scale([0.5, 0.5]) - 0.5) < EXACT_TOL      # the largest it can be
    assert gradient_scale(softmax(np.array([10.0, 2.0, 1.0]))) < 1e-3  # saturated: almost 0


# ---------------------------------------------------------------------------- 1) Var(q.k) = d
@pytest.mark.parametrize('d', [4, 64, 1024])
def test_variance_of_q_dot_k_is_d(d):
    (row,) = scaling.variance_widget(SAMPLES, 0, ds=(d,))
    var, se, sd = row['var'], row['se'], row['sd']
    assert abs(se - d * math.sqrt((2 + 6 / d) / SAMPLES)) < EXACT_TOL
    assert abs(var - d) < N_SE * se
    assert abs(sd - math.sqrt(var)) < EXACT_TOL


def test_standard_error_formula_matches_the_spread_of_measurements():
    # the SE used above, checked empirically: 200 measurements of Var at d = 4, 500 samples each
    rng = np.random.default_rng(1)
    measured = [scaling.dot_products(4, 500, rng).var(ddof=1) for _ in range(200)]
    assert abs(np.std(measured) / scaling.variance_standard_error(4, 500) - 1) < 0.2


# ---------------------------------------------------------------------------- 2), 3) softmax
def test_saturation_example():
    p = softmax(np.array(scaling.SATURATED))
    assert [round(x, 4) for x in p] == [0.9995, 0.0003, 0.0001]
    assert abs(p[0] - math.exp(10) / (math.exp(10) + math.exp(2) + math.exp(1))) < EXACT_TOL


def test_three_tokens_by_hand():
    from microgpt import inference
    out, logits, weights = inference.attention_head(example.Q3, example.KEYS, example.VALUES)
    printed = 1.5e-3  # printed to 3 decimals, sums of rounded products
    assert np.abs(logits * 2 - example.RAW_SCORES).max() < EXACT_TOL + 1e-15
    assert np.abs(softmax(logits * 10) - example.WEIGHTS_X10).max() < printed
    assert abs(weights[2] - 0.394521) < 5e-7
    assert round(weights[2], 3) == example.WEIGHTS[2] == 0.395  # rounded (truncated, it reads 0.394)


# ---------------------------------------------------------------------------- 4) one row
# Reference medians for d = 64, eight unit-variance keys, from 400,000 draws (seed 7), and the
# standard deviation of a 2000-draw median, from 200 repeats: the band is 5 of those.
DRAWS = 2000
REFERENCE_MEDIANS = {  # label: {name: (median, sd of a 2000-draw median)}
    'without scaling': {'spread': (7.051, 0.056), 'entropy': (0.245, 0.020), 'max_weight': (0.964, 0.0037)},
    'with scaling': {'spread': (0.881, 0.007), 'entropy': (2.551, 0.0065), 'max_weight': (0.334, 0.003)},
}


def test_the_spread_ratio_is_sqrt_d_and_the_medians_within_their_band():
    study = scaling.row_study(DRAWS, seed=42)
    assert abs(study['spread_ratio'] - 8) < EXACT_TOL
    spreads = [study[label]['median']['spread'] for label in scaling.LABELS]  # of 2000 draws each
    assert abs(spreads[0] / spreads[1] - 8) < EXACT_TOL
    for label, names in REFERENCE_MEDIANS.items():
        for name, (median, sd) in names.items():
            assert abs(study[label]['median'][name] - median) < 5 * sd, (label, name)


def test_a_bigger_head_saturates_only_without_scaling():
    # d = 256 without scaling saturates; with scaling nothing changes
    small, big = scaling.row_study(DRAWS, seed=5, d=64), scaling.row_study(DRAWS, seed=5, d=256)
    assert big['without scaling']['median']['max_weight'] > small['without scaling']['median']['max_weight']
    assert big['without scaling']['median']['gradient_scale'] < 0.01
    scaled = REFERENCE_MEDIANS['with scaling']
    for name in scaled:  # the d = 64 band, doubled: the scaled rows still shift a little with d
        assert abs(big['with scaling']['median'][name] - scaled[name][0]) < 10 * scaled[name][1]
    assert abs(big['spread_ratio'] - 16) < EXACT_TOL


def test_scaling_never_sharpens_a_row():
    # the entropy of softmax(beta * z) falls as beta grows, so every unscaled row is sharper
    rows = scaling.random_rows(500, np.random.default_rng(3))
    unscaled, scaled = batch_statistics(rows), batch_statistics(rows / 8)
    assert (unscaled['entropy'] <= scaled['entropy'] + EXACT_TOL).all()
    assert (unscaled['max_weight'] >= scaled['max_weight'] - EXACT_TOL).all()


# ---------------------------------------------------------------------------- 5), 6) arithmetic
def test_cost_ratio_at_gpt2_smalls_width():
    assert round(scaling.cost_ratio(128, 768), 2) == 0.08
    assert round(scaling.cost_ratio(1024, 768), 2) == 0.67
    assert round(scaling.cost_ratio(8192, 768), 1) == 5.3
    assert scaling.cost_ratio(2 * 768, 768) == 1  # the crossover at n = 2 D


def test_command_prints_every_section(capsys):
    assert main(['scaling', '--samples', '2000', '--draws', '300']) == 0
    out = capsys.readouterr().out
    for heading in ('1) Var(q.k) = d', '2) Saturation', '3) Three tokens by hand', '4) One attention row',
                    '5) Cost', '6) The score matrix'):
        assert heading in out
    assert '0.9995' in out and '0.394521' in out and 'about 5.9 times' in out
    assert '33,554,432' in out and '64 MiB' in out
    assert '49,152 scores of 64 multiply-adds each = 3,145,728' in out  # the index widget's contraction
    assert 'lesson' not in out.lower() and 'czech' not in out.lower()
