"""
The embeddings sandbox: what the rows of wte and wpe learned.

    python -m microgpt.lab embeddings --neighbours 5 --png emb.png

A model of running text never reads BOS, so its row of wte, still as initialised, is left out.
"""

import numpy as np

from .loading import data_mode
from .render import number, table, token_label

VOWELS = set('aeiouyAEIOUY')  # y counted as a vowel, as it mostly is at the end of names
VOWEL_MARK = '°'


def cosine_matrix(rows):
    """Cosine similarity of every pair of rows (n, d) -> (n, n); 0 for a row of zeros."""
    norms = np.linalg.norm(rows, axis=1, keepdims=True)         # (n, 1)
    unit = rows / np.where(norms > 0, norms, 1.0)               # (n, d): each row length 1 (or 0)
    return unit @ unit.T                                        # (n, n)


def principal_components(rows, k=2):
    """(the rows projected on their first k principal components (n, k), variance share (k,)).

    Rows with fewer than k directions of spread (n_embd 1, or identical rows) get 0 for the
    components they lack, each with a share of 0.
    """
    centred = rows - rows.mean(axis=0)                            # (n, d)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)       # s (min(n,d),), vt (min(n,d), d)
    total = (s ** 2).sum()
    share = s ** 2 / total if total > 0 else np.zeros_like(s)     # (min(n,d),): variance per component
    coords = np.zeros((len(rows), k))                             # (n, k)
    found = min(k, len(s))
    coords[:, :found] = centred @ vt[:found].T                    # (n, found)
    return coords, np.pad(share[:found], (0, k - found))          # (n, k), (k,)


def compute(model, neighbours=3, ckpt=None):
    """What the command shows, for a NumpyGPT: the wte projection, each row's nearest
    `neighbours` rows by cosine similarity, and the wte and wpe similarity matrices."""
    tok = model.tokenizer
    n = tok.bos if data_mode(ckpt) == 'text' else model.config.vocab_size  # running text: no BOS row
    wte = model.weights['wte'][:n]                                # (n, n_embd): the rows read
    labels = [token_label(tok, i) for i in range(n)]
    coords, share = principal_components(wte)                     # (n, 2), (2,)
    sim = cosine_matrix(wte)                                      # (n, n)
    near = []
    for i in range(len(labels)):
        order = [j for j in np.argsort(-sim[i], kind='stable') if j != i][:neighbours]
        near.append([(labels[j], float(sim[i, j])) for j in order])
    return {'n_embd': model.config.n_embd, 'data_mode': data_mode(ckpt), 'labels': labels,
            'vowel': [l in VOWELS for l in labels], 'coords': coords, 'share': share,
            'neighbours': near, 'wte_cosine': sim,
            # (block_size, block_size), or None and the page's words why: a RoPE model has no wpe
            'wpe_cosine': None if model.config.rope else cosine_matrix(model.weights['wpe']),
            'wpe_note': NO_WPE if model.config.rope else None}


NO_WPE = ("wpe: this model has none. It uses RoPE: no position is added to the tokens; each layer "
          "turns every head's q and k by their positions, so that a score sees only how far apart they are "
          "(python -m microgpt.lab attention shows a score at every distance)")


def scatter(labels, coords, vowel, width=64, height=22):
    """A text scatter plot: each label at its (pc1, pc2) cell; vowels carry a mark."""
    x, y = coords[:, 0], coords[:, 1]
    def cell(v, lo, hi, n):
        return 0 if hi == lo else int(round((v - lo) / (hi - lo) * (n - 1)))
    grid = [[' '] * (width + 2) for _ in range(height)]
    for label, xi, yi, is_vowel in zip(labels, x, y, vowel):
        text = ('^' if label == '<BOS>' else label) + (VOWEL_MARK if is_vowel else '')
        col = cell(xi, x.min(), x.max(), width)
        row = height - 1 - cell(yi, y.min(), y.max(), height)
        for k, ch in enumerate(text):
            grid[row][col + k] = ch
    return ['  │' + ''.join(r).rstrip() for r in grid] + ['  └' + '─' * (width + 2)]


def render(v):
    lines = [f"wte: {len(v['labels'])} rows of {v['n_embd']} numbers, projected on their two "
             f"principal components (they hold {v['share'][0]:.0%} and {v['share'][1]:.0%} of the spread)",
             f"  → pc1, ↑ pc2; {VOWEL_MARK} marks a vowel" + (
                 " (running text: BOS, never read, is left out)" if v.get('data_mode') == 'text' else ", ^ is BOS"), '']
    lines += scatter(v['labels'], v['coords'], v['vowel'])
    lines += ['', "nearest neighbours by cosine similarity, in all dimensions"]
    rows = [[label + (VOWEL_MARK if is_vowel else '')] +
            [f"{n}{VOWEL_MARK if n in VOWELS else ''} {number(s, '+.2f')}" for n, s in near]
            for label, is_vowel, near in zip(v['labels'], v['vowel'], v['neighbours'])]
    k = len(v['neighbours'][0])
    lines.append(table(['char'] + [f'#{i + 1}' for i in range(k)], rows, align='l' * (k + 1)))
    vowel_idx = [i for i, is_v in enumerate(v['vowel']) if is_v]
    if vowel_idx:
        hits = sum(n in VOWELS for i in vowel_idx for n, _ in v['neighbours'][i][:1])
        lines.append(f"  {hits} of {len(vowel_idx)} vowels have a vowel as their nearest neighbour")
    c = v['wpe_cosine']
    if c is None:
        return '\n'.join(lines + ['', v['wpe_note']])
    lines += ['', "wpe: cosine similarity of the position embeddings, position i (rows) by position j"]
    n = len(c)
    # one table, so that a long block folds into blocks of positions j, each under its header
    lines.append(table(['   '] + [f'{j:>6}' for j in range(n)],
                       [[f'{i:>3}'] + [number(c[i, j], '>+6.2f') for j in range(n)] for i in range(n)],
                       align='r' * (n + 1), keep=1, sep=' '))
    if n > 1:  # a block of one position has no pairs
        lines.append(f"  neighbouring positions: mean similarity {number(np.mean([c[i, i + 1] for i in range(n - 1)]), '+.2f')}; "
                     f"all pairs {number(c[~np.eye(n, dtype=bool)].mean(), '+.2f')}")
    return '\n'.join(lines)


def picture(path, v, source):
    from .plot import embedding_pictures
    embedding_pictures(path, v, f"{source}: what the embeddings learned")
