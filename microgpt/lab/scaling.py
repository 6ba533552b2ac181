"""
The numbers behind "divide by sqrt(head_dim)", and what attention costs, measured afresh.

    python -m microgpt.lab scaling
    python -m microgpt.lab scaling --png scaling.png          # also four panels of it (matplotlib)
    python -m microgpt.lab scaling --part row --row-d 256 --no-scale   # one widget of the page

No checkpoint is needed. The Scaling page asks for one widget at a time (--part), so the page
and the printout share every function.
"""

import numpy as np

from ..edge.checks import short
from ..edge.errors import UserError
from .render import table
from .attention import temper
from .limits import MAX_ROW_NUMBERS  # draws x row_d: section 4 holds draws x 8 x row_d numbers, twice
from .rowstats import batch_statistics, row_statistics, softmax
# the three-token example's vectors (example.py, standard library only: the exercises read them too)
from .example import KEYS, Q3, VALUES

SATURATED = [10.0, 2.0, 1.0]                   # section 2's scores
LABELS = ('without scaling', 'with scaling')
ROW_D, ROW_KEYS = 64, 8                         # section 4's row: head size, keys
COST_D, COST_NS = 768, (128, 1024, 8192)        # section 5: GPT-2 small's width, three lengths
SCORE_HEADS, SCORE_T = 32, (1024, 8192)         # section 6: heads, lengths


# ---------------------------------------------------------------------------- 1) Var(q.k) = d
def dot_products(d, samples, rng):
    """`samples` values of q.k for q, k with independent N(0, 1) components, (samples,), drawn
    in chunks of about a million numbers, so that d = 1024 needs no gigabytes."""
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


def variance_widget(samples, seed=42, ds=(4, 64, 1024)):
    """[{d, var: Var(q.k) measured on `samples` dot products, se: its standard error, sd}]."""
    rng = np.random.default_rng(seed)
    rows = []
    for d in ds:
        var = float(dot_products(d, samples, rng).var(ddof=1))
        rows.append({'d': d, 'var': var, 'se': variance_standard_error(d, samples), 'sd': float(np.sqrt(var))})
    return rows


# ---------------------------------------------------------------------------- 4) one row, many draws
def random_rows(draws, rng, d=ROW_D, n_keys=ROW_KEYS):
    """Unscaled scores q.k_j of `draws` random rows: one query against n_keys keys, (draws, n_keys)."""
    q = rng.standard_normal((draws, 1, d))          # (draws, 1, d)
    k = rng.standard_normal((draws, n_keys, d))     # (draws, n_keys, d)
    return (q * k).sum(axis=-1)                     # (draws, n_keys)


# ---------------------------------------------------------------------------- 5), 6) arithmetic
def cost_ratio(n, D):
    """Attention's two contractions (2 n^2 D multiply-adds) over the projections Q, K, V, O
    (4 n D^2): n / (2 D). Attention only outweighs the projections for n > 2 D."""
    return (2 * n * n * D) / (4 * n * D * D)


def score_matrix_size(n_head, T, bytes_per_number=2):
    """(numbers, bytes) of one layer's score matrix: n_head x T x T; fp16 takes 2 bytes."""
    numbers = n_head * T * T
    return numbers, numbers * bytes_per_number


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
    """The sqrt(d) widget's numbers for one row of unscaled scores q.k_j, raw (n,): {'raw',
    'scores', 'weights', 'stats'}, the stats rowstats' plus max - min (another reading of
    "spread") and the vanishing flag (inf or nan at a tiny temperature, as on the Attention page)."""
    raw = np.asarray(raw, dtype=np.float64)                      # (n,)
    scores, inputs = divided(raw * (d ** -0.5 if scale else 1.0), temperature)  # (n,) each
    with np.errstate(over='ignore', invalid='ignore'):
        stats = row_statistics(inputs)
        stats['max_minus_min'] = float(inputs.max() - inputs.min())
    stats['vanishing'] = stats['gradient_scale'] < VANISHING
    return {'raw': raw, 'scores': scores, 'weights': softmax(inputs), 'stats': stats}


def random_row_widget(d, scale=True, temperature=1.0, n_keys=ROW_KEYS, seed=42, draws=WIDGET_DRAWS):
    """row_widget for one random row, and the medians over `draws` more at the same settings.
    One draw can be lucky (two keys sharing the weight keep the gradient scale near 1/2 even
    when saturated), so the warning 'vanishing' is given by the median: most rows at this d."""
    raw = random_rows(1, np.random.default_rng(seed), d, n_keys)[0]              # (n_keys,)
    out = row_widget(raw, d, scale, temperature)
    many = random_rows(draws, np.random.default_rng(seed + 1), d, n_keys)        # (draws, n_keys)
    _, many = divided(many * (d ** -0.5 if scale else 1.0), temperature)         # (draws, n_keys)
    with np.errstate(over='ignore', invalid='ignore'):
        stats = batch_statistics(many)
        stats['max_minus_min'] = many.max(axis=-1) - many.min(axis=-1)           # (draws,)
    out['median'] = {name: float(np.median(v)) for name, v in stats.items()}
    out['quartiles'] = {name: tuple(np.percentile(v, [25, 75])) for name, v in stats.items()}
    out['draws'] = draws
    out['vanishing'] = out['median']['gradient_scale'] < VANISHING
    return out


def row_study(draws, seed, d=ROW_D):
    """Section 4: an eight-key row at head size d, {label: random_row_widget's numbers} without
    and with scaling, and 'spread_ratio', the unscaled draw's spread over the scaled one's."""
    out = {label: random_row_widget(d, label == 'with scaling', seed=seed, draws=draws) for label in LABELS}
    out['spread_ratio'] = out['without scaling']['stats']['spread'] / out['with scaling']['stats']['spread']
    return out


def saturation_sweep(ds, draws, seed=42, n_keys=ROW_KEYS):
    """Median max weight, entropy and gradient scale of random rows at each head size d,
    without and with scaling: {label: {name: [median per d]}}. What --png draws against d."""
    out = {label: {'max_weight': [], 'entropy': [], 'gradient_scale': []} for label in LABELS}
    for d in ds:
        many = random_rows(draws, np.random.default_rng(seed), d, n_keys)  # (draws, n_keys)
        for label, factor in zip(LABELS, (1.0, d ** -0.5)):
            stats = batch_statistics(many * factor)
            for name in out[label]:
                out[label][name].append(float(np.median(stats[name])))
    return out


def row_part(row_d=ROW_D, scale=True, temperature=1.0, keys=ROW_KEYS, seed=42, scores=None,
             draws=WIDGET_DRAWS):
    """The page's row widget: a random row, or the unscaled scores q.k given (a model's, or
    typed), its warning then from the row itself."""
    if not len(scores if scores is not None else ()):  # none given (the command line's default: [])
        out = random_row_widget(row_d, scale, temperature, keys, seed, draws)
    else:
        out = row_widget(scores, row_d, scale, temperature)
        out['vanishing'] = out['stats']['vanishing']
    out.update(row_d=row_d, scale=scale, temperature=temperature, threshold=VANISHING)
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
# GPT-2 small's sizes: one sequence (b 1) of 64 positions, 12 heads of 64, D = h d = 768
EXAMPLE_SIZES = {'b': 1, 'h': 12, 'q': 64, 'k': 64, 'd': 64, 't': 64, 'c': 768, 'e': 768}


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
def worked_examples(samples=50_000, draws=2000, seed=42, row_d=ROW_D):
    from microgpt import inference  # the port's attention_head, the function its forward() calls per head and position

    if draws * row_d > MAX_ROW_NUMBERS:
        raise UserError(f"--draws {draws} x --row-d {row_d} = {draws * row_d:,} is more than "
                        f"{MAX_ROW_NUMBERS:,}: section 4 would hold {draws * row_d * ROW_KEYS * 16 >> 20:,} MiB; "
                        "lower one of them")
    out3, logits3, w3 = inference.attention_head(Q3, KEYS, VALUES)  # (4,), (3,), (3,)
    raw3 = np.array(KEYS) @ np.array(Q3)  # (3,) the unscaled q3.k_j
    return {'samples': samples, 'draws': draws, 'seed': seed, 'row_d': row_d,
            'variance': variance_widget(samples, seed),
            'saturation': {'scores': SATURATED, 'weights': softmax(np.array(SATURATED)),  # (3,)
                           'stats': row_statistics(SATURATED)},
            'three': {'raw': raw3, 'scaled': logits3, 'weights': w3, 'out': out3,
                      'weights_x10': softmax(raw3 / 2 * 10)},  # (3,): the same scores x 10
            'row': row_study(draws, seed, row_d),
            'cost': [cost_table(n, COST_D) for n in COST_NS],
            'score_matrix': [dict(zip(('numbers', 'bytes'), score_matrix_size(SCORE_HEADS, T)), n_head=SCORE_HEADS, T=T)
                             for T in SCORE_T]}


def render_all(d):
    samples, draws, seed, row_d = d['samples'], d['draws'], d['seed'], d['row_d']
    lines = [f"scaling: samples={samples} (per d, for the variance) draws={draws} "
             f"(random rows, for the medians) seed={seed}", '']

    # 1) Var(q.k) = d
    lines.append("1) Var(q.k) = d, for q and k with independent zero-mean unit-variance components")
    lines.append(table(('d', 'measured Var', 'std. error', 'predicted', 'std dev'),
                       [(v['d'], f"{v['var']:.2f}", f"± {v['se']:.2f}", v['d'], f"{v['sd']:.2f}")
                        for v in d['variance']]))
    lines.append("   Unscaled scores spread like sqrt(d): ±8 at d = 64, ±32 at d = 1024. Dividing by "
                 "sqrt(d)\n   brings the variance back to 1 whatever d is. (Each run is a sample: "
                 "expect the\n   measured variance within about two standard errors of d.)")

    # 2) saturation
    p, sat = d['saturation']['weights'], d['saturation']['stats']
    lines += ['', "2) Saturation: softmax of the scores [10, 2, 1]",
              f"   weights [{', '.join(f'{x:.4f}' for x in p)}]   "
              f"(e^10 / (e^10 + e^2 + e^1) = {p[0]:.6f})",
              f"   gradient scale {sat['gradient_scale']:.2e} (a uniform row of 3 would give "
              f"{1 / 3:.3f}): one key takes everything\n   and almost no gradient flows back "
              "to the scores."]

    # 3) three tokens by hand
    c = d['three']
    w3, w10 = c['weights'], c['weights_x10']
    lines += ['', "3) Three tokens by hand: head_dim 4, the query of token 3 against the keys of tokens 1..3",
              f"   q3.k_j          {np.array2string(c['raw'], precision=3)}",
              f"   / sqrt(4) = 2   {np.array2string(c['scaled'], precision=3)}",
              f"   softmax         {np.array2string(w3, precision=3)}   (the last is {w3[2]:.6f})",
              f"   out3 = sum w v  {np.array2string(c['out'], precision=3)}",
              f"   scores x 10     {np.array2string(w10, precision=3)}: the weakest weight falls "
              f"{w3[1]:.3f} -> {w10[1]:.3f},\n                   about {w3[1] / w10[1]:.1f} times"]

    # 4) one row of eight keys at d = 64 (or --row-d)
    study = d['row']
    lines += ['', f"4) One attention row: d = {row_d}, {ROW_KEYS} keys, q and k with unit-variance "
              f"components\n   (a uniform row of {ROW_KEYS} keys has entropy {np.log2(ROW_KEYS):g} bits, "
              f"max weight {1 / ROW_KEYS:g}, gradient scale {1 / ROW_KEYS:g})"]
    rows = []
    for label in LABELS:
        s, m, qs = study[label]['stats'], study[label]['median'], study[label]['quartiles']
        rows.append((label, f'this draw (seed {seed})', f"{s['spread']:.3g}",
                     f"{s['entropy']:.3f}", f"{s['max_weight']:.3f}", f"{s['gradient_scale']:.2e}"))
        rows.append(('', f'median of {draws}', f"{m['spread']:.3g}", f"{m['entropy']:.3f}",
                     f"{m['max_weight']:.3f}", f"{m['gradient_scale']:.2e}"))
        rows.append(('', 'middle half', *(f"{qs[n][0]:.3g}..{qs[n][1]:.3g}"
                                          for n in ('spread', 'entropy', 'max_weight', 'gradient_scale'))))
    lines.append(table(('', 'row', 'spread (std)', 'entropy (bits)', 'max weight', 'gradient scale'),
                       rows, align='llrrrr'))
    median = study['without scaling']['median']
    lines.append(f"   The spread ratio is exactly sqrt({row_d}) = {row_d ** 0.5:g} "
                 f"(this draw: {study['spread_ratio']:.12g}). Unscaled, the median row has\n"
                 f"   already collapsed onto one key (max weight {median['max_weight']:.3f}, entropy "
                 f"{median['entropy']:.2f} bits) before any training.")

    # 5) cost
    scores = contraction(CONTRACTIONS['scores'][0], EXAMPLE_SIZES)
    rows = [(c['n'], f"{c['projections']:.3g}", f"{c['attention']:.3g}", f"{c['ratio']:.3g}") for c in d['cost']]
    lines += ['', f"5) Cost of one layer at D = {COST_D} in multiply-adds: projections 4 n D^2, "
              "attention 2 n^2 D",
              table(('n', 'projections', 'attention', 'attention/projections'), rows),
              f"   Attention outweighs the projections only past n = 2 D = {2 * COST_D}. One "
              f"contraction '{scores['spec']}'\n   at b=1, h=12, q=k=d=64 makes "
              f"{scores['elements']:,} scores of {scores['per_element']} multiply-adds each = "
              f"{scores['multiply_adds']:,}."]

    # 6) the score matrix
    lines += ['', "6) The score matrix of one layer: n_head x T x T numbers (head_dim and "
              "n_embd do not appear)"]
    lines.append(table(('n_head', 'T', 'numbers', 'fp16 (2 bytes each)'),
                       [(m['n_head'], m['T'], f"{m['numbers']:,}", _bytes(m['bytes'])) for m in d['score_matrix']]))
    return '\n'.join(lines)


# ---------------------------------------------------------------------------- one part at a time
PARTS = ('all', 'row', 'variance', 'cost', 'index')  # 'all': the printout; the others: the page's widgets
WIDGET_NUMBERS = 4_000_000  # random numbers behind the row widget's medians: ~30 MB at most


def compute(samples=50_000, draws=2000, seed=42, row_d=ROW_D, part='all', scale=True, temperature=1.0,
            keys=ROW_KEYS, scores=None, n=1024, D=COST_D, tab='scores', sizes=None):
    """part='all': every section of the printout (worked_examples); else one widget of the
    Scaling page (row_part, variance_widget, cost_table, contraction). Every answer carries the
    part and the printout's own settings (its --png draws from them)."""
    if part not in PARTS:
        raise UserError(f"--part {short(part)} is not one of {', '.join(PARTS)}")
    settings = {'part': part, 'samples': samples, 'draws': draws, 'seed': seed, 'row_d': row_d}
    if part == 'all':
        return {**worked_examples(samples, draws, seed, row_d), **settings}
    if part == 'row':  # the medians' draws: as many as WIDGET_NUMBERS allows, 50..WIDGET_DRAWS
        widget_draws = max(50, min(WIDGET_DRAWS, WIDGET_NUMBERS // (keys * row_d)))
        return {**settings, **row_part(row_d, scale, temperature, keys, seed, scores, widget_draws)}
    if part == 'variance':
        return {**settings, 'rows': variance_widget(samples, seed)}
    if part == 'cost':
        return {**settings, **cost_table(n, D), 'examples': [cost_table(m, COST_D) for m in COST_NS]}
    if tab not in CONTRACTIONS:
        raise UserError(f"--tab {short(tab)} is not one of {', '.join(CONTRACTIONS)}")
    given = {}
    for letter, size in (sizes or {}).items():
        if letter not in EXAMPLE_SIZES or size != int(size):
            raise UserError(f"{letter}={size:g}: give whole sizes for the indices "
                            f"{', '.join(EXAMPLE_SIZES)}, e.g. h=12")
        given[letter] = int(size)
    spec, about = CONTRACTIONS[tab]
    return {**settings, 'tab': tab, 'tabs': {t: s for t, (s, _) in CONTRACTIONS.items()}, 'about': about,
            **contraction(spec, {**EXAMPLE_SIZES, **given})}


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
        return table(('d', 'measured Var', 'std. error', 'std dev'),
                     [(r['d'], f"{r['var']:.2f}", f"± {r['se']:.2f}", f"{r['sd']:.2f}") for r in d['rows']])
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
    from .plot import scaling_pictures
    samples, draws, seed, row_d = d['samples'], d['draws'], d['seed'], d['row_d']
    raw = random_rows(1, np.random.default_rng(seed), row_d)[0]  # (n_keys,): section 4's draw
    ns = np.unique(np.geomspace(16, 16384, 40).astype(int))      # (40,) sequence lengths
    scaling_pictures(path, {
        'variance': d['rows'] if d['part'] == 'variance' else
                    d['variance'] if d['part'] == 'all' else
                    variance_widget(samples, seed),
        'row_d': row_d,
        'row': {label: row_widget(raw, row_d, scale=label == 'with scaling')['weights'] for label in LABELS},
        'sweep_ds': SWEEP_DS, 'sweep': saturation_sweep(SWEEP_DS, min(draws, 2000), seed),
        'cost_D': COST_D, 'cost_n': ns, 'cost_ratio': [cost_ratio(int(n), COST_D) for n in ns],
    }, f"lab scaling (samples {samples}, draws {draws}, seed {seed})")
