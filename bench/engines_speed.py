"""
The three engines side by side, data parallelism on this machine, checkpoints in both formats,
and what dropout adds to a numpy step.

    python bench/engines_speed.py            # everything below, about five minutes here
    python bench/engines_speed.py --skip-checkpoints --steps 50

Each measurement runs in a fresh child with one BLAS and torch thread (--threads):
1. engines  the scalar, numpy and torch engines (float64 and float32), their steps interleaved
            from the same weights on the same batches, at the default config (batch 1), at
            4 x 64 batch 32 (the scalar engine only its first --scalar-steps), and at README's
            tiny shakespeare size (4 x 128, block 64, batch 12), where the scalar engine is
            left out: one step's graph would hold about a billion Values.
2. ranks    torchrun with two processes against one, the same global batch (4 x 64, batch 32,
            float64, gloo on 127.0.0.1): the speedup and the all-reduce's share of a step,
            alternated --rounds times with the load average, so that the spread shows.
3. ckpt     the 8 x 256 model (6.3M parameters) with Adam's moments: size, save and load times
            (read_checkpoint with all its checks), JSON against safetensors.
4. cuda     with a CUDA device, the torch engine's step on it against the CPU.
5. dropout  the names recipe's model (bench/recipe.py), numpy float64 and float32: a step without
            masks against one with --dropout 0.1's; the draw itself, against one array from
            16-bit integers or floats.
Without PyTorch the torch lines say skipped. Data: names.txt from ../shared/data, else the
bundled names.
"""

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import time

from common import TORCH_HINT, child_env, read_text, run_child, shared_data

SIZES = {'default': dict(n_layer=1, n_embd=16, batch=1), '4x64': dict(n_layer=4, n_embd=64, batch=32),
         'text': dict(n_layer=4, n_embd=128, batch=12, block_size=64, text=True)}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Time the three engines, two ranks against one, both checkpoint formats "
                                            "and dropout.")
    p.add_argument('--steps', type=int, default=100, help="steps per engine and size (default 100)")
    p.add_argument('--scalar-steps', type=int, default=2,
                   help="scalar engine steps at n_layer 4 n_embd 64 batch 32 (default 2, ~20 s or more each)")
    p.add_argument('--rounds', type=int, default=3, help="one-process / two-rank pairs for [2] (default 3)")
    p.add_argument('--threads', type=int, default=1, help="BLAS / torch threads in every child (default 1)")
    p.add_argument('--skip-checkpoints', action='store_true', help="skip [3] (its JSON side takes a few minutes)")
    p.add_argument('--data', default=None, help="names file (default: ../shared/data/names.txt or bundled)")
    p.add_argument('--child', default=None, help="internal: run one measurement and print JSON")
    return p.parse_args(argv)


# ---------------------------------------------------------------------------- the children
def setup(data, n_layer, n_embd, n_head=4, block_size=16, text=False, n_windows=2000):
    """(config, GPT, tokenizer, training token lists) as train.py makes them, the GPT with fused.py's
    blocks (train.py's): on a names file (None: the bundled names), or (text) on random windows of
    block_size + 1 characters of tiny shakespeare."""
    from microgpt.model import GPT, GPTConfig
    from microgpt.tokenizer import CharTokenizer
    if text:
        import random
        whole = read_text(shared_data('tinyshakespeare.txt'))
        tokenizer = CharTokenizer(sorted(set(whole)))
        ids = tokenizer.encode(whole)
        rng = random.Random(42)
        starts = [rng.randrange(len(ids) - block_size - 1) for _ in range(n_windows)]
        tokens = [ids[i:i + block_size + 1] for i in starts]
    else:
        from microgpt.edge.data import load_docs, split_docs
        from microgpt.training import doc_tokens
        docs = load_docs(data)
        train_docs, _ = split_docs(docs, None, seed=42, shuffle=True)
        tokenizer = CharTokenizer.from_docs(docs)
        tokens = [doc_tokens(tokenizer, d) for d in train_docs]
    config = GPTConfig(tokenizer.vocab_size, n_layer, n_embd, n_head, block_size)
    return config, GPT(config, seed=42, tokenizer=tokenizer, fused=True), tokenizer, tokens


def interleaved(trainers, steps, batch_of, lr_of, limit=None):
    """{'times': {name: [seconds]}, 'loss': {name: [loss]}} of `steps` steps of each trainer
    ({name: step(batch, lr)}), one step of each in turn on the same batch, so that a load spike
    hits all alike; limit: {name: steps} for a trainer that takes only its first few."""
    out = {'times': {name: [] for name in trainers}, 'loss': {name: [] for name in trainers}}
    for step in range(steps):
        batch, lr = batch_of(step), lr_of(step)
        for name, train in trainers.items():
            if step < (limit or {}).get(name, steps):
                t0 = time.perf_counter()
                out['loss'][name].append(train(batch, lr))
                out['times'][name].append(time.perf_counter() - t0)
    return out


def batches(tokens, B):
    """step -> its B token lists, taken in turn round the training set."""
    return lambda step: [tokens[(step * B + b) % len(tokens)] for b in range(B)]


def torch_or_none(threads):
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(threads)
    return torch


def child_engines(args, size):
    from microgpt import backprop
    from microgpt.optim import Adam
    from microgpt.programs.train import ScalarTrainer
    from microgpt.training import learning_rate
    s = SIZES[size]
    config, model, tokenizer, tokens = setup(args.data, s['n_layer'], s['n_embd'], block_size=s.get('block_size', 16),
                                             text=s.get('text', False))
    trainers = {'numpy': backprop.Trainer(config, model.weights(), tokenizer)}
    if s.get('text'):  # the recipe trains in float32
        trainers['numpy-float32'] = backprop.Trainer(config, model.weights(), tokenizer, dtype='float32')
    if torch_or_none(args.threads) is not None:
        from microgpt import torchgpt
        for dtype in ('float64', 'float32'):
            trainers[f'torch-{dtype}'] = torchgpt.Trainer(config, model.weights(), tokenizer, dtype=dtype)
    if not s.get('text'):  # at the text size one step's graph would not fit in memory
        trainers['scalar'] = ScalarTrainer(model, Adam(model.params))
    steps = {name: trainer.step for name, trainer in trainers.items()}
    return interleaved(steps, args.steps, batches(tokens, s['batch']), lambda step: learning_rate(0.01, step, args.steps),
                       limit={'scalar': args.steps if size == 'default' else args.scalar_steps})


def child_ranks(args):
    """One measurement of [2]: under torchrun (two ranks) or alone (one process)."""
    torch = torch_or_none(args.threads)
    from microgpt import torchgpt
    from microgpt.training import learning_rate
    from microgpt.torchgpt.distributed import World
    s = SIZES['4x64']
    config, model, tokenizer, tokens = setup(args.data, s['n_layer'], s['n_embd'])
    world = World(torch.device('cpu')) if 'WORLD_SIZE' in os.environ else None
    reduce_times = []
    if world is not None:
        real = world.all_reduce_sum

        def timed(flat):
            t0 = time.perf_counter()
            real(flat)
            reduce_times.append(time.perf_counter() - t0)
        world.all_reduce_sum = timed
    trainer = torchgpt.Trainer(config, model.weights(), tokenizer, world=world)
    out = interleaved({'torch': trainer.step}, args.steps, batches(tokens, s['batch']),
                      lambda step: learning_rate(0.01, step, args.steps))
    if world is None or world.rank == 0:
        return {'times': out['times']['torch'], 'loss': out['loss']['torch'], 'reduce': reduce_times}
    return None


def child_ckpt(args):
    """[3]: a random 8 x 256 model with Adam's moments, saved and read back in both formats."""
    import random

    from microgpt.edge.checkpoint import Checkpoint, SavedRun, TrainState, read_checkpoint, write_checkpoint
    from microgpt.model import GPTConfig, parameter_shapes
    from microgpt.tokenizer import CharTokenizer
    tokenizer = CharTokenizer(list('abcdefghijklmnopqrstuvwxyz'))
    config = GPTConfig(tokenizer.vocab_size, 8, 256, 4, 16)
    rng = random.Random(42)
    weights = {name: [[rng.gauss(0, 0.08) for _ in range(n_in)] for _ in range(n_out)]
               for name, (n_out, n_in) in parameter_shapes(config).items()}
    n = sum(a * b for a, b in parameter_shapes(config).values())
    adam = {'t': 100, 'm': [rng.gauss(0, 1e-3) for _ in range(n)], 'v': [rng.random() * 1e-6 for _ in range(n)]}
    saved_run = SavedRun(data=None, val_size=None, shuffle=True, steps=1000, lr=0.01, seed=42)
    state = TrainState(100, saved_run, '0' * 64)
    ckpt = Checkpoint(config, tuple(tokenizer.chars), weights, optimizer=adam, train_state=state)
    out = {'params': n}
    with tempfile.TemporaryDirectory() as folder:
        for ext in ('.safetensors', '.json'):
            path = os.path.join(folder, 'model' + ext)
            t0 = time.perf_counter()
            write_checkpoint(path, ckpt)
            t1 = time.perf_counter()
            back = read_checkpoint(path, training=True)
            t2 = time.perf_counter()
            assert list(back.weights['layer7.mlp_fc2'][-1]) == weights['layer7.mlp_fc2'][-1]  # read back whole
            out[ext] = {'bytes': os.path.getsize(path), 'save': t1 - t0, 'load': t2 - t1}
            os.remove(path)
            del back
    return out


def child_cuda(args):
    torch = torch_or_none(args.threads)
    if torch is None or not torch.cuda.is_available():
        return {'skipped': 'no PyTorch' if torch is None else 'no CUDA device (torch.cuda.is_available() is False)'}
    from microgpt import torchgpt
    s = SIZES['4x64']
    config, model, tokenizer, tokens = setup(args.data, s['n_layer'], s['n_embd'])
    out = {'device': torch.cuda.get_device_name(0)}
    for device, dtype in (('cpu', 'float64'), ('cuda', 'float64'), ('cuda', 'float32'), ('cuda', 'bfloat16')):
        trainer = torchgpt.Trainer(config, model.weights(), tokenizer, device=device, dtype=dtype)
        # the step's .item() on the loss waits for the GPU: the time is real
        times = interleaved({'step': trainer.step}, args.steps, batches(tokens, s['batch']),
                            lambda step: 0.01)['times']['step']
        out[f'{device}-{dtype}'] = statistics.median(times[5:] or times)
    return out


def child_dropout(args):
    import numpy as np

    from microgpt import backprop
    from microgpt.backprop.dropout import draw, sites
    from recipe import RECIPE
    B, p = RECIPE['batch_size'], 0.1
    config, model, tokenizer, tokens = setup(args.data, RECIPE['n_layer'], RECIPE['n_embd'], RECIPE['n_head'],
                                             RECIPE['block_size'])
    out = {}
    for dtype in ('float64', 'float32'):
        trainer = backprop.Trainer(config, model.weights(), tokenizer, dtype=dtype)
        plain, dropped = [], []
        for step in range(1, 41):
            batch = batches(tokens, B)(step)
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


# ---------------------------------------------------------------------------- the parent
def child(args, which, torchrun=False):
    argv = ['--child', which, '--steps', args.steps, '--scalar-steps', args.scalar_steps, '--threads', args.threads,
            *(['--data', args.data] if args.data else [])]
    prefix = ()
    if torchrun:
        with socket.socket() as s:
            s.bind(('127.0.0.1', 0))
            port = s.getsockname()[1]
        prefix = ('-m', 'torch.distributed.run', '--nproc_per_node', '2', '--master_addr', '127.0.0.1',
                  '--master_port', str(port))
    env = child_env(args.threads, **({'GLOO_SOCKET_IFNAME': 'lo'} if torchrun else {}))
    return run_child(__file__, argv, env, f"{which} child", prefix)


def report_engines(size, r, args):
    s = SIZES[size]
    scalar = len(r['times'].get('scalar', []))
    what = (f"block {s['block_size']}, batch {s['batch']} windows of tiny shakespeare" if s.get('text')
            else f"batch {s['batch']} names")
    print(f"\n[1] n_layer {s['n_layer']}, n_embd {s['n_embd']}, {what}: "
          f"{args.steps} steps interleaved (scalar: {scalar})")
    numpy_ms = 1e3 * statistics.median(r['times']['numpy'])
    for name in ('scalar', 'numpy', 'numpy-float32', 'torch-float64', 'torch-float32'):
        if name == 'numpy-float32' and not s.get('text'):
            continue
        if name not in r['times']:
            why = ("one step's graph would hold about a billion Values" if name == 'scalar'
                   else f"PyTorch is not installed ({TORCH_HINT})")
            print(f"    {name:14s} SKIPPED: {why}")
            continue
        ms = 1e3 * statistics.median(r['times'][name])
        k = len(r['loss'][name])
        diff = max(abs(a - b) for a, b in zip(r['loss'][name], r['loss']['numpy'][:k]))
        print(f"    {name:14s} {ms:9.2f} ms/step (median)   {ms / numpy_ms:7.2f}x numpy's time   "
              f"largest loss difference from numpy {diff:.1e}")


def report_ranks(rounds):
    print("\n[2] n_layer 4, n_embd 64, batch 32, float64, torch engine: two ranks (torchrun, gloo) against "
          "one process, alternated")
    if not rounds:
        print(f"    SKIPPED: needs PyTorch ({TORCH_HINT})")
        return
    for i, (one, two, load) in enumerate(rounds, 1):
        t1, t2 = statistics.median(one['times']), statistics.median(two['times'])
        reduce = statistics.median(two['reduce'])
        diff = max(abs(a - b) for a, b in zip(one['loss'], two['loss']))
        print(f"    round {i}: one process {1e3 * t1:.2f} ms/step   two ranks {1e3 * t2:.2f} ms/step   "
              f"speedup {t1 / t2:.2f}x   all-reduce {1e3 * reduce:.2f} ms ({100 * reduce / t2:.0f}% of a "
              f"two-rank step)   loss difference {diff:.1e}   load average {load:.2f}")


def report_ckpt(r):
    print(f"\n[3] the 8-layer n_embd 256 model, {r['params']:,} parameters, with Adam's moments")
    for ext in ('.json', '.safetensors'):
        x = r[ext]
        print(f"    {ext:12s} {x['bytes'] / 1e6:8.1f} MB   save {x['save']:6.2f} s   load {x['load']:6.2f} s")
    j, s = r['.json'], r['.safetensors']
    print(f"    JSON / safetensors: size {j['bytes'] / s['bytes']:.2f}x, save {j['save'] / s['save']:.1f}x, "
          f"load {j['load'] / s['load']:.1f}x")


def report_cuda(r):
    print("\n[4] CUDA, n_layer 4, n_embd 64, batch 32")
    if r is None or 'skipped' in r:
        print(f"    SKIPPED: {r['skipped'] if r else 'the child failed'}")
        return
    cpu = r['cpu-float64']
    for key in ('cuda-float64', 'cuda-float32', 'cuda-bfloat16'):
        print(f"    {r['device']} {key[5:]:9s} {1e3 * r[key]:7.2f} ms/step (median)   CPU float64 / this {cpu / r[key]:6.2f}x")


def report_dropout(r):
    from recipe import RECIPE
    print(f"\n[5] dropout 0.1, the recipe's model ({RECIPE['n_layer']}x{RECIPE['n_embd']}, batch "
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
        path = shared_data('names.txt') or 'names.txt'
        args.data = path if os.path.exists(path) else None
    if args.child:
        which, _, size = args.child.partition(':')
        result = {'engines': lambda: child_engines(args, size), 'ranks': lambda: child_ranks(args),
                  'ckpt': lambda: child_ckpt(args), 'cuda': lambda: child_cuda(args),
                  'dropout': lambda: child_dropout(args)}[which]()
        if result is not None:
            print(json.dumps(result))
        return 0
    print(f"data: {args.data or 'bundled census names'}; children: {args.threads} thread(s), "
          f"OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE unset; load average {os.getloadavg()[0]:.2f}", flush=True)
    for size in SIZES:
        if SIZES[size].get('text') and shared_data('tinyshakespeare.txt') is None:
            print("\n[1] the running-text recipe's size: SKIPPED, tinyshakespeare.txt is not in ../shared/data")
            continue
        r = child(args, f'engines:{size}')
        if r:
            report_engines(size, r, args)
    rounds = []
    if torch_or_none(1) is not None:
        for _ in range(args.rounds):  # alternated, so a change in the machine's load shows as a spread
            one, two = child(args, 'ranks'), child(args, 'ranks', torchrun=True)
            if one and two:
                rounds.append((one, two, os.getloadavg()[0]))
    report_ranks(rounds)
    if args.skip_checkpoints:
        print("\n[3] checkpoints: SKIPPED (--skip-checkpoints)")
    else:
        r = child(args, 'ckpt')
        if r:
            report_ckpt(r)
    report_cuda(child(args, 'cuda'))
    r = child(args, 'dropout')
    if r:
        report_dropout(r)
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == '__main__':
    sys.exit(main())
