"""
The checks of exercises 23 to 25, the byte-pair tokenizer: counting pairs, one merge, and
encoding with a learned merge table. The project's answers come from microgpt/bpe.py; the oracles
are written here the slow, obvious way (Counter over zip(ids, ids[1:]), a merge through a string
of the ids, every merge of the table applied in turn). Wikipedia's example (aaabdaaabac: 3 merges
give XdXac) is among the fixed cases of each.
"""

import random
from collections import Counter

from ...bpe import N_BYTES, BPETokenizer, get_stats, learn_merges, merge

RANDOM_CASES = 8
WIKIPEDIA = 'aaabdaaabac'
WIKIPEDIA_MERGES = [(97, 97), (97, 98), (256, 257)]  # aa -> Z, ab -> Y, ZY -> X
ALPHABET = 'ab c\u0159'  # a, b, a space, c and a Czech letter of two bytes, to make runs and pairs


def random_ids(rng):
    return list(''.join(rng.choice(ALPHABET) for _ in range(rng.randrange(0, 30))).encode('utf-8'))


# ---------------------------------------------------------------------------- 23. get_stats
def as_rows(counts):
    """{(a, b): n} as sorted [a, b, n] rows: what compare() can hold side by side."""
    return sorted([a, b, n] for (a, b), n in counts.items())


def check_get_stats(t, fn):
    rng = random.Random(123)
    cases = [('the Wikipedia example', list(WIKIPEDIA.encode())), ('a run of one letter: overlaps count', [97] * 5),
             ('one id: no pair', [7]), ('no ids', []), ('two tokens past the bytes', [256, 257, 256, 257])]
    cases += [(f"random {i + 1}", random_ids(rng)) for i in range(RANDOM_CASES)]
    for k, (label, ids) in enumerate(cases):
        t.case(label, f"ids = {ids}", k < 5)
        got = t.call(fn, list(ids))
        t.expect(type(got) is dict and all(type(p) is tuple and len(p) == 2 and type(n) is int
                                           for p, n in got.items()), got,
                 "a dict {(a, b): count}, each key a tuple of two ids and each count an int")
        want = get_stats([list(ids)])
        no_overlap = {}
        i = 0
        while i + 1 < len(ids):  # the slip: counting 'aaa' as one 'aa', as a merge would see it
            no_overlap[ids[i], ids[i + 1]] = no_overlap.get((ids[i], ids[i + 1]), 0) + 1
            i += 2 if ids[i] == ids[i + 1] else 1
        t.compare('the pair counts, as sorted [a, b, count] rows', as_rows(got), as_rows(want),
                  oracle=('collections.Counter of zip(ids, ids[1:])', as_rows(Counter(zip(ids, ids[1:])))),
                  mistakes=[('no overlaps', as_rows(no_overlap),
                             "Count every adjacent pair, overlapping ones too: [97, 97, 97] holds (97, 97) twice.")],
                  hint="Walk zip(ids, ids[1:]) and add one to each pair's count.")


# ---------------------------------------------------------------------------- 24. merge
def rebuilt(ids, pair, new_id):
    """The oracle: through text, each id a word; replace the pair's words left to right."""
    words, out, i = [str(x) for x in ids], [], 0
    a, b = str(pair[0]), str(pair[1])
    while i < len(words):
        if words[i:i + 2] == [a, b]:
            out.append(str(new_id))
            i += 2
        else:
            out.append(words[i])
            i += 1
    return [int(w) for w in out]


def projects_merge(ids, pair, new_id):
    return merge(list(ids), tuple(pair), new_id)


def check_merge(t, fn):
    rng = random.Random(124)
    w = list(WIKIPEDIA.encode())
    cases = [('the Wikipedia example, aa -> Z', w, (97, 97), 256),
             ('its second merge, ab -> Y', projects_merge(w, (97, 97), 256), (97, 98), 257),
             ('a run of three: merged once, from the left', [97, 97, 97], (97, 97), 256),
             ('a run of four', [97] * 4, (97, 97), 256), ('the pair absent', [1, 2, 3], (3, 1), 300),
             ('no ids', [], (1, 2), 256)]
    for i in range(RANDOM_CASES):
        ids = random_ids(rng)
        pair = (ids[0], ids[1]) if len(ids) > 1 and rng.random() < 0.8 else (97, 97)
        cases.append((f"random {i + 1}", ids, pair, 256 + i))
    for k, (label, ids, pair, new_id) in enumerate(cases):
        t.case(label, f"ids = {ids}, pair = {pair}, new_id = {new_id}", k < 6)
        passed = list(ids)
        got = t.call(fn, passed, pair, new_id)
        t.expect(type(got) is list and all(type(x) is int for x in got), got, "a list of ints")
        t.compare('the ids passed in, after the call', passed, list(ids),
                  hint="Build a new list: the caller's ids must be left as they were.")
        # the slip: moving one on after a merge, so that each position emits new_id or itself
        greedy = [new_id if i + 1 < len(ids) and (x, ids[i + 1]) == tuple(pair) else x for i, x in enumerate(ids)]
        want = projects_merge(ids, pair, new_id)
        hint = ("After a merge, skip BOTH ids of the pair (i += 2): the second id is inside the new token, "
                "and 'aaa' holds 'aa' twice but merges once." if got == greedy and greedy != want else
                "Left to right: on the pair, emit new_id and move two on; else emit the id and move one.")
        t.compare('how many ids the merge leaves', len(got), len(want), hint=hint)
        t.compare('the ids after the merge', got, want, hint=hint,
                  oracle=('the pair replaced in a string of the ids', rebuilt(ids, pair, new_id)))


# ---------------------------------------------------------------------------- 25. encode
def every_merge_in_turn(text, merges):
    """The oracle: apply each merge of the table, in order, to the whole list (a merge can
    only be built on earlier ones, so one pass in order is the same as the earliest first)."""
    ids = list(text.encode('utf-8'))
    for k, pair in enumerate(merges):
        ids = rebuilt(ids, pair, N_BYTES + k)
    return ids


def check_encode(t, fn):
    rng = random.Random(125)
    cases = [('the Wikipedia example', WIKIPEDIA, WIKIPEDIA_MERGES),
             ('a character never trained: its UTF-8 bytes', '\u0159', WIKIPEDIA_MERGES),
             ('an empty text', '', WIKIPEDIA_MERGES), ('no merges at all: the bytes', 'abc', []),
             ('a later merge built on an earlier one', 'aaaa', [(97, 97), (256, 256)])]
    for i in range(RANDOM_CASES):
        training = ''.join(rng.choice(ALPHABET) for _ in range(60))
        merges = learn_merges([training], rng.randrange(1, 12))
        cases.append((f"random {i + 1}", ''.join(rng.choice(ALPHABET) for _ in range(rng.randrange(25))), merges))
    for k, (label, text, merges) in enumerate(cases):
        t.case(label, f"text = {text!r}, merges = {[list(p) for p in merges]}", k < 5)
        got = t.call(fn, text, [list(p) for p in merges])
        t.expect(type(got) is list and all(type(x) is int for x in got), got, "a list of ints")
        want = BPETokenizer(merges).encode(text)
        hint = ("Merge while any pair of the ids is in the table: you returned the bytes unmerged."
                if got == list(text.encode('utf-8')) != want else
                "Start from list(text.encode('utf-8')); while some adjacent pair is in the table, merge "
                "the one with the lowest index k into 256 + k.")
        t.compare('how many tokens', len(got), len(want), hint=hint)
        t.compare('the token ids', got, want, hint=hint,
                  oracle=('every merge of the table applied in turn', every_merge_in_turn(text, merges)))


CHECKS = {23: check_get_stats, 24: check_merge, 25: check_encode}
