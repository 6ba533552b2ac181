"""
Exercise 26 (a modern rung): RoPE, one head's q or k turned by its position (the real one:
microgpt/model.py, rotate, which gpt() calls on every head when config.rope is on).

microgpt tells attention where a token sits by adding wpe[pos] to its embedding. RoPE adds
nothing: it turns each head's query and key by an angle that grows with the position. Turning
q_i and k_j leaves their dot product depending on the positions only through i - j, so a score
sees how far back a key lies, not where the name began. The head's numbers are turned two at a
time, as points on a plane, each pair at its own speed: the first pair a radian per position,
the last ones barely (they tell far positions apart).

What a Value offers (microgpt/engine.py): .data, .grad, + - * / with a number on either side,
** a constant, .exp(), .log(), .relu(). cos and sin of a plain number are math.cos and math.sin.

Reading: docs/modern.md, RoPE. See it live: `python -m microgpt.lab attention anna` (what q and
k score, before any turn). Then run `python -m microgpt.lab exercises check 26`.
"""

import math


def rotate(x, pos_id):
    """x (head_dim Values, head_dim even) turned by RoPE at position pos_id: head_dim Values.

    Pair m (m = 0 .. head_dim / 2 - 1) is the two neighbours a = x[2m] and b = x[2m + 1], a point
    (a, b) on a plane. It turns counterclockwise by theta = pos_id * f_m radians, with the
    frequency f_m = 10000 ^ (-2m / head_dim): the new pair is the point (a, b) after the turn,
    in the same two places of the output. At position 0 nothing turns. A turn keeps the pair's
    length: cos and sin of theta are plain numbers, and each output is a sum of a and b times them.
    """
    # solution
    head_dim = len(x)
    out = []
    for m in range(head_dim // 2):
        theta = pos_id * 10000.0 ** (-2 * m / head_dim)
        c, s = math.cos(theta), math.sin(theta)
        a, b = x[2 * m], x[2 * m + 1]
        out += [a * c - b * s, a * s + b * c]
    return out
    # end solution
