"""
The character tokenizer: every distinct character of the data set is one token.

As in microgpt, the vocabulary is the sorted set of characters, with ids 0..n-1, plus one
special token BOS (= n) that marks both the start and the end of a name. A name "emma" is
trained as [BOS, e, m, m, a, BOS]: the model learns what starts a name and when to stop.
The vocabulary travels inside every checkpoint, so sample.py needs no data file.
"""

from .errors import UserError


class CharTokenizer:
    """Maps characters to ids and back; `bos` is the extra begin/end-of-name id."""

    def __init__(self, chars):
        chars = list(chars)
        if len(set(chars)) != len(chars) or not all(isinstance(c, str) and len(c) == 1 for c in chars):
            raise UserError("the vocabulary must be a list of distinct single characters")
        self.chars = chars                                  # id -> character
        self.stoi = {ch: i for i, ch in enumerate(chars)}   # character -> id
        self.bos = len(chars)                               # the begin/end-of-name token
        self.vocab_size = len(chars) + 1                    # every character, plus BOS

    @classmethod
    def from_docs(cls, docs):
        """The vocabulary of a data set: its sorted unique characters."""
        return cls(sorted(set(''.join(docs))))

    def encode(self, text):
        """Characters to ids; an unknown character is an error that names it."""
        ids = []
        for ch in text:
            if ch not in self.stoi:
                known = ''.join(self.chars)
                raise UserError(f"character {ch!r} is not in the vocabulary ({known!r}): "
                                "use only characters the model was trained on")
            ids.append(self.stoi[ch])
        return ids

    def decode(self, ids):
        """Ids to text. BOS has no character of its own, so it is left out."""
        out = []
        for i in ids:
            if i == self.bos:
                continue
            if not 0 <= i < len(self.chars):
                raise UserError(f"token id {i} is outside the vocabulary (0..{self.bos})")
            out.append(self.chars[i])
        return ''.join(out)
