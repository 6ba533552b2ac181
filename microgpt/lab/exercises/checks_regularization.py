"""
The checks of exercises 21 and 22: decoupled weight decay beside Adam (on Values, as exercise
15) and inverted dropout's forward and backward (on arrays). The project's answers: optim.Adam
with weight_decay, and src/backprop/layers.py's dropout on the same mask. The oracles: the decay's
closed forms, the moments of an Adam without decay, a mask keeping exactly 1 - p of each column,
y written with np.where, and finite differences for dx. Dropout's check imports numpy when it
runs: weight decay's is checked by a Python without it.
"""

import random

from .checks_model import adam_steps, float_adam
from .harness import fmt

RANDOM_CASES = 3
ORACLE_CLOSE = 1e-12  # a closed form of a few float operations agrees to rounding


# ---------------------------------------------------------------------------- 21. adamw_step
ADAMW_SLIPS = {
    'no decay': "The weights must shrink too: each loses the fraction lr * weight_decay of itself, before "
                "Adam's step (weight_decay 0 is plain Adam).",
    'L2': "That is L2 regularization: weight_decay * w added to the gradient goes through m and v and is "
          "divided by sqrt(v_hat) with the rest, so it is not the same decay for every weight. Decoupled: "
          "shrink the weight itself by lr * weight_decay * w and leave its gradient alone.",
    'after': "Shrink first, then take Adam's step: w (1 - lr * wd) - s. Shrinking after the step shrinks the "
             "step s as well, by lr * wd * s: a small difference, but not AdamW's update.",
    'no lr': "The fraction a weight loses is lr * weight_decay, the learning rate times the decay: it follows "
             "the learning rate's schedule, as Adam's step does.",
    'constant': "Shrink each weight in proportion to itself, by lr * weight_decay * w: a large weight loses "
                "more, a weight at 0 stays at 0, a negative one moves up towards 0.",
}


def check_adamw(t, fn):
    rng = random.Random(121)
    cases = [('weights with no gradient shrink by (1 - lr * wd) a step, 0 stays 0', [2.0, -0.5, 0.0],
              [[0.0, 0.0, 0.0]] * 3, [0.1, 0.05, 0.02], 0.5, None),
             ('one weight, lr 0.1, weight_decay 0.5: shrink first, then move', [0.8],
              [[0.3], [-0.2], [0.1]], [0.1] * 3, 0.5, None),
             ("a large, a tiny and no gradient; lr 0.01 decaying as train.py's over 5 steps", [1.0, 1.0, 1.0],
              [[0.5, 1e-4, 0.0], [-0.4, 2e-4, 0.0], [0.3, -1e-4, 0.0]], [0.01, 0.008, 0.006], 0.1, None),
             ('weight_decay 0 is Adam exactly', [0.3, -0.7], [[0.2, -0.1], [0.1, 0.3]], [0.01] * 2, 0.0, None),
             ('betas (0.9, 0.999) and eps 1e-6 passed in', [0.3, 0.7], [[0.2, -0.1], [0.1, 0.3]], [0.05] * 2,
              0.2, (0.9, 0.999, 1e-6))]
    for i in range(RANDOM_CASES):
        n, steps = rng.randint(2, 5), 4
        cases.append((f"random {i + 1}", [round(rng.uniform(-2, 2), 3) for _ in range(n)],
                      [[round(rng.uniform(-1, 1), 3) for _ in range(n)] for _ in range(steps)],
                      [round(rng.uniform(0.01, 0.1), 4)] * steps, round(rng.uniform(0.05, 0.5), 2), None))
    hints = dict(ADAMW_SLIPS, defaults="Use the beta1, beta2 and eps passed in, and pass them on to your "
                                       "adam_step, not the default numbers.")
    for k, (label, data, grads, lrs, wd, settings) in enumerate(cases):
        b1, b2, eps = settings or (0.85, 0.99, 1e-8)
        rates = f"lr {lrs[0]} at every step" if len(set(lrs)) == 1 else f"lr {fmt(lrs)}, step by step"
        t.case(label, f"params {fmt(data)}, weight_decay {wd}, beta1 {b1}, beta2 {b2}, eps {eps:g}; {rates}; "
                      f"the gradient at each step: {fmt(grads)}", k < 5)
        plain_m = [0.0] * len(data)  # an Adam without decay's m on the same gradients: the oracle of m
        shrunk = list(data)          # w_0 * prod(1 - lr_t * wd): the oracle of a weight without gradient
        slips = {s: float_adam(data, grads, lrs, b1, b2, eps, wd, s) for s in ADAMW_SLIPS}
        for step, g, lr, got, want, m, v, adamw in adam_steps(
                t, fn, data, grads, lrs, settings, slips, hints, "Shrink every weight by the fraction lr * "
                "weight_decay of itself, then take your adam_step.", "Your adam_step sets p.grad = 0.0 once it is "
                "used: call it, after the decay.", wd):
            shrunk = [w * (1 - lr * wd) for w in shrunk]
            idle = [i for i in range(len(data)) if all(gs[i] == 0 for gs in grads[:step])]
            if idle:
                t.compare(f"the weights {idle}, which have had no gradient, after step {step}",
                          [got[i] for i in idle], [want[i] for i in idle],
                          mistakes=[(s, [after[step - 1][0][i] for i in idle], hints[s])
                                    for s, after in slips.items()],
                          oracle=('w_0 * prod(1 - lr_t * wd): Adam moves a weight without gradient by 0',
                                  [shrunk[i] for i in idle], ORACLE_CLOSE),
                          hint="A weight without gradient only shrinks, by the fraction lr * weight_decay a step.")
            plain_m = [b1 * a + (1 - b1) * gi for a, gi in zip(plain_m, g)]
            t.compare(f"m after step {step}", list(m), adamw.m,
                      oracle=("the m of an Adam without weight decay: the moments never see it", plain_m, ORACLE_CLOSE),
                      mistakes=[('L2', slips['L2'][step - 1][1], hints['L2'])],
                      hint="Update m in place, through your adam_step: the caller keeps the same list.")
            t.compare(f"v after step {step}", list(v), adamw.v,
                      hint="Update v in place, through your adam_step: the gradient alone goes into it.")


# ---------------------------------------------------------------------------- 22. dropout
def dropout_slips(x, kept, p, dy):
    """{slip: (y, dx)}: inverted dropout with the usual slips."""
    f = kept / (1 - p)                                                       # (x's shape)
    return {'plain dropout': (x * kept, dy * kept),
            'times 1 - p': (x * kept * (1 - p), dy * kept * (1 - p)),
            'divided by p': (x * kept / p, dy * kept / p) if p else None,
            'the dropped kept': (x * ~kept / (1 - p), dy * ~kept / (1 - p)),
            'backward not masked': (x * f, dy / (1 - p)),
            'backward unscaled': (x * f, dy * kept),
            'backward is y': (x * f, x * f)}


DROPOUT_HINTS = {
    'plain dropout': "Inverted dropout divides the kept numbers by 1 - p: without it the expected value of y "
                     "is (1 - p) x, and evaluation, which never drops, would see a larger scale than training did.",
    'times 1 - p': "Divide the kept numbers by 1 - p, do not multiply: E[y] = (1 - p) * x / (1 - p) = x.",
    'divided by p': "The kept numbers are divided by 1 - p, the probability of being kept, not by p, that of "
                    "being dropped.",
    'the dropped kept': "kept is True where the number is KEPT: multiply by it (where it is False, y is 0).",
    'backward not masked': "A dropped number passed nothing forward, so it gets no gradient back: dx is 0 where "
                           "kept is False, as y is.",
    'backward unscaled': "The gradient goes back through the same factor: dx = f * dy, with f = 1 / (1 - p) where "
                         "kept, as y = f * x.",
    'backward is y': "dx is made from dy, the gradient handed back, not from x: dx = f * dy.",
}


def exactly_kept(rng, shape, p, n_rows):
    """A mask of `shape` (n_rows first) keeping exactly (1 - p) * n_rows of each column."""
    import numpy as np
    keep = round((1 - p) * n_rows)
    columns = [rng.sample([True] * keep + [False] * (n_rows - keep), n_rows)
               for _ in range(int(np.prod(shape[1:])))]
    return np.array(columns).T.reshape(shape)                                 # (n_rows, ...)


def check_dropout(t, fn):
    import numpy as np
    from microgpt.backprop.dropout import draw
    from microgpt.backprop.layers import dropout_backward, dropout_forward
    from ...model import GPTConfig
    from .checks_numpy import array, fd_grad, read_arrays, show, unchanged
    rng = random.Random(122)
    config = GPTConfig(5, n_layer=1, n_embd=4, n_head=2, block_size=3)
    drawn = draw(0.25, 42, 1, 1, config).arrays                               # {site: (1, ...)}
    row = array(rng, 1, 3)
    cases = [('p = 0.1 on a (2, 4) stream', array(rng, 2, 4), np.array([[True, False, True, True],
                                                                         [True, True, True, False]]), 0.1),
             ('p = 0.25, exactly 3 of 4 kept down each column: the mean of y is x itself',
              np.repeat(row, 8, axis=0), exactly_kept(rng, (8, 3), 0.25, 8), 0.25),
             ('p = 0 keeps everything: y = x and dx = dy', array(rng, 3, 2), np.ones((3, 2), dtype=bool), 0.0),
             ("the embedding's mask of step 1 as train.py --dropout 0.25 --seed 42 draws it (one name, "
              "block_size 3, n_embd 4)", array(rng, 3, 4), drawn['embedding'][0] > 0, 0.25),
             ("that step's mask of layer 0's attention weights, (n_head 2, T 3, T 3)",
              array(rng, 2, 3, 3, lo=0.0, hi=1.0), drawn['layer0.attn_weights'][0] > 0, 0.25)]
    for i in range(RANDOM_CASES):
        shape = (rng.randint(1, 4), rng.randint(1, 6))
        p = rng.choice([0.05, 0.2, 0.3, 0.6])
        cases.append((f"random {i + 1}", array(rng, *shape),
                      np.array([rng.random() >= p for _ in range(shape[0] * shape[1])]).reshape(shape), p))
    for k, (label, x, kept, p) in enumerate(cases):
        dy = array(rng, *x.shape)
        t.case(label, show(x=x, kept=kept, dy=dy) + f"; p = {p:g}", k < 5)
        inputs = (x.copy(), kept.copy(), p, dy.copy())
        y, dx = read_arrays(t, t.call(fn, *inputs), [x.shape, x.shape], ['y', 'dx'])
        unchanged(t, (x, kept, dy), (inputs[0], inputs[1], inputs[3]), ['x', 'kept', 'dy'])
        mask = kept * (1.0 / (1.0 - p))  # dropout.py's mask of the same kept numbers: 0 or 1/(1-p)
        p_y, cache = dropout_forward(x, mask)
        p_dx = dropout_backward(dy, cache)
        slips = {s: v for s, v in dropout_slips(x, kept, p, dy).items() if v is not None}
        t.compare('y', y, p_y, mistakes=[(s, v[0], DROPOUT_HINTS[s]) for s, v in slips.items()],
                  oracle=('x where kept, divided by 1 - p, else 0', np.where(kept, x / (1 - p), 0.0)),
                  hint="y = x / (1 - p) where kept, 0 where dropped.")
        if k == 1:
            t.compare('the mean of y down each column', y.mean(axis=0), p_y.mean(axis=0),
                      mistakes=[(s, v[0].mean(axis=0), DROPOUT_HINTS[s]) for s, v in slips.items()],
                      oracle=('x itself: E[y] = x, here exactly', row[0], ORACLE_CLOSE),
                      hint="Divide the kept numbers by 1 - p, so that on average y is x.")
        backward_first = sorted(slips, key=lambda s: not s.startswith('backward'))  # y passed: look there first
        t.compare('dx', dx, p_dx, mistakes=[(s, slips[s][1], DROPOUT_HINTS[s]) for s in backward_first],
                  oracle=('central differences of L = sum(dy * y), y = x / (1 - p) where kept, in x',
                          fd_grad(lambda a: float((dy * np.where(kept, a / (1 - p), 0.0)).sum()), x)),
                  hint="dx = f * dy: the gradient goes back through the same factor, 0 or 1 / (1 - p).")


CHECKS = {21: check_adamw, 22: check_dropout}
