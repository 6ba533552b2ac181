"""
Convert a checkpoint from one format to the other: JSON (readable) <-> safetensors (compact).

    python -m microgpt.convert out/model.json out/model.safetensors
    python -m microgpt.convert out/model.safetensors out/model.json

The format of each side is named by its extension (.safetensors, anything else JSON). Everything
moves: weights, config, vocabulary and the training state, so the converted file resumes
exactly where the original would (float64 both ways, bit for bit). The source is read and
validated as every reader reads it (checkpoint.read_checkpoint); the target is written as
train.py writes (atomically, never over a file that is not a microgpt checkpoint, never over
the source, and only if it fits its format's size limit).
"""

import os
from types import SimpleNamespace

from . import cli
from ..edge.checkpoint import check_fits, is_our_checkpoint, read_checkpoint, save_checkpoint
from ..edge.errors import UserError
from ..tokenizer import CharTokenizer


def parse_args(argv=None):
    p = cli.ArgumentParser(prog='python -m microgpt.convert',
                           description="Convert a microgpt checkpoint between JSON and safetensors.")
    p.add_argument('source', help="checkpoint to read (.json, .safetensors, or the 3D tutorial's export)")
    p.add_argument('target', help="file to write; .safetensors writes that format, anything else JSON")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if os.path.exists(args.target) and os.path.exists(args.source) and os.path.samefile(args.source, args.target):
        raise UserError(f"{args.target} is the source itself: give another target file")
    if os.path.isdir(args.target):
        raise UserError(f"{args.target} is a directory: give a file name")
    if os.path.exists(args.target) and not is_our_checkpoint(args.target):
        raise UserError(f"{args.target} exists and is not a microgpt checkpoint: it is never replaced; "
                        "choose another target (or move that file away)")
    ckpt = read_checkpoint(args.source)
    check_fits(args.target, ckpt['config'])
    model = SimpleNamespace(config=ckpt['config'], tokenizer=CharTokenizer(ckpt['vocab']),
                            weights=lambda: ckpt['state_dict'])  # what save_checkpoint reads
    save_checkpoint(args.target, model, ckpt['train_state'])
    print(f"wrote {args.target} ({os.path.getsize(args.target):,} bytes) from {args.source} "
          f"({os.path.getsize(args.source):,} bytes)")
    return 0


def command():
    cli.run(main)


if __name__ == '__main__':
    command()
