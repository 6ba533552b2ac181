"""
The tokens sandbox: text cut into the checkpoint's tokens, and the merges that cut it.

    python -m microgpt.lab tokens "the king" --ckpt out/bpe.json --merges 30

Why the text splits where it does: the merge that made each token, and at each cut why its
two sides stayed apart (in 'the', merge 0 'h' + 'e' takes the 'h' that merge 1 't' + 'h' wanted).
"""

from ..bpe import BPETokenizer
from ..edge.checks import encode
from .loading import data_mode
from .render import BOS_LABEL, VISIBLE, table


def label(tok, i):
    """A token as text with its spaces and newlines shown (␣, ⏎): a byte pair holds several."""
    return BOS_LABEL if i == tok.bos else ''.join(VISIBLE.get(ch, ch) for ch in tok.chars[i])


def replay(tok, text):
    """encode's merges replayed one rank at a time (the earliest-learned pair present, each of its
    occurrences left to right, minbpe's loop) to see what each merge took: (ids, made, lost).
    made[i]: the merge that made token i, None for a byte; lost[c]: the pairs of the table that
    sat across cut c (between tokens c and c + 1) and lost a side before their turn, as (pair,
    rank, k, side): merge k took the 'left', 'right' or 'both' sides first."""
    seq = [(b, o, o + 1) for o, b in enumerate(text.encode('utf-8'))]  # (id, first byte, end byte)
    lost = {}
    while True:
        present = [tok.rank[l[0], r[0]] for l, r in zip(seq, seq[1:]) if (l[0], r[0]) in tok.rank]
        if not present:
            break
        k = min(present)
        merged, i = [], 0
        while i < len(seq):
            if i + 1 < len(seq) and (seq[i][0], seq[i + 1][0]) == tok.merges[k]:
                merged.append((256 + k, seq[i][1], seq[i + 1][2]))
                i += 2
            else:
                merged.append(seq[i])
                i += 1
        after = {l[2]: (l, r) for l, r in zip(merged, merged[1:])}  # the cuts that survive, by byte offset
        for l, r in zip(seq, seq[1:]):
            pair = (l[0], r[0])
            if pair in tok.rank and l[2] in after and after[l[2]] != (l, r):  # still a cut, a side gone
                new_l, new_r = after[l[2]]
                side = 'both' if new_l != l and new_r != r else 'left' if new_l != l else 'right'
                lost.setdefault(l[2], []).append((pair, tok.rank[pair], k, side))
        seq = merged
    ids = [t[0] for t in seq]
    return ids, [i - 256 if i >= 256 else None for i in ids], [lost.get(t[2], []) for t in seq[:-1]]


def quoted(tok, i):
    return f"'{label(tok, i)}'"


def why_token(tok, i, k):
    if k is None:
        return f"byte {i}: one of the 256 base tokens, no merge made it"
    a, b = tok.merges[k]
    return f"merge {k}: {quoted(tok, a)} + {quoted(tok, b)}"


def why_cut(tok, left, right, lost):
    """Why tokens left and right stayed apart: the pairs across the cut that lost, then theirs."""
    said = []
    for (a, b), rank, k, side in lost:
        taken = {'left': quoted(tok, a), 'right': quoted(tok, b), 'both': f"{quoted(tok, a)} and {quoted(tok, b)}"}[side]
        by = (f"merge {k} ({quoted(tok, tok.merges[k][0])} + {quoted(tok, tok.merges[k][1])})" if k != rank
              else "another occurrence of the same pair (a merge runs left to right)")
        said.append(f"{quoted(tok, a)} + {quoted(tok, b)} is merge {rank}, but {by} took {taken} first")
    return '; '.join(said + [f"{quoted(tok, left)} + {quoted(tok, right)} is not in the merge table"])


def compute(model, text, merges=20, ckpt=None):
    """TEXT as the model's tokenizer cuts it: {'kind', 'vocab_size', 'data_mode', 'text',
    'tokens': [{'id', 'label', 'bytes', 'merge', 'why'}], 'cuts': [{'after', 'pair', 'lost',
    'why'}], 'fed', 'n_chars', 'merges': the first `merges` of the table as {'k', 'id', 'pair',
    'label'}, 'n_merges'}. A token's merge is the rank that made it (None: a byte or a character);
    cut k lies between tokens k and k + 1, lost as replay's: [{'pair', 'rank', 'by', 'side'}]."""
    tok = model.tokenizer
    ids = encode(tok, text)  # a character model names an unknown character in one line
    byte_pairs = isinstance(tok, BPETokenizer)
    made, lost = replay(tok, text)[1:] if byte_pairs else ([None] * len(ids), [[]] * len(ids))
    tokens = [{'id': i, 'label': label(tok, i), 'merge': k,
               'why': why_token(tok, i, k) if byte_pairs else "a character: a character model has no merges",
               'bytes': list(tok.vocab[i] if byte_pairs else tok.chars[i].encode('utf-8'))} for i, k in zip(ids, made)]
    cuts = [{'after': c, 'pair': [ids[c], ids[c + 1]],
             'lost': [{'pair': list(pair), 'rank': rank, 'by': k, 'side': side} for pair, rank, k, side in lost[c]],
             'why': why_cut(tok, ids[c], ids[c + 1], lost[c]) if byte_pairs
             else "a character model cuts between every two characters"} for c in range(len(ids) - 1)]
    table_of = tok.merges if byte_pairs else []
    shown = [{'k': k, 'id': 256 + k, 'pair': list(pair), 'label': label(tok, 256 + k),
              'parts': [label(tok, pair[0]), label(tok, pair[1])]}
             for k, pair in enumerate(table_of[:merges])]
    mode = data_mode(ckpt)
    fed = ids if mode == 'text' else [tok.bos] + ids  # a name is read after BOS
    return {'kind': 'bpe' if byte_pairs else 'char', 'vocab_size': tok.vocab_size, 'data_mode': mode,
            'text': text, 'tokens': tokens, 'cuts': cuts, 'fed': fed, 'n_chars': len(text), 'merges': shown,
            'n_merges': len(table_of)}


def render(d):
    kind = ("byte pairs: 256 bytes, " f"{d['n_merges']} merges and BOS" if d['kind'] == 'bpe'
            else "characters: one token each, and BOS")
    lines = [f"tokenizer: {kind} ({d['vocab_size']} tokens)",
             f"{d['text']!r}: {d['n_chars']} characters in {len(d['tokens'])} tokens",
             '  ' + ' | '.join(t['label'] for t in d['tokens']), '',
             table(('id', 'token', 'bytes'), [(str(t['id']), t['label'], ' '.join(map(str, t['bytes'])))
                                              for t in d['tokens']])]
    if d['merges']:
        lines += ['', f"the first {len(d['merges'])} of {d['n_merges']} merges, in the order learned:",
                  table(('#', 'pair', 'makes', 'token'), [(str(m['k']), f"{m['pair'][0]} {m['pair'][1]}", str(m['id']),
                                                         f"{m['parts'][0]} + {m['parts'][1]} = {m['label']}")
                                                        for m in d['merges']])]
    fed = "after BOS, as a name" if d['data_mode'] == 'lines' else "as running text"
    lines += ['', f"fed to the model {fed}: {d['fed']}"]
    if d['kind'] == 'bpe' and d['tokens']:
        lines += ['', "why it splits where it does: the merge that made each token, and why each two stayed apart:"]
        for k, t in enumerate(d['tokens']):
            lines.append(f"  {t['label']!r}: {t['why']}")
            if k < len(d['cuts']):
                lines.append(f"    | {d['cuts'][k]['why']}")
    return '\n'.join(lines)
