"""
Generate names, or running text, from a trained checkpoint.

    python sample.py                              # 20 names from out/model.json
    python sample.py --num 5 --temperature 0.8 --prompt ma
    python sample.py --top-k 5 --temperature 1    # draw only among the 5 most likely characters
    python sample.py --ckpt out/shakespeare.safetensors --length 500 --prompt "ROMEO:"   # running text

main() reads as three stages: settle the flags, read the checkpoint, generate with
microgpt/sampling.py. Either engine gives the same text for the same seed; each name or
character is printed as soon as it is made, so Ctrl-C keeps what was already printed.
"""

import os
import random
import sys
import unicodedata

from ..edge import limits
from ..edge.checkpoint import TUTORIAL_N_HEAD, read_checkpoint
from ..edge.checks import Range, check_prompt, check_sampling, encode
from ..edge.errors import DIVERGED, OVERFLOWS, UserError
from ..model import GPT
from ..sampling import TEMPERATURE, generate, iter_names
from . import cli
from .runlog import best_path_for
from .settings import CORE_ENGINES, Settings

DEFAULT_LENGTH = 500     # running text: a screenful
DEFAULT_NUM = {'lines': 20, 'text': 1}  # names, or running-text samples
TEXT_START = '\n'        # an empty prompt for running text starts after a newline, as a line would
# Above this many parameters the numpy port samples by default: at train.py's default size
# (4,192) the Value engine draws 20 names in about 0.1 s, as fast as anyone reads them; at the
# names recipe's 4 x 64 (200,000) one name takes it seconds (bench/inference_speed.py).
SCALAR_UP_TO = 20_000


def parse_args(argv=None):
    p = cli.ArgumentParser(prog=cli.program_name('sample.py'), formatter_class=cli.ShowDefaults,
                           description="Generate names (or running text) from a trained microgpt checkpoint.")
    g = p.add_argument_group('model')
    g.add_argument('--ckpt', default=Settings.out, metavar='PATH',  # where train.py writes
                   help="checkpoint written by train.py, or the 3D tutorial's weights export")
    g.add_argument('--best', action='store_true',
                   help="the weights of the run's lowest validation loss instead, which train.py keeps "
                        "beside --ckpt (out/model.best.json for out/model.json)")
    g.add_argument('--n-head', type=Range(int, 1, limits.MAX_N_HEAD).parse,
                   help="heads, for the 3D tutorial's export only (docs/lessons.md; it does not record "
                        f"them; default {TUTORIAL_N_HEAD})")
    g.add_argument('--engine', choices=CORE_ENGINES,
                   help="scalar: the Value-based gpt(), one position per call; numpy: the port in "
                        "src/inference (identical text, much faster on large models) (default: scalar up "
                        f"to {SCALAR_UP_TO:,} parameters, numpy above, where numpy is installed)")
    g = p.add_argument_group('sampling')
    g.add_argument('--num', type=Range(int, 0, limits.MAX_NAMES).parse,
                   help=f"how many names (or running-text samples), 0..{limits.MAX_NAMES:,} "
                        f"(default {DEFAULT_NUM['lines']} names, {DEFAULT_NUM['text']} text)")
    g.add_argument('--length', type=Range(int, 1).parse, metavar='N',
                   help="running-text models: tokens to generate after the prompt (characters, with the "
                        f"character tokenizer; a byte pair is about 2 of English) (default {DEFAULT_LENGTH}); "
                        "a names model stops each name at its end token")
    g.add_argument('--temperature', type=Range(float, 0, limits.MAX_TEMPERATURE).parse, default=TEMPERATURE,
                   help=f"0..{limits.MAX_TEMPERATURE:g}; below 1 is safer and more typical, above 1 more "
                        "inventive, 0 = greedy (always the most likely character)")
    g.add_argument('--top-k', type=Range(int, 1, limits.MAX_VOCAB_SIZE).parse, metavar='K',
                   help="draw only among the K most likely tokens, 1 to the model's vocab_size (default: all)")
    g.add_argument('--seed', type=Range(int, 0, limits.MAX_SEED).parse, default=Settings.seed,
                   help=f"random seed, 0..{limits.MAX_SEED}: the same seed gives the same text")
    g.add_argument('--prompt', default='',
                   help="how every name (or the text) starts, normalized to NFC as train.py's data is; "
                        "its characters must be in the vocabulary; for running text any length (default: none)")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)                                   # 1. settle: every flag in its range
    path = best_path_for(args.ckpt) if args.best else args.ckpt
    if args.best and not os.path.exists(path):
        raise UserError(f"{path} does not exist: train.py keeps the best validation's weights there once the "
                        f"run behind {args.ckpt} has validated (not with --val-size 0)")
    ckpt = read_checkpoint(path, n_head=args.n_head)          # 2. read: the one record
    prompt = unicodedata.normalize('NFC', args.prompt)        # as train.py's data is
    model = model_for(ckpt.config, ckpt.weights, ckpt.tokenizer, args.engine)
    if ckpt.data_mode == 'text':                              # 3. generate
        num = DEFAULT_NUM['text'] if args.num is None else args.num
        stream_text(model, prompt, num, args.length or DEFAULT_LENGTH, args.temperature, args.top_k, args.seed)
        return 0
    if args.length is not None:
        raise UserError("--length is for running-text models: a names model ends each name at its "
                        "end token; use --num for how many names")
    # the sampler trusts its arguments: what the user typed is checked here, against this model
    check_sampling(args.temperature, args.top_k, ckpt.config.vocab_size)
    check_prompt(ckpt.tokenizer, ckpt.config.block_size, prompt)
    num = DEFAULT_NUM['lines'] if args.num is None else args.num
    try:
        for name in iter_names(model, num=num, temperature=args.temperature, seed=args.seed, prompt=prompt,
                               top_k=args.top_k):
            print(name, flush=True)  # at once: Ctrl-C keeps every name already made
    except OVERFLOWS:  # the scalar engine's exp() overflowed, or the logits are inf or nan
        raise UserError(DIVERGED) from None
    return 0


def model_for(config, weights, tokenizer, engine=None):
    """The model to sample from: the engine asked for, else the fastest that gives the same text."""
    n_params, faster = limits.parameter_count(config), "drop --engine scalar"
    if engine is None:
        try:
            import numpy  # noqa: F401  (the port needs it)
            engine = 'numpy' if n_params > SCALAR_UP_TO else 'scalar'
        except ImportError:
            engine, faster = 'scalar', "install numpy (pip install numpy)"
    if engine == 'scalar':
        if n_params > SCALAR_UP_TO:  # a learner waiting minutes should know why, and the way out
            print(f"note: the Value engine is slow on {n_params:,} parameters; the numpy port gives "
                  f"the same text in seconds: {faster}", file=sys.stderr, flush=True)
        return GPT.from_weights(config, weights, tokenizer, fused=True)  # the fast blocks, the same text
    inference = cli.import_optional('microgpt.inference', "--engine numpy")
    from microgpt.backprop.threads import for_generation
    for_generation()  # one position's products: more BLAS threads only wait, on a busy core too
    return inference.NumpyGPT(config, weights, tokenizer=tokenizer)


def text_prompt_ids(tokenizer, prompt):
    """The ids running text is continued from (here and in the lab): the prompt's; for an empty
    prompt, a newline, or a text's first character where it has none."""
    ids = encode(tokenizer, prompt)
    return ids or tokenizer.encode(TEXT_START if tokenizer.unknown(TEXT_START) is None else tokenizer.chars[0])


def stream_text(model, prompt='', num=1, length=DEFAULT_LENGTH, temperature=TEMPERATURE, top_k=None, seed=42,
                out=None):
    """`num` samples of `length` characters after the prompt, each character printed at once."""
    out = out or sys.stdout
    check_sampling(temperature, top_k, model.config.vocab_size)
    prompt_ids = text_prompt_ids(model.tokenizer, prompt)
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


def command():  # microgpt-sample, python -m microgpt.sample and sample.py
    cli.run(main)


if __name__ == '__main__':
    command()
