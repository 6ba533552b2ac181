"""
How much faster is a training step on the project's engine than on the original microgpt's?

    python bench/train_speed.py                        # both configs, 50 steps, bundled names
    python bench/train_speed.py --configs 1x16 --steps 20
    python bench/train_speed.py --data ../shared/data/names.txt   # original microgpt's name list

For each config (LxE = n_layer x n_embd) three trainers start from the same weights and train on
the same names at the same learning rate: ours (train.py's ScalarTrainer, fused.py's blocks),
unfused (ops.py's composed blocks, `train.py --unfused`) and the baseline
(bench/baseline_microgpt.py, written the original way); the same math, so their losses differ by
far less than 1e-9. Each trainer runs in its own child process: Python's cyclic collector is global,
and the baseline's graphs (held by a self-referring closure, as in the original) are freed only
by it, so sharing a process would bill its collections to our steps. The baseline keeps the
collector on, as the original does; ours pauses it during a step, as train.py does.
"""

import argparse
import gc
import json
import os
import statistics
import sys
import time

from common import peak_rss_bytes, run_child

from baseline_microgpt import BaselineGPT, BaselineTrainer
from microgpt.edge.data import load_docs, split_docs
from microgpt.model import GPT, GPTConfig
from microgpt.optim import Adam
from microgpt.tokenizer import CharTokenizer
from microgpt.programs.train import ScalarTrainer
from microgpt.training import doc_tokens, learning_rate

N_HEAD = 4
BLOCK_SIZE = 16
TRAINERS = ('ours', 'unfused', 'baseline')


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Time training steps of the project's engine against "
                                            "a baseline written the original microgpt way.")
    g = p.add_argument_group('what to run')
    g.add_argument('--configs', nargs='+', default=['1x16', '2x32'], metavar='LxE',
                   help="configs as n_layer x n_embd, e.g. 1x16 (the default model) or 2x32; "
                        f"n_head {N_HEAD}, block_size {BLOCK_SIZE} (default: 1x16 2x32)")
    g.add_argument('--steps', type=int, default=50,
                   help="training steps per trainer and config, >= 1 (default 50)")
    g.add_argument('--lr', type=float, default=0.01,
                   help="peak learning rate, decayed linearly to 0 over --steps (default 0.01)")
    g.add_argument('--seed', type=int, default=42,
                   help="seed of the shared initial weights (default 42)")
    g = p.add_argument_group('data')
    g.add_argument('--data', metavar='PATH', default=None,
                   help="text file, one name per line (default: the bundled census names); "
                        "../shared/data/names.txt is the list the original microgpt trains on")
    g.add_argument('--nodes', action='store_true',
                   help="only count the nodes one training name's graph has, fused and composed, "
                        "at each config (no timing)")
    g = p.add_argument_group('internal')
    g.add_argument('--child', choices=TRAINERS, default=None,
                   help="run one trainer on the first of --configs and print its losses, step "
                        "times and peak memory as JSON (the parent starts these itself)")
    args = p.parse_args(argv)
    if args.steps < 1:
        p.error("--steps must be at least 1")
    for spec in args.configs:
        try:
            parse_spec(spec)
        except ValueError:
            p.error(f"--configs: {spec!r} is not LxE with positive integers and E divisible "
                    f"by {N_HEAD}, e.g. 1x16")
    return args


def parse_spec(spec):
    """'2x32' -> (n_layer 2, n_embd 32)."""
    n_layer, n_embd = (int(part) for part in spec.lower().split('x'))
    if n_layer < 1 or n_embd < 1 or n_embd % N_HEAD:
        raise ValueError(spec)
    return n_layer, n_embd


# ---------------------------------------------------------------------------- one trainer (child)
def make_step_fn(args, which, spec):
    """The shared set-up, then a function (step) -> loss for trainer `which`."""
    docs = load_docs(args.data)
    tokenizer = CharTokenizer.from_docs(docs)
    train_docs, _ = split_docs(docs, seed=42)
    names = [train_docs[s % len(train_docs)] for s in range(args.steps)]
    n_layer, n_embd = parse_spec(spec)
    config = GPTConfig(vocab_size=tokenizer.vocab_size, n_layer=n_layer, n_embd=n_embd,
                       n_head=N_HEAD, block_size=BLOCK_SIZE)
    model = GPT(config, seed=args.seed, tokenizer=tokenizer, fused=which != 'unfused')  # every child builds it once

    if which in ('ours', 'unfused'):
        trainer = ScalarTrainer(model, Adam(model.params))

        def step_fn(step):
            tokens = doc_tokens(tokenizer, names[step])
            return trainer.step([tokens], learning_rate(args.lr, step, args.steps))
        return step_fn

    trainer = BaselineTrainer(BaselineGPT(model.weights(), N_HEAD), steps=args.steps, lr=args.lr)
    del model  # the baseline keeps only its own copy of the weights

    def step_fn(step):
        return trainer.train_step(doc_tokens(tokenizer, names[step]), step)
    return step_fn


def one_trainer(args):
    step_fn = make_step_fn(args, args.child, args.configs[0])
    gc.collect()  # start clean, so no set-up garbage is collected inside a timed step
    before = peak_rss_bytes()
    losses, times = [], []
    for step in range(args.steps):
        start = time.perf_counter()
        losses.append(step_fn(step))
        times.append(time.perf_counter() - start)
    # json writes floats with repr, so the losses arrive in the parent bit for bit
    print(json.dumps({'losses': losses, 'times': times,
                      'peak': peak_rss_bytes(), 'before': before}))
    return 0


def run_trainer(args, spec, which):
    """Start a child for (spec, which) and return its JSON result, or None if it failed."""
    return run_child(__file__, ['--child', which, '--configs', spec, '--steps', args.steps, '--lr', repr(args.lr),
                                '--seed', args.seed, *(['--data', args.data] if args.data else [])],
                     env=dict(os.environ), what=f"{which} trainer on {spec}")


# ---------------------------------------------------------------------------- report
def print_table(spec, runs):
    n_layer, n_embd = parse_spec(spec)
    print(f"\n=== config {spec}: n_layer {n_layer}, n_embd {n_embd}, n_head {N_HEAD}, "
          f"block_size {BLOCK_SIZE}")
    print(f"{'step':>4}  {'loss ours':>18}  {'loss baseline':>18}  {'|diff|':>9}  "
          f"{'ms ours':>8}  {'ms base':>8}")
    o, b = runs['ours'], runs['baseline']
    for step, (lo, lb, to, tb) in enumerate(zip(o['losses'], b['losses'], o['times'], b['times'])):
        print(f"{step:>4}  {lo:>18.15f}  {lb:>18.15f}  {abs(lo - lb):>9.2e}  "
              f"{1e3 * to:>8.2f}  {1e3 * tb:>8.2f}")


def print_summary(spec, runs, steps):
    o, b, u = runs['ours'], runs['baseline'], runs['unfused']
    mean_o, mean_b = statistics.mean(o['times']), statistics.mean(b['times'])
    med_o, med_b = statistics.median(o['times']), statistics.median(b['times'])
    ratio = mean_b / mean_o
    max_diff = max(abs(lo - lb) for lo, lb in zip(o['losses'], b['losses']))
    mib = 1024 * 1024
    print(f"\n[{spec}]")
    print(f"  mean   ours {1e3 * mean_o:8.2f} ms   baseline {1e3 * mean_b:8.2f} ms   "
          f"ratio {ratio:6.2f}x")
    print(f"  median ours {1e3 * med_o:8.2f} ms   baseline {1e3 * med_b:8.2f} ms   "
          f"ratio {med_b / med_o:6.2f}x")
    mean_u = statistics.mean(u['times'])
    print(f"  mean   unfused {1e3 * mean_u:8.2f} ms   unfused / ours {mean_u / mean_o:6.2f}x   "
          f"(train.py --unfused against the default)")
    print(f"  losses: max |diff| {max_diff:.3e} over {steps} steps (ours vs baseline); unfused vs ours "
          f"{max(abs(lo - lu) for lo, lu in zip(o['losses'], u['losses'])):.3e}")
    print(f"  peak RSS  ours {o['peak'] / mib:7.1f} MiB   baseline {b['peak'] / mib:7.1f} MiB   "
          f"ours/baseline {o['peak'] / b['peak']:.2f}")
    print(f"  training  ours {(o['peak'] - o['before']) / mib:7.1f} MiB   baseline "
          f"{(b['peak'] - b['before']) / mib:7.1f} MiB   (peak minus the peak before step 0)")


def count_nodes(args):
    """The size of one training step's graph: the nodes recorded on the tape for the first
    training name, with fused.py's blocks (train.py's) and with ops.py's composed ones."""
    from microgpt.engine import Tape
    from microgpt.training import doc_loss
    docs = load_docs(args.data)
    tokenizer = CharTokenizer.from_docs(docs)
    name = split_docs(docs, seed=42)[0][0]
    print(f"train_speed --nodes: the graph of one training step on {name!r} "
          f"({len(name)} letters, {len(name) + 1} positions)")
    for spec in args.configs:
        n_layer, n_embd = parse_spec(spec)
        config = GPTConfig(vocab_size=tokenizer.vocab_size, n_layer=n_layer, n_embd=n_embd,
                           n_head=N_HEAD, block_size=BLOCK_SIZE)
        counts = {}
        for fused in (True, False):
            model = GPT(config, seed=args.seed, tokenizer=tokenizer, fused=fused)
            with Tape() as tape:
                doc_loss(model, doc_tokens(tokenizer, name))
            counts[fused] = len(tape.nodes)
        print(f"  {spec}: fused {counts[True]:,} nodes, composed {counts[False]:,} "
              f"(1/{counts[False] / counts[True]:.1f})")
    return 0


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        return one_trainer(args)
    if args.nodes:
        return count_nodes(args)
    print("train_speed: ours (microgpt/engine.py) vs baseline (bench/baseline_microgpt.py)")
    print(f"  configs {' '.join(args.configs)} | steps {args.steps} | lr {args.lr} | "
          f"seed {args.seed} | data {args.data or 'bundled census names'}")
    print(f"  python {sys.version.split()[0]} on {sys.platform}; each trainer in its own process")
    results = {}
    for spec in args.configs:
        runs = {which: run_trainer(args, spec, which) for which in TRAINERS}
        if None in runs.values():
            continue
        print_table(spec, runs)
        results[spec] = runs
    print("\n=== summary (times are per training step: forward, backward, Adam update)")
    for spec, runs in results.items():
        print_summary(spec, runs, args.steps)
    return 0


if __name__ == '__main__':
    sys.exit(main())
