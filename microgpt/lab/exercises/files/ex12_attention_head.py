"""
Exercise 12: one head of causal attention for one query, over the KV cache (the real one: the
head loop in step 2 of microgpt/model.py's gpt(); in numpy, src/inference/attention.py's
attention_head).

The query of position i looks at the keys and values of positions 0..i, which earlier calls
of gpt() left in the KV cache: the future has not been computed yet, so no mask is needed.
One worked by hand (docs/reading-guide.md, section 3): with q3 = [0.9, 0.8, 0.2, 0.1] and three
keys the weights are [0.309, 0.297, 0.395] and out3 = [0.309, 0.356, 0.444, 0.189].

What a Value offers (microgpt/engine.py): .data (its number) and .grad; the arithmetic
a + b, a - b, a * b, a / b, -a (with a number on either side, 2 * a or a + 1.0 too); a ** n for
a constant n; and .exp(), .log(), .relu(). Each builds a new Value that remembers its inputs.

Reading: docs/reading-guide.md, section 1, file 6, and section 2's attention table. See it live:
`python -m microgpt.lab attention anna`, the web lab's By hand and In phases pages.
Then run `python -m microgpt.lab exercises check 12`.
"""

from ex08_dot import dot
from ex10_softmax import softmax


def attention_head(q, keys, values):
    """One head, one query: (out, weights).

    q: the query, head_dim Values. keys, values: one vector of head_dim Values per position
    the query may see (positions 0..i, the cache).
    The math: score_j = (q . k_j) / sqrt(head_dim) for each visible key j; the weights are the
    softmax of the scores (positive, summing to 1 over the visible positions);
    out[d] = sum_j weight_j * values[j][d], for each dimension d.
    Returns (out, weights): head_dim Values, and one weight (a Value) per visible position.
    Why sqrt(head_dim): q . k adds head_dim products, so its spread grows like sqrt(head_dim);
    dividing keeps the scores at the same scale for any head size, and the softmax unsaturated
    (`python -m microgpt.lab scaling`).
    """
    # solution
    scale = len(q) ** -0.5
    scores = [dot(q, k_j) * scale for k_j in keys]
    weights = softmax(scores)
    out = [dot(weights, [v_j[d] for v_j in values]) for d in range(len(q))]
    return out, weights
    # end solution
