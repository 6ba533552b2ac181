"""
Running-text training speed at nanoGPT's shakespeare_char CPU shape (4 layers, 4 heads, n_embd
128, block 64, batch 12, float32): the numpy engine against PyTorch, each against its own matrix
products and the machine's matmul peak (docs/performance.md gives the figures and the method).

    python bench/text_speed.py                  # 1 and 2 threads, 40 timed rounds each
    python bench/text_speed.py --steps 100 --threads 1

Each thread count runs in a fresh child (common.child_env), and so do the numpy engine's peak
memory alone and the breakdown of a one-thread step, layer function by layer function.
"""

import argparse
import json
import os
import statistics
import sys
import time

from common import TORCH_HINT, best_time, child_env, load, peak_rss_bytes, processor, read_text, run_child, shared_data

CONFIG = dict(n_layer=4, n_head=4, n_embd=128, block_size=64)  # nanoGPT's CPU shakespeare_char
BATCH = 12
MEMORY_STEPS = 20  # the memory child's steps: the peak is reached in the first
BLOCK = 4          # steps of one side in a row, then as many of its products alone, before the next side
SPIN = 0.3         # s between sides: OpenBLAS's threads spin ~0.1 s after their last product, OpenMP's too


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
    products = {'numpy': lambda: a @ a}
    try:
        import torch
        t = torch.from_numpy(a)
        products['torch'] = lambda: torch.mm(t, t)
    except ImportError:
        pass
    best = {}
    for name, mm in products.items():
        mm()
        best[name] = 2 * n ** 3 / best_time(mm, 5)[0] / 1e9
    return best


def products_alone(config, B, T, torch=None):
    """A function that computes one step's matrix products alone, in float32, and nothing else: the
    products src/backprop/model.py's step computes on a batch of B windows of T, shape for shape
    and transpose for transpose, every layer on arrays of its own (as the step's layers are), each
    output a new array (as the step's are). No step built on these products can be faster.
    torch: the torch module, to compute them with torch.matmul instead of numpy's @."""
    import numpy as np
    rng = np.random.default_rng(0)
    C, V, H, R, L = config.n_embd, config.vocab_size, config.n_head, B * T, config.n_layer
    hd = C // H
    r = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    linears = [(3 * C, C), (C, C), (4 * C, C), (C, 4 * C)] * L + [(V, C)]  # (n_out, n_in)
    ws = [r(n_out, n_in) for n_out, n_in in linears]
    xs = [r(R, n_in) for _, n_in in linears]
    dys = [r(R, n_out) for n_out, _ in linears]
    heads = [[r(H, B, T, hd) for _ in range(4)] for _ in range(L)]  # q, k, v, dout: (n_head, B, T, head_dim)
    atts = [r(H, B, T, T) for _ in range(L)]                        # (n_head, B, T, T)
    one_hots = r(R, V), r(R, config.block_size)                     # embedding_backward's one-hot products
    t = lambda x: x.swapaxes(-1, -2)  # noqa: E731
    if torch is not None:
        ws, xs, dys, atts, one_hots = ([torch.from_numpy(a) for a in group] for group in (ws, xs, dys, atts, one_hots))
        heads = [[torch.from_numpy(a) for a in layer] for layer in heads]

    def products():
        for w, x, dy in zip(ws, xs, dys):
            x @ t(w), dy @ w, t(dy) @ x                # linear_forward, linear_backward's dx and dw
        for (q, k, v, dout), att in zip(heads, atts):  # attention_forward, attention_backward
            q @ t(k), att @ v
            t(att) @ dout, dout @ t(v), att @ k, t(att) @ q
        for oh in one_hots:
            t(oh) @ xs[0][:, :C]
    return products


def recipe_data(path):
    """(config, tokenizer, the training part's ids) for nanoGPT's shape on the text at path:
    what every child trains."""
    from microgpt.edge import text
    from microgpt.model import GPTConfig
    from microgpt.tokenizer import CharTokenizer
    whole = read_text(path)
    tokenizer = CharTokenizer.from_docs([whole])
    config = GPTConfig(tokenizer.vocab_size, **CONFIG)
    return config, tokenizer, tokenizer.encode(text.split_text(whole, None, config.block_size)[0])


def random_weights(config):
    """Weights drawn by numpy at std 0.02, fast to make: the memory and breakdown children's."""
    import numpy as np
    from microgpt.model import parameter_shapes
    r = np.random.default_rng(0)
    return {name: r.normal(0, 0.02, shape) for name, shape in parameter_shapes(config).items()}


def memory_child(args, workers):
    """The numpy engine's own peak memory: this process trains MEMORY_STEPS steps and does nothing
    else (its weights from numpy's generator: init_weights' Python floats would count too)."""
    from microgpt import backprop
    from microgpt.edge import text
    config, tokenizer, ids = recipe_data(args.data)
    weights = random_weights(config)
    before = peak_rss_bytes()
    trainer = backprop.Trainer(config, weights, tokenizer, dtype='float32', workers=workers)
    for step in range(1, MEMORY_STEPS + 1):
        trainer.step(text.train_windows(ids, config.block_size, BATCH, 42, step), 1e-3)
    return {'before': before, 'peak': peak_rss_bytes()}


def breakdown(args, _):
    """Where the numpy step's time goes: each of backprop/model.py's layer functions timed (CPU
    seconds, one BLAS thread) over args.steps steps, the products inside them apart from the
    passes over arrays; then the split step's phases (wall time, two workers)."""
    import numpy as np
    from microgpt import backprop
    from microgpt.backprop import model, optim, parallel, threads
    from microgpt.edge import text
    config, tokenizer, ids = recipe_data(args.data)
    weights = random_weights(config)
    threads.set_threads(1)
    batches = [text.train_windows(ids, config.block_size, BATCH, 42, step) for step in range(1, args.steps + 4)]
    spent = {}

    def timing(module, name, clock):
        f = getattr(module, name)

        def timed(*a, **k):
            t0 = clock()
            out = f(*a, **k)
            spent[name] = spent.get(name, 0.0) + clock() - t0
            return out
        setattr(module, name, timed)
        return lambda: setattr(module, name, f)
    layer_functions = [n for n in dir(model) if n.endswith(('_forward', '_backward')) and n not in
                       ('model_forward', 'model_backward')] + ['stacked_qkv']
    undo = [timing(model, n, time.thread_time) for n in layer_functions] + [timing(optim.AdamArrays, 'step', time.thread_time)]
    trainer = backprop.Trainer(config, weights, tokenizer, dtype='float32')
    step_time = []
    for i, batch in enumerate(batches):
        if i == 3:
            spent.clear()
        t0 = time.thread_time()
        trainer.step(batch, 1e-3)
        step_time.append(time.thread_time() - t0)
    for u in undo:
        u()
    n = len(batches) - 3
    per_step = {k: 1e3 * v / n for k, v in spent.items()}
    # the products inside attention_forward/backward: the same products alone, on the same shapes
    H, T, hd = config.n_head, config.block_size, config.n_embd // config.n_head
    r = np.random.default_rng(0)
    q, k, v, d = (r.standard_normal((H, BATCH, T, hd)).astype(np.float32) for _ in range(4))
    att = r.standard_normal((H, BATCH, T, T)).astype(np.float32)
    t0 = time.thread_time()
    for _ in range(n * config.n_layer):
        q @ k.swapaxes(-1, -2), att @ v, att.swapaxes(-1, -2) @ d, d @ v.swapaxes(-1, -2), att @ k, att.swapaxes(-1, -2) @ q
    attention_products = 1e3 * (time.thread_time() - t0) / n
    t0 = time.thread_time()
    for _ in range(n * config.n_layer):
        np.fmax.reduce(att, axis=-1, keepdims=True)
    row_maxima = 1e3 * (time.thread_time() - t0) / n
    # the split step's phases, two workers
    split = backprop.Trainer(config, weights, tokenizer, dtype='float32', workers=2)
    undo = [timing(parallel.Split, 'loss_and_grad', time.perf_counter), timing(optim.AdamArrays, 'step', time.perf_counter)]
    whole_split, half = [], []
    for i, batch in enumerate(batches):
        if i == 3:
            spent.clear()
        t0 = time.perf_counter()
        split.step(batch, 1e-3)
        whole_split.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        trainer.gradient(batch[:BATCH // 2])  # one part alone, here, the other core idle
        half.append(time.perf_counter() - t0)
    for u in undo:
        u()
    return {'step': 1e3 * statistics.median(step_time[3:]), 'per_step': per_step,
            'attention_products': attention_products, 'row_maxima': row_maxima,
            'split': 1e3 * statistics.median(whole_split[3:]), 'half': 1e3 * statistics.median(half[3:]),
            'split_parts': 1e3 * spent['loss_and_grad'] / n, 'split_adam': 1e3 * spent['step'] / n}


def report_breakdown(b):
    per = b['per_step']
    linear = per['linear_forward'] + per['linear_backward']
    attention = per['attention_forward'] + per['attention_backward'] - b['attention_products']
    named = {'linear products': linear, 'attention products (the same, alone)': b['attention_products'],
             'attention: softmax and its backward, the rest': attention,
             'rmsnorm': per['rmsnorm_forward'] + per['rmsnorm_backward'], 'Adam': per['step'],
             'relu': per['relu_forward'] + per['relu_backward'],
             'embeddings, residual adds, loss, stacking q k v':
                 sum(per[k] for k in per if k.startswith(('embedding', 'residual', 'cross_entropy', 'stacked')))}
    named['Python and the rest'] = b['step'] - sum(named.values())
    print(f"\n\nwhere a one-thread numpy step's {b['step']:.1f} ms go (CPU seconds, each layer function timed, medians "
          "and sums over the steps):")
    for k, v in named.items():
        print(f"  {k:60s} {v:6.2f} ms")
    print(f"  (of the attention's: the softmax's row maxima alone {b['row_maxima']:.2f} ms)")
    print(f"split on two workers: {b['split']:.1f} ms a step (wall): the two parts side by side {b['split_parts']:.1f} ms "
          f"(one part alone, the other core idle: {b['half']:.1f}), Adam on both cores {b['split_adam']:.1f} ms")


def child(args, n):
    """One thread count's sides, timed in turn: what report() prints."""
    from microgpt import backprop
    from microgpt.backprop import threads
    from microgpt.edge import text
    from microgpt.model import init_weights
    from microgpt.training import learning_rate
    config, tokenizer, ids = recipe_data(args.data)
    weights = init_weights(config, seed=42)
    T = config.block_size
    batch_of = lambda step: text.train_windows(ids, T, BATCH, 42, step)  # noqa: E731
    lr_of = lambda step: learning_rate(3e-3, step - 1, 2000)  # noqa: E731

    # the sides: (name, set the threads up, one training step, its products alone)
    sides = []
    floor = products_alone(config, BATCH, T)
    if n == 1:
        numpy_step = backprop.Trainer(config, weights, tokenizer, dtype='float32').step
        sides.append(('numpy float32', lambda: threads.set_threads(1), numpy_step, floor))
    else:
        split = backprop.Trainer(config, weights, tokenizer, dtype='float32', workers=n)
        parts = [products_alone(config, BATCH // n, T) for _ in range(n)]
        in_parts = lambda: list(split.split.pool.map(lambda f: f(), parts))  # noqa: E731
        sides.append((f'numpy float32, {n} workers x 1 BLAS thread', lambda: threads.set_threads(1), split.step, in_parts))
        one_pass = backprop.Trainer(config, weights, tokenizer, dtype='float32').step
        sides.append((f'numpy float32, {n} BLAS threads', lambda: threads.set_threads(n), one_pass, floor))
    try:
        import torch
        torch.set_num_threads(n)
        sides.append((f'PyTorch, {n} thread{"s" * (n > 1)}', lambda: threads.set_threads(n),
                      torch_trainer(config, weights), products_alone(config, BATCH, T, torch)))
    except ImportError:
        pass
    for step in range(1, 4):  # warm up: first-touch allocations, the workers' threads, PyTorch's
        for _, set_up, train, products in sides:
            set_up()
            train(batch_of(step), lr_of(step))
            products()
    out = {'threads': n, 'peak': peak_matmul(n), 'flops': model_flops(config, BATCH, T), 'tokens': BATCH * T,
           'sides': {name: {'step': [], 'products': [], 'loss': [], 'step_cpu': [], 'products_cpu': []}
                     for name, *_ in sides}}
    for first in range(4, 4 + args.steps, BLOCK):
        for name, set_up, train, products in sides:
            time.sleep(SPIN)  # the last side's BLAS or OpenMP threads stop spinning first
            set_up()
            side = out['sides'][name]
            for step in range(first, min(first + BLOCK, 4 + args.steps)):  # BLOCK steps, then BLOCK products
                c0, t0 = time.process_time(), time.perf_counter()
                side['loss'].append(train(batch_of(step), lr_of(step)))
                side['step'].append(time.perf_counter() - t0)
                side['step_cpu'].append(time.process_time() - c0)
            for _ in range(first, min(first + BLOCK, 4 + args.steps)):
                c0, t0 = time.process_time(), time.perf_counter()
                products()
                side['products'].append(time.perf_counter() - t0)
                side['products_cpu'].append(time.process_time() - c0)
    out['rss'] = peak_rss_bytes()
    return out


# ---------------------------------------------------------------------------- the parent
def report(r):
    n = r['threads']
    peak = max(r['peak'].values())
    print(f"\n{n} thread{'s' * (n > 1)}: matmul peak {peak:.1f} GFLOP/s "
          f"({', '.join(f'{k} {v:.1f}' for k, v in r['peak'].items())}; 2048^2 float32, best of 5); "
          f"a step's model FLOPs {r['flops'] / 1e9:.2f} G")
    print(f"  {'':44s} {'step ms':>8s} {'(mean)':>7s} {'products':>9s} {'step/':>6s} {'GFLOP/s':>8s} {'of peak':>8s}"
          f"   {'CPU ms: step':>12s} {'products':>9s} {'step/':>6s}")
    print(f"  {'':44s} {'median':>8s} {'':>7s} {'alone ms':>9s} {'prod.':>6s} {'':>8s} {'':>8s}"
          f"   {'':>12s} {'':>9s} {'prod.':>6s}")
    medians = {}
    for name, side in r['sides'].items():
        step, products = statistics.median(side['step']), statistics.median(side['products'])
        step_cpu, products_cpu = statistics.median(side['step_cpu']), statistics.median(side['products_cpu'])
        medians[name] = step
        gf = r['flops'] / step / 1e9
        print(f"  {name:44s} {1e3 * step:8.1f} {1e3 * statistics.mean(side['step']):7.1f} {1e3 * products:9.1f} "
              f"{step / products:5.2f}x {gf:8.1f} {100 * gf / peak:7.1f}%   {1e3 * step_cpu:12.1f} "
              f"{1e3 * products_cpu:9.1f} {step_cpu / products_cpu:5.2f}x")
    names = list(r['sides'])
    torch_name = next((k for k in names if k.startswith('PyTorch')), None)
    if torch_name is None:
        print(f"  PyTorch: SKIPPED, not installed; install it with `{TORCH_HINT}`")
    else:
        best = min((k for k in names if k.startswith('numpy')), key=medians.get)
        diff = max(abs(a - b) for a, b in zip(r['sides'][best]['loss'], r['sides'][torch_name]['loss']))
        print(f"  {best} against {torch_name}: {medians[torch_name] / medians[best]:.2f}x step for step "
              f"(largest loss difference {diff:.1e}, float32 both)")
    print(f"  peak memory of this child: {r['rss'] / 2 ** 20:.0f} MiB (every model and products array above)")


def main(argv=None):
    p = argparse.ArgumentParser(description="numpy float32 against PyTorch at nanoGPT's CPU shakespeare_char config.")
    p.add_argument('--steps', type=int, default=40, help=f"timed steps per side (default 40, after 3 warm-up), {BLOCK} in a row")
    p.add_argument('--threads', type=int, action='append', help="thread counts (default: 1 and 2)")
    p.add_argument('--data', default=shared_data('tinyshakespeare.txt'), help="tinyshakespeare.txt (default ../shared/data/)")
    p.add_argument('--child', default=None, help="internal: one measurement (threads:N, memory:WORKERS or "
                   "breakdown), printed as JSON")
    args = p.parse_args(argv)
    if not args.data or not os.path.exists(args.data):
        print("text_speed: tinyshakespeare.txt not found (../shared/data/): skipped; get it with "
              "curl -O https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt")
        return 0
    if args.child:
        kind, _, n = args.child.partition(':')
        print(json.dumps({'threads': child, 'memory': memory_child, 'breakdown': breakdown}[kind](args, int(n or 0))))
        return 0
    print(f"config {CONFIG}, batch {BATCH}, {args.steps} steps a side, {BLOCK} in a row, sides in turn; "
          f"processor {processor()}, {os.cpu_count()} cores; children: OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE "
          f"unset; load average before {load()}", flush=True)
    for n in args.threads or [1, 2]:
        r = run_child(__file__, ['--child', f'threads:{n}', '--steps', args.steps, '--data', args.data], child_env(n), f"{n}-thread child")
        if r:
            report(r)
    for workers in (1, 2):
        m = run_child(__file__, ['--child', f'memory:{workers}', '--data', args.data], child_env(OPENBLAS_NUM_THREADS='1'))
        if m:
            print(f"\npeak memory of the numpy engine alone ({MEMORY_STEPS} steps in a child that does nothing else, "
                  f"{'one pass' if workers == 1 else f'split on {workers} workers'}): {m['peak'] / 2 ** 20:.1f} MiB "
                  f"({m['before'] / 2 ** 20:.1f} MiB of it before the trainer: Python, numpy, the text)", end='')
    b = run_child(__file__, ['--child', 'breakdown', '--steps', args.steps, '--data', args.data],
                  child_env(OPENBLAS_NUM_THREADS='1'), 'breakdown child')
    if b:
        report_breakdown(b)
    print(f"\nload average after {load()}")
    return 0


if __name__ == '__main__':
    sys.exit(main())
