"""
How long learning byte-pair merges takes on tiny Shakespeare: microgpt/bpe.py's incremental
trainer (pair counts updated where a merge changes them) against recounting every pair after
every merge (the textbook loop, minbpe's `train`), side by side; both must learn the same merges.
Then encoding the whole text with them. The processor and the load average are printed.

    python bench/bpe_speed.py                 # 256 merges, both ways (the recount takes minutes)
    python bench/bpe_speed.py --merges 64     # fewer merges, quicker
"""

import argparse
import os
import sys
import time

from common import processor, read_text, shared_data

from microgpt.bpe import N_BYTES, BPETokenizer, learn_merges


def recount_merges(texts, n_merges):
    """The same merges, the slow way: count every pair of every text afresh for each merge."""
    seqs = [list(t.encode('utf-8')) for t in texts]
    merges = []
    while len(merges) < n_merges:
        counts = {}
        for seq in seqs:
            for pair in zip(seq, seq[1:]):
                counts[pair] = counts.get(pair, 0) + 1
        if not counts:
            break
        pair = min(counts, key=lambda p: (-counts[p], p))  # bpe.py's rule: most frequent, then smallest
        new_id = N_BYTES + len(merges)
        merges.append(pair)
        for s, seq in enumerate(seqs):
            out, i = [], 0
            while i < len(seq):
                if i + 1 < len(seq) and (seq[i], seq[i + 1]) == pair:
                    out.append(new_id)
                    i += 2
                else:
                    out.append(seq[i])
                    i += 1
            seqs[s] = out
    return merges


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument('--merges', type=int, default=256, help="merges to learn (1-4096)")
    p.add_argument('--data', default=None, help="text file (default: ../shared/data/tinyshakespeare.txt)")
    args = p.parse_args()
    if not 1 <= args.merges <= 4096:
        p.error("--merges must be from 1 to 4096")
    path = args.data or shared_data('tinyshakespeare.txt')
    if path is None or not os.path.exists(path):
        print("skipped: ../shared/data/tinyshakespeare.txt is not beside the checkout (give --data PATH)")
        return 0
    text = read_text(path)
    print(f"{processor()}; load average {os.getloadavg()[0]:.2f}; {path}: {len(text):,} characters, "
          f"{len(text.encode('utf-8')):,} bytes; {args.merges} merges")
    t0 = time.perf_counter()
    fast = learn_merges([text], args.merges)
    t_fast = time.perf_counter() - t0
    t0 = time.perf_counter()
    slow = recount_merges([text], args.merges)
    t_slow = time.perf_counter() - t0
    tokenizer = BPETokenizer(fast)
    t0 = time.perf_counter()
    ids = tokenizer.encode(text)
    t_encode = time.perf_counter() - t0
    print(f"{'incremental':>12} {t_fast:8.2f} s")
    print(f"{'recount':>12} {t_slow:8.2f} s   {t_slow / t_fast:.0f}x the incremental time")
    print(f"same merges: {fast == slow}; encoding the text with them: {t_encode:.2f} s, "
          f"{len(ids):,} tokens ({len(text) / len(ids):.2f} characters a token); "
          f"load average now {os.getloadavg()[0]:.2f}")
    return 0 if fast == slow else 1


if __name__ == '__main__':
    sys.exit(main())
