"""
The attention sandbox: one head, one query position, every step of attention with the real
numbers of a trained checkpoint (what byhand.py does on typed numbers).

    python -m microgpt.lab attention anna                    # layer 0, head 0, last position
    python -m microgpt.lab attention anna --head 1 --query 2 # an earlier query: see the mask
    python -m microgpt.lab attention anna --no-scale         # what if q.k were not / sqrt(d)?
    python -m microgpt.lab attention anna --png heads.png    # a heatmap per head

At the defaults of the "what if" knobs the printout checks itself against the weights the
port's forward pass captured.
"""

import numpy as np

from ..edge.errors import UserError
from .loading import data_mode, read_text
from .render import MASKED, bar, number, shade, table, token_label, unit, width
from .rowstats import row_statistics, softmax


# ---------------------------------------------------------------------------- the arithmetic
def temper(scores, temperature):
    """scores / temperature, ready for a softmax, with each row's max subtracted first.

    The softmax does not change (a constant per row cancels), but every entry is now <= 0, so
    a tiny temperature (1e-308) gives a large negative number or -inf, never +inf (and
    never inf - inf = nan): the weights tend to one-hot on the best key, as they should.
    """
    if temperature == 1.0:
        return scores
    top = scores.max(axis=-1, keepdims=True)      # (..., 1): the best visible score per row
    with np.errstate(over='ignore'):
        return (scores - top) / temperature       # same shape as scores


def weight_matrix(q_h, k_h, scale=True, temperature=1.0):
    """One head's causal attention weights from q_h, k_h (T, head_dim): (T, T), NaN where j > i."""
    T, head_dim = q_h.shape
    scores = q_h @ k_h.T                          # (T, T): q_i . k_j for every pair
    if scale:
        scores = scores * head_dim ** -0.5        # (T, T)
    future = np.triu(np.ones((T, T), dtype=bool), k=1)  # (T, T): True where j > i
    weights = softmax(temper(np.where(future, -np.inf, scores), temperature))  # (T, T): exp(-inf) = 0
    return np.where(future, np.nan, weights)      # (T, T): a future cell is "no weight", not 0


def kv_head(config, head):
    """The head of keys and values that query head `head` reads: its own, or with grouped-query
    attention (n_kv_head < n_head) the one its group of n_head // n_kv_head query heads shares."""
    return head // (config.n_head // config.n_kv_head)


def rope_by_distance(q, k, i, j, block_size):
    """RoPE: the score q.k / sqrt(head_dim) of query q (position i) and key k (position j), both
    as scored, at every distance d = i - j from 0 to block_size - 1: (block_size,).

    Turned back (q by -i, k by -j), they are the vectors before RoPE. Turned by i and j they
    score (R(i) q) . (R(j) k) = (R(i - j) q) . k, pair by pair (a turn by i, then back by j): only
    the distance counts. So the bare q turned by d, scored against the bare k, is what the two
    score d positions apart wherever they sit; entry i - j is the model's own score."""
    from microgpt.inference.attention import rope
    bare_q, bare_k = rope(q[None], -i)[0], rope(k[None], -j)[0]  # (head_dim,) each: before RoPE
    turned = rope(np.tile(bare_q, (block_size, 1)))              # (block_size, head_dim): row d turned by d
    return turned @ bare_k * len(q) ** -0.5                      # (block_size,)


def head_view(model, token_ids, layer, head, query, scale=True, temperature=1.0):
    """Every number the printout shows, for head `head` of layer `layer` at query `query`."""
    from microgpt import inference

    _, caps = model.forward(token_ids, capture=('q', 'k', 'v', 'attention_softmax'))
    kv = kv_head(model.config, head)
    q = caps['q'][layer, head, query]             # (head_dim,): what position i looks for
    keys = caps['k'][layer, kv, :query + 1]       # (t, head_dim): the visible keys j <= i
    values = caps['v'][layer, kv, :query + 1]     # (t, head_dim): their values
    # the port's own attention step, the function forward() calls for this head and position
    out, scores, weights = inference.attention_head(q, keys, values, scale=scale)  # (head_dim,), (t,), (t,)
    if temperature != 1.0:
        weights = softmax(temper(scores, temperature))  # (t,)
        with np.errstate(over='ignore'):
            scores = scores / temperature         # (t,): shown as they are; +-inf at a tiny temperature
        out = weights @ values                    # (head_dim,)
    all_heads = np.stack([weight_matrix(caps['q'][layer, h], caps['k'][layer, kv_head(model.config, h)],
                                        scale, temperature) for h in range(model.config.n_head)])  # (n_head, T, T)
    return {
        'q': q,
        'keys': keys,
        'values': values,
        'products': keys * q,                     # (t, head_dim): q[d] * k_j[d], the dot product's terms
        'raw': keys @ q,                          # (t,): q . k_j, not yet scaled
        'scores': scores,                         # (t,): what enters the softmax
        'weights': weights,                       # (t,): sums to 1
        'weighted_values': weights[:, None] * values,  # (t, head_dim): w_j * v_j
        'out': out,                               # (head_dim,): sum_j w_j v_j
        'all_heads': all_heads,
        'model_weights': caps['attention_softmax'][layer, :, query],  # (n_head, T), NaN for j > i
        'kv_head': kv,
    }


def check_choice(model, token_ids, layer, head, query, mode='lines'):
    """The query position (default: the last), after checking every choice is in range."""
    c, T = model.config, len(token_ids)
    if not 0 <= layer < c.n_layer:
        raise UserError(f"--layer {layer} is out of range: this model has {c.n_layer} "
                        f"layer(s), 0..{c.n_layer - 1}")
    if not 0 <= head < c.n_head:
        raise UserError(f"--head {head} is out of range: this model has {c.n_head} heads, "
                        f"0..{c.n_head - 1}")
    if query is None:
        return T - 1
    if not 0 <= query < T:
        what = "TEXT has" if mode == 'text' else "[BOS] + TEXT has"
        raise UserError(f"--query {query} is out of range: {what} positions 0..{T - 1}"
                        + ("" if mode == 'text' else " (0 is BOS)"))
    return query


# ---------------------------------------------------------------------------- the printout
def _keys(first, last):
    """'key 0 is' or 'keys 0..3 are': the positions first..last, singular when there is one."""
    return f'key {first} is' if first == last else f'keys {first}..{last} are'


def _vec(x, spec='+.3f', shown=None):
    """[a b c], or its first `shown` numbers and how many are left: [a b … +29]."""
    words = [number(v, spec) for v in x]
    if shown is None or shown >= len(words):
        return '[' + ' '.join(words) + ']'
    return '[' + ' '.join(words[:shown]) + f' … +{len(words) - shown}]'


def compute(model, text, layer=0, head=0, query=None, scale=True, temperature=1.0, key=None, ckpt=None):
    """head_view for TEXT, and the row statistics without and with the scaling; on a RoPE model,
    the score of the query and `key` (default: the key this head weights most) at every distance."""
    mode = data_mode(ckpt)
    token_ids = read_text(model, text, mode).ids
    query = check_choice(model, token_ids, layer, head, query, mode)
    if key is not None and key > query:
        raise UserError(f"--key {key} is a future key of query {query}: give 0..{query}")
    view = head_view(model, token_ids, layer, head, query, scale, temperature)
    view['rope'] = None
    if model.config.rope:
        key = int(np.argmax(view['model_weights'][head, :query + 1])) if key is None else key
        view['rope'] = {'key': key, 'distance': query - key, 'scores': rope_by_distance(
            view['q'], view['keys'][key], query, key, model.config.block_size)}  # scores: (block_size,)
    head_dim = model.config.head_dim
    row_statistics(view['raw'])  # the model's own scores must fit a float's arithmetic (see run)
    stats = {}
    for label, factor in (('without scaling', 1.0), ('with scaling', head_dim ** -0.5)):
        # only the what-if temperature may push them past it: a tiny one gives spread inf or nan
        with np.errstate(invalid='ignore', over='ignore'):
            stats[label] = row_statistics(temper(view['raw'] * factor, temperature))
    view.update(text=text, data_mode=mode, unit=unit(model.tokenizer), layer=layer, head=head, query=query,
                scale=scale, temperature=temperature, head_dim=head_dim, n_head=model.config.n_head,
                n_kv_head=model.config.n_kv_head,
                scaled=view['raw'] * (head_dim ** -0.5 if scale else 1.0),  # (t,)
                labels=[token_label(model.tokenizer, i) for i in token_ids], stats=stats)
    return view


def render(view):
    """The printout of compute's numbers."""
    text, layer, head = view['text'], view['layer'], view['head']
    scale, temperature = view['scale'], view['temperature']
    query, labels = view['query'], view['labels']
    T, t, head_dim = len(labels), query + 1, view['head_dim']
    dims = [f'd{d}' for d in range(head_dim)]

    reads = (f"running text, no BOS: the model reads its {view.get('unit', 'character')}s"
             if view.get('data_mode') == 'text' else "the model reads BOS first")
    lines = [f"text {text!r}: {T} position{'s' * (T != 1)}, {reads}",
             table(('position', *range(T)), [('token', *labels)], align='l' + 'r' * T),
             f"layer {layer}, head {head}, query position {query} ({labels[query]!r}): "
             f"{_keys(0, query)} visible, " + (f"{_keys(query + 1, T - 1)} in the future" if t < T else
                                               "none lies in the future (pick an earlier --query to see the mask)"),
             (f"scores divided by sqrt(head_dim) = sqrt({head_dim}) = {head_dim ** 0.5:.4g}" if scale
              else "--no-scale: scores NOT divided by sqrt(head_dim) (the model itself does divide)")
             + f"; temperature {temperature:g}" + ('' if temperature == 1 else ' (the model uses 1)'),
             '']
    group = view['n_head'] // view.get('n_kv_head', view['n_head'])
    if group > 1:
        first = head // group * group
        lines.insert(-1, f"grouped-query attention: head {head} reads the keys and values of kv head "
                         f"{head // group}, shared by heads {first}..{first + group - 1}")

    # 1) the dot products, term by term
    lines.append(f"1) q.k, one product per dimension: q_{query}[d] * k_j[d], summed over d")
    lines.append(f"   q_{query} = {_vec(view['q'])}")
    rows = [(j, labels[j], *(number(p, '+.3f') for p in view['products'][j]),
             number(view['raw'][j], '+.4f'))
            for j in range(t)]
    lines.append(table(('j', 'key', *dims, 'q.k'), rows, align='ll' + 'r' * (head_dim + 1)))

    # 2) scores, mask, softmax
    divisor = f'/sqrt({head_dim})' if scale else '(unscaled)'
    tcol = [] if temperature == 1 else [f'/{temperature:g}']
    lines += ['', "2) scores, the causal mask, softmax (weights over the visible keys sum to 1)"]
    rows = []
    for j in range(T):
        if j < t:
            s_scaled = view['raw'][j] * (head_dim ** -0.5 if scale else 1.0)
            extra = [number(view['scores'][j], '+.4f')] if tcol else []
            w = view['weights'][j]
            rows.append((j, labels[j], number(view['raw'][j], '+.4f'), number(s_scaled, '+.4f'), *extra,
                         'visible', f'{w:.4f}', bar(w)))
        else:
            rows.append((j, labels[j], '', '', *([''] * len(tcol)), 'masked: -inf', MASKED,
                         'future key: never gets a weight'))
    lines.append(table(('j', 'key', 'q.k', divisor, *tcol, 'mask', 'weight', ''), rows,
                       align='llrr' + 'r' * len(tcol) + 'lrl'))
    total = float(view['weights'].sum())
    lines.append(f"   sum of the weights: {total:.12f}")
    if scale and temperature == 1:
        diff = float(np.abs(view['weights'] - view['model_weights'][head, :t]).max())
        lines.append(f"   check: the model's own captured weights agree to {diff:.1e}")

    # 3) the weighted sum of values
    lines += ['', f"3) the output: out_{query} = sum_j w_j * v_j (this head's {head_dim} numbers)"]
    # two vectors side by side fit the terminal only shortened: each keeps its first numbers
    # (7 characters apiece) and says how many it leaves out; out_query is printed whole below
    shown = max(2, (width() - len(f'  {t - 1}  out_{query}  0.0000  ')) // 2 // 7 - 1)
    rows = [(j, labels[j], f"{view['weights'][j]:.4f}", _vec(view['values'][j], shown=shown),
             _vec(view['weighted_values'][j], shown=shown)) for j in range(t)]
    if shown >= head_dim:
        rows.append(('', f'out_{query}', '', '', _vec(view['out'])))
    lines.append(table(('j', 'key', 'w_j', 'v_j', 'w_j * v_j'), rows, align='llrll'))
    if shown < head_dim:
        lines.append(f"   v_j and w_j * v_j: their first {shown} of {head_dim} numbers (--wide prints all)")
        lines.append(f"   out_{query} = {_vec(view['out'])}")

    # 4) every head, side by side
    n_head = view['n_head']
    lines += ['', f"4) every head of layer {layer} at query {query}: its weights over the keys "
              f"(scaling and temperature as above; {MASKED} = masked)"]
    rows = []
    for j in range(T):
        cells = []
        for h in range(n_head):
            w = view['all_heads'][h, query, j]
            cells.append(f'{MASKED:>6}  ' if np.isnan(w) else f'{w:.3f} {shade(w) * 2}')
        rows.append((j, labels[j], *cells))
    lines.append(table(('j', 'key', *(f'head {h}' for h in range(n_head))), rows,
                       align='ll' + 'l' * n_head))
    top = [int(np.nanargmax(view['all_heads'][h, query])) for h in range(n_head)]
    lines.append("   most attended: " + ', '.join(f'head {h} -> {top[h]} ({labels[top[h]]})'
                                                  for h in range(n_head)))

    # 5) the widget's row statistics
    lines += ['', f"5) this row's statistics without and with the 1/sqrt({head_dim}) scaling "
              f"(temperature {temperature:g}; {t} visible key{'s' * (t != 1)})"]
    rows = []
    for label, s in view['stats'].items():
        rows.append((label, number(s['spread'], '.4f'), number(s['entropy'], '.3f'),
                     number(s['max_entropy'], '.3f'), number(s['max_weight'], '.4f'),
                     number(s['gradient_scale'], '.3e')))
    lines.append(table(('', 'spread', 'entropy (bits)', 'max = log2(keys)', 'max weight',
                        'gradient scale'), rows))
    lines.append("   spread: standard deviation of the scores. gradient scale: the largest "
                 "eigenvalue of the\n   softmax Jacobian diag(p) - p p^T, the most the weights "
                 "can move per unit change of the\n   scores (1/keys when uniform over two or more "
                 "keys, at most 0.5, near 0 when saturated,\n   and exactly 0 for one key: its "
                 "weight is 1 whatever its score).")
    rope = view.get('rope')
    if rope:
        j, d, scores = rope['key'], rope['distance'], rope['scores']
        lines += ['', f"6) RoPE: the score of q_{query} and k_{j} ({labels[j]!r}) at every distance i - j: both "
                  f"turned back to before RoPE, then q turned by the distance; * is the model's own (i - j = {d})"]
        lines.append(table(['i - j', *(f"{n}*" if n == d else n for n in range(len(scores)))],
                           [['score', *(number(x, '+.3f') for x in scores)]], align='r' * (len(scores) + 1)))
        lines.append("   RoPE scores a query and a key by how far apart they are, not by where they sit")
    return '\n'.join(lines)


def picture(path, view, source):
    from .plot import attention_heatmaps
    title = (f"{source}: layer {view['layer']}, {view['text']!r}" + ('' if view['scale'] else ', unscaled')
             + (f", temperature {view['temperature']:g}" if view['temperature'] != 1 else ''))
    attention_heatmaps(path, view['all_heads'], view['labels'], view['query'], title)
