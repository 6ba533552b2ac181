"""
Exercise 25: encoding new text with a learned merge table (the real one: microgpt/bpe.py,
BPETokenizer.encode), with your get_stats (exercise 23) and merge (exercise 24).

Reading: docs/reading-guide.md, section 14 (Tokens: what the model sees).
See it live: `python -m microgpt.lab tokens "the king" --ckpt out/bpe.json` (a model trained with
--tokenizer bpe), the web lab's Tokens page.
Then run `python -m microgpt.lab exercises check 25`.
"""

from ex23_get_stats import get_stats
from ex24_merge import merge


def encode(text, merges):
    """The token ids of text under a merge table: a list of ints.

    merges: the pairs in the order they were learned, as lists or tuples [a, b]; merge k makes
    token 256 + k, and ids 0..255 are the bytes themselves. Start from text's UTF-8 bytes
    (list(text.encode('utf-8'))). Then, while some pair of adjacent ids is in the table, merge
    the one learned EARLIEST (the lowest k) everywhere, as training did: a later merge may be
    built on an earlier one. The Wikipedia example's table [(97, 97), (97, 98), (256, 257)]
    turns 'aaabdaaabac' into [258, 100, 258, 97, 99] (XdXac). A character training never saw
    stays its bytes: 'ř' is [197, 153].
    """
    # solution
    rank = {tuple(pair): k for k, pair in enumerate(merges)}
    ids = list(text.encode('utf-8'))
    while len(ids) >= 2:
        present = [pair for pair in get_stats(ids) if pair in rank]
        if not present:
            break
        pair = min(present, key=rank.get)
        ids = merge(ids, pair, 256 + rank[pair])
    return ids
    # end solution
