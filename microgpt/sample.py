"""
Generate names from a trained checkpoint.

    python sample.py                              # 20 names from out/model.json
    python sample.py --num 5 --temperature 0.8 --prompt ma
    python sample.py --engine numpy               # same names, computed by the numpy port
    python sample.py --temperature 0              # greedy: the most likely character, every time
    python sample.py --top-k 5 --temperature 1    # draw only among the 5 most likely characters

The checkpoint carries its own config and vocabulary, so nothing else is needed. Sampling is
microgpt's loop (see microgpt/sampling.py): feed BOS and the prompt, draw the next character
from softmax(logits / temperature) with a generator seeded by --seed, stop at BOS or when the
block is full. The same checkpoint, seed, temperature, top-k and prompt give the same names
with either engine. --temperature 0 is greedy decoding (argmax, no randomness: the same names
for every seed); --top-k K draws only among the K most likely characters. Each name is
printed as soon as it is made, so Ctrl-C keeps the names already printed.
"""

import unicodedata

from microgpt import cli, limits
from microgpt.checkpoint import load_checkpoint
from microgpt.checks import check_prompt, check_sampling
from microgpt.errors import DIVERGED, OVERFLOWS, UserError
from microgpt.sampling import iter_names


def parse_args(argv=None):
    p = cli.ArgumentParser(description="Generate names from a trained microgpt checkpoint.")
    g = p.add_argument_group('model')
    g.add_argument('--ckpt', default='out/model.json', metavar='PATH',
                   help="checkpoint written by train.py, or the 3D tutorial's weights export "
                        "(default out/model.json)")
    g.add_argument('--n-head', type=cli.int_in(1, limits.MAX_N_HEAD),
                   help="heads, for the 3D tutorial's export only (docs/lessons.md; it does not record "
                        "them; default 4)")
    g.add_argument('--engine', choices=('scalar', 'numpy'), default='scalar',
                   help="scalar: the Value-based gpt(), one position per call; numpy: the port in "
                        "src/inference (faster, identical names)")
    g = p.add_argument_group('sampling')
    g.add_argument('--num', type=cli.int_in(0, limits.MAX_NAMES), default=20,
                   help=f"how many names, 0..{limits.MAX_NAMES:,} (default 20)")
    g.add_argument('--temperature', type=cli.float_in(0, limits.MAX_TEMPERATURE), default=0.5,
                   help=f"0..{limits.MAX_TEMPERATURE:g}; below 1 is safer and more typical, above 1 more "
                        "inventive, 0 = greedy (always the most likely character) (default 0.5)")
    g.add_argument('--top-k', type=cli.int_in(1, limits.MAX_VOCAB_SIZE), metavar='K',
                   help="draw only among the K most likely tokens, 1 to the model's vocab_size (default: all)")
    g.add_argument('--seed', type=cli.int_in(0, limits.MAX_SEED), default=42,
                   help=f"random seed, 0..{limits.MAX_SEED}: the same seed gives the same names (default 42)")
    g.add_argument('--prompt', default='',
                   help="how every name starts, normalized to NFC as train.py's data is; its characters "
                        "must be in the vocabulary (default: empty)")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.engine == 'numpy':  # numpy lives only in the port, so it is imported only when asked for
        inference = cli.import_numpy_module('inference', "--engine numpy")
        model = inference.load_checkpoint(args.ckpt, n_head=args.n_head)
    else:
        model = load_checkpoint(args.ckpt, n_head=args.n_head)
    # the sampler trusts its arguments: what the user typed is checked here, against this model
    check_sampling(args.temperature, args.top_k, model.config.vocab_size)
    prompt = unicodedata.normalize('NFC', args.prompt)  # as train.py's data is
    check_prompt(model.tokenizer, model.config.block_size, prompt)
    names = iter_names(model, num=args.num, temperature=args.temperature, seed=args.seed,
                       prompt=prompt, top_k=args.top_k)
    try:
        for name in names:
            print(name, flush=True)  # at once: Ctrl-C keeps every name already made
    except OVERFLOWS:  # the scalar engine's exp() overflowed, or the logits are inf or nan
        raise UserError(DIVERGED) from None
    return 0


def command():
    """`microgpt-sample` (installed), `python -m microgpt.sample` and the top-level sample.py."""
    cli.run(main)


if __name__ == '__main__':
    command()
