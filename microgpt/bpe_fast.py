"""
Byte pairs, faster: bpe.py's merges and ids, computed without recounting.

bpe.py counts every pair of the text again for each merge. But merging one occurrence of (a, b)
into Z changes only its neighbours p and n: (p, a) and (b, n) lose one, (p, Z) and (Z, n) gain
one. So this file counts once and keeps the counts up to date, in a linked list of the tokens
that knows where each pair is. Encoding replays the merges the same way, with a heap of the
pairs present by rank. The results are bpe.py's, merge for merge and id for id
(tests/test_bpe.py); bench/bpe_speed.py times the two side by side on tiny Shakespeare.
train.py and the checkpoints use this tokenizer; it is a BPETokenizer in every other respect.
"""

import heapq

from .bpe import N_BYTES, BPETokenizer


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
            del self.counts[pair]  # so that min() over counts sees only pairs that exist

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
    """bpe.learn_merges, with the counts kept up to date instead of recounted."""
    tokens = _Tokens([list(t.encode('utf-8')) for t in texts])
    merges = []
    while len(merges) < n_merges and tokens.counts:
        pair = min(tokens.counts, key=lambda p: (-tokens.counts[p], p))
        tokens.merge(pair, N_BYTES + len(merges))
        merges.append(pair)
    return merges


class FastBPETokenizer(BPETokenizer):
    """bpe.BPETokenizer, learning and encoding through _Tokens."""

    @classmethod
    def from_docs(cls, docs, vocab_size):
        return cls(learn_merges(docs, vocab_size - N_BYTES - 1))

    def encode(self, text):
        """BPETokenizer.encode's ids. A merge forms new pairs only with its new, later id, so a
        heap of the ranks of the pairs present gives the earliest-learned pair each time."""
        tokens = _Tokens([list(text.encode('utf-8'))])
        todo = [self.rank[p] for p in tokens.counts if p in self.rank]
        heapq.heapify(todo)
        while todo:
            k = heapq.heappop(todo)
            for pair in tokens.merge(self.merges[k], N_BYTES + k):
                if pair in self.rank:
                    heapq.heappush(todo, self.rank[pair])
        return tokens.sequence(0) if text else []
