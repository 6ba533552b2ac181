"""
The scaling numbers (microgpt/lab/scaling.py) and the row statistics (rowstats.py) against
closed forms and against the lessons' own numbers (docs/lessons.md lists them), with tolerances
that say where they come from: sampling error for what is sampled, the lessons' rounding for
what is printed rounded.
"""

import math

import numpy as np
import pytest

from microgpt.lab import scaling
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
    (row,) = scaling.variance_table(SAMPLES, np.random.default_rng(0), ds=(d,))
    _, var, se, sd = row
    assert abs(se - d * math.sqrt((2 + 6 / d) / SAMPLES)) < EXACT_TOL
    assert abs(var - d) < N_SE * se
    assert abs(sd - math.sqrt(var)) < EXACT_TOL
    # the lesson's own measurements are consistent with d too (its sample size is unknown,
    # so only the 1% that its d = 1024 row shows: 1017.8 / 1024 = 0.994)
    lesson_var, lesson_sd = scaling.LESSON_VARIANCE[d]
    assert abs(lesson_var / d - 1) < 0.01
    assert abs(lesson_sd - math.sqrt(lesson_var)) < 0.005  # printed to 2-3 digits


def test_standard_error_formula_matches_the_spread_of_measurements():
    # the SE used above, checked empirically: 200 measurements of Var at d = 4, 500 samples each
    rng = np.random.default_rng(1)
    measured = [scaling.dot_products(4, 500, rng).var(ddof=1) for _ in range(200)]
    assert abs(np.std(measured) / scaling.variance_standard_error(4, 500) - 1) < 0.2


# ---------------------------------------------------------------------------- 2), 3) softmax
def test_saturation_example():
    p = softmax(np.array(scaling.LESSON_SATURATION[0]))
    assert [round(x, 4) for x in p] == [0.9995, 0.0003, 0.0001]
    # the lesson prints 0.9997 for the first: a rounding slip of 2e-4, which the command reports
    assert np.abs(p - scaling.LESSON_SATURATION[1]).max() < 3e-4


def test_czech_worked_example():
    from microgpt import inference
    out, logits, weights = inference.attention_head(scaling.CZECH_Q3, scaling.CZECH_KEYS,
                                                    scaling.CZECH_VALUES)
    lesson_rounding = 1.5e-3  # the lesson rounds to 3 decimals and sums rounded products
    assert np.abs(logits * 2 - scaling.CZECH_SCORES).max() < EXACT_TOL + 1e-15
    assert np.abs(weights - scaling.CZECH_WEIGHTS).max() < lesson_rounding
    assert np.abs(out - scaling.CZECH_OUT).max() < lesson_rounding
    assert np.abs(softmax(logits * 10) - scaling.CZECH_WEIGHTS_X10).max() < lesson_rounding


def test_the_lessons_0_394_is_truncated_not_rounded(capsys):
    from microgpt import inference
    _, _, weights = inference.attention_head(scaling.CZECH_Q3, scaling.CZECH_KEYS, scaling.CZECH_VALUES)
    assert abs(weights[2] - 0.394521) < 5e-7
    assert round(weights[2], 3) == 0.395                       # the exercise answer's 0.395
    assert math.floor(weights[2] * 1000) / 1000 == scaling.CZECH_WEIGHTS[2] == 0.394  # step 4's
    assert main(['scaling', '--samples', '100', '--draws', '50']) == 0
    out = capsys.readouterr().out
    assert 'the weight is 0.394521, which rounds to 0.395' in out and 'either way' not in out


# ---------------------------------------------------------------------------- 4) one row
# Reference medians for d = 64, eight unit-variance keys, from 400,000 draws (seed 7), and the
# standard deviation of a 2000-draw median, from 200 repeats: the band is 5 of those.
DRAWS = 2000
REFERENCE_MEDIANS = {  # label: {name: (median, sd of a 2000-draw median)}
    'without scaling': {'spread': (7.051, 0.056), 'entropy': (0.245, 0.020), 'max_weight': (0.964, 0.0037)},
    'with scaling': {'spread': (0.881, 0.007), 'entropy': (2.551, 0.0065), 'max_weight': (0.334, 0.003)},
}


def test_spread_ratio_is_exactly_sqrt_d():
    study = scaling.row_study(DRAWS, seed=42)
    assert abs(study['spread_ratio'] - 8) < EXACT_TOL
    ratios = study['all']['without scaling']['spread'] / study['all']['with scaling']['spread']
    assert np.abs(ratios - 8).max() < EXACT_TOL
    # the lesson's draw has the same ratio, to its printed digits
    assert abs(25.1 / 3.14 - 8) < 0.05


def test_the_lessons_row_fits_max_minus_min():
    # the lesson never defines its spread; with spread = max - min one row of eight scores
    # reproduces all six of its numbers to the digits it prints
    fit = np.array(scaling.LESSON_ROW_FIT)                      # (8,) the scaled scores
    for label, row in (('with scaling', fit), ('without scaling', fit * 8)):
        spread, entropy, max_weight = scaling.LESSON_ROW[label]
        s = row_statistics(row)
        digits = 2 if spread < 10 else 1
        assert round(row.max() - row.min(), digits) == spread, label
        assert round(s['entropy'], 3) == entropy, label
        assert round(s['max_weight'], 3) == max_weight, label
    # negative control: read as our standard deviation, the same row is nowhere near 3.14
    assert abs(row_statistics(fit)['spread'] - 1.03) < 0.005


def test_the_lessons_spread_is_an_ordinary_max_minus_min_but_no_standard_deviation():
    study = scaling.row_study(DRAWS, seed=42)
    below = study['below_lesson']['with scaling']
    assert below['spread'] == 1.0                              # as a std: above every draw
    assert 0.1 < below['entropy'] < 0.9 and 0.1 < below['max_weight'] < 0.9  # ordinary values
    ranges = study['max_minus_min']['with scaling']
    assert 0.25 < ranges['below_lesson'] < 0.9                   # as max - min: ordinary too
    assert ranges['quartiles'][0] < ranges['median'] < ranges['quartiles'][1]
    rows = scaling.random_rows(DRAWS, np.random.default_rng(43)) / 8  # (draws, 8): the same draws
    assert abs(np.median(rows.max(axis=-1) - rows.min(axis=-1)) - ranges['median']) < EXACT_TOL


def test_the_widgets_snapshot_is_not_one_row_of_six_keys():
    # the lesson's widget shows entropy 1.986 bits with max weight 0.8266 for six tokens. With
    # max weight m, the most entropy n keys can have puts the rest evenly on the other n - 1
    # keys; even that stays far below 1.986, so docs/lessons.md says the lab cannot reproduce it
    m = 0.8266
    for n in (6, 8):
        best = entropy_bits([m] + [(1 - m) / (n - 1)] * (n - 1))
        assert best < 1.2 < 1.986
        other = entropy_bits([m, 1 - m - 0.01 * (n - 2)] + [0.01] * (n - 2))  # an uneven rest
        assert other < best                                     # the even rest is the most


def test_medians_within_their_band():
    study = scaling.row_study(DRAWS, seed=42)
    for label, names in REFERENCE_MEDIANS.items():
        for name, (median, sd) in names.items():
            assert abs(study['median'][label][name] - median) < 5 * sd, (label, name)


def test_a_bigger_head_saturates_only_without_scaling():
    # the lesson's exercise: d = 256 without scaling saturates; with scaling nothing changes
    small, big = scaling.row_study(DRAWS, seed=5, d=64), scaling.row_study(DRAWS, seed=5, d=256)
    assert big['median']['without scaling']['max_weight'] > small['median']['without scaling']['max_weight']
    assert big['median']['without scaling']['gradient_scale'] < 0.01
    scaled = REFERENCE_MEDIANS['with scaling']
    for name in scaled:  # the d = 64 band, doubled: the scaled rows still shift a little with d
        assert abs(big['median']['with scaling'][name] - scaled[name][0]) < 10 * scaled[name][1]
    assert abs(big['spread_ratio'] - 16) < EXACT_TOL


def test_scaling_never_sharpens_a_row():
    # the entropy of softmax(beta * z) falls as beta grows, so every unscaled row is sharper
    rows = scaling.random_rows(500, np.random.default_rng(3))
    unscaled, scaled = batch_statistics(rows), batch_statistics(rows / 8)
    assert (unscaled['entropy'] <= scaled['entropy'] + EXACT_TOL).all()
    assert (unscaled['max_weight'] >= scaled['max_weight'] - EXACT_TOL).all()


# ---------------------------------------------------------------------------- 5), 6) arithmetic
def test_cost_ratio_rounds_to_the_lessons_numbers():
    assert round(scaling.cost_ratio(128, 768), 2) == 0.08
    assert round(scaling.cost_ratio(1024, 768), 2) == 0.67
    assert round(scaling.cost_ratio(8192, 768), 1) == 5.3
    assert scaling.cost_ratio(2 * 768, 768) == 1  # the crossover at n = 2 D


def test_score_matrix_size():
    assert scaling.score_matrix_size(32, 1024) == (33_554_432, 64 * 2 ** 20)
    assert scaling.score_matrix_size(32, 8192)[0] == 2_147_483_648  # "2 billion"


def test_command_prints_every_section(capsys):
    assert main(['scaling', '--samples', '2000', '--draws', '300']) == 0
    out = capsys.readouterr().out
    for heading in ('1) Var(q.k) = d', '2) Saturation', '3) The hand-worked', '4) One attention row',
                    '5) Cost', '6) The score matrix'):
        assert heading in out
    assert 'lesson (one draw)' in out and '25.1' in out and '0.994' in out  # the lesson's draw, named
    assert '33,554,432' in out and '64 MiB' in out
    assert '49,152 scores of 64 multiply-adds each = 3,145,728' in out  # the lesson's einsum widget
