"""
The character tokenizer: every distinct character of the data set is one token.

As in microgpt, the vocabulary is the sorted set of characters, with ids 0..n-1, plus one
special token BOS (= n) that marks both the start and the end of a name. A name "emma" is
trained as [BOS, e, m, m, a, BOS]: the model learns what starts a name and when to stop.
The vocabulary travels inside every checkpoint, so sample.py needs no data file. bpe.py's
byte-pair tokenizer has the same methods and fields, so either serves every engine.
"""


class CharTokenizer:
    """Maps characters to ids and back; `bos` is the extra begin/end-of-name id."""

    def __init__(self, chars):
        self.chars = list(chars)                                 # id -> character
        self.stoi = {ch: i for i, ch in enumerate(self.chars)}   # character -> id
        self.bos = len(self.chars)                               # the begin/end-of-name token
        self.vocab_size = len(self.chars) + 1                    # every character, plus BOS

    @classmethod
    def from_docs(cls, docs):
        """The vocabulary of a data set: its sorted unique characters."""
        return cls(sorted(set(''.join(docs))))

    def encode(self, text):
        """Characters to ids (every character must be in the vocabulary: checks.encode says
        which is not, for text a user typed)."""
        return [self.stoi[ch] for ch in text]

    def decode(self, ids):
        """Ids to text. BOS has no character of its own, so it is left out."""
        return ''.join(self.chars[i] for i in ids if i != self.bos)

    def unknown(self, text):
        """The first character of text that is not in the vocabulary, or None."""
        return next((ch for ch in text if ch not in self.stoi), None)

    def decoder(self):
        """A function id -> its text, for streaming (bpe.py's holds back half a character;
        here every id is a whole one)."""
        return lambda i: self.chars[i] if i != self.bos else ''
