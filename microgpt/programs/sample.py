"""
Generate names, or running text, from a trained checkpoint.

    python sample.py                              # 20 names from out/model.json
    python sample.py --num 5 --temperature 0.8 --prompt ma
    python sample.py --engine numpy               # same names, computed by the numpy port
    python sample.py --temperature 0              # greedy: the most likely character, every time
    python sample.py --top-k 5 --temperature 1    # draw only among the 5 most likely characters
    python sample.py --ckpt out/shakespeare.json --length 500 --prompt "ROMEO:"   # running text

The checkpoint carries its own config, vocabulary and data mode, so nothing else is needed.
For a names model, sampling is microgpt's loop (see microgpt/sampling.py): feed BOS and the
prompt, draw the next character from softmax(logits / temperature) with a generator seeded by
--seed, stop at BOS or when the block is full. For a running-text model (train.py --data-mode
text), microgpt/programs/generate.py draws --length characters after the prompt, which may be of any
length: past the block the model sees the last block_size characters (a sliding window).
The same checkpoint, seed, temperature, top-k and prompt give the same text with either engine.
--temperature 0 is greedy decoding (argmax, no randomness: the same text for every seed);
--top-k K draws only among the K most likely characters. Everything is printed as soon as it
is made (running text character by character), so Ctrl-C keeps what was already printed.
"""

import random
import sys
import unicodedata

from microgpt.programs import cli
from microgpt.edge import limits
from microgpt.edge.checkpoint import load_checkpoint
from microgpt.edge.checks import check_prompt, check_sampling, encode
from microgpt.edge.errors import DIVERGED, OVERFLOWS, UserError
from microgpt.programs.generate import generate
from microgpt.sampling import iter_names

MAX_LENGTH = 10_000_000  # characters of running text one run prints: hours of the scalar engine
DEFAULT_LENGTH = 500     # running text: a screenful
TEXT_START = '\n'        # an empty prompt for running text starts after a newline, as a line would


def parse_args(argv=None):
    p = cli.ArgumentParser(description="Generate names (or running text) from a trained microgpt checkpoint.")
    g = p.add_argument_group('model')
    g.add_argument('--ckpt', default='out/model.json', metavar='PATH',
                   help="checkpoint written by train.py, or the 3D tutorial's weights export "
                        "(default out/model.json)")
    g.add_argument('--n-head', type=cli.int_in(1, limits.MAX_N_HEAD),
                   help="heads, for the 3D tutorial's export only (docs/lessons.md; it does not record "
                        "them; default 4)")
    g.add_argument('--engine', choices=('scalar', 'numpy'), default='scalar',
                   help="scalar: the Value-based gpt(), one position per call; numpy: the port in "
                        "src/inference (faster, identical text)")
    g = p.add_argument_group('sampling')
    g.add_argument('--num', type=cli.int_in(0, limits.MAX_NAMES),
                   help=f"how many names (or running-text samples), 0..{limits.MAX_NAMES:,} "
                        "(default 20 names, 1 text)")
    g.add_argument('--length', type=cli.int_in(1, MAX_LENGTH), metavar='N',
                   help=f"running-text models: characters to generate after the prompt, 1..{MAX_LENGTH:,} "
                        f"(default {DEFAULT_LENGTH}); a names model stops each name at its end token")
    g.add_argument('--temperature', type=cli.float_in(0, limits.MAX_TEMPERATURE), default=0.5,
                   help=f"0..{limits.MAX_TEMPERATURE:g}; below 1 is safer and more typical, above 1 more "
                        "inventive, 0 = greedy (always the most likely character) (default 0.5)")
    g.add_argument('--top-k', type=cli.int_in(1, limits.MAX_VOCAB_SIZE), metavar='K',
                   help="draw only among the K most likely tokens, 1 to the model's vocab_size (default: all)")
    g.add_argument('--seed', type=cli.int_in(0, limits.MAX_SEED), default=42,
                   help=f"random seed, 0..{limits.MAX_SEED}: the same seed gives the same text (default 42)")
    g.add_argument('--prompt', default='',
                   help="how every name (or the text) starts, normalized to NFC as train.py's data is; "
                        "its characters must be in the vocabulary; for running text any length (default: empty)")
    return p.parse_args(argv)


def stream_text(model, prompt='', num=1, length=DEFAULT_LENGTH, temperature=0.5, top_k=None, seed=42,
                out=None):
    """`num` samples of `length` characters after the prompt, each character printed at once.

    The arguments are checked here (this is an edge): the prompt's characters and the sampling
    settings; an empty prompt starts after a newline.
    """
    out = out or sys.stdout
    check_sampling(temperature, top_k, model.config.vocab_size)
    prompt_ids = encode(model.tokenizer, prompt)  # an unknown character: one line naming it
    if not prompt_ids:
        if TEXT_START not in model.tokenizer.stoi:
            raise UserError("this model's text has no newline to start from: give --prompt")
        prompt_ids = model.tokenizer.encode(TEXT_START)
    rng = random.Random(seed)
    try:
        for i in range(num):
            out.write(('\n\n' if i else '') + prompt)
            for ch in generate(model, length, rng, temperature, prompt_ids, top_k):
                out.write(ch)
                out.flush()  # at once: Ctrl-C keeps every character already made
    except OVERFLOWS:  # the scalar engine's exp() overflowed, or the logits are inf or nan
        raise UserError(DIVERGED) from None
    out.write('\n')
    out.flush()


def main(argv=None):
    args = parse_args(argv)
    if args.engine == 'numpy':  # numpy lives only in the port, so it is imported only when asked for
        inference = cli.import_numpy_module('inference', "--engine numpy")
        model = inference.load_checkpoint(args.ckpt, n_head=args.n_head)
    else:
        model = load_checkpoint(args.ckpt, n_head=args.n_head)
    prompt = unicodedata.normalize('NFC', args.prompt)  # as train.py's data is
    if model.data_mode == 'text':
        stream_text(model, prompt, 1 if args.num is None else args.num, args.length or DEFAULT_LENGTH,
                    args.temperature, args.top_k, args.seed)
        return 0
    if args.length is not None:
        raise UserError("--length is for running-text models: a names model ends each name at its "
                        "end token; use --num for how many names")
    # the sampler trusts its arguments: what the user typed is checked here, against this model
    check_sampling(args.temperature, args.top_k, model.config.vocab_size)
    check_prompt(model.tokenizer, model.config.block_size, prompt)
    names = iter_names(model, num=20 if args.num is None else args.num, temperature=args.temperature,
                       seed=args.seed, prompt=prompt, top_k=args.top_k)
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
