"""
The byte-pair tokenizer: tokens are byte strings, grown by merging the most frequent pair.

BPE (Gage 1994; GPT-2's tokenizer) starts from the text's bytes and repeats one move: find the
pair of adjacent tokens that occurs most often and make it a new token. A worked example:

    aaabdaaabac   'aa' is the most frequent pair: call it Z
    ZabdZabac     'ab' (tied with 'Za'; the smaller pair wins): call it Y
    ZYdZYac       'ZY': call it X
    XdXac         3 merges: 11 tokens became 5

The merges, in the order learned, ARE the tokenizer. `encode` replays them on new text. `decode`
joins each token's bytes. It is byte-level, as GPT-2's: the first 256 ids are the 256 possible
bytes. So any valid Unicode text encodes, even characters training never saw (an emoji, a Czech
letter: UTF-8 turns each into 2-4 bytes, all known), and decode(encode(t)) == t. A names model
meets few of the 256 bytes. The rest of their rows in wte stay near their random start.

The character tokenizer (tokenizer.py) is the same kind of object: encode, decode, bos (the one
special token, the last id), vocab_size. So every engine and sampler takes either. Unlike
GPT-2, the text is not first split into words: a token may cross a space.

This file is the plain algorithm: count every pair, merge the most frequent, again. bpe_fast.py
learns and encodes the same, faster, by keeping the counts up to date instead of recounting;
train.py uses it, and tests/test_bpe.py holds the two equal.

    tok = BPETokenizer.from_docs(['aaabdaaabac'], vocab_size=260)  # 256 bytes, 3 merges, BOS
    tok.encode('aaabdaaabac')                                        # [258, 100, 258, 97, 99]: XdXac
"""

import codecs

N_BYTES = 256  # ids 0..255 are the bytes themselves; merge k makes id 256 + k


def get_stats(seqs):
    """How often each adjacent pair of ids occurs, over every sequence: {(a, b): count}. A pair
    never spans two sequences (two names, say)."""
    counts = {}
    for seq in seqs:
        for pair in zip(seq, seq[1:]):
            counts[pair] = counts.get(pair, 0) + 1
    return counts


def merge(seq, pair, new_id):
    """seq with every occurrence of pair replaced by new_id, left to right: 'aaa' merges once."""
    out, i = [], 0
    while i < len(seq):
        if i + 1 < len(seq) and (seq[i], seq[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(seq[i])
            i += 1
    return out


def learn_merges(texts, n_merges):
    """The n_merges merges of `texts`, in order: each time the most frequent pair, a tie to the
    smallest (a, b). Fewer if the texts run out of pairs."""
    seqs, merges = [list(t.encode('utf-8')) for t in texts], []
    while len(merges) < n_merges:
        counts = get_stats(seqs)
        if not counts:
            break
        pair = min(counts, key=lambda p: (-counts[p], p))  # most frequent first, then smallest
        seqs = [merge(seq, pair, N_BYTES + len(merges)) for seq in seqs]
        merges.append(pair)
    return merges


class BPETokenizer:
    """Bytes and merges to ids and back; `bos` is the extra begin/end-of-name id, the last."""

    def __init__(self, merges):
        self.merges = [tuple(pair) for pair in merges]  # merge k: (a, b) -> 256 + k
        self.rank = {pair: k for k, pair in enumerate(self.merges)}
        self.vocab = [bytes([b]) for b in range(N_BYTES)]  # id -> its bytes
        for a, b in self.merges:
            self.vocab.append(self.vocab[a] + self.vocab[b])
        # each token as text, to show it (a token that cuts a character in two shows U+FFFD)
        self.chars = [t.decode('utf-8', errors='replace') for t in self.vocab]
        self.bos = len(self.vocab)
        self.vocab_size = len(self.vocab) + 1

    @classmethod
    def from_docs(cls, docs, vocab_size):
        """A tokenizer of (at most) vocab_size tokens learned from the data set's documents."""
        return cls(learn_merges(docs, vocab_size - N_BYTES - 1))

    def encode(self, text):
        """Text to ids: its UTF-8 bytes, then the merges replayed. Of the pairs present, the one
        learned earliest is merged first, as training merged it."""
        ids = list(text.encode('utf-8'))
        while len(ids) >= 2:
            learned = [p for p in get_stats([ids]) if p in self.rank]
            if not learned:
                break
            pair = min(learned, key=self.rank.get)
            ids = merge(ids, pair, N_BYTES + self.rank[pair])
        return ids

    def decode(self, ids):
        """Ids to text. BOS has no bytes, so it is left out. Bytes that are not UTF-8 (a model
        may draw a token that ends inside a character) become U+FFFD."""
        return b''.join(self.vocab[i] for i in ids if i != self.bos).decode('utf-8', errors='replace')

    def unknown(self, text):
        """The first character of text that cannot be encoded: none, every byte is a token."""
        return None

    def decoder(self):
        """A fresh function id -> the text it completes: a character whose bytes span two
        tokens is held back until its last byte arrives (what a sampler streams)."""
        utf8 = codecs.getincrementaldecoder('utf-8')(errors='replace')
        return lambda i: utf8.decode(self.vocab[i]) if i != self.bos else ''
