"""
The numbers behind "divide by sqrt(head_dim)", measured afresh next to the lessons' own.

    python -m microgpt.lab scaling
    python -m microgpt.lab scaling --samples 200000 --draws 10000 --seed 1
    python -m microgpt.lab scaling --png scaling.png          # also four panels of it (matplotlib)
    python -m microgpt.lab scaling --part row --row-d 256 --no-scale   # one widget of the page

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

No checkpoint is needed: everything here is random draws and arithmetic. The web lab's
Scaling page asks for one widget at a time (--part row, variance, cost, index: the functions
under "the widgets" below), so the page and the printout share every function; with a model's
own scores (--scores, which the page takes from the Attention sandbox) the row is that model's.
"""

import functools

import numpy as np

from ..edge.checks import short
from ..edge.errors import UserError
from .render import table
from .attention import temper
from .limits import MAX_ROW_NUMBERS  # draws x row_d: section 4 holds draws x 8 x row_d numbers, twice
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
# Czech lesson, "kočka spí venku": its vectors and printed numbers (czech.py, standard library only)
from .czech import (CZECH_KEYS, CZECH_OUT, CZECH_Q3, CZECH_SCORES, CZECH_VALUES,  # noqa: E402,F401
                    CZECH_WEIGHTS, CZECH_WEIGHTS_X10)
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


def _fixed(x):
    """x to 3 decimals, or 3 significant digits once that would take a line (a tiny temperature)."""
    return f'{x:.3f}' if abs(x) < 1e6 else f'{x:.3g}'


def _bytes(n):
    for unit, size in (('GiB', 2 ** 30), ('MiB', 2 ** 20), ('KiB', 2 ** 10)):
        if n >= size:
            return f'{n / size:g} {unit}'
    return f'{n} B'


# ---------------------------------------------------------------------------- the widgets
# What the web lab's Scaling page shows (api.py calls these, the printout above and --png too).
VANISHING = 0.01   # gradient scale below which we say the gradient vanishes: a change of 1 in
                   # the scores moves the weights by at most 0.01 (a uniform row of 8 gives 0.125)
WIDGET_DRAWS = 500  # random rows behind the widget's medians: enough for a stable median, ~20 ms


def divided(scaled, temperature):
    """(the scores scaled / temperature as shown, +-inf where a tiny temperature (1e-308)
    overflows them; the softmax's input: the same, or there attention.temper's, shifted by the
    row's max so that it never reaches +inf, whose weights are the limit's, one-hot on the best key)."""
    with np.errstate(over='ignore', invalid='ignore'):
        scores = scaled / temperature                            # same shape as scaled
        fits = np.isfinite(scores - scores.max(axis=-1, keepdims=True)).all()  # the softmax's own shift
    return scores, scores if fits else temper(scaled, temperature)


def row_widget(raw, d, scale=True, temperature=1.0):
    """The sqrt(d) widget's numbers for one row of unscaled scores q.k_j, raw (n,).

    The scores entering the softmax are raw / sqrt(d) (or raw, scale off), then / temperature.
    Returns {'raw', 'scores', 'weights', 'stats'}: stats are rowstats' four numbers plus the
    scores' max - min (the lesson's own "spread", see section 4) and the vanishing flag. At a tiny
    temperature the spread and max - min are inf or nan, as on the Attention page.
    """
    raw = np.asarray(raw, dtype=np.float64)                      # (n,)
    scores, inputs = divided(raw * (d ** -0.5 if scale else 1.0), temperature)  # (n,) each
    with np.errstate(over='ignore', invalid='ignore'):
        stats = row_statistics(inputs)
        stats['max_minus_min'] = float(inputs.max() - inputs.min())
    stats['vanishing'] = stats['gradient_scale'] < VANISHING
    return {'raw': raw, 'scores': scores, 'weights': softmax(inputs), 'stats': stats}


def random_row_widget(d, scale=True, temperature=1.0, n_keys=ROW_KEYS, seed=42, draws=WIDGET_DRAWS):
    """row_widget for one random row (q and k with unit-variance components), and beside it
    the medians over `draws` more rows at the same settings.

    One draw can be lucky (two keys sharing the weight keep the gradient scale near 1/2 even
    when saturated), so the warning 'vanishing' is given by the median: most rows at this d.
    """
    raw = random_rows(1, np.random.default_rng(seed), d, n_keys)[0]              # (n_keys,)
    out = row_widget(raw, d, scale, temperature)
    many = random_rows(draws, np.random.default_rng(seed + 1), d, n_keys)        # (draws, n_keys)
    _, many = divided(many * (d ** -0.5 if scale else 1.0), temperature)         # (draws, n_keys)
    with np.errstate(over='ignore', invalid='ignore'):
        stats = batch_statistics(many)
        stats['max_minus_min'] = many.max(axis=-1) - many.min(axis=-1)           # (draws,)
    out['median'] = {name: float(np.median(v)) for name, v in stats.items()}
    out['draws'] = draws
    out['vanishing'] = out['median']['gradient_scale'] < VANISHING
    return out


def variance_widget(samples, seed=42, ds=(4, 64, 1024)):
    """Section 1 for the page: [{d, var, se, sd, lesson_var, lesson_sd}] (the lesson's
    measurements beside ours; None where the lesson measured no such d)."""
    rows = []
    for d, var, se, sd in variance_table(samples, np.random.default_rng(seed), ds):
        lesson_var, lesson_sd = LESSON_VARIANCE.get(d, (None, None))
        rows.append({'d': d, 'var': var, 'se': se, 'sd': sd, 'lesson_var': lesson_var, 'lesson_sd': lesson_sd})
    return rows


def saturation_sweep(ds, draws, seed=42, n_keys=ROW_KEYS):
    """Median max weight, entropy and gradient scale of random rows at each head size d,
    without and with scaling: {label: {name: [median per d]}}. What --png draws against d."""
    out = {label: {'max_weight': [], 'entropy': [], 'gradient_scale': []} for label in LESSON_ROW}
    for d in ds:
        many = random_rows(draws, np.random.default_rng(seed), d, n_keys)  # (draws, n_keys)
        for label, factor in (('without scaling', 1.0), ('with scaling', d ** -0.5)):
            stats = batch_statistics(many * factor)
            for name in out[label]:
                out[label][name].append(float(np.median(stats[name])))
    return out


@functools.lru_cache(maxsize=4)  # the same 1000 draws for every redraw of the page's widget
def lesson_row_table(draws=1000, seed=42):
    """The lesson's table (d = 64, eight keys, without and with scaling) beside ours:
    {label: {'lesson': (spread, entropy, max weight), 'draw': stats, 'median': stats}}."""
    study = row_study(draws, seed)
    one = random_rows(1, np.random.default_rng(seed))[0]  # (n_keys,): row_study's fixed draw
    return {label: {'lesson': LESSON_ROW[label], 'draw': study['draw'][label],
                    'draw_max_minus_min': float(np.ptp(one * factor)),
                    'median': study['median'][label],
                    'median_max_minus_min': study['max_minus_min'][label]['median']}
            for label, factor in (('without scaling', 1.0), ('with scaling', ROW_D ** -0.5))}


def row_part(row_d=ROW_D, scale=True, temperature=1.0, keys=ROW_KEYS, seed=42, scores=None,
             draws=WIDGET_DRAWS):
    """The page's row widget: a random row (random_row_widget), or the unscaled scores q.k
    given (a model's, from the Attention sandbox, or typed) as row_widget sees them, its
    warning from the row itself; with the lesson's table and the threshold beside it."""
    if not len(scores if scores is not None else ()):  # none given (the command line's default: [])
        out = random_row_widget(row_d, scale, temperature, keys, seed, draws)
    else:
        out = row_widget(scores, row_d, scale, temperature)
        out['vanishing'] = out['stats']['vanishing']
    out.update(row_d=row_d, scale=scale, temperature=temperature, threshold=VANISHING,
               lesson=lesson_row_table())
    return out


def cost_table(n, D):
    """The cost widget: multiply-adds of one layer's projections (4 n D^2) and attention
    (2 n^2 D), their ratio n / (2 D), and the n where attention starts to outweigh."""
    return {'n': n, 'D': D, 'projections': 4 * n * D * D, 'attention': 2 * n * n * D,
            'ratio': cost_ratio(n, D), 'crossover': 2 * D}


# The index-notation widget's three tabs. Letters: b batch, h head, q query position, k key
# position, d head_dim; t position, c n_embd in, e n_embd out (W stored [n_out][n_in], as ours).
CONTRACTIONS = {
    'scores': ('bhqd,bhkd->bhqk', "q k^T: every query against every key, summing over d"),
    'output': ('bhqk,bhkd->bhqd', "weights times values: summing over the keys k"),
    'projection': ('btc,ec->bte', "x W^T, one of Q, K, V, O: summing over the input width c"),
}
INDEX_MEANING = {'b': 'batch', 'h': 'head', 'q': 'query position', 'k': 'key position',
                 'd': 'head_dim', 't': 'position', 'c': 'n_embd (in)', 'e': 'n_embd (out)'}
# the Russian lesson's sizes (b 1, h 12, q = k = d = 64), with D = h d = 768 as in its cost table
LESSON_SIZES = {'b': 1, 'h': 12, 'q': 64, 'k': 64, 'd': 64, 't': 64, 'c': 768, 'e': 768}


def contraction(spec, sizes):
    """What an einsum 'ij,jk->ik' costs at the given index sizes {letter: int}.

    An index in the output is kept (one result per value of it); any other is summed. Each
    result element takes one multiply-add per value of the summed indices, so
    multiply-adds = elements x product(summed sizes).
    """
    inputs, output = spec.split('->')
    letters = list(dict.fromkeys(inputs.replace(',', '')))  # in order of first appearance
    summed = [x for x in letters if x not in output]
    shape = [sizes[x] for x in output]
    elements = int(np.prod(shape, dtype=object))            # Python ints: never overflow
    per_element = int(np.prod([sizes[x] for x in summed], dtype=object))
    return {'spec': spec, 'operands': inputs.split(','), 'output': output,
            'indices': [{'index': x, 'size': sizes[x], 'role': 'kept' if x in output else 'summed',
                         'meaning': INDEX_MEANING.get(x, '')} for x in letters],
            'shape': shape, 'elements': elements, 'per_element': per_element,
            'multiply_adds': elements * per_element}


# ---------------------------------------------------------------------------- the sandbox
def lesson_numbers(samples=50_000, draws=2000, seed=42, row_d=ROW_D):
    """Every number the printout shows, each section's measurements beside the lesson's."""
    from microgpt import inference  # the port's attention_head, the function its forward() calls per head and position

    if draws * row_d > MAX_ROW_NUMBERS:
        raise UserError(f"--draws {draws} x --row-d {row_d} = {draws * row_d:,} is more than "
                        f"{MAX_ROW_NUMBERS:,}: section 4 would hold {draws * row_d * ROW_KEYS * 16 >> 20:,} MiB; "
                        "lower one of them")
    rng = np.random.default_rng(seed)
    z = LESSON_SATURATION[0]
    out3, logits3, w3 = inference.attention_head(CZECH_Q3, CZECH_KEYS, CZECH_VALUES)  # (4,), (3,), (3,)
    raw3 = np.array(CZECH_KEYS) @ np.array(CZECH_Q3)  # (3,) the unscaled q3.k_j
    d = {'samples': samples, 'draws': draws, 'seed': seed, 'row_d': row_d,
         'variance': [{'d': dd, 'var': var, 'se': se, 'sd': sd, 'lesson_var': LESSON_VARIANCE[dd][0],
                       'lesson_sd': LESSON_VARIANCE[dd][1]} for dd, var, se, sd in variance_table(samples, rng)],
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


def render_all(d):
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
    scores = contraction(CONTRACTIONS['scores'][0], LESSON_SIZES)
    rows = [(c['n'], f"{c['projections']:.3g}", f"{c['attention']:.3g}", f"{c['ratio']:.3g}",
             f"{LESSON_COST[c['n']]:g}") for c in d['cost']]
    lines += ['', f"5) Cost of one layer at D = {LESSON_COST_D}: projections 4 n D^2, attention 2 n^2 D "
              "multiply-adds, ratio n / (2 D)",
              table(('n', 'projections', 'attention', 'attention/projections', 'lesson'), rows),
              f"   Attention outweighs the projections only past n = 2 D = {2 * LESSON_COST_D}. One "
              f"contraction '{scores['spec']}'\n   at b=1, h=12, q=k=d=64 makes "
              f"{scores['elements']:,} scores of {scores['per_element']} multiply-adds each = "
              f"{scores['multiply_adds']:,}."]

    # 6) the score matrix
    lines += ['', "6) The score matrix of one layer: n_head x T x T numbers (head_dim and "
              "n_embd do not appear)"]
    lines.append(table(('n_head', 'T', 'numbers', 'fp16 (2 bytes each)'),
                       [(m['n_head'], m['T'], f"{m['numbers']:,}", _bytes(m['bytes'])) for m in d['score_matrix']]))
    lines.append("   The Czech lesson: 33,554,432 numbers = 64 MiB at T = 1024; \"2 billion\" at T = 8192.")
    return '\n'.join(lines)


# ---------------------------------------------------------------------------- one part at a time
PARTS = ('all', 'row', 'variance', 'cost', 'index')  # 'all': the printout; the others: the page's widgets
WIDGET_NUMBERS = 4_000_000  # random numbers behind the row widget's medians: ~30 MB at most


def compute(samples=50_000, draws=2000, seed=42, row_d=ROW_D, part='all', scale=True, temperature=1.0,
            keys=ROW_KEYS, scores=None, n=1024, D=LESSON_COST_D, tab='scores', sizes=None):
    """The registry's contract. part='all' is the printout of every section (lesson_numbers);
    the Scaling page asks for one widget at a time:
      'row'       one attention row at head size row_d (random, or the unscaled `scores` given),
                  with `scale`, `temperature` and `keys` (row_part);
      'variance'  Var(q.k) at d = 4, 64, 1024 from `samples` dot products (variance_widget);
      'cost'      attention / projections at length n and width D, and the lesson's three rows;
      'index'     the contraction of CONTRACTIONS[tab] at the given index `sizes` (the lesson's
                  for the rest).
    Every answer carries the part and the printout's own settings (its --png draws from them)."""
    if part not in PARTS:
        raise UserError(f"--part {short(part)} is not one of {', '.join(PARTS)}")
    settings = {'part': part, 'samples': samples, 'draws': draws, 'seed': seed, 'row_d': row_d}
    if part == 'all':
        return {**lesson_numbers(samples, draws, seed, row_d), **settings}
    if part == 'row':  # the medians' draws: as many as WIDGET_NUMBERS allows, 50..WIDGET_DRAWS
        widget_draws = max(50, min(WIDGET_DRAWS, WIDGET_NUMBERS // (keys * row_d)))
        return {**settings, **row_part(row_d, scale, temperature, keys, seed, scores, widget_draws)}
    if part == 'variance':
        return {**settings, 'rows': variance_widget(samples, seed)}
    if part == 'cost':
        return {**settings, **cost_table(n, D),
                'lesson': [{**cost_table(m, LESSON_COST_D), 'lesson_ratio': r} for m, r in LESSON_COST.items()]}
    if tab not in CONTRACTIONS:
        raise UserError(f"--tab {short(tab)} is not one of {', '.join(CONTRACTIONS)}")
    given = {}
    for letter, size in (sizes or {}).items():
        if letter not in LESSON_SIZES or size != int(size):
            raise UserError(f"{letter}={size:g}: give whole sizes for the indices "
                            f"{', '.join(LESSON_SIZES)}, e.g. h=12")
        given[letter] = int(size)
    spec, about = CONTRACTIONS[tab]
    return {**settings, 'tab': tab, 'tabs': {t: s for t, (s, _) in CONTRACTIONS.items()}, 'about': about,
            **contraction(spec, {**LESSON_SIZES, **given})}


def render(d):
    part = d['part']
    if part == 'all':
        return render_all(d)
    if part == 'row':
        s = d['stats']
        lines = [f"one row of {len(d['weights'])} keys at d = {d['row_d']}, "
                 f"{'divided by sqrt(d)' if d['scale'] else 'NOT divided by sqrt(d)'}, temperature {d['temperature']:g}",
                 table(('key', 'q.k', 'score', 'weight'),
                       [(j, _fixed(r), _fixed(c), f'{w:.4f}') for j, (r, c, w) in
                        enumerate(zip(d['raw'], d['scores'], d['weights']))]),
                 f"spread (std) {_fixed(s['spread'])}, max - min {_fixed(s['max_minus_min'])}, entropy {s['entropy']:.3f} "
                 f"bits (of {s['max_entropy']:.3f}), max weight {s['max_weight']:.4f}, gradient scale "
                 f"{s['gradient_scale']:.3e}"]
        if 'median' in d:
            m = d['median']
            lines.append(f"median of {d['draws']} random rows: entropy {m['entropy']:.3f} bits, max weight "
                         f"{m['max_weight']:.4f}, gradient scale {m['gradient_scale']:.3e}")
        if d['vanishing']:
            lines.append(f"warning: the gradient vanishes (gradient scale below {d['threshold']}): a change "
                         "of the scores barely moves the weights")
        return '\n'.join(lines)
    if part == 'variance':
        return table(('d', 'measured Var', 'std. error', 'std dev', 'lesson: Var', 'lesson: sd'),
                     [(r['d'], f"{r['var']:.2f}", f"± {r['se']:.2f}", f"{r['sd']:.2f}", f"{r['lesson_var']:g}",
                       f"{r['lesson_sd']:g}") for r in d['rows']])
    if part == 'cost':
        return (f"n = {d['n']}, D = {d['D']}: projections 4 n D^2 = {d['projections']:,}, attention 2 n^2 D = "
                f"{d['attention']:,} multiply-adds; attention / projections = n / (2 D) = {d['ratio']:.4g} "
                f"(attention outweighs them past n = {d['crossover']:,})")
    rows = [(i['index'], i['size'], i['role'], i['meaning']) for i in d['indices']]
    return '\n'.join([f"{d['spec']}  ({d['about']})", table(('index', 'size', 'role', 'meaning'), rows, align='lrll'),
                      f"result shape {d['shape']}: {d['elements']:,} elements, {d['per_element']:,} multiply-adds "
                      f"each = {d['multiply_adds']:,}"])


SWEEP_DS = (4, 16, 64, 256, 1024)  # head sizes on the picture's saturation panel


def picture(path, d, source):
    """--png: Var(q.k), section 4's row at row_d without and with scaling, the median
    saturation against d and the cost ratio n / (2 D), from the printout's settings."""
    from .plot import scaling_pictures
    samples, draws, seed, row_d = d['samples'], d['draws'], d['seed'], d['row_d']
    raw = random_rows(1, np.random.default_rng(seed), row_d)[0]  # (n_keys,): section 4's draw
    ns = np.unique(np.geomspace(16, 16384, 40).astype(int))      # (40,) sequence lengths
    scaling_pictures(path, {
        'variance': d['rows'] if d['part'] == 'variance' else
                    d['variance'] if d['part'] == 'all' and 'lesson_var' in d['variance'][0] else
                    variance_widget(samples, seed),
        'row_d': row_d,
        'row': {label: row_widget(raw, row_d, scale=label == 'with scaling')['weights'] for label in LESSON_ROW},
        'sweep_ds': SWEEP_DS, 'sweep': saturation_sweep(SWEEP_DS, min(draws, 2000), seed),
        'cost_D': LESSON_COST_D, 'cost_n': ns, 'cost_ratio': [cost_ratio(int(n), LESSON_COST_D) for n in ns],
        'cost_lesson': LESSON_COST,
    }, f"lab scaling (samples {samples}, draws {draws}, seed {seed})")
