"""
README's running-text recipe, measured end to end through train.py itself: tiny shakespeare at
nanoGPT's CPU shakespeare_char shape (n_layer 4, n_head 4, n_embd 128, block 64, batch 12).

    python bench/shakespeare.py                  # ../shared/data/tinyshakespeare.txt
    python bench/shakespeare.py --threads 1      # pin the BLAS threads instead of timing them
    python bench/shakespeare.py --keep DIR       # keep the checkpoint and log in DIR
    python bench/shakespeare.py --tokenizer bpe  # the same recipe on byte pairs (--vocab-size 512)

It runs README's command (RECIPE) in a child (common.child_env) and reports what the run took and
logged. nanoGPT's README reports about 1.88 in about 3 minutes on a laptop CPU. The load average
is printed before and after: a busy machine makes the run slower, not the loss different.
"""

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

from common import REPO_DIR, child_env, load, shared_data, timed_saves, train_flags

# nanoGPT's shape and batch; lr and steps are this model's (no warm-up, linear decay to 0): 1500
# steps fit in a minute or two here (microgpt's architecture: 1000 gave 1.832, 2000 gave 1.708).
# An evaluation every 300 steps draws the curve with five points.
MICROGPT = dict(n_layer=4, n_head=4, n_embd=128, block_size=64, batch_size=12, lr=0.004, steps=1500,
                eval_every=300, save_every=1500)
# Three rungs of docs/modern.md helped here alone and help together (bench/modern.py), RoPE the
# most clearly: running text has no start, so a letter's distance back is what counts.
RECIPE = dict(MICROGPT, rope=True, mlp='swiglu', tie_embeddings=True)
OUT = 'shakespeare.safetensors'  # a save of 8 bytes a number (JSON writes about 20, as text)


def recipe_flags(recipe=RECIPE):
    return ['--data-mode', 'text', '--engine', 'numpy', '--dtype', 'float32'] + train_flags(recipe)


def main(argv=None):
    p = argparse.ArgumentParser(description="Run README's tiny-shakespeare recipe through train.py and measure it.")
    p.add_argument('--data', default=shared_data('tinyshakespeare.txt'), help="tinyshakespeare.txt (default ../shared/data/)")
    p.add_argument('--threads', type=int, help="pass --threads N to train.py (default: it measures)")
    p.add_argument('--steps', type=int, help=f"override the recipe's steps ({RECIPE['steps']})")
    p.add_argument('--lr', type=float, help=f"override the recipe's lr ({RECIPE['lr']})")
    p.add_argument('--tokenizer', choices=('char', 'bpe'), default='char', help="train.py --tokenizer")
    p.add_argument('--vocab-size', type=int, default=512, help="train.py --vocab-size, with --tokenizer bpe")
    p.add_argument('--keep', metavar='DIR', help="keep the run's checkpoint and log in DIR (for README's "
                                                   "sample and loss curve); default: a temporary folder")
    args = p.parse_args(argv)
    if not args.data or not os.path.exists(args.data):
        print("shakespeare: tinyshakespeare.txt not found (../shared/data/): skipped")
        return 0
    env = child_env()  # without this machine's OpenBLAS settings, as the docstring says
    flags = recipe_flags()
    for name in ('steps', 'lr'):
        if getattr(args, name) is not None:
            flags[flags.index(f'--{name}') + 1] = str(getattr(args, name))
    if args.threads:
        flags += ['--threads', str(args.threads)]
    if args.tokenizer == 'bpe':
        flags += ['--tokenizer', 'bpe', '--vocab-size', str(args.vocab_size)]
    load_before = load()
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(args.keep or tmp, OUT)
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
        command = [sys.executable, os.path.join(REPO_DIR, 'train.py'), '--data', args.data, *flags, '--out', out]
        print('recipe: train.py ' + ' '.join(command[2:-2]), flush=True)
        log = out + '.log.jsonl'
        t0 = time.perf_counter()
        child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seen = watch_log(child, log, t0)  # (seconds after start, line) as each log line appears
        stdout, stderr = child.communicate()
        total = time.perf_counter() - t0
        if child.returncode != 0:
            raise SystemExit(f"train.py failed: {stderr}")
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # kB -> MiB
        lines = stdout.splitlines()
        threads = next((l[len('threads: '):] for l in lines if l.startswith('threads: ')), None)  # as timed
        if threads is None:  # as the user set them
            found = re.search(r'threads=(.*)$', next(l for l in lines if l.startswith('training:')))
            threads = found.group(1) if found else '?'
        vals = [json.loads(line) for _, line in seen if 'val_loss' in line]
        first_step = seen[0][0]
        # an evaluation's time: from its step's line to its val_loss line, the next one written
        evaluations = [t - seen[i - 1][0] for i, (t, line) in enumerate(seen) if 'val_loss' in line]
        size = os.path.getsize(out)
        saves, save = timed_saves(out, int(flags[flags.index('--steps') + 1]), RECIPE['save_every'], tmp, 2)
    print(f"validation loss {vals[-1]['val_loss']:.4f} at step {vals[-1]['step']} "
          f"(every logged: {', '.join(str(v['step']) + ': ' + format(v['val_loss'], '.4f') for v in vals)}); "
          f"{vals[-1]['val_bpc']:.4f} bits per character")
    print(f"whole run {total:.1f} s = {total / 60:.2f} min; the first step done {first_step:.2f} s after "
          f"start; threads {threads}")
    print(f"{len(vals)} evaluations of {min(evaluations):.2f}-{max(evaluations):.2f} s each = "
          f"{100 * sum(evaluations) / total:.1f}% of the run (the exact validation loss, and the training loss "
          "on as many characters; timed between log lines, to 10 ms)")
    print(f"{saves} checkpoint saves of {1e3 * save:.0f} ms each = {100 * saves * save / total:.1f}% of the run; "
          f"checkpoint {size / 1e6:.1f} MB ({OUT}: weights and Adam moments); peak memory {peak:.0f} MiB")
    print(f"load average before {load_before}, after {load()} (2 cores)")
    return 0


def watch_log(child, log, t0):
    """[(seconds after t0, line)] for every line train.py writes to its log, timed as it appears
    (polled every 10 ms) until the child ends."""
    seen, pending, offset = [], '', 0
    while True:
        done = child.poll() is not None
        if os.path.exists(log):
            with open(log, encoding='utf-8') as f:
                f.seek(offset)
                chunk = f.read()
                offset = f.tell()
            now = time.perf_counter() - t0
            *lines, pending = (pending + chunk).split('\n')
            seen += [(now, line) for line in lines if line]
        if done:
            return seen
        time.sleep(0.01)


if __name__ == '__main__':
    sys.exit(main())
