"""
The checks of exercises 26 to 28, two of the modern rungs: RoPE's turn on Values, its backward
on arrays, and grouped-query attention's shared keys.

The project's answers: microgpt/model.py's rotate and gpt()'s head loop, src/backprop/layers.py's
rope_backward. The oracles: each pair as a complex number times e^(i theta), central differences
of that forward, and the numpy port's own heads in a small GPT with n_kv_head set. numpy is
imported inside the checks that need it: exercise 26 is checked without it.
"""

import cmath
import math
import random

from ... import ops
from ...model import GPTConfig, ROPE_BASE, init_weights, rotate
from .checks_model import check_function, float_attention, read_values, vectors
from .harness import fmt


def complex_rotate(x, pos, sign=1, slip=None):
    """RoPE in floats, each pair a complex number a + ib multiplied by e^(i sign theta), theta =
    pos * ROPE_BASE^(-2m / head_dim); with one of ROTATE_SLIPS on request."""
    D = len(x)
    out = list(x)
    for m in range(D // 2):
        i, j = (m, m + D // 2) if slip == 'halves' else (2 * m, 2 * m + 1)
        rate = math.exp(-(m if slip == 'rate' else 2 * m) / D * math.log(ROPE_BASE))
        turned = complex(x[i], x[j]) * cmath.exp(1j * sign * (1 if slip == 'no position' else pos) * rate)
        out[i], out[j] = turned.real, turned.imag
    return out


ROTATE_SLIPS = {
    'sign': "Turned the wrong way: the first of a pair becomes a cos - b sin, the second a sin + b cos.",
    'halves': "A pair is two neighbours, x[2m] and x[2m + 1], not x[m] and x[m + head_dim / 2] (another "
              "convention, GPT-NeoX's: the weights of one do not work in the other).",
    'no position': "The angle grows with the position: pos_id times the pair's frequency.",
    'rate': "Pair m's frequency is 10000 ** (-2m / head_dim): the exponent counts dimensions, two per pair.",
}


# ---------------------------------------------------------------------------- 26. rotate
def check_rotate(t, fn):
    rng = random.Random(126)
    cases = [("position 0 turns nothing", [0.5, -1.0, 2.0, 0.25], 0),
             ("head_dim 2, position 1, one radian", [1.0, 0.0], 1),
             ("head_dim 4, position 3", [1.0, 2.0, -0.5, 0.5], 3)]
    for i in range(5):
        cases.append((f"random {i + 1}", vectors(rng, rng.choice([2, 4, 8])), rng.randrange(16)))
    for k, (label, x, pos) in enumerate(cases):
        t.case(label, f"x = {fmt(x)}, pos_id = {pos}", k < 3)
        neox = complex_rotate(x, pos, slip='halves')  # pairs (m, m + head_dim / 2), each put back in place
        in_turn = [v for m in range(len(x) // 2) for v in neox[m::len(x) // 2]]  # or appended pair by pair
        oracle = (("x itself, exactly", x, 0.0) if pos == 0 else
                  ("each pair as a + ib, times e^(i theta)", complex_rotate(x, pos)))
        check_function(t, lambda x_: fn(x_, pos), [x], ['x'], read_values(len(x), "one per input"),
                       lambda x_: rotate(x_, pos), seed=k, out_oracle=oracle,
                       out_mistakes=[(s, complex_rotate(x, pos, -1 if s == 'sign' else 1, s), h)
                                     for s, h in ROTATE_SLIPS.items()] + [('halves', in_turn, ROTATE_SLIPS['halves'])],
                       out_hint="Each pair (x[2m], x[2m + 1]) turned by the angle pos_id * frequency m.",
                       grad_hint="Build the outputs from the Values a and b times the plain numbers cos and sin.")


# ---------------------------------------------------------------------------- 27. rope_backward
def check_rope_backward(t, fn):
    import numpy as np
    from microgpt.backprop.layers import rope_angles, rope_backward
    from .checks_numpy import array, fd_grad, read_arrays, show, unchanged
    rng = random.Random(127)
    cases = [("one row at position 0: nothing turns, so dx = dy", 1, 4, 0), ("head_dim 2, positions 0 to 2", 3, 2, 0),
             ("head_dim 4, positions 5 to 7, after a cache of 5", 3, 4, 5)]
    cases += [(f"random {i + 1}", rng.randint(1, 5), rng.choice([2, 4, 8]), rng.randrange(10)) for i in range(5)]
    for k, (label, T, D, start) in enumerate(cases):
        pos, x, dy = np.arange(start, start + T), array(rng, T, D), array(rng, T, D)
        t.case(label, show(dy=dy) + f"; pos = {fmt(pos.tolist())}", k < 3)
        inputs = (dy.copy(), pos.copy())
        dx = read_arrays(t, t.call(fn, *inputs), [(T, D)], ['dx'], hint="dx has the shape of dy.")[0]
        unchanged(t, (dy, pos), inputs, ['dy', 'pos'])

        def turned(a, sign=1, slip=None):  # every row of a turned by its own position, in complex numbers
            return np.array([complex_rotate(row, p, sign, slip) for row, p in zip(a.tolist(), pos.tolist())])
        slips = [('the same turn', turned(dy), "The backward turns dy the OTHER way, by -theta: the "
                  "transpose of a turn is the turn back."),
                 ('halves', turned(dy, -1, 'halves'), ROTATE_SLIPS['halves']),
                 ('no position', turned(dy, -1, 'no position'), ROTATE_SLIPS['no position'])]
        t.compare('dx', dx, rope_backward(dy, *rope_angles(pos, D, np.float64)), mistakes=slips,
                  oracle=('central differences of L = sum(dy * rope(x)), in x', fd_grad(
                      lambda a: float((dy * turned(a)).sum()), x)),
                  hint="Pair m of row r: dx = M^T dy, M the 2 x 2 turn by pos[r] * frequency m.")


# ---------------------------------------------------------------------------- 28. grouped_attention
def float_grouped(q, keys, values, n_head, n_kv_head, slip=None):
    """Grouped-query attention in floats: query head h reads kv head h // (n_head // n_kv_head);
    slip: '%' or '// n_kv_head' for the usual wrong kv head, None when it does not exist."""
    D = len(q) // n_head
    out = []
    for h in range(n_head):
        kv = {'%': h % n_kv_head, '// n_kv_head': h // n_kv_head}.get(slip, h // (n_head // n_kv_head))
        if kv >= n_kv_head:
            return None
        out += float_attention(q[h * D:(h + 1) * D], [k[kv * D:(kv + 1) * D] for k in keys],
                               [v[kv * D:(kv + 1) * D] for v in values])[0]
    return out


def project_grouped(q, keys, values, n_head, n_kv_head):
    """gpt()'s head loop (microgpt/model.py, step 2), with the cache's keys and values as given."""
    D, group, out = len(q) // n_head, n_head // n_kv_head, []
    for h in range(n_head):
        hs, ks = h * D, h // group * D
        weights = ops.softmax([ops.dot(q[hs:hs + D], k[ks:ks + D]) * D ** -0.5 for k in keys])
        out += [ops.dot(weights, [v[ks + d] for v in values]) for d in range(D)]
    return out


GROUPED_SLIPS = {
    '%': "Query heads share in consecutive groups: heads 0 .. group - 1 read kv head 0, the next group kv "
         "head 1 (h // group); h % n_kv_head deals them out in turn instead.",
    '// n_kv_head': "The group's size is n_head // n_kv_head: divide h by it, not by n_kv_head.",
}


def port_case(config, tokens, seed):
    """q, the cached keys and values of layer 0 at the last position, and its heads' outputs, from
    the numpy port's captures of a small GPT with n_kv_head set (and RoPE on)."""
    from microgpt.inference import NumpyGPT
    cap = NumpyGPT(config, init_weights(config, seed)).forward(tokens, capture=('q', 'k', 'v', 'head_output'))[1]
    i = len(tokens) - 1
    q, k, v, out = (cap[name][0].transpose(1, 0, 2).reshape(len(tokens), -1) for name in ('q', 'k', 'v', 'head_output'))
    return q[i].tolist(), k[:i + 1].tolist(), v[:i + 1].tolist(), out[i].tolist()


def check_grouped_attention(t, fn):
    rng = random.Random(128)
    gpt = GPTConfig(7, n_layer=1, n_embd=8, n_head=4, block_size=6, n_kv_head=2, rope=True)
    cases = [("multi-query: 2 query heads read 1 kv head", 2, 1, [1.0, -1.0, 0.5, 2.0], [[0.5, 0.5], [2.0, -1.0]],
              [[1.0, 0.0], [0.0, 1.0]]),
             ("4 query heads, 2 kv heads", 4, 2, vectors(rng, 8), [vectors(rng, 4) for _ in range(3)],
              [vectors(rng, 4) for _ in range(3)]),
             ("6 query heads, 3 kv heads: groups of 2", 6, 3, vectors(rng, 12), [vectors(rng, 6) for _ in range(2)],
              [vectors(rng, 6) for _ in range(2)]),
             ("n_kv_head = n_head: microgpt's attention", 2, 2, vectors(rng, 4), [vectors(rng, 4)], [vectors(rng, 4)])]
    q, k, v, port = port_case(gpt, [6, 0, 3, 2], 7)
    cases.append(("a GPT's layer 0 at position 3 (n_head 4, n_kv_head 2, RoPE)", 4, 2, q, k, v))
    for i in range(3):
        n_kv, group, D, n = rng.choice([1, 2]), rng.choice([1, 2, 3]), rng.choice([2, 4]), rng.randint(1, 4)
        cases.append((f"random {i + 1}", n_kv * group, n_kv, vectors(rng, n_kv * group * D),
                      [vectors(rng, n_kv * D) for _ in range(n)], [vectors(rng, n_kv * D) for _ in range(n)]))
    for k, (label, n_head, n_kv, q, keys, values) in enumerate(cases):
        t.case(label, f"n_head = {n_head}, n_kv_head = {n_kv}, q = {fmt(q)}, keys = {fmt(keys)}, "
                      f"values = {fmt(values)}", k < 5)
        right = float_grouped(q, keys, values, n_head, n_kv)
        oracle = (('the numpy port, head_output', port, 1e-9) if k == 4 else
                  ('each head in floats over its kv head, sums by math.fsum', right))
        check_function(t, lambda *a: fn(*a, n_head, n_kv), [q, keys, values], ['q', 'keys', 'values'],
                       read_values(len(q), "the heads' outputs side by side"),
                       lambda *a: project_grouped(*a, n_head, n_kv), seed=k, out_oracle=oracle,
                       out_mistakes=[(s, float_grouped(q, keys, values, n_head, n_kv, s), h)
                                     for s, h in GROUPED_SLIPS.items()],
                       out_hint="Query head h attends over kv head h // (n_head // n_kv_head) of every key and value.",
                       exception_hint="A key holds n_kv_head heads, not n_head: slice kv head h // group of it.",
                       out_label=f"out ({n_head} heads of {len(q) // n_head})")


CHECKS = {26: check_rotate, 27: check_rope_backward, 28: check_grouped_attention}
