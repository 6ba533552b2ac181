"""
What dropout costs the numpy training path (src/backprop/): a step with --dropout 0.1's masks
against one without, and the masks' draw against two ways of making one array of them.

    python bench/backprop_speed.py
    python bench/backprop_speed.py --threads 2

The model is the names recipe's (bench/recipe.py), float64 and float32, on names.txt from
../shared/data (else the bundled names). It runs in a fresh child with one BLAS thread
(--threads) and OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE unset, as a user's machine has them.
The engines' step times side by side are bench/engines_speed.py's [1]; the share of a run spent
saving is bench/recipe.py's.
"""

import argparse
import json
import os
import statistics
import sys
import time

from common import child_env, names_setup, run_child, shared_data


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Time the numpy training path's steps with and without dropout.")
    p.add_argument('--threads', type=int, default=1, help="BLAS threads in the child (default 1)")
    p.add_argument('--data', default=None, help="names file (default: ../shared/data/names.txt or bundled)")
    p.add_argument('--child', action='store_true', help="internal: run the measurement and print JSON")
    return p.parse_args(argv)


def child_dropout(args):
    import numpy as np

    from microgpt import backprop
    from microgpt.backprop.dropout import draw, sites
    from recipe import RECIPE
    B, p = RECIPE['batch_size'], 0.1
    config, model, tokenizer, tokens = names_setup(args.data, RECIPE['n_layer'], RECIPE['n_embd'],
                                             RECIPE['n_head'], RECIPE['block_size'])
    out = {}
    for dtype in ('float64', 'float32'):
        trainer = backprop.Trainer(config, model.weights(), tokenizer, dtype=dtype)
        plain, dropped = [], []
        for step in range(1, 41):
            batch = [tokens[(step * B + b) % len(tokens)] for b in range(B)]
            t0 = time.perf_counter()
            trainer.step(batch, 0.001)
            t1 = time.perf_counter()
            trainer.step(batch, 0.001, draw(p, 42, step, B, config))
            plain.append(t1 - t0)
            dropped.append(time.perf_counter() - t1)
        out[dtype] = (statistics.median(plain[5:]), statistics.median(dropped[5:]))
    n = B * sum(int(np.prod(shape)) for shape in sites(config).values())
    rng, times = np.random.default_rng(0), {'draw': [], 'ints': [], 'uniform': []}
    for step in range(40):  # the masks of a step: by draw(), and as one array each way
        t0 = time.perf_counter()
        draw(p, 42, step, B, config)
        t1 = time.perf_counter()
        (rng.integers(0, 65536, n, dtype=np.uint16) >= round(p * 65536)) * (1 / (1 - p))
        t2 = time.perf_counter()
        (rng.random(n, dtype=np.float32) >= p) * (1 / (1 - p))
        for name, t in zip(times, (t1 - t0, t2 - t1, time.perf_counter() - t2)):
            times[name].append(t)
    return {'steps': out, 'numbers': n, **{name: statistics.median(t) for name, t in times.items()}}


def report_dropout(r):
    from recipe import RECIPE
    print(f"\ndropout 0.1, the recipe's model ({RECIPE['n_layer']}x{RECIPE['n_embd']}, batch "
          f"{RECIPE['batch_size']}), median of 35 steps each, interleaved")
    for dtype, (plain, dropped) in r['steps'].items():
        print(f"    {dtype}: {1e3 * plain:.2f} ms/step without masks, {1e3 * dropped:.2f} ms with: "
              f"{dropped / plain:.2f}x")
    print(f"    a step's masks, {r['numbers']:,} numbers: draw() {1e3 * r['draw']:.2f} ms; as one array, "
          f"from 16-bit integers {1e3 * r['ints']:.2f} ms, from uniform float32s {1e3 * r['uniform']:.2f} ms "
          f"({r['uniform'] / r['ints']:.1f}x)")


def main(argv=None):
    args = parse_args(argv)
    if args.data is None:
        args.data = shared_data('names.txt')
    if args.child:
        print(json.dumps(child_dropout(args)))
        return 0
    print(f"data: {args.data or 'bundled census names'}; child: OPENBLAS_NUM_THREADS="
          f"OMP_NUM_THREADS={args.threads}, OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE unset; "
          f"load average {os.getloadavg()[0]:.2f}")
    r = run_child(__file__, ['--child', '--threads', args.threads, *(['--data', args.data] if args.data else [])],
                  child_env(args.threads), "dropout child")
    if r:
        report_dropout(r)
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == '__main__':
    sys.exit(main())
