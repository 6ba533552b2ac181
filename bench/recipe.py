"""
README's numpy recipe on makemore's names, measured end to end through train.py itself.

    python bench/recipe.py                                  # names.txt from ../shared/data
    python bench/recipe.py --data names.txt                 # names.txt from elsewhere
    python bench/recipe.py --keep DIR --plain               # README's two curves, kept in DIR
    python bench/recipe.py --grid                           # first the runs that chose the recipe

It runs README's command (RECIPE) in a child and reports what the run took and logged. The
recipe keeps one BLAS thread (--threads 1) for its loss: one thread sums in one order, so every run
ends at the same loss to the last digit. It costs little or some time by the hour: train.py timed
a step at 23.4 ms on one thread and 23.3 on two, and at a slower hour 32.6 against two workers'
26.4. --plain also runs it without weight decay and dropout, into DIR/plain.safetensors (README's
curve: python -m microgpt.lab loss DIR/plain.safetensors.log.jsonl DIR/names.safetensors.log.jsonl
--png docs/img/recipe-loss.png).
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

from common import REPO_DIR, child_env, read_text, shared_data, timed_saves, train_flags

from microgpt.programs.runlog import log_path_for

# makemore's Transformer shape, 4 x 64. GRID chose the regularizer on microgpt's architecture
# (MICROGPT, about two minutes a run; --grid reruns it, one line a run: docs/lessons.md): at 5500
# float64 steps dropout underfits and decay only lifts the training loss; at 12000 float32 steps
# the plain model memorizes (train 1.73, val 1.96) and a little of both helps most. RECIPE adds
# SwiGLU and QK-norm (docs/modern.md), and batches of 64 at a larger rate, for the steps that fit
# in three minutes here; docs/modern.md has the grid around it.
MICROGPT = dict(n_layer=4, n_embd=64, n_head=4, block_size=16, batch_size=32, lr=0.003, steps=12000,
                weight_decay=0.1, dropout=0.05, dtype='float32', save_every=4000, eval_every=2000)
RECIPE = dict(MICROGPT, mlp='swiglu', qk_norm=True, batch_size=64, lr=0.0055, steps=7300, threads=1)
OUT = 'names.safetensors'  # its saves take milliseconds, where JSON's take most of a second each
# (weight decay, dropout, steps, dtype) of each grid run, on MICROGPT
GRID = [(0.0, 0.0, 5500, 'float64'), (0.1, 0.0, 5500, 'float64'), (0.3, 0.0, 5500, 'float64'),
        (1.0, 0.0, 5500, 'float64'), (0.0, 0.1, 5500, 'float64'), (0.0, 0.2, 5500, 'float64'),
        (0.0, 0.0, 12000, 'float32'), (0.0, 0.05, 12000, 'float32'), (0.1, 0.0, 12000, 'float32'),
        (0.1, 0.1, 12000, 'float32'), (0.2, 0.0, 12000, 'float32')]  # then RECIPE's own


def recipe_flags(recipe=RECIPE, **changes):
    """train.py's flags for `recipe`, with `changes` (weight_decay=0.1, ...) made to it; a rung
    that is on, such as qk_norm=True, is its switch alone."""
    return ['--engine', 'numpy'] + train_flags({**recipe, **changes})


def train(data, out, env, recipe=RECIPE, **changes):
    """Run train.py on `recipe` with `changes` into `out`: (seconds, its log's evaluations, stdout)."""
    command = [sys.executable, os.path.join(REPO_DIR, 'train.py'), '--data', data,
               *recipe_flags(recipe, **changes), '--out', out, '--force']
    t0 = time.perf_counter()
    result = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    total = time.perf_counter() - t0
    with open(log_path_for(out), encoding='utf-8') as f:
        vals = [json.loads(line) for line in f if 'val_loss' in line]
    return total, vals, result.stdout


def grid(data, env, tmp):
    """One run per row of GRID, on microgpt's architecture: its validation and training loss at the
    end, and its wall time."""
    print(f"{'weight decay':>12} {'dropout':>7} {'steps':>6} {'dtype':>7} {'val':>7} {'train':>7} {'gap':>6} {'time':>6}")
    for row in GRID:
        changes = dict(zip(('weight_decay', 'dropout', 'steps', 'dtype'), row))
        total, vals, _ = train(data, os.path.join(tmp, 'grid.json'), env, MICROGPT, eval_every=changes['steps'],
                               save_every=0, num_samples=0, **changes)
        end = vals[-1]
        print(f"{changes['weight_decay']:>12g} {changes['dropout']:>7g} {changes['steps']:>6} {changes['dtype']:>7} "
              f"{end['val_loss']:>7.4f} {end['train_loss']:>7.4f} {end['val_loss'] - end['train_loss']:>6.3f} "
              f"{total:>5.1f}s", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description="Run README's numpy training recipe through train.py and measure it.")
    p.add_argument('--data', default=shared_data('names.txt') or 'names.txt',
                   help="makemore's names.txt (default: ../shared/data/names.txt beside the checkout)")
    p.add_argument('--keep', metavar='DIR', help="keep the run's checkpoint and log in DIR")
    p.add_argument('--plain', action='store_true', help="with --keep: also run the recipe without its "
                   "regularizer into DIR/plain.safetensors")
    p.add_argument('--grid', action='store_true', help="first run GRID, the variants that chose the recipe "
                   "(weight decay x dropout x steps: about ten minutes)")
    args = p.parse_args(argv)
    if not os.path.exists(args.data):
        print(f"recipe: {args.data} not found; get makemore's names.txt and pass --data")
        return 0

    env = child_env()  # without this machine's OpenBLAS settings: the recipe sets its threads
    with tempfile.TemporaryDirectory() as tmp:
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
        if args.grid:
            grid(args.data, env, tmp)
        if args.keep and args.plain:
            total, vals, _ = train(args.data, os.path.join(args.keep, 'plain.safetensors'), env, weight_decay=0.0, dropout=0.0)
            print(f"without its regularizer: validation loss {vals[-1]['val_loss']:.4f}, training "
                  f"{vals[-1]['train_loss']:.4f}; whole run {total:.1f} s", flush=True)
        out = os.path.join(args.keep or tmp, OUT)
        print('recipe: train.py --data ' + ' '.join([args.data, *recipe_flags(), '--out', out]), flush=True)
        total, vals, stdout = train(args.data, out, env)
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # kB -> MiB (the largest child's)
        lines = stdout.splitlines()
        names = [l.strip() for l in lines[lines.index('samples:') + 1:]] if 'samples:' in lines else []
        saves, save = timed_saves(out, RECIPE['steps'], RECIPE['save_every'], tmp, 3)
    known = {line.strip() for line in read_text(args.data).splitlines()}
    print(f"validation loss {vals[-1]['val_loss']:.4f} at step {vals[-1]['step']} (every logged: "
          f"{', '.join(str(v['step']) + ': ' + format(v['val_loss'], '.4f') for v in vals)}); whole run {total:.1f} s")
    print(f"{saves} checkpoint saves of {1e3 * save:.0f} ms each = {100 * saves * save / total:.1f}% of the run; "
          f"peak memory {peak:.0f} MiB; load average {os.getloadavg()[0]:.2f} (2 cores)")
    print("names (* not in the data): " + ', '.join(n + ('' if n in known else '\\*') for n in names))
    return 0


if __name__ == '__main__':
    sys.exit(main())
