"""
The tokens sandbox: text cut into the checkpoint's tokens, and the merges that cut it.

    python -m microgpt.lab tokens "the king"                       # out/model.json's tokens
    python -m microgpt.lab tokens "the king" --ckpt out/bpe.json --merges 30

What the model reads is ids, never text. For a character model (microgpt/tokenizer.py) each
character of TEXT is one token; for a byte-pair model (microgpt/bpe.py) TEXT's UTF-8 bytes are
merged by the checkpoint's merge table, in the order learned, so a token may be a whole word or
half of a character (a Czech letter is two bytes). Each token is shown with its id, its bytes
and its text; then the first merges of the table, each the pair of ids it replaced and the
token it made; then the ids as the model is fed them (a name after BOS; running text as it is).

`compute` returns the numbers (the tokenizer's own encode, nothing recomputed); `render` prints
them; the Tokens page draws the same answer.
"""

from ..bpe import BPETokenizer
from ..edge.checks import encode
from .loading import data_mode
from .render import BOS_LABEL, VISIBLE, table


def label(tok, i):
    """A token as text with its spaces and newlines shown (␣, ⏎): a byte pair holds several."""
    return BOS_LABEL if i == tok.bos else ''.join(VISIBLE.get(ch, ch) for ch in tok.chars[i])


def compute(model, text, merges=20, ckpt=None):
    """TEXT as the model's tokenizer cuts it: {'kind', 'vocab_size', 'data_mode', 'text',
    'tokens': [{'id', 'label', 'bytes'}], 'fed', 'n_chars', 'merges': the first `merges` of the
    table as {'k', 'id', 'pair', 'label'}, 'n_merges'}."""
    tok = model.tokenizer
    ids = encode(tok, text)  # a character model names an unknown character in one line
    byte_pairs = isinstance(tok, BPETokenizer)
    tokens = [{'id': i, 'label': label(tok, i),
               'bytes': list(tok.vocab[i] if byte_pairs else tok.chars[i].encode('utf-8'))} for i in ids]
    table_of = tok.merges if byte_pairs else []
    shown = [{'k': k, 'id': 256 + k, 'pair': list(pair), 'label': label(tok, 256 + k),
              'parts': [label(tok, pair[0]), label(tok, pair[1])]}
             for k, pair in enumerate(table_of[:merges])]
    mode = data_mode(ckpt)
    fed = ids if mode == 'text' else [tok.bos] + ids  # a name is read after BOS
    return {'kind': 'bpe' if byte_pairs else 'char', 'vocab_size': tok.vocab_size, 'data_mode': mode,
            'text': text, 'tokens': tokens, 'fed': fed, 'n_chars': len(text), 'merges': shown,
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
    return '\n'.join(lines)
