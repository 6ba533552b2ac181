"""
Convert a checkpoint from one format to the other: JSON (readable) <-> safetensors (compact).

    python -m microgpt.convert out/model.json out/model.safetensors
    python -m microgpt.convert out/model.safetensors out/model.json

It reads the whole checkpoint record (edge/checkpoint.py), Adam's state and the training state
included, so the converted file samples and resumes exactly as the original would (bit for bit),
and writes it through train.py's own output checks (run.Output): the lock, never the source nor a
file that is not a checkpoint, a trained model only with --force.
"""

import os

from ..edge.checkpoint import read_checkpoint
from . import cli
from .run import Output


def parse_args(argv=None):
    p = cli.ArgumentParser(prog=cli.program_name('python -m microgpt.convert'),
                           description="Convert a microgpt checkpoint between JSON and safetensors.")
    p.add_argument('source', help="checkpoint to read (.json, .safetensors, or the 3D tutorial's export)")
    p.add_argument('target', help="file to write: a .json or .safetensors name, which says the format")
    p.add_argument('--force', action='store_true', help="replace a trained model at the target")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    with Output(args.target, fresh=True, force=args.force, what='target',
                protected=[(args.source, 'the source checkpoint')]) as output:
        ckpt = read_checkpoint(args.source, training=True)
        output.write(ckpt)
        if output.log is not None:
            output.log.trim(0)  # a replaced model's log told of another model
    print(f"wrote {args.target} ({os.path.getsize(args.target):,} bytes) from {args.source} "
          f"({os.path.getsize(args.source):,} bytes)")
    return 0


def command():
    cli.run(main)


if __name__ == '__main__':
    command()
