"""
Exercise 23: counting pairs, the first half of a byte-pair merge (the real one: microgpt/bpe.py,
get_stats; bpe_fast.py keeps these counts up to date instead of counting again).

Reading: docs/reading-guide.md, section 14 (Tokens: what the model sees).
See it live: `python -m microgpt.lab tokens "the king" --ckpt out/bpe.json` (a model trained with
--tokenizer bpe), the web lab's Tokens page; `python bench/bpe_speed.py` times counting afresh
against keeping counts.
Then run `python -m microgpt.lab exercises check 23`.
"""


def get_stats(ids):
    """How often each pair of adjacent ids occurs: {(a, b): count}.

    ids: a list of ints (a text's UTF-8 bytes, or tokens after some merges). Every adjacent
    pair counts, overlapping ones too: [97, 97, 97] holds (97, 97) twice. Fewer than two ids
    hold no pair: the dict is empty. For the Wikipedia example, the bytes of 'aaabdaaabac',
    (97, 97) ('aa') counts 4, the most of any pair.
    """
    # solution
    counts = {}
    for pair in zip(ids, ids[1:]):
        counts[pair] = counts.get(pair, 0) + 1
    return counts
    # end solution
