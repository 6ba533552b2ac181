"""
How fast does each engine write running text? Characters per second, side by side, quiet and
with the other core busy.

    python bench/sampling_speed.py                                  # README's Shakespeare model
    python bench/sampling_speed.py --ckpt out/shakespeare.safetensors --length 500

The model is README's Shakespeare recipe's (4 x 128, block 64): the checkpoint at --ckpt, else
fresh weights of its shape (the speed does not depend on what they learned). Each engine writes
--length characters after "ROMEO:" through sampling.generate, as `sample.py --length` does: the
scalar engine (--scalar-length), the numpy port with its KV cache and without it, at one BLAS
thread (sample.py's and the lab's) and at the library's default, and PyTorch where installed (the
whole window per character, as nanoGPT's generate). Each is timed quiet, then while another
process spins on the last core; the best of --repeats runs is kept.
"""

import argparse
import os
import random
import subprocess
import sys
import time

from common import TORCH_HINT, processor, read_text, shared_data

from microgpt import inference  # after common: it puts the checkout on sys.path
from microgpt.backprop import threads
from microgpt.edge.checkpoint import read_checkpoint
from microgpt.model import GPT, GPTConfig, init_weights
from microgpt.sampling import generate
from microgpt.tokenizer import CharTokenizer

PROMPT = 'ROMEO:'
SHAPE = dict(n_layer=4, n_embd=128, n_head=4, block_size=64)  # README's Shakespeare recipe
SPIN = "import os, sys; os.sched_setaffinity(0, {int(sys.argv[1])}); exec('while True: pass')"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Characters per second of each engine's generation.")
    p.add_argument('--ckpt', default='out/shakespeare.safetensors', metavar='PATH',
                   help="a trained checkpoint (default README's; absent: fresh weights of its shape)")
    p.add_argument('--length', type=int, default=500, help="characters per run of the fast engines (default 500)")
    p.add_argument('--scalar-length', type=int, default=10, help="characters per run of the scalar engine (default 10)")
    p.add_argument('--repeats', type=int, default=3, help="runs per timing; the best is kept (default 3)")
    return p.parse_args(argv)


def the_model(path):
    """(config, weights, tokenizer, what it is): the checkpoint, or fresh weights of its shape."""
    if os.path.exists(path):
        ckpt = read_checkpoint(path)
        return ckpt.config, ckpt.weights, ckpt.tokenizer, path
    data = shared_data('tinyshakespeare.txt')
    chars = sorted(set(read_text(data))) if data else [chr(c) for c in range(32, 97)] + ['\n']
    config = GPTConfig(vocab_size=len(chars) + 1, **SHAPE)
    return config, init_weights(config), CharTokenizer(chars), f"fresh weights of the recipe's shape ({path} not found)"


def chars_per_second(model, length, repeats):
    """The best of `repeats` runs: characters written per second after PROMPT, at temperature 1."""
    prompt_ids = model.tokenizer.encode(PROMPT)
    best = float('inf')
    for seed in range(repeats):
        t0 = time.perf_counter()
        text = ''.join(generate(model, length, random.Random(seed), 1.0, prompt_ids))
        best = min(best, time.perf_counter() - t0)
        assert len(text) == length
    return length / best


class Uncached:
    """The numpy port with its cache switched off: every character recomputes the window."""

    def __init__(self, port):
        self.port, self.config, self.tokenizer = port, port.config, port.tokenizer

    def next_logits_fn(self):
        return self.port.next_logits_fn(cached=False)


class TorchWindow:
    """PyTorch, the whole window per character (nanoGPT's generate has no KV cache)."""

    def __init__(self, config, weights, tokenizer):
        import torch
        from microgpt.torchgpt.model import GPT as TorchGPT
        self.torch, self.config, self.tokenizer = torch, config, tokenizer
        self.model = TorchGPT(config).eval()
        self.model.load_state_dict({name: torch.tensor(w, dtype=torch.float32) for name, w in weights.items()})

    def next_logits_fn(self):
        def next_logits(ids):
            with self.torch.no_grad():
                return self.model(self.torch.tensor([ids]))[0, -1].tolist()
        return next_logits


def main(argv=None):
    args = parse_args(argv)
    config, weights, tokenizer, what = the_model(args.ckpt)
    port = inference.NumpyGPT(config, weights, tokenizer=tokenizer)
    sides = [('scalar engine (Values)', GPT.from_weights(config, weights, tokenizer, fused=True), 1, args.scalar_length),
             ('numpy, KV cache, 1 BLAS thread', port, 1, args.length),
             ('numpy, whole window, 1 BLAS thread', Uncached(port), 1, args.length),
             ('numpy, KV cache, default BLAS threads', port, None, args.length),
             ('numpy, whole window, default BLAS threads', Uncached(port), None, args.length)]
    try:
        sides.append(('PyTorch float32, whole window', TorchWindow(config, weights, tokenizer), None, args.length))
    except ImportError:
        print(f"PyTorch is not installed: its line is left out ({TORCH_HINT})")
    default = threads.cores()
    print(f"{what}: {config.n_layer} layers, n_embd {config.n_embd}, block {config.block_size}; "
          f"{processor()}, {default} cores")
    results = {}
    for load in ('quiet', 'busy'):
        spinner = None
        if load == 'busy':
            spinner = subprocess.Popen([sys.executable, '-c', SPIN, str(default - 1)])
            time.sleep(0.5)
        try:
            for name, model, n_threads, length in sides:
                threads.set_threads(n_threads or default)
                results[name, load] = chars_per_second(model, length, args.repeats)
        finally:
            if spinner:
                spinner.kill()
    threads.set_threads(default)
    print(f"\ncharacters per second, {PROMPT!r} then {args.length} characters (scalar: {args.scalar_length})")
    print(f"{'':44} {'quiet':>9} {'core busy':>10} {'busy costs':>11}")
    for name, *_ in sides:
        quiet, busy = results[name, 'quiet'], results[name, 'busy']
        print(f"{name:44} {quiet:9.1f} {busy:10.1f} {quiet / busy:10.2f}x")
    cached, window = 'numpy, KV cache, 1 BLAS thread', 'numpy, whole window, 1 BLAS thread'
    for load in ('quiet', 'busy'):
        print(f"{load}: the KV cache is {results[cached, load] / results[window, load]:.1f}x the whole window, "
              f"{results[cached, load] / results['scalar engine (Values)', load]:.0f}x the scalar engine; "
              f"one BLAS thread is {results[cached, load] / results['numpy, KV cache, default BLAS threads', load]:.2f}x "
              "the default threads")
    return 0


if __name__ == '__main__':
    sys.exit(main())
