"""
The numbers behind "divide by sqrt(head_dim)", measured afresh next to the lessons' own.

    python -m microgpt.lab scaling
    python -m microgpt.lab scaling --samples 200000 --draws 10000 --seed 1

The attention lessons argue with a handful of numbers a reader can check (docs/lessons.md
says what each lesson shows). This command recomputes each one, prints it beside the value
the lesson states, and says where and why the two differ:

  1. Var(q.k) = d for q, k with independent unit-variance components (measured by sampling);
  2. the saturation example softmax([10, 2, 1]);
  3. the hand-worked example of the Czech lesson (three tokens, head_dim 4) and its
     "no sqrt(d)" exercise, through the port's own attention_head;
  4. one attention row of eight keys at d = 64 (or --row-d) without and with scaling: a
     fixed-seed draw, and the median over many draws (the lesson's table is a single draw);
  5. the cost of attention against the projections, n / (2 D);
  6. the size of the score matrix that FlashAttention never builds.

No checkpoint is needed: everything here is random draws and arithmetic.
"""

import numpy as np

from ..errors import UserError
from ..limits import MAX_ROW_NUMBERS  # draws x row_d: section 4 holds draws x 8 x row_d numbers, twice
from .render import table
from .rowstats import batch_statistics, row_statistics, softmax

# ---------------------------------------------------------------------------- the lessons' numbers
# docs/lessons.md says what each lesson shows and lists these numbers. LESSON_*: as a lesson
# states it (the random draws below take --seed, which has nothing to do with these).
# Russian lesson, "Откуда √d": d -> (measured variance, standard deviation of q.k)
LESSON_VARIANCE = {4: (4.03, 2.01), 64: (64.21, 8.01), 1024: (1017.8, 31.9)}
# Czech lesson, step 3: why divide by sqrt(d). (scores, the weights it prints)
LESSON_SATURATION = ([10.0, 2.0, 1.0], [0.9997, 0.0003, 0.0001])
# Russian lesson, one widget run at d = 64, eight keys: (spread, entropy in bits, max weight)
LESSON_ROW = {'without scaling': (25.1, 0.994, 0.547), 'with scaling': (3.14, 2.295, 0.355)}
ROW_D, ROW_KEYS = 64, 8
# The lesson does not define its "spread". Eight scaled scores (found by least squares, rounded
# to 4 decimals) that reproduce all six numbers above if spread means max - min; x 8 gives the
# unscaled row. Their standard deviation is 1.03: an ordinary unit-variance row.
LESSON_ROW_FIT = [0.0, -0.0236, -1.2538, -1.8669, -2.0217, -2.1339, -2.2435, -3.14]
# Russian lesson, cost: D = 768, n -> attention / projections
LESSON_COST_D = 768
LESSON_COST = {128: 0.08, 1024: 0.67, 8192: 5.3}
# Czech lesson, "kočka spí venku": the query of token 3, the keys and values of tokens 1..3
CZECH_Q3 = [0.9, 0.8, 0.2, 0.1]
CZECH_KEYS = [[0.9, 0.1, 0.4, 0.0], [0.0, 1.0, 0.0, 0.9], [0.8, 0.9, 0.1, 0.0]]
CZECH_VALUES = [[0.2, 0.8, 0.0, 0.1], [0.7, 0.1, 0.3, 0.0], [0.1, 0.2, 0.9, 0.4]]
CZECH_SCORES = [0.97, 0.89, 1.46]
CZECH_WEIGHTS = [0.309, 0.297, 0.394]
CZECH_OUT = [0.309, 0.356, 0.444, 0.189]
CZECH_WEIGHTS_X10 = [0.075, 0.051, 0.874]
# Czech lesson, exercise 3 (T = 1024) and its "2 miliardy" (2 billion) at T = 8192: heads, lengths
SCORE_HEADS, SCORE_T = 32, (1024, 8192)


# ---------------------------------------------------------------------------- 1) Var(q.k) = d
def dot_products(d, samples, rng):
    """`samples` values of q.k for q, k with independent N(0, 1) components, (samples,).

    Drawn in chunks of about a million numbers, so d = 1024 needs no gigabytes.
    """
    chunk = max(1, (1 << 20) // d)
    out = []
    left = samples
    while left:
        n = min(chunk, left)
        q = rng.standard_normal((n, d))            # (n, d)
        k = rng.standard_normal((n, d))            # (n, d)
        out.append(np.einsum('nd,nd->n', q, k))    # (n,) one dot product per row
        left -= n
    return np.concatenate(out)                     # (samples,)


def variance_standard_error(d, samples):
    """The standard error of the measured variance of q.k.

    q.k = sum of d independent products x = q_i k_i with E x^2 = 1 and E x^4 = 3 * 3 = 9,
    so E (q.k)^4 = 9 d + 3 d (d - 1) = 3 d^2 + 6 d and Var((q.k)^2) = 2 d^2 + 6 d. The mean of
    `samples` squares then has standard error sqrt((2 d^2 + 6 d) / samples).
    """
    return float(np.sqrt((2 * d * d + 6 * d) / samples))


def variance_table(samples, rng, ds=(4, 64, 1024)):
    """[(d, measured variance, standard error, standard deviation)] for each d."""
    rows = []
    for d in ds:
        s = dot_products(d, samples, rng)
        var = float(s.var(ddof=1))
        rows.append((d, var, variance_standard_error(d, samples), float(np.sqrt(var))))
    return rows


# ---------------------------------------------------------------------------- 4) one row, many draws
def random_rows(draws, rng, d=ROW_D, n_keys=ROW_KEYS):
    """Unscaled scores q.k_j of `draws` random rows: one query against n_keys keys, (draws, n_keys)."""
    q = rng.standard_normal((draws, 1, d))          # (draws, 1, d)
    k = rng.standard_normal((draws, n_keys, d))     # (draws, n_keys, d)
    return (q * k).sum(axis=-1)                     # (draws, n_keys)


def row_study(draws, seed, d=ROW_D):
    """An eight-key row at head size d: a fixed-seed draw, and statistics over `draws` draws.

    Returns {'draw': {label: stats}, 'median': {label: {name: float}},
             'quartiles': {label: {name: (q1, q3)}}, 'below_lesson': {label: {name: share}},
             'all': {label: {name: (draws,)}},
             'max_minus_min': {label: {'median', 'quartiles', 'below_lesson'}} of the scores,
             'spread_ratio': unscaled / scaled spread of the fixed draw}.
    'below_lesson' is the share of draws below the lesson's number (LESSON_ROW).
    """
    scale = d ** -0.5
    one = random_rows(1, np.random.default_rng(seed), d)[0]       # (n_keys,)
    many = random_rows(draws, np.random.default_rng(seed + 1), d)  # (draws, n_keys)
    out = {'draw': {}, 'median': {}, 'quartiles': {}, 'below_lesson': {}, 'all': {}, 'max_minus_min': {}}
    for label, factor in (('without scaling', 1.0), ('with scaling', scale)):
        out['draw'][label] = row_statistics(one * factor)
        stats = batch_statistics(many * factor)
        out['all'][label] = stats
        out['median'][label] = {n: float(np.median(v)) for n, v in stats.items()}
        out['quartiles'][label] = {n: tuple(np.percentile(v, [25, 75])) for n, v in stats.items()}
        lesson_values = dict(zip(('spread', 'entropy', 'max_weight'), LESSON_ROW[label]))
        out['below_lesson'][label] = {n: float((stats[n] < v).mean()) for n, v in lesson_values.items()}
        ranges = (many * factor).max(axis=-1) - (many * factor).min(axis=-1)  # (draws,)
        out['max_minus_min'][label] = {'median': float(np.median(ranges)),
                                       'quartiles': tuple(np.percentile(ranges, [25, 75])),
                                       'below_lesson': float((ranges < lesson_values['spread']).mean())}
    out['spread_ratio'] = out['draw']['without scaling']['spread'] / out['draw']['with scaling']['spread']
    return out


# ---------------------------------------------------------------------------- 5), 6) arithmetic
def cost_ratio(n, D):
    """Attention's two contractions (2 n^2 D multiply-adds) over the projections Q, K, V, O
    (4 n D^2): n / (2 D). Attention only outweighs the projections for n > 2 D."""
    return (2 * n * n * D) / (4 * n * D * D)


def score_matrix_size(n_head, T, bytes_per_number=2):
    """(numbers, bytes) of one layer's score matrix: n_head x T x T; fp16 takes 2 bytes."""
    numbers = n_head * T * T
    return numbers, numbers * bytes_per_number


def _share(x):
    """'83% of' or 'every one of', for a share of draws below a lesson's value."""
    return 'every one of' if x == 1.0 else 'none of' if x == 0.0 else f'{x:.0%} of'


def _bytes(n):
    for unit, size in (('GiB', 2 ** 30), ('MiB', 2 ** 20), ('KiB', 2 ** 10)):
        if n >= size:
            return f'{n / size:g} {unit}'
    return f'{n} B'


# ---------------------------------------------------------------------------- the sandbox
def compute(samples=50_000, draws=2000, seed=42, row_d=ROW_D):
    """Every number the printout shows, each section's measurements beside the lesson's."""
    import inference  # the port's attention_head, the function its forward() calls per head and position

    if draws * row_d > MAX_ROW_NUMBERS:
        raise UserError(f"--draws {draws} x --row-d {row_d} = {draws * row_d:,} is more than "
                        f"{MAX_ROW_NUMBERS:,}: section 4 would hold {draws * row_d * ROW_KEYS * 16 >> 20:,} MiB; "
                        "lower one of them")
    rng = np.random.default_rng(seed)
    z = LESSON_SATURATION[0]
    out3, logits3, w3 = inference.attention_head(CZECH_Q3, CZECH_KEYS, CZECH_VALUES)  # (4,), (3,), (3,)
    raw3 = np.array(CZECH_KEYS) @ np.array(CZECH_Q3)  # (3,) the unscaled q3.k_j
    d = {'samples': samples, 'draws': draws, 'seed': seed, 'row_d': row_d,
         'variance': [{'d': dd, 'var': var, 'se': se, 'sd': sd} for dd, var, se, sd in variance_table(samples, rng)],
         'saturation': {'scores': z, 'weights': softmax(np.array(z)), 'stats': row_statistics(z)},  # (3,)
         'czech': {'raw': raw3, 'scaled': logits3, 'weights': w3, 'out': out3,
                   'weights_x10': softmax(raw3 / 2 * 10)},  # (3,): the exercise, scores x 10
         'row': row_study(draws, seed, row_d),
         'cost': [{'n': n, 'projections': 4 * n * LESSON_COST_D ** 2, 'attention': 2 * n * n * LESSON_COST_D,
                   'ratio': cost_ratio(n, LESSON_COST_D)} for n in LESSON_COST],
         'score_matrix': [{'n_head': SCORE_HEADS, 'T': T, 'numbers': score_matrix_size(SCORE_HEADS, T)[0],
                           'bytes': score_matrix_size(SCORE_HEADS, T)[1]} for T in SCORE_T]}
    if row_d == ROW_D:  # the lesson's fitted row, scaled and unscaled
        d['row_fit'] = {'scaled': row_statistics(LESSON_ROW_FIT),
                        'unscaled': row_statistics(np.array(LESSON_ROW_FIT) * ROW_D ** 0.5),  # (n_keys,)
                        'range': max(LESSON_ROW_FIT) - min(LESSON_ROW_FIT)}
    return d


def render(d):
    samples, draws, seed, row_d = d['samples'], d['draws'], d['seed'], d['row_d']
    lines = [f"scaling: samples={samples} (per d, for the variance) draws={draws} "
             f"(random rows, for the medians) seed={seed}", '']

    # 1) Var(q.k) = d
    lines.append("1) Var(q.k) = d, for q and k with independent zero-mean unit-variance components")
    rows = []
    for v in d['variance']:
        lesson_var, lesson_sd = LESSON_VARIANCE[v['d']]
        rows.append((v['d'], f"{v['var']:.2f}", f"± {v['se']:.2f}", v['d'], f"{v['sd']:.2f}",
                     f'{lesson_var:g}', f'{lesson_sd:g}'))
    lines.append(table(('d', 'measured Var', 'std. error', 'predicted', 'std dev',
                        'lesson: Var', 'lesson: sd'), rows))
    lines.append("   Unscaled scores spread like sqrt(d): ±8 at d = 64, ±32 at d = 1024. Dividing by "
                 "sqrt(d)\n   brings the variance back to 1 whatever d is. (Each run is a sample: "
                 "expect the\n   measured variance within about two standard errors of d.)")

    # 2) saturation
    p, sat = d['saturation']['weights'], d['saturation']['stats']
    lines += ['', "2) Saturation: softmax of the scores [10, 2, 1]",
              f"   weights [{', '.join(f'{x:.4f}' for x in p)}]   (lesson: {LESSON_SATURATION[1]}; "
              f"unrounded {np.array2string(p, precision=6, floatmode='fixed')})",
              f"   gradient scale {sat['gradient_scale']:.2e} (a uniform row of 3 would give "
              f"{1 / 3:.3f}): one key takes everything\n   and almost no gradient flows back "
              "to the scores. The lesson's 0.9997 is a rounding slip:\n"
              f"   e^10 / (e^10 + e^2 + e^1) = {p[0]:.6f}, which rounds to 0.9995."]

    # 3) the Czech hand computation
    c = d['czech']
    w3, w10 = c['weights'], c['weights_x10']
    lines += ['', "3) The hand-worked example (Czech lesson: three tokens, head_dim 4, query = token 3)",
              f"   q3.k_j          {np.array2string(c['raw'], precision=3)}   (lesson: {CZECH_SCORES})",
              f"   / sqrt(4) = 2   {np.array2string(c['scaled'], precision=3)}",
              f"   softmax         {np.array2string(w3, precision=3)}   (lesson: {CZECH_WEIGHTS}; "
              f"its exercise answer\n                   says 0.395 for the last: the weight is "
              f"{w3[2]:.6f}, which rounds to {w3[2]:.3f};\n                   the 0.394 is truncated)",
              f"   out3 = sum w v  {np.array2string(c['out'], precision=3)}   (lesson: {CZECH_OUT})",
              f"   scores x 10     {np.array2string(w10, precision=3)}   (lesson: {CZECH_WEIGHTS_X10}): "
              f"the weakest\n                   weight falls {w3[1]:.3f} -> {w10[1]:.3f}, "
              f"about {w3[1] / w10[1]:.1f} times"]

    # 4) one row of eight keys at d = 64 (or --row-d)
    study = d['row']
    lesson = 'row_fit' in d  # the lesson's draw is for d = 64 only
    lines += ['', f"4) One attention row: d = {row_d}, {ROW_KEYS} keys, q and k with unit-variance "
              f"components\n   (a uniform row of {ROW_KEYS} keys has entropy {np.log2(ROW_KEYS):g} bits, "
              f"max weight {1 / ROW_KEYS:g}, gradient scale {1 / ROW_KEYS:g})"]
    rows = []
    for label in ('without scaling', 'with scaling'):
        s, m, qs = study['draw'][label], study['median'][label], study['quartiles'][label]
        sp, en, mw = LESSON_ROW[label]
        if lesson:
            rows.append((label, 'lesson (one draw)', f'{sp:g}', f'{en:g}', f'{mw:g}', '-'))
        rows.append(('' if lesson else label, f'this draw (seed {seed})', f"{s['spread']:.3g}",
                     f"{s['entropy']:.3f}", f"{s['max_weight']:.3f}", f"{s['gradient_scale']:.2e}"))
        rows.append(('', f'median of {draws}', f"{m['spread']:.3g}", f"{m['entropy']:.3f}",
                     f"{m['max_weight']:.3f}", f"{m['gradient_scale']:.2e}"))
        rows.append(('', 'middle half', *(f"{qs[n][0]:.3g}..{qs[n][1]:.3g}"
                                          for n in ('spread', 'entropy', 'max_weight', 'gradient_scale'))))
    lines.append(table(('', 'row', 'spread', 'entropy (bits)', 'max weight', 'gradient scale'),
                       rows, align='llrrrr'))
    below, median = study['below_lesson'], study['median']
    lines.append(f"   The spread ratio is exactly sqrt({row_d}) = {row_d ** 0.5:g} "
                 f"(this draw: {study['spread_ratio']:.12g}" +
                 (f"; the lesson's 25.1 / 3.14 = {25.1 / 3.14:.2f})." if lesson else ")."))
    if lesson:
        ranges = study['max_minus_min']
        fit, fit8, fit_range = d['row_fit']['scaled'], d['row_fit']['unscaled'], d['row_fit']['range']
        lines.append(
            f"   The lesson's row is ONE draw from its widget, and the lesson never defines its 'spread'.\n"
            f"   Ours is the standard deviation. Read that way, its scaled 3.14 is above "
            f"{_share(below['with scaling']['spread'])} our draws,\n"
            f"   yet its entropy and max weight are ordinary: above "
            f"{_share(below['with scaling']['entropy'])} our draws and {_share(below['with scaling']['max_weight'])} "
            f"them.\n"
            f"   max - min fits all its numbers: 3.14 is above "
            f"{_share(ranges['with scaling']['below_lesson'])} our scaled rows' max - min (median "
            f"{ranges['with scaling']['median']:.2f}),\n"
            f"   and the scores {LESSON_ROW_FIT}\n"
            f"   give max - min {fit_range:.2f}, entropy {fit['entropy']:.3f} bits, max weight {fit['max_weight']:.3f}; "
            f"times {ROW_D ** 0.5:g}: {fit_range * ROW_D ** 0.5:.1f}, "
            f"{fit8['entropy']:.3f} bits, {fit8['max_weight']:.3f}\n"
            f"   (their standard deviation is {fit['spread']:.2f}).\n"
            f"   Unscaled, the median row has already collapsed onto one key (max weight "
            f"{median['without scaling']['max_weight']:.3f}, entropy\n"
            f"   {median['without scaling']['entropy']:.2f} bits) before any training; the lesson's "
            f"{LESSON_ROW['without scaling'][1]} bits is above {_share(below['without scaling']['entropy'])}\n"
            f"   our draws: its one draw is less saturated than most.")
    else:
        lines.append(f"   (The lesson's single draw is for d = {ROW_D}; rerun without --row-d to compare.)")

    # 5) cost
    rows = [(c['n'], f"{c['projections']:.3g}", f"{c['attention']:.3g}", f"{c['ratio']:.3g}",
             f"{LESSON_COST[c['n']]:g}") for c in d['cost']]
    lines += ['', f"5) Cost of one layer at D = {LESSON_COST_D}: projections 4 n D^2, attention 2 n^2 D "
              "multiply-adds, ratio n / (2 D)",
              table(('n', 'projections', 'attention', 'attention/projections', 'lesson'), rows),
              f"   Attention outweighs the projections only past n = 2 D = {2 * LESSON_COST_D}. One "
              "contraction 'bhqd,bhkd->bhqk'\n   at b=1, h=12, q=k=d=64 makes "
              f"{1 * 12 * 64 * 64:,} scores of 64 multiply-adds each = {1 * 12 * 64 * 64 * 64:,}."]

    # 6) the score matrix
    lines += ['', "6) The score matrix of one layer: n_head x T x T numbers (head_dim and "
              "n_embd do not appear)"]
    lines.append(table(('n_head', 'T', 'numbers', 'fp16 (2 bytes each)'),
                       [(m['n_head'], m['T'], f"{m['numbers']:,}", _bytes(m['bytes'])) for m in d['score_matrix']]))
    lines.append("   The Czech lesson: 33,554,432 numbers = 64 MiB at T = 1024; \"2 billion\" at T = 8192.")
    return '\n'.join(lines)
