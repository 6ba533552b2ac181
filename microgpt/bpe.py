"""
The byte-pair tokenizer: tokens are byte strings, grown by merging the most frequent pair.

BPE (Gage 1994; GPT-2's tokenizer) starts from the text's bytes and repeats one move: find the
pair of adjacent tokens that occurs most often and make it a new token. The classic example:

    aaabdaaabac   'aa' is the most frequent pair: call it Z
    ZabdZabac     'ab' (tied with 'Za'; the smaller pair wins): call it Y
    ZYdZYac       'ZY': call it X
    XdXac         3 merges: 11 tokens became 5

The merges, in the order learned, ARE the tokenizer: `encode` replays them on new text and
`decode` joins each token's bytes. It is byte-level, as GPT-2's: the first 256 ids are the 256
possible bytes, so any text encodes, even characters training never saw (an emoji, a Czech
letter: UTF-8 turns each into 2-4 bytes, all known), and decode(encode(t)) == t always. For a
names model this means most of the 256 base tokens are bytes it never meets: their rows of wte
stay near their random start, and the merges it learns are the common letter pairs ('an',
'el'). The character tokenizer (tokenizer.py) is the same class of object: encode, decode, bos
(the one special token, the last id), vocab_size, so every engine and sampler takes either.

Training counts every adjacent pair once, then keeps the counts up to date: merging one
occurrence of (a, b) into Z touches only its neighbours p and n, so (p, a), (b, n) lose one and
(p, Z), (Z, n) gain one; nothing is recounted. 256 merges of tiny Shakespeare (1.1 MB) take
3.4 s this way on an AMD EPYC, 19x faster than recounting every pair after every merge (64 s):
`python bench/bpe_speed.py` times both, side by side. Unlike GPT-2, the text is not first split
into words: a token may cross a space.

    tok = BPETokenizer.from_docs(['aaabdaaabac'], vocab_size=260)  # 256 bytes, 3 merges, BOS
    tok.encode('aaabdaaabac')                                        # [258, 100, 258, 97, 99]: XdXac
    train.py --tokenizer bpe --vocab-size 512                        # a model of byte pairs
"""

import codecs
import heapq

N_BYTES = 256  # ids 0..255 are the bytes themselves; merge k makes id 256 + k


class _Tokens:
    """Token sequences as one linked list, with each adjacent pair's count and positions, so
    that a merge visits only where its pair is (training and encoding share it)."""

    def __init__(self, chunks):
        # one array over every chunk (a name, or the whole text); no pair crosses two chunks
        self.ids, self.next, self.prev = [], [], []
        for chunk in chunks:
            start = len(self.ids)
            self.ids += chunk
            self.next += range(start + 1, start + len(chunk) + 1)
            self.prev += range(start - 1, start + len(chunk) - 1)
            if chunk:
                self.next[-1], self.prev[start] = -1, -1  # -1: no neighbour
        self.counts, self.where = {}, {}  # pair -> occurrences; pair -> positions of its left token
        for i, j in enumerate(self.next):
            if j != -1:
                self._add((self.ids[i], self.ids[j]), i)

    def _add(self, pair, i):
        self.counts[pair] = self.counts.get(pair, 0) + 1
        self.where.setdefault(pair, []).append(i)

    def _drop(self, pair):
        self.counts[pair] -= 1
        if not self.counts[pair]:
            del self.counts[pair]  # so that max() over counts sees only pairs that exist

    def merge(self, pair, new_id):
        """Every occurrence of pair becomes new_id, left to right; the new pairs it forms."""
        a, b = pair
        formed = set()
        # positions go stale as neighbours merge (a run 'aaa' holds 'aa' twice but merges once):
        # each is checked again when its turn comes, in the order of the text
        for i in sorted(self.where.pop(pair, ())):
            j = self.next[i]
            if self.ids[i] != a or j == -1 or self.ids[j] != b:
                continue
            p, n = self.prev[i], self.next[j]
            self._drop(pair)
            if p != -1:
                self._drop((self.ids[p], a))
                self._add((self.ids[p], new_id), p)
                formed.add((self.ids[p], new_id))
            if n != -1:
                self._drop((b, self.ids[n]))
                self._add((new_id, self.ids[n]), i)
                formed.add((new_id, self.ids[n]))
                self.prev[n] = i
            self.ids[i], self.next[i], self.ids[j] = new_id, n, -1  # j is gone: -1 is no token's id
        return formed

    def sequence(self, i):
        """The token ids of the chunk that starts at position i, in order."""
        ids = []
        while i != -1:
            ids.append(self.ids[i])
            i = self.next[i]
        return ids


def learn_merges(texts, n_merges):
    """The n_merges most useful merges of `texts` (a list, no pair crosses two): each the most
    frequent pair, ties to the smallest (a, b). Fewer if the texts run out of pairs."""
    tokens = _Tokens([list(t.encode('utf-8')) for t in texts])
    merges = []
    while len(merges) < n_merges and tokens.counts:
        pair = min(tokens.counts, key=lambda p: (-tokens.counts[p], p))
        tokens.merge(pair, N_BYTES + len(merges))
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
        """Text to ids: its UTF-8 bytes, then the merges replayed in the order learned. At each
        point the earliest-learned pair present is merged, as in training; a merge forms pairs
        only with its new, later id, so a heap of the pairs present, by rank, suffices."""
        tokens = _Tokens([list(text.encode('utf-8'))])
        todo = [self.rank[p] for p in tokens.counts if p in self.rank]
        heapq.heapify(todo)
        while todo:
            k = heapq.heappop(todo)
            for pair in tokens.merge(self.merges[k], N_BYTES + k):
                if pair in self.rank:
                    heapq.heappush(todo, self.rank[pair])
        return tokens.sequence(0) if text else []

    def decode(self, ids):
        """Ids to text. BOS has no bytes, so it is left out; bytes that are not UTF-8 (a model
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
