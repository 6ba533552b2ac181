"""
Running-text training throughput: the numpy engine in float32 against PyTorch, at nanoGPT's
shakespeare_char CPU configuration (n_layer 4, n_head 4, n_embd 128, block_size 64, batch 12).

    python bench/text_speed.py                  # 1 and 2 threads, 40 timed steps each
    python bench/text_speed.py --steps 100 --threads 1

The PyTorch side is the same GPT written as PyTorch users write it (torch_gpt below): an
nn.Module of nn.Embedding and nn.Linear(bias=False) layers, F.rms_norm, F.scaled_dot_product_attention
(is_causal=True), ReLU, torch.optim.Adam (betas 0.85, 0.99, as microgpt's), float32, loss.backward().
Both start from the same weights (microgpt's GPT(config, seed=42)) and train on the same
batches (microgpt/edge/text.py's windows of tinyshakespeare, seed 42), their steps interleaved
(one of each in turn, each timed with perf_counter) so that a load spike from the other
developers' processes on this shared machine hits both alike. Throughput is predicted
characters per second (12 x 64 per step); the ratio is numpy / PyTorch on the mean step time.
Beside it, the ratio of CPU seconds (process_time: all the child's threads together), which
a busy machine disturbs less than wall time.

Peak: in the same child, a 2048 x 2048 float32 matrix product (numpy's @ and torch.mm, the
faster of the two, best of 5) gives the machine's measured matmul rate at that thread count;
each side's fraction is its model FLOPs per second (the matrix products a step needs: 6 x
tokens x matrix weights, plus the T x T attention products, counted in model_flops) over it.

Each thread count runs in a fresh child process (this script with --child N) with
OPENBLAS_NUM_THREADS = OMP_NUM_THREADS = N and torch.set_num_threads(N), and with
OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE UNSET for the child only (this machine sets them to
work around old OpenBLAS bugs; users' machines do not, and they slow numpy's matmuls here).
The load average is printed before and after: the machine is shared, so the numbers are noisy.
Data: ../shared/data/tinyshakespeare.txt beside the checkout; skipped (exit 0) when absent.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(BENCH_DIR)
sys.path[:0] = [REPO_DIR, os.path.join(REPO_DIR, 'src'), BENCH_DIR]  # run from a checkout

CONFIG = dict(n_layer=4, n_head=4, n_embd=128, block_size=64)  # nanoGPT's CPU shakespeare_char
BATCH = 12
TORCH_HINT = ".venv/bin/pip install torch==2.13.0"


def shakespeare_path():
    """../shared/data/tinyshakespeare.txt beside the checkout (or beside a worktree's parent)."""
    for up in (('..',), ('..', '..')):
        path = os.path.join(REPO_DIR, *up, 'shared', 'data', 'tinyshakespeare.txt')
        if os.path.exists(path):
            return os.path.normpath(path)
    return None


def model_flops(config, B, T):
    """Multiply-adds x 2 of one training step's matrix products: forward, and backward twice it."""
    C, V, L = config.n_embd, config.vocab_size, config.n_layer
    weights = L * (4 * C * C + 2 * 4 * C * C) + V * C  # every matrix a token goes through (lm_head too)
    attention = L * 2 * (B * T * T * C)                 # q k^T and att v, every head, full T x T
    return 3 * 2 * (B * T * weights + attention)        # backward = 2x forward


# ---------------------------------------------------------------------------- PyTorch, idiomatically
def torch_gpt(config, weights):
    """microgpt's GPT as a PyTorch user writes it, loaded with `weights` ({name: [[float]]})."""
    import torch
    from torch import nn
    F = nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            C = config.n_embd
            self.attn_wq, self.attn_wk, self.attn_wv, self.attn_wo = (nn.Linear(C, C, bias=False) for _ in range(4))
            self.mlp_fc1 = nn.Linear(C, 4 * C, bias=False)
            self.mlp_fc2 = nn.Linear(4 * C, C, bias=False)

        def forward(self, x):
            B, T, C = x.shape
            h = F.rms_norm(x, (C,), eps=1e-5)
            q, k, v = (lin(h).view(B, T, config.n_head, -1).transpose(1, 2)
                       for lin in (self.attn_wq, self.attn_wk, self.attn_wv))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.attn_wo(y.transpose(1, 2).reshape(B, T, C))
            return x + self.mlp_fc2(F.relu(self.mlp_fc1(F.rms_norm(x, (C,), eps=1e-5))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(config.vocab_size, config.n_embd)
            self.wpe = nn.Embedding(config.block_size, config.n_embd)
            self.layers = nn.ModuleList(Block() for _ in range(config.n_layer))
            self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)

        def forward(self, idx, targets):
            T = idx.shape[1]
            x = F.rms_norm(self.wte(idx) + self.wpe(torch.arange(T)), (config.n_embd,), eps=1e-5)
            for block in self.layers:
                x = block(x)
            logits = self.lm_head(x)
            return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))

    model = GPT()
    with torch.no_grad():
        for name, w in weights.items():  # microgpt's names: wte, layer0.attn_wq, ...
            module_name = name.replace('layer', 'layers.', 1) if name.startswith('layer') else name
            target = model.get_submodule(module_name)
            target.weight.copy_(torch.tensor(w, dtype=torch.float32))
    return model


def torch_trainer(config, weights):
    import numpy as np
    import torch
    model = torch_gpt(config, weights)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.85, 0.99), eps=1e-8)

    def step(batch, lr):
        a = torch.from_numpy(np.asarray(batch))   # (B, T + 1)
        loss = model(a[:, :-1], a[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        for group in opt.param_groups:
            group['lr'] = lr
        opt.step()
        return loss.item()
    return step


# ---------------------------------------------------------------------------- one child
def peak_matmul(threads):
    """The best GFLOP/s of a 2048 x 2048 float32 product, numpy and (if present) torch."""
    import numpy as np
    n = 2048
    a = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)  # (n, n)
    best = {}
    for name, mm in (('numpy', lambda: a @ a), ('torch', None)):
        if name == 'torch':
            try:
                import torch
            except ImportError:
                continue
            t = torch.from_numpy(a)
            mm = lambda: torch.mm(t, t)  # noqa: E731
        mm()
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            mm()
            times.append(time.perf_counter() - t0)
        best[name] = 2 * n ** 3 / min(times) / 1e9
    return best


def products_floor(config, B, T, repeats=5):
    """Seconds of one step's matrix products alone, in float32, best of `repeats`: the same
    products src/backprop/model.py's step computes, shape for shape and transpose for
    transpose, with nothing between them. No step built on these products can be faster, so
    PyTorch's step time over this is the largest ratio numpy could reach against it."""
    import numpy as np
    rng = np.random.default_rng(0)
    C, V, H, R = config.n_embd, config.vocab_size, config.n_head, B * T
    hd = C // H
    r = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    linears = [(3 * C, C), (C, C), (4 * C, C), (C, 4 * C)] * config.n_layer + [(V, C)]  # (n_out, n_in)
    ws = [r(n_out, n_in) for n_out, n_in in linears]
    xs = [r(R, n_in) for _, n_in in linears]
    dys = [r(R, n_out) for n_out, _ in linears]
    q, k, v, dout = (r(H, B, T, hd) for _ in range(4))  # (n_head, B, T, head_dim)
    att = r(H, B, T, T)                                # (n_head, B, T, T)
    one_hots = r(R, V), r(R, config.block_size)        # embedding_backward's one-hot products

    def products():
        for w, x, dy in zip(ws, xs, dys):
            x @ w.T, dy @ w, dy.T @ x                  # linear_forward, linear_backward's dx and dw
        for _ in range(config.n_layer):                # attention_forward, attention_backward
            q @ k.swapaxes(-1, -2), att @ v
            att.swapaxes(-1, -2) @ dout, dout @ v.swapaxes(-1, -2), att @ k, att.swapaxes(-1, -2) @ q
        for oh in one_hots:
            oh.T @ xs[0][:, :C]
    products()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        products()
        times.append(time.perf_counter() - t0)
    return min(times)


def child(args):
    import backprop
    from microgpt.edge import text
    from microgpt.model import GPT, GPTConfig
    from microgpt.tokenizer import CharTokenizer
    from microgpt.training import learning_rate
    from train_speed import peak_rss_bytes
    with open(args.data, encoding='utf-8') as f:
        whole = f.read()
    tokenizer = CharTokenizer.from_docs([whole])
    config = GPTConfig(tokenizer.vocab_size, **CONFIG)
    train_text, _ = text.split_text(whole, None, config.block_size)
    ids = tokenizer.encode(train_text)
    weights = GPT(config, seed=42).weights()
    numpy_step = backprop.Trainer(config, weights, tokenizer, dtype='float32').step
    try:
        import torch
        torch.set_num_threads(args.child)
        torch_step = torch_trainer(config, weights)
    except ImportError:
        torch_step = None
    out = {'numpy_time': [], 'torch_time': [], 'numpy_loss': [], 'torch_loss': [], 'numpy_cpu': [], 'torch_cpu': [],
           'peak': peak_matmul(args.child), 'threads': args.child,
           'floor': products_floor(config, BATCH, config.block_size),
           'flops': model_flops(config, BATCH, config.block_size), 'tokens': BATCH * config.block_size}
    warmup = 3
    for step in range(1, warmup + args.steps + 1):
        batch = text.train_windows(ids, config.block_size, BATCH, 42, step)
        lr = learning_rate(3e-3, step - 1, 2000)
        c0, t0 = time.process_time(), time.perf_counter()
        a = numpy_step(batch, lr)
        c1, t1 = time.process_time(), time.perf_counter()
        b = torch_step(batch, lr) if torch_step else None
        c2, t2 = time.process_time(), time.perf_counter()
        if step > warmup:
            out['numpy_time'].append(t1 - t0)
            out['numpy_cpu'].append(c1 - c0)
            out['numpy_loss'].append(a)
            if torch_step:
                out['torch_time'].append(t2 - t1)
                out['torch_cpu'].append(c2 - c1)
                out['torch_loss'].append(b)
    out['rss'] = peak_rss_bytes()
    return out


# ---------------------------------------------------------------------------- the parent
def report(r):
    n = r['threads']
    peak = max(r['peak'].values())
    mean_n = statistics.mean(r['numpy_time'])
    n_tps, n_gf = r['tokens'] / mean_n, r['flops'] / mean_n / 1e9
    print(f"\n{n} thread{'s' * (n > 1)}: matmul peak {peak:.1f} GFLOP/s "
          f"({', '.join(f'{k} {v:.1f}' for k, v in r['peak'].items())}; 2048^2 float32, best of 5)")
    print(f"  numpy float32  {1e3 * mean_n:7.1f} ms/step  {n_tps:8.0f} chars/s  {n_gf:5.1f} GFLOP/s "
          f"= {100 * n_gf / peak:4.1f}% of peak   (median {1e3 * statistics.median(r['numpy_time']):.1f} ms)")
    if not r['torch_time']:
        print(f"  PyTorch        SKIPPED: not installed; install it with `{TORCH_HINT}`")
        return
    mean_t = statistics.mean(r['torch_time'])
    t_tps, t_gf = r['tokens'] / mean_t, r['flops'] / mean_t / 1e9
    print(f"  PyTorch        {1e3 * mean_t:7.1f} ms/step  {t_tps:8.0f} chars/s  {t_gf:5.1f} GFLOP/s "
          f"= {100 * t_gf / peak:4.1f}% of peak   (median {1e3 * statistics.median(r['torch_time']):.1f} ms)")
    floor_gf = r['flops'] / r['floor'] / 1e9
    print(f"  a step's matrix products alone {1e3 * r['floor']:.1f} ms (float32, the same shapes, best of 5; "
          f"{floor_gf:.1f} GFLOP/s = {100 * floor_gf / peak:.0f}% of peak): numpy spends "
          f"{100 * r['floor'] / mean_n:.0f}% of its step in them; a numpy step that were nothing else "
          f"would be {mean_t / r['floor']:.2f}x PyTorch, the most any step on them can reach")
    diff = max(abs(a - b) for a, b in zip(r['numpy_loss'], r['torch_loss']))
    cpu = sum(r['torch_cpu']) / sum(r['numpy_cpu'])
    print(f"  ratio numpy / PyTorch {mean_t / mean_n:.2f}x (median steps {statistics.median(r['torch_time']) / statistics.median(r['numpy_time']):.2f}x; "
          f"CPU seconds {cpu:.2f}x, {1e3 * statistics.mean(r['numpy_cpu']):.0f} vs {1e3 * statistics.mean(r['torch_cpu']):.0f} ms/step); "
          f"largest loss difference {diff:.1e} (float32 both); peak memory {r['rss'] / 2 ** 20:.0f} MiB both models")


def main(argv=None):
    p = argparse.ArgumentParser(description="numpy float32 against PyTorch at nanoGPT's CPU shakespeare_char config.")
    p.add_argument('--steps', type=int, default=40, help="timed steps per side (default 40, after 3 warm-up)")
    p.add_argument('--threads', type=int, action='append', help="thread counts (default: 1 and 2)")
    p.add_argument('--data', default=shakespeare_path(), help="tinyshakespeare.txt (default ../shared/data/)")
    p.add_argument('--child', type=int, default=None, help="internal: one measurement at this thread count")
    args = p.parse_args(argv)
    if not args.data or not os.path.exists(args.data):
        print("text_speed: tinyshakespeare.txt not found (../shared/data/): skipped; get it with "
              "curl -O https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt")
        return 0
    if args.child:
        print(json.dumps(child(args)))
        return 0
    print(f"config {CONFIG}, batch {BATCH}, {args.steps} interleaved steps per side; children: "
          "OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE unset; load average before "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    for n in args.threads or [1, 2]:
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(n), OMP_NUM_THREADS=str(n))
        env.pop('OPENBLAS_CORETYPE', None)
        env.pop('OPENBLAS_L2_SIZE', None)
        cmd = [sys.executable, os.path.abspath(__file__), '--child', str(n), '--steps', str(args.steps),
               '--data', args.data]
        result = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if result.returncode != 0:
            print(f"  the {n}-thread child failed:\n{result.stderr}")
            continue
        report(json.loads(result.stdout.strip().splitlines()[-1]))
    print(f"\nload average after {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == '__main__':
    sys.exit(main())
