"""
The first loss over the whole grid of sizes: n_embd 16 to 512, n_layer 1 to 12, against ln(vocab_size).

    python bench/init_loss.py               # names.txt and tinyshakespeare from ../shared/data/
    python bench/init_loss.py --seeds 5

A model that has learned nothing should guess every token evenly: its loss is ln(vocab_size).
For every size this prints the first loss of a batch (32 names; 12 windows of 64 characters) as
its distance from ln(vocab_size) in percent, mean and worst over --seeds draws; beside it, the
same without model.py's depth factor, and the final residual stream's rms with and without (1
after the first rmsnorm: the growth is the blocks'). The target: within 5% everywhere. The
weights are drawn with numpy at model.py's stds (init_stds): init_weights would take 15 s and
1.2 GB for the largest, and the loss depends on the stds, not the generator. The forward is the
numpy engine's, in float32. Last, why a batch: one name's first loss moves by about 4% from one
draw to the next; and the time init_weights takes at the running-text recipe's size.
"""

import argparse
import math
import os
import random
import sys

import numpy as np

from common import read_text, shared_data

from microgpt.backprop.model import make_batch, model_forward  # after common: it puts the checkout on sys.path
from microgpt.model import GPTConfig, init_stds, parameter_shapes
from microgpt.tokenizer import CharTokenizer
from microgpt.training import doc_tokens

WIDTHS = (16, 32, 64, 128, 256, 512)
DEPTHS = (1, 2, 4, 6, 8, 12)
TARGET = 0.05  # within 5% of ln(vocab_size), the loss of an even guess among the vocabulary


def stds(config, depth_rule=True):
    """model.py's initial std for each matrix (without depth_rule: the width rule alone, wte's
    std, which no depth factor touches, for every matrix)."""
    return init_stds(config) if depth_rule else init_stds(config, init_std=init_stds(config)['wte'])


def first_loss(config, batch, seed, depth_rule=True):
    """(loss, rms of the final residual stream) of one batch at weights drawn with the rule."""
    r = np.random.default_rng(seed)
    weights = {name: r.standard_normal(shape, dtype=np.float32) * np.float32(std)
               for (name, shape), std in zip(parameter_shapes(config).items(), stds(config, depth_rule).values())}
    idx, targets, mask = make_batch(batch, config.block_size, config.vocab_size)
    loss, caches = model_forward(weights, config, idx, targets, mask)
    stream = caches['lm_head']  # the input of lm_head: the residual stream after the last block
    return loss, float(np.sqrt((stream.astype(np.float64) ** 2).mean()))


def data(args):
    """[(name, tokenizer, block_size, batch)]: a batch of names and one of running text."""
    out = []
    for path, kind in ((args.names, 'names'), (args.text, 'text')):
        if not path or not os.path.exists(path):
            print(f"  ({kind}: {path} not found, skipped)")
            continue
        whole = read_text(path)
        if kind == 'names':
            names = [line.strip() for line in whole.splitlines() if line.strip()]
            tok = CharTokenizer.from_docs(names)
            rng = random.Random(0)
            out.append(('32 names', tok, 16, [doc_tokens(tok, rng.choice(names)) for _ in range(32)]))
        else:
            tok = CharTokenizer.from_docs([whole])
            ids = tok.encode(whole[:200_000])
            rng = random.Random(0)
            starts = [rng.randrange(len(ids) - 65) for _ in range(12)]
            out.append(('12 windows of text', tok, 64, [ids[s:s + 65] for s in starts]))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description="The first loss against ln(vocab_size), n_embd 16-512 x n_layer 1-12.")
    p.add_argument('--seeds', type=int, default=3, help="draws of the weights per size (default 3)")
    p.add_argument('--names', default=shared_data('names.txt'),
                   help="names.txt (default ../shared/data/)")
    p.add_argument('--text', default=shared_data('tinyshakespeare.txt'), help="tinyshakespeare.txt (default ../shared/data/)")
    args = p.parse_args(argv)
    worst_all = 0.0
    for title, tok, block, batch in data(args):
        V = tok.vocab_size
        print(f"\n{title}, vocab {V}, ln(vocab_size) = {math.log(V):.3f}: first loss - ln(V), in % of ln(V): "
              f"mean over {args.seeds} draws / worst;  [without the depth factor: mean / worst];  "
              "final stream rms with / without")
        print("  n_embd \\ n_layer" + "".join(f"{L:>32d}" for L in DEPTHS))
        for C in WIDTHS:
            cells = []
            for L in DEPTHS:
                config = GPTConfig(V, n_layer=L, n_embd=C, n_head=4, block_size=block)
                res = {rule: [first_loss(config, batch, seed, rule) for seed in range(args.seeds)] for rule in (True, False)}
                rel = {rule: [100 * (loss / math.log(V) - 1) for loss, _ in res[rule]] for rule in res}
                rms = {rule: np.mean([r for _, r in res[rule]]) for rule in res}
                worst = max(rel[True], key=abs)
                worst_all = max(worst_all, abs(worst))
                cells.append(f"{np.mean(rel[True]):+4.1f}/{worst:+4.1f} [{np.mean(rel[False]):+4.1f}/"
                             f"{max(rel[False], key=abs):+4.1f}] {rms[True]:.2f}/{rms[False]:.2f}")
            print(f"  {C:6d}          " + "".join(f"{c:>32s}" for c in cells), flush=True)
    print(f"\nworst first loss over the grid: {worst_all:.1f}% from ln(vocab_size) (target: within {100 * TARGET:.0f}%)")
    single_names(args)
    drawing_time()
    return 0


def drawing_time():
    """init_weights against building the scalar GPT, for the running-text recipe's model."""
    import time
    from microgpt.model import GPT, init_weights
    config = GPTConfig(66, n_layer=4, n_embd=128, n_head=4, block_size=64)
    t0 = time.perf_counter()
    init_weights(config, 42)
    t1 = time.perf_counter()
    GPT(config, seed=42).weights()
    t2 = time.perf_counter()
    print(f"drawing the recipe's 811,520 initial weights: init_weights {t1 - t0:.2f} s, "
          f"GPT(config).weights() {t2 - t1:.2f} s (the same numbers, as Values first)")


def single_names(args):
    """The spread of one name's first loss: why the grid is measured on batches."""
    if not args.names or not os.path.exists(args.names):
        return
    names = [line.strip() for line in read_text(args.names).splitlines() if line.strip()]
    tok = CharTokenizer.from_docs(names)
    rng = random.Random(1)
    for C, L in ((16, 1), (256, 8)):
        config = GPTConfig(tok.vocab_size, n_layer=L, n_embd=C, n_head=4, block_size=16)
        rel = np.array([100 * (first_loss(config, [doc_tokens(tok, rng.choice(names))], seed)[0]
                               / math.log(tok.vocab_size) - 1) for seed in range(40)])
        print(f"one name at a time, {C} x {L} (40 draws, a name each): mean {rel.mean():+.1f}%, "
              f"standard deviation {rel.std():.1f}%, worst {rel[np.abs(rel).argmax()]:+.1f}%, "
              f"{np.mean(np.abs(rel) > 100 * TARGET):.0%} of them more than 5% off")


if __name__ == '__main__':
    sys.exit(main())
