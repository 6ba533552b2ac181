"""
The batched numpy training recipe, measured end to end through train.py itself.

    python bench/recipe.py                                  # makemore's names.txt from ../shared/data
    python bench/recipe.py --data names.txt --threads 1     # one BLAS thread (see below)

It runs the very command README shows, in a child process:

    python train.py --engine numpy --data names.txt --n-layer 4 --n-embd 64 --n-head 4 \
        --batch-size 32 --lr 0.003 --steps 5500 --eval-every 2000 --save-every 2000 --out ...

and reports the wall time of the whole process (imports, data, training, validation, the
checkpoint saves, the closing samples), the validation loss it logged last, and the share of the
run spent writing checkpoints: the saves the run made (every --save-every steps and at the end),
each timed afresh by saving the run's own final checkpoint (weights and Adam moments, the same
file) with microgpt.edge.checkpoint.write_checkpoint. Peak memory is the child's (ru_maxrss).

Threads: OpenBLAS runs two threads on 2 cores. On a quiet machine that is fastest (44 s here);
when other processes keep the cores busy, the spinning second thread made steps several times
slower (one thread: 59 s whatever the load). --threads N sets OPENBLAS_NUM_THREADS for the
child; by default it is left as the machine has it. OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are
left as set, as a user's run would have them where they are set.
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
sys.path[:0] = [REPO_DIR, os.path.join(REPO_DIR, 'src')]  # run from a checkout, installed or not

# The recipe: makemore's Transformer shape, 4 x 64. What was tried on the way, all batch 32,
# val after the whole run (linear decay):
#   2x64 lr 0.01 3000 steps 2.055 | 2x64 lr 0.005 5000 steps 1.974 | 2x64 lr 0.005 8000 1.966
#   2x64 lr 0.003 8000 steps 1.958 | 2x64 lr 0.002 8000 steps 1.969 | 3x64 lr 0.003 6000 1.954
#   3x64 lr 0.003 7500 steps 1.955 | 4x64 lr 0.003 5500 steps 1.934
RECIPE = dict(n_layer=4, n_embd=64, n_head=4, block_size=16, batch_size=32, lr=0.003, steps=5500,
              save_every=2000, eval_every=2000)


def recipe_flags():
    return ['--engine', 'numpy'] + [arg for name, value in RECIPE.items()
                                    for arg in (f"--{name.replace('_', '-')}", str(value))]


def default_data():
    """makemore's names.txt beside the checkout (../shared/data) or beside a worktree's parent."""
    for up in (('..',), ('..', '..')):
        path = os.path.join(REPO_DIR, *up, 'shared', 'data', 'names.txt')
        if os.path.exists(path):
            return os.path.normpath(path)
    return 'names.txt'


def main(argv=None):
    p = argparse.ArgumentParser(description="Run README's numpy training recipe through train.py and measure it.")
    p.add_argument('--data', default=default_data(),
                   help="makemore's names.txt (default: ../shared/data/names.txt beside the checkout)")
    p.add_argument('--threads', type=int, help="OPENBLAS_NUM_THREADS for the run (default: as set)")
    args = p.parse_args(argv)
    if not os.path.exists(args.data):
        print(f"recipe: {args.data} not found; get makemore's names.txt and pass --data")
        return 0

    from microgpt.edge.checkpoint import read_checkpoint, write_checkpoint

    env = dict(os.environ)
    if args.threads:
        env['OPENBLAS_NUM_THREADS'] = str(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, 'model.json')
        command = [sys.executable, os.path.join(REPO_DIR, 'train.py'), '--data', args.data,
                   *recipe_flags(), '--out', out]
        print('recipe: ' + ' '.join(command[1:]), flush=True)
        t0 = time.perf_counter()
        subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
        total = time.perf_counter() - t0
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # kB -> MiB
        with open(out[:-len('.json')] + '.log.jsonl', encoding='utf-8') as f:
            vals = [json.loads(line) for line in f if 'val_loss' in line]

        # the run's saves, timed afresh on its own final checkpoint (the same size of file)
        ckpt = read_checkpoint(out, training=True)
        steps, every = RECIPE['steps'], RECIPE['save_every']
        saves = steps // every + (steps % every != 0)
        t = time.perf_counter()
        for _ in range(3):
            write_checkpoint(out, ckpt)
        save = (time.perf_counter() - t) / 3
    print(f"validation loss {vals[-1]['val_loss']:.4f} at step {vals[-1]['step']}; whole run {total:.1f} s "
          f"(threads: {env.get('OPENBLAS_NUM_THREADS', 'as OpenBLAS chooses')}); "
          f"{saves} checkpoint saves of {1e3 * save:.0f} ms each = {100 * saves * save / total:.1f}% of the run; "
          f"peak memory {peak:.0f} MiB; load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == '__main__':
    sys.exit(main())
