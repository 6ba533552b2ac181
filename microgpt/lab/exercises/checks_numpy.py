"""
The checks of exercises 17 to 20, the numpy rung: causal attention on arrays, and three
backwards derived by hand (linear, softmax, one attention head).

The project's own answers: src/inference/attention.py's masked_attention, src/backprop/layers.py's
linear_backward and attention_backward (with one name and one head), and the softmax lines of
that attention_backward. The oracles: the three tokens worked by hand and attention written as a
loop over floats for the forward; central finite differences of the forward for every backward.
"""

import random

import numpy as np
from microgpt.inference.attention import causal_mask, softmax

from .checks_model import float_attention
from .harness import central_difference, fmt
from ..example import KEYS, OUT3, Q, ROUNDING, VALUES, WEIGHTS

RANDOM_CASES = 5


def array(rng, *shape, lo=-2.0, hi=2.0):
    return np.array([round(rng.uniform(lo, hi), 3) for _ in range(int(np.prod(shape)))]).reshape(shape)


def show(**arrays):
    return '; '.join(f"{name} {tuple(a.shape)} = {fmt(a)}" for name, a in arrays.items())


def read_arrays(t, got, shapes, names, hint=''):
    """A tuple of float arrays of the given shapes, one line if not."""
    wanted = ', '.join(f"{n} {s}" for n, s in zip(names, shapes))
    if len(shapes) == 1:
        got = (got,)
    t.expect(type(got) in (tuple, list) and len(got) == len(shapes), got if len(shapes) > 1 else got[0],
             f"{'a pair' if len(shapes) == 2 else 'a triple' if len(shapes) == 3 else 'an array'} ({wanted})")
    for a, shape, name in zip(got, shapes, names):
        t.expect(isinstance(a, np.ndarray) and a.dtype.kind == 'f', a, f"{name}: a float array of shape {shape}",
                 hint)
        t.expect(a.shape == shape, a, f"{name} of shape {shape}",
                 hint or "A gradient has the shape of what it is the gradient of.")
    return got


def unchanged(t, before, after, names):
    for b, a, name in zip(before, after, names):
        if not np.array_equal(b, a, equal_nan=True):
            t.fail_line(f"your {t.exercise.function}() changed its input {name}",
                        hint="Leave the inputs as they were: compute into new arrays (scores = q @ k.T ..., "
                             "not q *= ...); the caller uses them again.")


# ---------------------------------------------------------------------------- 17. masked_attention
def numpy_attention(q, k, v, mask='before', scale=True, triangle='future'):
    """One causal head in numpy, with the usual slips on request."""
    T, hd = q.shape
    z = q @ k.T * (hd ** -0.5 if scale else 1.0)                             # (T, T)
    hide = causal_mask(T) if triangle == 'future' else np.tril(np.ones((T, T), bool), -1)  # (T, T)
    if mask == 'before':
        z = np.where(hide, -np.inf, z)                                       # (T, T)
    w = softmax(z)                                                           # (T, T)
    if mask == 'after':
        w = np.where(hide, 0.0, w)                                           # rows no longer sum to 1
    return w @ v, w                                                          # (T, hd), (T, T)


MASK_SLIPS = [
    ({'mask': 'after'}, "A mask applied after the softmax: the visible weights then do not sum to 1. Set the "
                        "future scores to -inf BEFORE the softmax, and exp(-inf) = 0 does the rest."),
    ({'mask': 'none'}, "Mask the future: set scores[i, j] = -inf wherever j > i (np.triu(..., k=1))."),
    ({'triangle': 'past'}, "Mask the future (j > i, above the diagonal: np.triu(..., k=1)), not the past."),
    ({'scale': False}, "Divide the scores by sqrt(head_dim)."),
]


def check_masked_attention(t, fn):
    from microgpt.inference.attention import masked_attention as project
    rng = random.Random(117)
    cases = [("three tokens by hand", np.array(Q), np.array(KEYS), np.array(VALUES)),
             ("one position", np.array([[0.5, -1.0]]), np.array([[2.0, 1.0]]), np.array([[3.0, 4.0]])),
             ("4 positions, head_dim 2", array(rng, 4, 2), array(rng, 4, 2), array(rng, 4, 2))]
    for i in range(RANDOM_CASES):
        T, hd = rng.randint(2, 6), rng.choice([2, 4, 8])
        cases.append((f"random {i + 1}", array(rng, T, hd), array(rng, T, hd), array(rng, T, hd)))
    for k, (label, q, key, v) in enumerate(cases):
        t.case(label, show(q=q, k=key, v=v), k < 3)
        T, hd = q.shape
        inputs = (q.copy(), key.copy(), v.copy())
        out, w = read_arrays(t, t.call(fn, *inputs), [(T, hd), (T, T)], ['out', 'weights'])
        unchanged(t, (q, key, v), inputs, ['q', 'k', 'v'])
        p_out, p_w = (a[0] for a in project(q[None], key[None], v[None]))
        loop = [float_attention(q[i].tolist(), key[:i + 1].tolist(), v[:i + 1].tolist()) for i in range(T)]
        loop_w = np.array([row[1] + [0.0] * (T - i - 1) for i, row in enumerate(loop)])
        loop_out = np.array([row[0] for row in loop])
        mistakes = [(str(kw), numpy_attention(q, key, v, **kw)[1], h) for kw, h in MASK_SLIPS]
        t.compare('the weights', w, p_w, mistakes=mistakes, oracle=('one query at a time over its keys 0..i, '
                  'in floats', loop_w), hint="Scaled scores, the mask, then the softmax along each row.")
        t.compare('out', out, p_out, oracle=('the same loop', loop_out),
                  hint="out = weights @ v: each row averages the values with that row's weights.")
        if k == 0:
            t.compare("the weights of token 3", w[2], p_w[2],
                      oracle=('three tokens by hand, 3 decimals', WEIGHTS, ROUNDING))
            t.compare("out3", out[2], p_out[2],
                      oracle=('three tokens by hand, 3 decimals', OUT3, ROUNDING))
            t.compare("out1 (the first token sees only itself)", out[0], p_out[0],
                      oracle=('v1, exactly', VALUES[0], 0.0),
                      hint="Row 1 has one visible key, so its weight is 1 and out1 = v1.")


# ---------------------------------------------------------------------------- 18. linear_backward
def check_linear_backward(t, fn):
    from microgpt.backprop.layers import linear_backward as project
    rng = random.Random(118)
    cases = [("one row, 3 inputs, 2 outputs", (1, 3, 2)), ("2 rows, 2 inputs, 3 outputs", (2, 2, 3)),
             ("3 rows, a square w", (3, 2, 2))]
    cases += [(f"random {i + 1}", (rng.randint(1, 4), rng.randint(1, 5), rng.randint(1, 5))) for i in range(RANDOM_CASES)]
    for k, (label, (R, n_in, n_out)) in enumerate(cases):
        x, w, dy = array(rng, R, n_in), array(rng, n_out, n_in), array(rng, R, n_out)
        t.case(label, show(x=x, w=w, dy=dy), k < 3)
        dx, dw = read_arrays(t, t.call(fn, dy.copy(), x.copy(), w.copy()), [(R, n_in), (n_out, n_in)], ['dx', 'dw'],
                             hint="dx has x's shape (R, n_in), dw has w's shape (n_out, n_in): dx = dy @ w, "
                                  "dw = dy.T @ x.")
        p_dx, p_dw = project(dy, x, w)
        loss = lambda x_, w_: float((dy * (x_ @ w_.T)).sum())  # noqa: E731: L whose dL/dy is dy
        t.compare('dx', dx, p_dx, oracle=('central differences of L = sum(dy * (x @ w.T))', fd_grad(lambda a: loss(a, w), x)),
                  mistakes=[('dy @ w.T', dy @ w.T if n_in == n_out else None,
                             "dx = dy @ w: y = x @ w.T, so going back multiplies by w itself.")],
                  hint="dx[r, i] = sum_o dy[r, o] * w[o, i]: dx = dy @ w.")
        t.compare('dw', dw, p_dw, oracle=('central differences of L', fd_grad(lambda a: loss(x, a), w)),
                  mistakes=[('x.T @ dy', (x.T @ dy) if n_in == n_out else None,
                             "dw = dy.T @ x: stored [n_out, n_in] like w (x.T @ dy is its transpose).")],
                  hint="dw[o, i] = sum_r dy[r, o] * x[r, i], summed over every row: dw = dy.T @ x.")


def fd_grad(f, a):
    """Central differences of the scalar f at every entry of the array a."""
    g = np.zeros_like(a)
    for idx in np.ndindex(a.shape):
        def moved(z, idx=idx):
            b = a.copy()
            b[idx] = z
            return f(b)
        g[idx] = central_difference(moved, float(a[idx]))
    return g


# ---------------------------------------------------------------------------- 19. softmax_backward
def softmax_backward(dp, p):
    """dz for p = softmax(z), row by row: src/backprop/layers.py attention_backward's two softmax lines."""
    return p * (dp - (dp * p).sum(axis=-1, keepdims=True))


def check_softmax_backward(t, fn):
    rng = random.Random(119)
    cases = [("one row of 3", (3,)), ("2 rows of 4", (2, 4)), ("3 rows of 2", (3, 2)), ("a (2, 3, 4) array", (2, 3, 4))]
    cases += [(f"random {i + 1}", (rng.randint(1, 4), rng.randint(2, 6))) for i in range(RANDOM_CASES)]
    for k, (label, shape) in enumerate(cases):
        z, dp = array(rng, *shape, lo=-3, hi=3), array(rng, *shape)
        p = softmax(z)
        t.case(label, show(p=p, dp=dp) + f" (p = softmax(z), z = {fmt(z)})", k < 4)
        dz = read_arrays(t, t.call(fn, dp.copy(), p.copy()), [shape], ['dz'],
                         hint="dz has the shape of p.")[0]
        want = softmax_backward(dp, p)  # the project's
        mistakes = [('no row sum', p * dp, "The softmax backward is missing its row sum: dz = p * (dp - "
                                           "sum_j dp_j p_j), every output depends on every input."),
                    ('whole sum', p * (dp - (dp * p).sum()),
                     "Sum over each row's own entries (axis=-1, keepdims=True), not over the whole array.")]
        if len(shape) == 2 and shape[0] > 1:
            mistakes.append(('column sum', p * (dp - (dp * p).sum(axis=0, keepdims=True)),
                             "Sum along each row (axis=-1), not down the columns."))
        t.compare('dz', dz, want, mistakes=mistakes, hint="dz = p * (dp - sum over the row of dp * p).",
                  oracle=('central differences of L = sum(dp * softmax(z)), in z',
                          fd_grad(lambda a: float((dp * softmax(a)).sum()), z)),
                  source="src/backprop/layers.py, attention_backward's softmax lines")


# ---------------------------------------------------------------------------- 20. attention_backward
def numpy_attention_backward(dout, q, k, v, slip=None):
    T, hd = q.shape
    s = hd ** -0.5
    out, a = numpy_attention(q, k, v)
    dv = a.T @ dout
    dz = softmax_backward(dout @ v.T, a)
    s_back = 1.0 if slip == 'no scale' else s
    dq = dz @ k * s_back
    dk = (dz @ q if slip == 'no transpose' else dz.T @ q) * s_back
    return dq, dk, dv


def check_attention_backward(t, fn):
    from microgpt.backprop.layers import attention_backward, attention_forward
    rng = random.Random(120)
    cases = [("three tokens by hand", np.array(Q), np.array(KEYS), np.array(VALUES)),
             ("one position", array(rng, 1, 2), array(rng, 1, 2), array(rng, 1, 2)),
             ("4 positions, head_dim 2", array(rng, 4, 2), array(rng, 4, 2), array(rng, 4, 2))]
    for i in range(RANDOM_CASES):
        T, hd = rng.randint(2, 5), rng.choice([2, 4])
        cases.append((f"random {i + 1}", array(rng, T, hd), array(rng, T, hd), array(rng, T, hd)))
    for k, (label, q, key, v) in enumerate(cases):
        T, hd = q.shape
        dout = array(rng, T, hd)
        t.case(label, show(q=q, k=key, v=v, dout=dout), k < 3)
        got = read_arrays(t, t.call(fn, dout.copy(), q.copy(), key.copy(), v.copy()), [(T, hd)] * 3,
                          ['dq', 'dk', 'dv'])
        _, cache = attention_forward(q, key, v, np.arange(T), 1, T, 1)  # one name, one head
        want = attention_backward(dout, cache)

        def loss(q_, k_, v_):  # L = sum(dout * out), out by a loop over floats: the oracle's forward
            out = [float_attention(q_[i].tolist(), k_[:i + 1].tolist(), v_[:i + 1].tolist())[0] for i in range(T)]
            return float((dout * np.array(out)).sum())
        oracles = [fd_grad(lambda a: loss(a, key, v), q), fd_grad(lambda a: loss(q, a, v), key),
                   fd_grad(lambda a: loss(q, key, a), v)]
        slips = {s: numpy_attention_backward(dout, q, key, v, s) for s in ('no scale', 'no transpose')}
        for i, name in enumerate(['dv', 'dq', 'dk']):
            j = {'dq': 0, 'dk': 1, 'dv': 2}[name]
            t.compare(name, got[j], want[j], oracle=('central differences of L = sum(dout * out)', oracles[j]),
                      mistakes=[('no scale', slips['no scale'][j], "The scores were multiplied by "
                                 "s = 1/sqrt(head_dim) on the way forward, so dq and dk are too."),
                                ('no transpose', slips['no transpose'][j], "dk = dz.T @ q: key j collects from "
                                 "every query i that scored it, down column j of dz.")],
                      hint={'dv': "dv = a.T @ dout: value j receives from every query, weighted by a[i, j].",
                            'dq': "dq = (dz @ k) * s, with dz = softmax_backward(dout @ v.T, a).",
                            'dk': "dk = (dz.T @ q) * s."}[name])


CHECKS = {17: check_masked_attention, 18: check_linear_backward, 19: check_softmax_backward,
          20: check_attention_backward}
