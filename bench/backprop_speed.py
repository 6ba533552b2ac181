"""
How fast does the numpy training path (src/backprop/) train, against the scalar engine and PyTorch?

    python bench/backprop_speed.py
    python bench/backprop_speed.py --steps 100 --torch-steps 20

Each measurement runs in a fresh child process (peak memory: VmHWM), the two trainers' steps
interleaved, one of each in turn, so that a load spike hits both alike:
1. scalar   batch 1, the default config: train.py's ScalarTrainer against backprop.Trainer, from
            the same weights on the same names: the ratio of step times, the largest loss gap.
2. torch    4 x 64, batch 32, float64: backprop.Trainer against torch_loss below with
            torch.optim.Adam, in predicted tokens per second (skipped without torch).
3. ckpt     the recipe's model (bench/recipe.py): the share of a run spent saving every
            --save-every steps, save / (save_every * step + save).
4. dropout  the recipe's model, float64 and float32: a step without masks against one with
            --dropout 0.1's; the draw itself, against one array from 16-bit integers or floats.
The children run with one BLAS and torch thread (--threads): two spinning OpenBLAS threads made
numpy steps several times slower whenever the shared machine was busy. Data: names.txt from
../shared/data, else the bundled names.
"""

import argparse
import json
import os
import statistics
import sys
import time

from common import child_env, interleaved, names_setup, peak_rss_bytes, run_child, shared_data

TORCH_HINT = ".venv/bin/pip install torch==2.13.0"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Time the numpy training path against the scalar engine and PyTorch.")
    p.add_argument('--steps', type=int, default=200, help="batch-1 steps per engine (default 200)")
    p.add_argument('--torch-steps', type=int, default=30, help="batch-32 steps per engine (default 30)")
    p.add_argument('--save-every', type=int, default=None,
                   help="checkpoint interval the share is computed for (default: the recipe's)")
    p.add_argument('--threads', type=int, default=1, help="BLAS / torch threads in every child (default 1)")
    p.add_argument('--data', default=None, help="names file (default: ../shared/data/names.txt or bundled)")
    p.add_argument('--child', choices=('scalar', 'torch', 'ckpt', 'dropout'), default=None,
                   help="internal: run one measurement and print JSON")
    return p.parse_args(argv)


# ---------------------------------------------------------------------------- the children
def child_scalar(args):
    from microgpt import backprop
    from microgpt.optim import Adam
    from microgpt.programs.train import ScalarTrainer
    from microgpt.training import learning_rate
    config, model, tokenizer, tokens = names_setup(args.data, 1, 16)
    trainer = backprop.Trainer(config, model.weights(), tokenizer)
    scalar = ScalarTrainer(model, Adam(model.params))  # train.py's Value engine
    before = peak_rss_bytes()
    out = interleaved({'scalar': scalar.step, 'numpy': trainer.step}, args.steps, lambda step: [tokens[step]],
                      lambda step: learning_rate(0.01, step, args.steps))
    return dict(out, peak=peak_rss_bytes(), before=before)


def torch_loss(w, config, idx, targets, mask):
    """microgpt's GPT written a second time in torch, over a padded batch: the mean loss over
    the real tokens. w: {name: float64 tensor [n_out, n_in]}; idx (B, T), targets (B*T,) and
    mask (B*T,): make_batch's arrays as tensors. tests/test_backprop_torch.py checks backprop's
    loss and every gradient against it, so both sides of [2] do the same work."""
    import torch
    F = torch.nn.functional
    B, T = idx.shape
    H, D = config.n_head, config.head_dim

    def rmsnorm(x):
        return x * ((x * x).mean(dim=-1, keepdim=True) + 1e-5) ** -0.5

    x = rmsnorm(w['wte'][idx] + w['wpe'][:T])                            # (B, T, n_embd)
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # (T, T): j > i
    for li in range(config.n_layer):
        p = f'layer{li}.'
        h = rmsnorm(x)                                                   # (B, T, n_embd)
        q, k, v = (F.linear(h, w[p + n]).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
                   for n in ('attn_wq', 'attn_wk', 'attn_wv'))
        att = (q @ k.transpose(-1, -2)) * D ** -0.5                      # (B, H, T, T)
        att = torch.softmax(att.masked_fill(future, float('-inf')), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, H * D)               # (B, T, n_embd)
        x = x + F.linear(y, w[p + 'attn_wo'])
        x = x + F.linear(torch.relu(F.linear(rmsnorm(x), w[p + 'mlp_fc1'])), w[p + 'mlp_fc2'])
    logits = F.linear(x, w['lm_head']).view(B * T, -1)                   # (B*T, vocab_size)
    losses = F.cross_entropy(logits, targets, reduction='none')          # (B*T,)
    return (losses * mask).sum() / mask.sum()


def torch_trainer(config, weights, threads):
    """step(batch, lr) -> loss for the same GPT in PyTorch (torch_loss, float64, torch.optim.Adam),
    or None without torch."""
    try:
        import torch
    except ImportError:
        return None
    import numpy as np
    from microgpt.backprop import make_batch
    torch.set_num_threads(threads)
    w = {name: torch.tensor(np.array(a), dtype=torch.float64, requires_grad=True) for name, a in weights.items()}
    opt = torch.optim.Adam(list(w.values()), lr=0.01, betas=(0.85, 0.99), eps=1e-8)

    def step(batch, lr):
        idx, targets, mask = (torch.from_numpy(a) for a in
                              make_batch(batch, config.block_size, config.vocab_size))
        loss = torch_loss(w, config, idx, targets, mask)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        for group in opt.param_groups:
            group['lr'] = lr
        opt.step()
        return loss.item()
    return step


def child_torch(args):
    from microgpt import backprop
    from microgpt.training import learning_rate, num_predictions
    B, steps = 32, args.torch_steps
    config, model, tokenizer, tokens = names_setup(args.data, 4, 64)
    trainer = backprop.Trainer(config, model.weights(), tokenizer)
    torch_step = torch_trainer(config, model.weights(), args.threads)
    if torch_step is None:
        return {'skipped': True}
    del model
    batch_of = lambda step: [tokens[(step * B + b) % len(tokens)] for b in range(B)]  # noqa: E731
    before = peak_rss_bytes()
    out = interleaved({'numpy': trainer.step, 'torch': torch_step}, steps, batch_of,
                      lambda step: learning_rate(0.01, step, steps))
    tokens = [sum(num_predictions(t, config.block_size) for t in batch_of(step)) for step in range(steps)]
    return dict(out, tokens=tokens, peak=peak_rss_bytes(), before=before)


def child_ckpt(args):
    import tempfile

    from microgpt import backprop
    from microgpt.edge.checkpoint import Checkpoint, SavedRun, TrainState, write_checkpoint
    from recipe import RECIPE
    B = RECIPE['batch_size']
    config, model, tokenizer, tokens = names_setup(args.data, RECIPE['n_layer'], RECIPE['n_embd'],
                                             RECIPE['n_head'], RECIPE['block_size'])
    trainer = backprop.Trainer(config, model.weights(), tokenizer)
    del model
    before = peak_rss_bytes()
    step_times, save_times = [], []
    saved_run = SavedRun(data=None, val_size=None, shuffle=True, steps=1000, lr=0.01, seed=42)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, 'model.json')
        for step in range(20):
            t0 = time.perf_counter()
            trainer.step([tokens[(step * B + b) % len(tokens)] for b in range(B)], 0.01)
            step_times.append(time.perf_counter() - t0)
            if step % 5 == 4:
                t0 = time.perf_counter()
                state = TrainState(step + 1, saved_run, '0' * 64)
                write_checkpoint(path, Checkpoint.of(trainer, optimizer=trainer.optimizer_state(), train_state=state))
                save_times.append(time.perf_counter() - t0)
        size = os.path.getsize(path)
    return {'step_times': step_times, 'save_times': save_times, 'size': size,
            'peak': peak_rss_bytes(), 'before': before}


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


# ---------------------------------------------------------------------------- the parent
def child(args, which):
    return run_child(__file__, ['--child', which, '--steps', args.steps, '--torch-steps', args.torch_steps,
                                '--threads', args.threads, *(['--data', args.data] if args.data else [])],
                     child_env(args.threads), f"{which} child")


def mib(n):
    return n / (1024 * 1024)


def report_scalar(r, steps):
    times, loss = r['times'], r['loss']
    s, n = statistics.mean(times['scalar']), statistics.mean(times['numpy'])
    diff = max(abs(a - b) for a, b in zip(loss['scalar'], loss['numpy']))
    print(f"\n[1] batch 1, default config (1x16), {steps} steps, interleaved")
    print(f"    scalar engine {1e3 * s:8.3f} ms/step   numpy {1e3 * n:8.3f} ms/step   "
          f"ratio {s / n:5.1f}x")
    print(f"    median ratio {statistics.median(times['scalar']) / statistics.median(times['numpy']):.1f}x; "
          f"largest loss difference {diff:.1e}; last loss {loss['numpy'][-1]:.4f}")
    print(f"    peak memory {mib(r['peak']):.0f} MiB ({mib(r['peak'] - r['before']):.1f} MiB during training)")


def report_torch(r, steps):
    print(f"\n[2] n_layer 4, n_embd 64, n_head 4, block_size 16, batch 32, float64, {steps} steps, interleaved")
    if r.get('skipped'):
        print(f"    SKIPPED: PyTorch is not installed; install it with `{TORCH_HINT}`")
        return
    tokens, times = sum(r['tokens']), r['times']
    n_tps, t_tps = tokens / sum(times['numpy']), tokens / sum(times['torch'])
    diff = max(abs(a - b) for a, b in zip(r['loss']['numpy'], r['loss']['torch']))
    print(f"    numpy {n_tps:8.0f} tokens/s ({1e3 * statistics.mean(times['numpy']):.1f} ms/step)   "
          f"PyTorch {t_tps:8.0f} tokens/s ({1e3 * statistics.mean(times['torch']):.1f} ms/step)")
    print(f"    ratio numpy / PyTorch {n_tps / t_tps:.2f}x; median-step ratio "
          f"{statistics.median(times['torch']) / statistics.median(times['numpy']):.2f}x; "
          f"largest loss difference {diff:.1e}")
    print(f"    peak memory {mib(r['peak']):.0f} MiB, both models in one process "
          f"({mib(r['peak'] - r['before']):.1f} MiB during training)")


def report_ckpt(r, save_every):
    step, save = statistics.mean(r['step_times']), statistics.mean(r['save_times'])
    share = save / (save_every * step + save)
    from recipe import RECIPE
    print(f"\n[3] checkpoints, the recipe's model ({RECIPE['n_layer']}x{RECIPE['n_embd']}, "
          f"batch {RECIPE['batch_size']}): {1e3 * step:.1f} ms/step, one save {1e3 * save:.0f} ms "
          f"({r['size'] / 1e6:.1f} MB with Adam's moments)")
    print(f"    saving every {save_every} steps costs {100 * share:.1f}% of the run; "
          f"peak memory {mib(r['peak']):.0f} MiB")


def report_dropout(r):
    from recipe import RECIPE
    print(f"\n[4] dropout 0.1, the recipe's model ({RECIPE['n_layer']}x{RECIPE['n_embd']}, batch "
          f"{RECIPE['batch_size']}), median of 35 steps each, interleaved")
    for dtype, (plain, dropped) in r['steps'].items():
        print(f"    {dtype}: {1e3 * plain:.2f} ms/step without masks, {1e3 * dropped:.2f} ms with: "
              f"{dropped / plain:.2f}x")
    print(f"    a step's masks, {r['numbers']:,} numbers: draw() {1e3 * r['draw']:.2f} ms; as one array, "
          f"from 16-bit integers {1e3 * r['ints']:.2f} ms, from uniform float32s {1e3 * r['uniform']:.2f} ms "
          f"({r['uniform'] / r['ints']:.1f}x)")


def main(argv=None):
    args = parse_args(argv)
    if args.save_every is None:
        from recipe import RECIPE
        args.save_every = RECIPE['save_every']
    if args.data is None:
        args.data = shared_data('names.txt')
    if args.child:
        result = {'scalar': child_scalar, 'torch': child_torch, 'ckpt': child_ckpt,
                  'dropout': child_dropout}[args.child](args)
        print(json.dumps(result))
        return 0
    print(f"data: {args.data or 'bundled census names'}; children: OPENBLAS_NUM_THREADS="
          f"OMP_NUM_THREADS={args.threads}, torch threads {args.threads}, OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE "
          f"unset; load average {os.getloadavg()[0]:.2f}")
    for which, report in (('scalar', lambda r: report_scalar(r, args.steps)),
                          ('torch', lambda r: report_torch(r, args.torch_steps)),
                          ('ckpt', lambda r: report_ckpt(r, args.save_every)), ('dropout', report_dropout)):
        r = child(args, which)
        if r:
            report(r)
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == '__main__':
    sys.exit(main())
