"""
Exercise 24: one merge, every occurrence of a pair replaced by a new token (the real one:
microgpt/bpe.py, merge).

Reading: docs/reading-guide.md, section 14 (Tokens: what the model sees).
See it live: `python -m microgpt.lab tokens "the king" --ckpt out/bpe.json` (a model trained with
--tokenizer bpe), the web lab's Tokens page.
Then run `python -m microgpt.lab exercises check 24`.
"""


def merge(ids, pair, new_id):
    """ids with every occurrence of pair (a, b) replaced by new_id: a new list.

    Scan left to right; where ids[i] == a and ids[i + 1] == b, emit new_id and skip both, else
    emit ids[i] and move one on. Occurrences that overlap merge once, from the left: 'aaa' with
    the pair 'aa' becomes [new_id, 'a'], not [new_id, new_id]. The list passed in is left as it was.
    The Wikipedia example: merging (97, 97) into 256 turns the bytes of 'aaabdaaabac' into
    [256, 97, 98, 100, 256, 97, 98, 97, 99] (ZabdZabac).
    """
    # solution
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out
    # end solution
