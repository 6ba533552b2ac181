"""
The single-head attention step of the numpy port, on hand-made numbers.

The oracle is the Czech lesson "Attention ručně na číslech" (docs/lessons.md describes it):
three tokens, one head of head_dim 4, every number worked out on paper. The lesson prints
three decimals, so its numbers are compared with LESSON_TOL. Then the loop version
(attention_head) is checked against the masked, vectorised one on random inputs, and a few
properties that hold for any input are checked with hypothesis.
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from microgpt.inference import attention_head
from microgpt.inference.attention import causal_mask, masked_attention

# The lesson rounds to three decimals, and once truncates (the weight 0.394521 is printed 0.394).
LESSON_TOL = 1e-3
EXACT_TOL = 1e-12  # two computations of the same sum, in a different order

# The lesson's numbers: the query of token 3 ("venku") and token 1 ("kočka"), keys and values.
Q1 = [1.0, 0.0, 0.5, 0.0]
Q3 = [0.9, 0.8, 0.2, 0.1]
KEYS = [[0.9, 0.1, 0.4, 0.0],   # k1
        [0.0, 1.0, 0.0, 0.9],   # k2
        [0.8, 0.9, 0.1, 0.0]]   # k3
VALUES = [[0.2, 0.8, 0.0, 0.1],  # v1
          [0.7, 0.1, 0.3, 0.0],  # v2
          [0.1, 0.2, 0.9, 0.4]]  # v3


def test_lesson_scores_are_dot_products():
    _, logits, _ = attention_head(Q3, KEYS, VALUES, scale=False)
    assert logits == pytest.approx([0.97, 0.89, 1.46], abs=EXACT_TOL)
    _, logits, _ = attention_head(Q3, KEYS, VALUES)
    assert logits == pytest.approx([0.485, 0.445, 0.730], abs=EXACT_TOL)  # divided by sqrt(4) = 2


def test_lesson_weights_and_output_of_token_3():
    out, _, weights = attention_head(Q3, KEYS, VALUES)
    assert weights == pytest.approx([0.309, 0.297, 0.394], abs=LESSON_TOL)
    assert weights.sum() == pytest.approx(1.0, abs=EXACT_TOL)
    assert out == pytest.approx([0.309, 0.356, 0.444, 0.189], abs=LESSON_TOL)


def test_lesson_ten_times_larger_scores_saturate_the_softmax():
    # scaling q by 10 scales every score by 10: [4.85, 4.45, 7.30]
    q3_times_10 = np.array(Q3) * 10  # (head_dim,)
    _, logits, weights = attention_head(q3_times_10, KEYS, VALUES)
    assert logits == pytest.approx([4.85, 4.45, 7.30], abs=EXACT_TOL)
    assert weights == pytest.approx([0.075, 0.051, 0.874], abs=LESSON_TOL)


def test_lesson_causal_mask_gives_token_1_all_its_weight():
    # the lesson's step 5, done the vectorised way: -inf for the future, then softmax
    q = np.array([Q1, [0.0] * 4, Q3])[None]  # (1, 3, 4): one head, three positions
    k = np.array(KEYS)[None]                 # (1, 3, 4)
    v = np.array(VALUES)[None]               # (1, 3, 4)
    out, weights = masked_attention(q, k, v)
    assert weights[0, 0].tolist() == [1.0, 0.0, 0.0]
    assert out[0, 0].tolist() == VALUES[0]
    assert weights[0, 2] == pytest.approx([0.309, 0.297, 0.394], abs=LESSON_TOL)


def test_lesson_mask_example_score_of_token_1_is_0_55():
    # token 1 sees only itself: one score, softmax of one number is 1, the average is v1.
    # The lesson's step 5 writes that score as 0.485, which is q3.k1 / 2; with its own
    # q1 the score is q1.k1 / 2 = (0.9 + 0.5 * 0.4) / 2 = 0.55. The weight is 1 either way.
    out, logits, weights = attention_head(Q1, KEYS[:1], VALUES[:1])
    assert logits.tolist() == pytest.approx([0.55], abs=EXACT_TOL)
    assert abs(logits[0] - 0.485) > 0.05 and weights.tolist() == [1.0]
    assert out.tolist() == VALUES[0]
    # the negative control: shown every key, its output would no longer be its own value
    assert np.abs(out - attention_head(Q1, KEYS, VALUES)[0]).max() > 0.1


def test_loop_and_masked_attention_agree_on_random_inputs():
    rng = np.random.default_rng(0)
    n_head, T, head_dim = 3, 9, 5
    q = rng.normal(size=(n_head, T, head_dim))  # (n_head, T, head_dim)
    k = rng.normal(size=(n_head, T, head_dim))  # (n_head, T, head_dim)
    v = rng.normal(size=(n_head, T, head_dim))  # (n_head, T, head_dim)
    out, weights = masked_attention(q, k, v)
    for h in range(n_head):
        for i in range(T):
            out_i, _, weights_i = attention_head(q[h, i], k[h, :i + 1], v[h, :i + 1])
            assert np.abs(out_i - out[h, i]).max() < EXACT_TOL
            assert np.abs(weights_i - weights[h, i, :i + 1]).max() < EXACT_TOL
    assert np.all(weights[:, causal_mask(T)] == 0.0)  # the future gets exactly nothing


vectors = st.lists(st.floats(-5, 5, allow_nan=False), min_size=3, max_size=3)


@settings(max_examples=50, deadline=None)
@given(q=vectors, keys=st.lists(vectors, min_size=1, max_size=6), data=st.data())
def test_weights_are_a_distribution_and_out_a_convex_mix(q, keys, data):
    values = data.draw(st.lists(vectors, min_size=len(keys), max_size=len(keys)))
    out, _, weights = attention_head(q, keys, values)
    assert np.all(weights >= 0) and weights.sum() == pytest.approx(1.0, abs=EXACT_TOL)
    # a weighted average stays between the smallest and the largest value, per dimension
    values = np.array(values)  # (t, head_dim)
    assert np.all(out >= values.min(axis=0) - EXACT_TOL)
    assert np.all(out <= values.max(axis=0) + EXACT_TOL)


@pytest.mark.parametrize('q, keys, values', [
    ([1.0, 2.0], [[1.0, 2.0, 3.0]], [[1.0, 2.0, 3.0]]),  # q shorter than the keys
    ([1.0, 2.0], [[1.0, 2.0]], [[1.0, 2.0], [3.0, 4.0]]),  # one key, two values
    ([1.0, 2.0], np.empty((0, 2)), np.empty((0, 2))),  # nothing visible
])
def test_attention_head_rejects_mismatched_shapes(q, keys, values):
    with pytest.raises(ValueError):
        attention_head(q, keys, values)
