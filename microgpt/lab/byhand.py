"""
Attention by hand: the three-token worked example (example.py), on numbers a learner types.
The web lab's Attention page draws this in its "By hand" mode.

    python -m microgpt.lab byhand                       # the example's three tokens, query = token 3
    python -m microgpt.lab byhand --query 1             # the first token: one key, weight 1

The exponentials are of the scores as they are, as by hand (the inputs are capped so they
cannot overflow); the model's softmax subtracts the max first, to the same weights.
"""

import numpy as np

from ..edge.errors import UserError
from .limits import MAX_HAND_ABS, MAX_HAND_DIM, MAX_HAND_TOKENS
from .example import KEYS, Q, TOKENS, VALUES
from .scaling import score_matrix_size

Q_GIVEN = [True, False, True]  # the worked example needs q1 and q3; q2 is made up
PRESET = {'tokens': TOKENS, 'q': Q, 'k': KEYS, 'v': VALUES,
          'q_given': Q_GIVEN, 'query': 2, 'n_head': 1,
          'w_o': np.eye(4).tolist()}  # W_O the identity: it passes concat through


# ---------------------------------------------------------------------------- reading what was typed
def parse_vector(text, what):
    """'0.9, 0.8 0.2 0.1' -> [0.9, 0.8, 0.2, 0.1]: numbers split by commas or spaces."""
    parts = text.replace(',', ' ').split()
    if not parts:
        raise UserError(f"{what} is empty: type its numbers, e.g. 0.9, 0.8, 0.2, 0.1")
    out = []
    for part in parts:
        try:
            x = float(part)
        except ValueError:
            raise UserError(f"{what}: {part[:20]!r} is not a number") from None
        if not abs(x) <= MAX_HAND_ABS:  # also refuses nan and inf
            raise UserError(f"{what}: {part[:20]} is outside -{MAX_HAND_ABS:g}..{MAX_HAND_ABS:g}")
        out.append(x)
    return out


def check_inputs(q, k, v, query, n_head, w_o):
    """The vectors as arrays (T, d) after checking the shapes agree; a UserError otherwise."""
    T = len(k)
    if not 1 <= T <= MAX_HAND_TOKENS or len(q) != T or len(v) != T:
        raise UserError(f"give q, k and v for each of 1..{MAX_HAND_TOKENS} tokens "
                        f"(got {len(q)} q, {len(k)} k, {len(v)} v)")
    d = len(k[0])
    if not 1 <= d <= MAX_HAND_DIM:
        raise UserError(f"each vector has 1..{MAX_HAND_DIM} numbers (got {d})")
    for name, vectors in (('q', q), ('k', k), ('v', v)):
        for j, vec in enumerate(vectors):
            if len(vec) != d:
                raise UserError(f"{name}{j + 1} has {len(vec)} numbers but k1 has {d}: every "
                                "vector needs the same length")
    if not 0 <= query < T:
        raise UserError(f"the query is token {query + 1}, but there are {T} tokens: give 1..{T}")
    if n_head < 1 or d % n_head:
        raise UserError(f"{n_head} heads cannot split {d} dimensions evenly: pick a divisor of {d}")
    if w_o is not None:
        if len(w_o) != d:
            raise UserError(f"W_O must be {d} x {d} (d x d), got {len(w_o)} rows")
        for r, row in enumerate(w_o):
            if len(row) != d:
                raise UserError(f"W_O row {r + 1} has {len(row)} numbers but k1 has {d}: W_O is d x d "
                                f"({d} x {d})")
    w_o = np.eye(d) if w_o is None else np.asarray(w_o, dtype=np.float64)  # (d, d)
    if not (np.abs(w_o) <= MAX_HAND_ABS).all():
        raise UserError(f"every number of W_O must lie in -{MAX_HAND_ABS:g}..{MAX_HAND_ABS:g}")
    return (np.asarray(q, dtype=np.float64), np.asarray(k, dtype=np.float64),  # (T, d) each
            np.asarray(v, dtype=np.float64), w_o)


# ---------------------------------------------------------------------------- the arithmetic
def one_head(q_i, keys, values, scale=True):
    """Steps 1-4 for one query: q_i (d,) against the visible keys and values (t, d), j = 0..i,
    as gpt()'s KV cache holds only them."""
    d = len(q_i)
    products = keys * q_i                          # (t, d): q_i[c] * k_j[c]
    raw = products.sum(axis=1)                     # (t,): q_i . k_j
    divisor = d ** 0.5 if scale else 1.0
    scores = raw / divisor                         # (t,)
    exps = np.exp(scores)                          # (t,): e^score, as a hand computation writes them
    total = float(exps.sum())
    weights = exps / total                         # (t,): sums to 1
    weighted = weights[:, None] * values           # (t, d): w_j * v_j
    out = weighted.sum(axis=0)                     # (d,): sum_j w_j v_j
    return {'products': products, 'raw': raw, 'divisor': divisor, 'scores': scores, 'exps': exps,
            'sum': total, 'weights': weights, 'weighted': weighted, 'out': out}


def by_hand(q, k, v, query, n_head=1, w_o=None, scale=True):
    """Every number of the computation for query token `query` (0-based).

    Returns {'T', 'd', 'query', 'head': one_head's numbers for the whole vector (steps 1-4,
    the example's single head), 'masked': the future key positions, 'heads': [one_head's numbers
    for each head's slice] with each head's 'slice', 'concat' (d,), 'w_o' (d, d), 'final' (d,)}.
    """
    q, k, v, w_o = check_inputs(q, k, v, query, n_head, w_o)
    T, d = k.shape
    visible = slice(0, query + 1)  # keys j <= i: the causal mask keeps these, the rest get -inf
    whole = one_head(q[query], k[visible], v[visible], scale)
    head_dim = d // n_head
    heads = []
    for h in range(n_head):
        cols = slice(h * head_dim, (h + 1) * head_dim)  # this head's slice of the d dimensions
        numbers = one_head(q[query, cols], k[visible, cols], v[visible, cols], scale)
        numbers['slice'] = [h * head_dim, (h + 1) * head_dim]
        heads.append(numbers)
    concat = np.concatenate([h['out'] for h in heads])  # (d,): the heads side by side
    final = w_o @ concat                                 # (d,): linear(concat, W_O)
    return {'T': T, 'd': d, 'query': query, 'scale': scale, 'n_head': n_head, 'head_dim': head_dim,
            'head': whole, 'masked': list(range(query + 1, T)), 'heads': heads,
            'concat': concat, 'w_o': w_o, 'final': final}


def shapes(B, T, d_model, n_head, bytes_per_number=2):
    """The table of shapes for a batch of B sequences of T tokens, and the memory of
    one layer's score matrix [B, n_head, T, T]: rows (name, shape, numbers, meaning)."""
    head_dim = d_model // n_head
    rows = [
        ('x', [B, T, d_model], 'the input'),
        ('q, k, v', [B, T, d_model], 'after the projections'),
        ('q, k, v per head', [B, n_head, T, head_dim], 'split into heads'),
        ('scores', [B, n_head, T, T], 'every query with every key: the quadratic one'),
        ('weights', [B, n_head, T, T], 'after the softmax'),
        ('out per head', [B, n_head, T, head_dim], 'weights times values'),
        ('out', [B, T, d_model], 'the heads side by side'),
        ('out', [B, T, d_model], 'after W_O'),
    ]
    numbers, size = score_matrix_size(B * n_head, T, bytes_per_number)
    return {'rows': [{'name': n, 'shape': s, 'numbers': int(np.prod(s, dtype=object)), 'meaning': m}
                     for n, s, m in rows],
            'head_dim': head_dim, 'score_numbers': numbers, 'score_bytes': size,
            'bytes_per_number': bytes_per_number}


# ---------------------------------------------------------------------------- the sandbox
def _text(vec):
    return ', '.join(f'{x:g}' for x in vec)


DEFAULTS = {'tokens': PRESET['tokens'], 'q': [_text(x) for x in PRESET['q']],
            'k': [_text(x) for x in PRESET['k']], 'v': [_text(x) for x in PRESET['v']],
            'w_o': [_text(x) for x in PRESET['w_o']]}


def compute(tokens=(), q=(), k=(), v=(), query=3, n_head=1, w_o=(), scale=True,
            batch=1, length=1024, d_model=4096, n_heads=32, bytes=2):
    """by_hand on the vectors as typed (none given: the worked example's), the query counted
    from 1; with 'inputs' (as text, for the page's boxes), 'shapes' and 'max_tokens'."""
    preset = not (q or k or v)
    q, k, v = (list(x) or DEFAULTS[n] for n, x in (('q', q), ('k', k), ('v', v)))
    read = {name: [parse_vector(text, f'{name}{j + 1}') for j, text in enumerate(vectors)]
            for name, vectors in (('q', q), ('k', k), ('v', v))}
    matrix = [parse_vector(text, f'W_O row {r + 1}') for r, text in enumerate(w_o)] or None
    T = len(read['k'])
    names = list(tokens or (DEFAULTS['tokens'] if preset else []))[:T]
    names += [f'token {j + 1}' for j in range(len(names), T)]
    if d_model % n_heads:
        raise UserError(f"{n_heads} heads cannot split d_model {d_model} evenly: pick a divisor of {d_model}")
    out = by_hand(read['q'], read['k'], read['v'], query - 1, n_head, matrix, scale)
    given = list(PRESET['q_given']) if q == DEFAULTS['q'] else [True] * T
    out.update(tokens=names, q_given=given[:T] + [True] * (T - len(given)),
               inputs={'q': [_text(x) for x in read['q']], 'k': [_text(x) for x in read['k']],
                       'v': [_text(x) for x in read['v']], 'w_o': [_text(x) for x in out['w_o']]},
               shapes=shapes(batch, length, d_model, n_heads, bytes), max_tokens=MAX_HAND_TOKENS)
    return out


def _vec(x, digits=3):
    return '[' + ', '.join(f'{v:.{digits}f}' for v in x) + ']'


def render(r):
    h, i, tokens = r['head'], r['query'], r['tokens']
    lines = [f"{r['T']} tokens, d = {r['d']}, query = token {i + 1} ({tokens[i]}): it sees tokens "
             f"1..{i + 1}" + (f"; tokens {i + 2}..{r['T']} are masked" if r['masked'] else ''), '']
    if not all(r['q_given'][:r['T']]):
        lines.append("(the worked example needs no " + ', '.join(f'q{j + 1}' for j, g in enumerate(r['q_given'])
                                                                 if not g)
                     + ": the preset's is made up, and matters only when that token is the query)")
    lines.append("1) scores q.k, one product per dimension")
    for j, (prods, raw) in enumerate(zip(h['products'], h['raw'])):
        lines.append(f"   q{i + 1}.k{j + 1} = " + ' + '.join(f'{p:.2f}' for p in prods) + f" = {raw:.4g}")
    lines.append(f"2) divided by {'sqrt(%d) = %g' % (r['d'], h['divisor']) if r['scale'] else '1 (no scaling)'}: "
                 f"{_vec(h['scores'])}")
    lines.append("3) softmax: " + ', '.join(f'e^{s:.3f} = {e:.3f}' for s, e in zip(h['scores'], h['exps']))
                 + f"; sum = {h['sum']:.3f}")
    lines.append(f"   weights = {_vec(h['weights'])}" + ''.join(f"; token {j + 1}: masked, 0" for j in r['masked']))
    lines.append("4) out = sum_j w_j v_j")
    for j, wv in enumerate(h['weighted']):
        lines.append(f"   {h['weights'][j]:.3f} x v{j + 1} = {_vec(wv)}")
    lines.append(f"   out{i + 1} = {_vec(h['out'])}")
    lines.append(f"5) {r['n_head']} head{'s' * (r['n_head'] > 1)} of {r['head_dim']} dimensions, then W_O")
    for n, head in enumerate(r['heads']):
        a, b = head['slice']
        lines.append(f"   head {n} (dims {a}..{b - 1}): weights {_vec(head['weights'])}, out {_vec(head['out'])}")
    lines.append(f"   concat = {_vec(r['concat'])}; W_O concat = {_vec(r['final'])}")
    s = r['shapes']
    lines += ['', "6) shapes, and the score matrix of one layer"]
    lines += [f"   {row['name']:<18} {str(row['shape']):<24} {row['numbers']:>16,}  {row['meaning']}" for row in s['rows']]
    lines.append(f"   the scores: {s['score_numbers']:,} numbers, {s['score_bytes'] / 2 ** 20:g} MiB at "
                 f"{s['bytes_per_number']} bytes each")
    return '\n'.join(lines)
