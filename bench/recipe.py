"""
The batched numpy training recipe, measured end to end through train.py itself.

    python bench/recipe.py                                  # makemore's names.txt from ../shared/data
    python bench/recipe.py --data names.txt --threads 1     # one BLAS thread (see below)

It runs the very command README shows, in a child process:

    python train.py --engine numpy --data names.txt --n-layer 4 --n-embd 64 --n-head 4 \
        --block-size 16 --batch-size 32 --lr 0.003 --steps 12000 --weight-decay 0.1 --dropout 0.05 \
        --dtype float32 --save-every 4000 --eval-every 2000 --out ...

and reports the wall time of the whole process (imports, data, training, validation, the
checkpoint saves, the closing samples), the validation loss it logged last, and the share of the
run spent writing checkpoints: the saves the run made (every --save-every steps and at the end),
each timed afresh by saving the run's own final checkpoint (weights and Adam moments, the same
file) with microgpt.edge.checkpoint.write_checkpoint. Peak memory is the child's (ru_maxrss).

Threads: train.py times its first 27 steps three ways (one BLAS thread, two, the batch split on
two workers) and keeps the fastest; its `threads:` line is printed here. --threads N sets
OPENBLAS_NUM_THREADS for the child instead. The child runs with OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE UNSET (this machine sets them for old OpenBLAS bugs; users' machines do not,
and they slow numpy's matrix products). --keep DIR keeps the checkpoint and log, and with
--plain also a run of the same command without weight decay and dropout, DIR/plain.json (README's
curve: python -m microgpt.lab loss DIR/plain.log.jsonl DIR/names.log.jsonl --png
docs/img/recipe-loss.png). The closing names are printed with a * on those not in the data.
--grid first runs GRID, the runs that chose the regularizer, one line each.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(BENCH_DIR)
sys.path[:0] = [REPO_DIR, BENCH_DIR]  # run from a checkout, installed or not

from common import child_env, shared_data  # noqa: E402

# The recipe: makemore's Transformer shape, 4 x 64. What was tried on the way, all batch 32,
# val after the whole run (linear decay):
#   2x64 lr 0.01 3000 steps 2.055 | 2x64 lr 0.005 5000 steps 1.974 | 2x64 lr 0.005 8000 1.966
#   2x64 lr 0.003 8000 steps 1.958 | 2x64 lr 0.002 8000 steps 1.969 | 3x64 lr 0.003 6000 1.954
#   3x64 lr 0.003 7500 steps 1.955 | 4x64 lr 0.003 5500 steps 1.934 (with a fixed 0.08 init std)
# Again with the width- and depth-scaled initial weights (2026-12-02, AMD EPYC, 2 cores):
#   4x64 lr 0.003 5500 steps 1.9616 (42-56 s) | 7500 steps 1.9521 (58 s) | float32 9000 steps
#   1.9517 (40 s) | float32 batch 64 lr 0.004 5000 steps 1.9556 | float32 4x96 6000 steps 1.9593.
#   The training loss measured alike reaches 1.78: past ~1.95 the model memorizes (no weight decay,
#   no dropout here), so more steps in the minute do not buy a lower validation loss.
# GRID chose the regularizer (--grid runs it; one run each, 2026-12-02, AMD EPYC, the machine
# shared, so times are not given here; the val is the code's):
#   float64 5500 steps: none 1.9616 | wd 0.1 1.9610 | wd 0.3 1.9895 | wd 1.0 2.0711 | dropout 0.1
#   1.9850 | dropout 0.2 2.0176: at this length dropout underfits and decay only lifts the training loss.
#   float32 12000 steps: none 1.9622 (train 1.7321: it memorizes) | dropout 0.05 1.9382 | wd 0.1
#   1.9431 | both 1.9333 | wd 0.1 with dropout 0.1 1.9526 | wd 0.2 1.9452. Also tried: float32 10000
#   steps wd 0.1 1.9419, dropout 0.05 1.9454; 4x128 dropout 0.2 lr 0.002 4000 steps 2.0008.
# RECIPE alone, nothing else running (2026-12-04, AMD EPYC, 2 cores): 1.9345 in 134 s, 7.2 ms a
#   step on 2 threads; --plain 1.9504 in 110 s (train 1.7289). A float32 run's rounding follows the
#   threads it keeps, so reruns part by about 0.01 (the grid's plain 12000 steps: 1.9622). Within
#   a minute here: 9000 float32 steps with wd 0.1 end at 1.9450 in 91 s, the machine shared.
RECIPE = dict(n_layer=4, n_embd=64, n_head=4, block_size=16, batch_size=32, lr=0.003, steps=12000,
              weight_decay=0.1, dropout=0.05, dtype='float32', save_every=4000, eval_every=2000)
# (weight decay, dropout, steps, dtype) of each grid run
GRID = [(0.0, 0.0, 5500, 'float64'), (0.1, 0.0, 5500, 'float64'), (0.3, 0.0, 5500, 'float64'),
        (1.0, 0.0, 5500, 'float64'), (0.0, 0.1, 5500, 'float64'), (0.0, 0.2, 5500, 'float64'),
        (0.0, 0.0, 12000, 'float32'), (0.0, 0.05, 12000, 'float32'), (0.1, 0.0, 12000, 'float32'),
        (0.1, 0.1, 12000, 'float32'), (0.2, 0.0, 12000, 'float32')]  # and RECIPE's own, run last


def recipe_flags(**changes):
    """train.py's flags for RECIPE, with `changes` (weight_decay=0.1, ...) made to it."""
    return ['--engine', 'numpy'] + [arg for name, value in {**RECIPE, **changes}.items()
                                    for arg in (f"--{name.replace('_', '-')}", str(value))]


def train(data, out, env, **changes):
    """Run train.py on the recipe with `changes` into `out`: (seconds, its log's evaluations, stdout)."""
    command = [sys.executable, os.path.join(REPO_DIR, 'train.py'), '--data', data,
               *recipe_flags(**changes), '--out', out, '--force']
    t0 = time.perf_counter()
    result = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    total = time.perf_counter() - t0
    with open(out[:-len('.json')] + '.log.jsonl', encoding='utf-8') as f:
        vals = [json.loads(line) for line in f if 'val_loss' in line]
    return total, vals, result.stdout


def grid(data, env, tmp):
    """One run per row of GRID: its validation and training loss at the end, and its wall time."""
    print(f"{'weight decay':>12} {'dropout':>7} {'steps':>6} {'dtype':>7} {'val':>7} {'train':>7} {'gap':>6} {'time':>6}")
    for row in GRID:
        changes = dict(zip(('weight_decay', 'dropout', 'steps', 'dtype'), row))
        total, vals, _ = train(data, os.path.join(tmp, 'grid.json'), env, eval_every=changes['steps'],
                               save_every=0, num_samples=0, **changes)
        end = vals[-1]
        print(f"{changes['weight_decay']:>12g} {changes['dropout']:>7g} {changes['steps']:>6} {changes['dtype']:>7} "
              f"{end['val_loss']:>7.4f} {end['train_loss']:>7.4f} {end['val_loss'] - end['train_loss']:>6.3f} "
              f"{total:>5.1f}s", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description="Run README's numpy training recipe through train.py and measure it.")
    p.add_argument('--data', default=shared_data('names.txt') or 'names.txt',
                   help="makemore's names.txt (default: ../shared/data/names.txt beside the checkout)")
    p.add_argument('--threads', type=int, help="OPENBLAS_NUM_THREADS for the run (default: train.py times them)")
    p.add_argument('--keep', metavar='DIR', help="keep the run's checkpoint and log in DIR")
    p.add_argument('--plain', action='store_true', help="with --keep: also run the recipe without its "
                   "regularizer into DIR/plain.json")
    p.add_argument('--grid', action='store_true', help="first run GRID, the variants that chose the recipe "
                   "(weight decay x dropout x steps: about ten minutes)")
    args = p.parse_args(argv)
    if not os.path.exists(args.data):
        print(f"recipe: {args.data} not found; get makemore's names.txt and pass --data")
        return 0

    from microgpt.edge.checkpoint import read_checkpoint, write_checkpoint

    env = child_env(**({'OPENBLAS_NUM_THREADS': str(args.threads)} if args.threads else {}))  # as the docstring says
    with tempfile.TemporaryDirectory() as tmp:
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
        if args.grid:
            grid(args.data, env, tmp)
        if args.keep and args.plain:
            total, vals, _ = train(args.data, os.path.join(args.keep, 'plain.json'), env, weight_decay=0.0, dropout=0.0)
            print(f"without its regularizer: validation loss {vals[-1]['val_loss']:.4f}, training "
                  f"{vals[-1]['train_loss']:.4f}; whole run {total:.1f} s", flush=True)
        out = os.path.join(args.keep or tmp, 'names.json')
        print('recipe: train.py --data ' + ' '.join([args.data, *recipe_flags(), '--out', out]), flush=True)
        total, vals, stdout = train(args.data, out, env)
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # kB -> MiB (the largest child's)
        lines = stdout.splitlines()
        threads = next((l for l in lines if l.startswith('threads: ')), f"threads: {args.threads} (--threads)")
        names = [l.strip() for l in lines[lines.index('samples:') + 1:]] if 'samples:' in lines else []

        # the run's saves, timed afresh on its own final checkpoint (the same size of file)
        ckpt = read_checkpoint(out, training=True)
        steps, every = RECIPE['steps'], RECIPE['save_every']
        saves = steps // every + (steps % every != 0)
        t = time.perf_counter()
        for _ in range(3):
            write_checkpoint(os.path.join(tmp, 'copy.json'), ckpt)
        save = (time.perf_counter() - t) / 3
    with open(args.data, encoding='utf-8') as f:
        known = {line.strip() for line in f}
    print(f"validation loss {vals[-1]['val_loss']:.4f} at step {vals[-1]['step']} (every logged: "
          f"{', '.join(str(v['step']) + ': ' + format(v['val_loss'], '.4f') for v in vals)}); whole run {total:.1f} s")
    print(threads)
    print(f"{saves} checkpoint saves of {1e3 * save:.0f} ms each = {100 * saves * save / total:.1f}% of the run; "
          f"peak memory {peak:.0f} MiB; load average {os.getloadavg()[0]:.2f} (2 cores)")
    print("names (* not in the data): " + ', '.join(n + ('' if n in known else '\\*') for n in names))
    return 0


if __name__ == '__main__':
    sys.exit(main())
