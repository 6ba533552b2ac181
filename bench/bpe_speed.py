"""
How long learning byte-pair merges takes on tiny Shakespeare: microgpt/bpe_fast.py (pair counts
kept up to date where a merge changes them, train.py's) against microgpt/bpe.py (every pair
counted again for each merge, the lesson's textbook loop), side by side; both must learn the same
merges. Then encoding the whole text with them, as train.py does. The processor and the load
average are printed.

    python bench/bpe_speed.py                 # 256 merges, both ways (the recount takes minutes)
    python bench/bpe_speed.py --merges 64     # fewer merges, quicker
"""

import argparse
import os
import sys
import time

from common import processor, read_text, shared_data

from microgpt import bpe, bpe_fast


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
    fast = bpe_fast.learn_merges([text], args.merges)
    t_fast = time.perf_counter() - t0
    t0 = time.perf_counter()
    slow = bpe.learn_merges([text], args.merges)
    t_slow = time.perf_counter() - t0
    tokenizer = bpe_fast.FastBPETokenizer(fast)
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
