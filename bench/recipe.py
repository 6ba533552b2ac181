"""
The batched numpy training recipe, measured: train on names with backprop.Trainer, report the
validation loss and the total wall time.

    python bench/recipe.py --data ../shared/data/names.txt     # the recipe (defaults below)
    python bench/recipe.py --data ../shared/data/names.txt --steps 2000 --n-layer 2

It drives the Trainer exactly as train.py's `--engine numpy` does, so train.py reproduces its
numbers: docs split by microgpt.data.split_docs(docs, None, seed=42, shuffle=True) (10% held
out, at most 1000); initial weights GPT(config, seed).weights(); step s (from 1) trains names
train[((s - 1) * B + b) % N] for b < B at learning rate microgpt.training.learning_rate(lr,
s - 1, steps); the validation loss is inference.evaluate(NumpyGPT(config, weights, tokenizer),
val) every --eval-every steps and at the end; the checkpoint is written with
microgpt.checkpoint.save_checkpoint (weights and Adam state) every --save-every steps and at
the end. The time printed is everything from start to the last checkpoint: set-up, training,
validation and saving, and, separately, the share spent writing checkpoints.

It sets OPENBLAS_NUM_THREADS=1 for itself (see below why) unless it is already set.
With train.py's `--engine numpy`, the same run is
    OPENBLAS_NUM_THREADS=1 python train.py --engine numpy --data ../shared/data/names.txt \
        --n-layer 4 --n-embd 64 --n-head 4 --block-size 16 --batch-size 32 --lr 0.003 \
        --steps 5500 --eval-every 2000 --save-every 2000
"""

import argparse
import math
import os
import sys
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(BENCH_DIR)
sys.path[:0] = [REPO_DIR, os.path.join(REPO_DIR, 'src')]  # run from a checkout, installed or not

T0 = time.perf_counter()  # the clock starts before the imports: they are part of the run

# One BLAS thread, set before numpy loads OpenBLAS (unless the caller chose a number): on this
# shared 2-core machine OpenBLAS's two spinning threads made a step ~7x SLOWER under load
# (325 ms against 46 ms for n_layer 2, n_embd 64, batch 32, load average 5). train.py's
# `--engine numpy` should do the same. OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are left as set.
os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')

import numpy as np  # noqa: E402

import backprop  # noqa: E402
import inference  # noqa: E402
from microgpt.checkpoint import save_checkpoint  # noqa: E402
from microgpt.data import load_docs, split_docs  # noqa: E402
from microgpt.model import GPT, GPTConfig  # noqa: E402
from microgpt.tokenizer import CharTokenizer  # noqa: E402
from microgpt.training import doc_tokens, learning_rate  # noqa: E402

# The recipe: reaches val <= 1.95 on makemore's names.txt in under 3 minutes on 2 cores, when
# they are not crowded (measured: val 1.934 in 60 s alone, 124 s beside another run). makemore's Transformer shape, 4 x 64; what
# was tried on the way, all batch 32, val after the whole run (linear decay):
#   2x64 lr 0.01 3000 steps 2.055 | 2x64 lr 0.005 5000 steps 1.974 | 2x64 lr 0.005 8000 1.966
#   2x64 lr 0.003 8000 steps 1.958 | 2x64 lr 0.002 8000 steps 1.969 | 3x64 lr 0.003 6000 1.954
#   3x64 lr 0.003 7500 steps 1.955 | 4x64 lr 0.003 5500 steps 1.934
RECIPE = dict(n_layer=4, n_embd=64, n_head=4, block_size=16, batch_size=32, lr=0.003, steps=5500,
              save_every=2000, eval_every=2000)


def default_data():
    """makemore's names.txt beside the checkout (../shared/data) or beside a worktree's parent."""
    for up in (('..',), ('..', '..')):
        path = os.path.join(REPO_DIR, *up, 'shared', 'data', 'names.txt')
        if os.path.exists(path):
            return os.path.normpath(path)
    return 'names.txt'


def peak_mib():
    """Peak resident memory of this process (VmHWM), in MiB; 0 where /proc is missing."""
    try:
        with open('/proc/self/status') as f:
            for line in f:
                if line.startswith('VmHWM:'):
                    return int(line.split()[1]) / 1024  # reported in kB
    except OSError:
        pass
    return 0.0


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Measure a numpy training recipe: val loss and wall time.")
    g = p.add_argument_group('data')
    g.add_argument('--data', default=default_data(),
                   help="text file, one name per line (default: makemore's names.txt in ../shared/data/ "
                        "beside the checkout, or ../../shared/data/ from a worktree)")
    g = p.add_argument_group('model')
    g.add_argument('--n-layer', type=int, default=RECIPE['n_layer'], help="transformer blocks")
    g.add_argument('--n-embd', type=int, default=RECIPE['n_embd'], help="embedding width")
    g.add_argument('--n-head', type=int, default=RECIPE['n_head'], help="attention heads")
    g.add_argument('--block-size', type=int, default=RECIPE['block_size'], help="longest sequence in tokens")
    g = p.add_argument_group('optimization')
    g.add_argument('--batch-size', type=int, default=RECIPE['batch_size'], help="names per step")
    g.add_argument('--lr', type=float, default=RECIPE['lr'], help="peak Adam lr, decayed linearly to 0")
    g.add_argument('--steps', type=int, default=RECIPE['steps'], help="training steps")
    g.add_argument('--seed', type=int, default=42, help="seed of the initial weights")
    g = p.add_argument_group('output')
    g.add_argument('--out', default='/tmp/backprop_recipe/model.json', help="checkpoint path")
    g.add_argument('--save-every', type=int, default=RECIPE['save_every'],
                   help="checkpoint every N steps (0: end only); one save of the recipe's model takes ~0.5-1.5 s")
    g.add_argument('--eval-every', type=int, default=RECIPE['eval_every'], help="validation every N steps (0: end only)")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    docs = load_docs(args.data)
    train_docs, val_docs = split_docs(docs, None, seed=42, shuffle=True)
    tokenizer = CharTokenizer.from_docs(docs)
    train_tokens = [doc_tokens(tokenizer, doc) for doc in train_docs]
    config = GPTConfig(tokenizer.vocab_size, args.n_layer, args.n_embd, args.n_head, args.block_size)
    trainer = backprop.Trainer(config, GPT(config, seed=args.seed).weights(), tokenizer)
    print(f"recipe: n_layer={args.n_layer} n_embd={args.n_embd} n_head={args.n_head} "
          f"block_size={args.block_size} batch_size={args.batch_size} lr={args.lr} steps={args.steps} "
          f"save_every={args.save_every} eval_every={args.eval_every}; "
          f"{len(train_docs)} train / {len(val_docs)} val names; params={trainer.flat.size}", flush=True)

    B, N = args.batch_size, len(train_tokens)
    save_time, val_loss, loss = 0.0, None, math.nan
    for step in range(1, args.steps + 1):
        batch = [train_tokens[((step - 1) * B + b) % N] for b in range(B)]
        loss = trainer.step(batch, learning_rate(args.lr, step - 1, args.steps))
        if not math.isfinite(loss):
            print(f"diverged at step {step}")
            return 1
        if step == args.steps or (args.eval_every and step % args.eval_every == 0):
            with np.errstate(over='raise', invalid='raise'):
                val_loss = inference.evaluate(
                    inference.NumpyGPT(config, trainer.weights(), tokenizer), val_docs)
            print(f"step {step}: loss {loss:.4f} val {val_loss:.4f} "
                  f"({time.perf_counter() - T0:.1f} s)", flush=True)
        if step == args.steps or (args.save_every and step % args.save_every == 0):
            t = time.perf_counter()
            save_checkpoint(args.out, trainer, {'step': step, 'adam': trainer.optimizer_state(),
                                                'val_loss': val_loss})
            save_time += time.perf_counter() - t
    total = time.perf_counter() - T0
    print(f"val loss {val_loss:.4f} after {args.steps} steps; total wall time {total:.1f} s "
          f"({'PASS' if val_loss <= 1.95 and total <= 180 else 'FAIL'} against val <= 1.95 "
          f"within 180 s); checkpoint writes {save_time:.2f} s = {100 * save_time / total:.1f}% "
          f"of the run; peak memory {peak_mib():.0f} MiB; load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == '__main__':
    sys.exit(main())
