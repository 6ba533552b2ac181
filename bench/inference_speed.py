"""
How much faster is the numpy port (src/inference) than the scalar gpt()? Measured side by side.

    python bench/inference_speed.py                      # default config, random weights
    python bench/inference_speed.py --ckpt out/model.json
    python bench/inference_speed.py --n-layer 2 --n-embd 24 --n-head 3 --block-size 8

On the same weights and inputs: 1. the logits for every position of a full block: the scalar
gpt() once per position with its KV cache, against the port's forward() (attention as j <= i
loops, the reference) and forward_batch() (one masked softmax per head); 2. names sampled per
second by each engine through microgpt.sampling, which also shows that both draw the same names
(exit status 1 if not). Each line gives the time, best of --repeats, and the speed-up.
"""

import argparse
import random
import sys

import numpy as np

from common import best_time

from microgpt import inference
from microgpt.edge.checkpoint import read_checkpoint
from microgpt.model import GPT, GPTConfig
from microgpt.sampling import sample_names
from microgpt.tokenizer import CharTokenizer


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Time the scalar gpt() against the numpy port.")
    g = p.add_argument_group('model (ignored with --ckpt, which brings its own)')
    g.add_argument('--ckpt', metavar='PATH', help="time a trained checkpoint instead of random weights")
    g.add_argument('--n-layer', type=int, default=1, help="transformer blocks (default 1, as train.py)")
    g.add_argument('--n-embd', type=int, default=16, help="embedding width (default 16)")
    g.add_argument('--n-head', type=int, default=4, help="attention heads (default 4)")
    g.add_argument('--block-size', type=int, default=16, help="positions per block (default 16)")
    g.add_argument('--init-std', type=float, default=0.08,
                   help="std of the random weights (default 0.08, microgpt's; larger gives shorter names)")
    g = p.add_argument_group('measurement')
    g.add_argument('--repeats', type=int, default=7, help="runs per timing; the best is reported (default 7)")
    g.add_argument('--num-names', type=int, default=20, help="names sampled per engine and run (default 20)")
    g.add_argument('--temperature', type=float, default=0.5, help="sampling temperature, > 0 (default 0.5)")
    g.add_argument('--seed', type=int, default=42, help="seed for weights, tokens and sampling (default 42)")
    return p.parse_args(argv)


def scalar_block_logits(model, token_ids):
    """What the scalar path needs for a whole block: one gpt() call per position, in order."""
    keys, values = model.empty_cache()
    return [[l.data for l in model.gpt(t, pos, keys, values)] for pos, t in enumerate(token_ids)]


def main(argv=None):
    args = parse_args(argv)
    if args.ckpt:
        scalar = read_checkpoint(args.ckpt).model(fused=True)  # sample.py's blocks
        source = args.ckpt
    else:
        chars = 'abcdefghijklmnopqrstuvwxyz'  # a names-like vocabulary: 26 letters plus BOS
        config = GPTConfig(vocab_size=len(chars) + 1, n_layer=args.n_layer, n_embd=args.n_embd,
                           n_head=args.n_head, block_size=args.block_size)
        scalar = GPT(config, seed=args.seed, tokenizer=CharTokenizer(chars), init_std=args.init_std, fused=True)
        source = f'random weights (std {args.init_std}, seed {args.seed})'
    port = inference.NumpyGPT.from_scalar(scalar)
    cfg = scalar.config
    print(f"config: {cfg.to_dict()}  from {source}")
    print(f"repeats: {args.repeats} (best kept)  names: {args.num_names}  "
          f"temperature: {args.temperature}")

    # 1) logits for every position of a full block
    rng = random.Random(args.seed)
    token_ids = [rng.randrange(cfg.vocab_size) for _ in range(cfg.block_size)]
    t_scalar, ref = best_time(lambda: scalar_block_logits(scalar, token_ids), args.repeats)
    t_loops, (logits, _) = best_time(lambda: port.forward(token_ids), args.repeats * 10)
    t_vec, logits_vec = best_time(lambda: port.forward_batch([token_ids])[0], args.repeats * 10)
    ref = np.array(ref)  # (block_size, vocab_size)
    gap = max(np.abs(logits - ref).max(), np.abs(logits_vec - ref).max())
    print(f"\nlogits for all {cfg.block_size} positions of a block (max |difference| {gap:.1e})")
    print(f"  scalar gpt(), one call per position  {t_scalar * 1e3:9.3f} ms")
    for label, t in (('port forward() (j <= i loops)', t_loops),
                     ('port forward_batch()', t_vec)):
        ratio = t_scalar / t
        print(f"  {label:<36} {t * 1e3:9.3f} ms  {ratio:6.1f}x faster")

    # 2) names per second, each engine through the same sampling loop
    def names_with(model):
        return sample_names(model, num=args.num_names, temperature=args.temperature, seed=args.seed)
    t_scalar_names, names_scalar = best_time(lambda: names_with(scalar), max(1, args.repeats // 2))
    t_port_names, names_port = best_time(lambda: names_with(port), max(1, args.repeats // 2))
    mean_len = sum(map(len, names_scalar)) / max(1, len(names_scalar))
    print(f"\nnames per second ({args.num_names} names, mean length {mean_len:.1f}; "
          f"identical names: {'yes' if names_scalar == names_port else 'NO'})")
    print(f"  scalar engine (KV cache)             {args.num_names / t_scalar_names:9.1f} names/s")
    print(f"  numpy engine (KV cache, vectorised)   {args.num_names / t_port_names:9.1f} names/s  "
          f"{t_scalar_names / t_port_names:6.1f}x faster")
    return 0 if names_scalar == names_port else 1


if __name__ == '__main__':
    sys.exit(main())
