"""
Where a lab command's picture goes (`--png FILE`, autograd's `--dot FILE`): checked before the
work, written whole.

A picture is an output like a checkpoint, and is guarded like one (programs/run.py's
check_out): it is never a file the command reads (the checkpoint, the log beside it, the data
it was trained on, a log `lab loss` draws), and an existing file that is not a picture of its
kind (a PNG's signature, a DOT file's `digraph`) is replaced only with --force. The bytes go
through files.write_atomic, so a full disk or `ulimit -f` leaves the old picture whole.
"""

import os

from ..edge.errors import UserError
from ..edge.files import write_atomic
from ..programs.runlog import log_path_for
from .loading import trained_data

# What an existing file must start with to be replaced without --force, by flag
KINDS = {'--png': (b'\x89PNG\r\n\x1a\n', 'a PNG picture'), '--dot': (b'digraph', 'a Graphviz DOT file')}


def beside(path):
    """The PNG that Graphviz renders next to a DOT file."""
    return os.path.splitext(path)[0] + '.png'


def read_by(ckpt_path=None, ckpt=None, logs=()):
    """The (path, whose) pairs a command reads: its checkpoint, the log beside it, the data the
    checkpoint was trained on, the logs it draws."""
    pairs = [(log, 'the training log') for log in logs]
    if ckpt_path:
        pairs += [(ckpt_path, 'the checkpoint'), (log_path_for(ckpt_path), "the checkpoint's log")]
    data = trained_data(ckpt)
    if isinstance(data, str):
        pairs.append((data, 'the data file'))
    return pairs


def check_target(path, flag, protected, force=False):
    """Refuse, in one line, a picture path that would destroy a file; the DOT file's rendering
    beside it is checked too."""
    targets = [(path, flag)] + ([(beside(path), '--png')] if flag == '--dot' else [])
    for target, kind in targets:
        _check_one(target, kind, flag, protected, force)


def _check_one(target, kind, flag, protected, force):
    if not target or target.endswith(os.sep) or os.path.isdir(target):
        raise UserError(f"{flag} {target!r} is not a file name: give one such as picture.png")
    for other, whose in protected:
        if os.path.exists(target) and os.path.exists(other) and os.path.samefile(target, other):
            raise UserError(f"{flag} {target} is {whose} ({other}): drawing there would destroy it; "
                            "choose another file")
    if force or not os.path.exists(target):
        return
    magic, what = KINDS[kind]
    try:
        with open(target, 'rb') as f:
            head = f.read(len(magic))
    except OSError:
        head = b''
    if head != magic:
        raise UserError(f"{flag} {target} exists and is not {what}: it is not replaced; choose another "
                        "file, or add --force to replace it")


def write(path, data, flag):
    """The picture's bytes to path, whole or not at all."""
    try:
        write_atomic(path, lambda f: f.write(data))
    except UserError as e:  # files.WriteError: says what failed and that the old file is intact
        raise UserError(f"{flag}: {e}") from None
