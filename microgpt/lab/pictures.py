"""
Where a lab command's picture goes (`--png FILE`, autograd's `--dot FILE`): checked before the
work, written whole.

A picture replaces only a picture of its kind: an existing file must start as a PNG does (or a
DOT file's `digraph`), whatever the flags, and through a link too, since the check reads what
the link leads to. So a checkpoint, its best file, its log and the data it was trained on are
never drawn over. The bytes go through files.write_atomic, so a full disk or `ulimit -f` leaves
the old picture whole.
"""

import os

from ..edge.errors import UserError
from ..edge.files import write_atomic

# What an existing file must start with to be replaced, by flag
KINDS = {'--png': (b'\x89PNG\r\n\x1a\n', 'a PNG picture'), '--dot': (b'digraph', 'a Graphviz DOT file')}


def beside(path):
    """The PNG that Graphviz renders next to a DOT file."""
    return os.path.splitext(path)[0] + '.png'


def check_target(path, flag):
    """Refuse, in one line, a picture path that would replace a file that is not a picture; the
    DOT file's rendering beside it is checked too."""
    targets = [(path, flag)] + ([(beside(path), '--png')] if flag == '--dot' else [])
    for target, kind in targets:
        if not target or target.endswith(os.sep) or os.path.isdir(target):
            raise UserError(f"{flag} {target!r} is not a file name: give one such as picture.png")
        if not os.path.exists(target):
            continue
        magic, what = KINDS[kind]
        try:
            with open(target, 'rb') as f:
                head = f.read(len(magic))
        except OSError:
            head = b''
        if head != magic:
            raise UserError(f"{flag} {target} exists and is not {what}: it is never replaced; choose another "
                            "file, or move that one away")


def write(path, data, flag):
    """The picture's bytes to path, whole or not at all."""
    try:
        write_atomic(path, lambda f: f.write(data))
    except UserError as e:  # files.WriteError: says what failed and that the old file is intact
        raise UserError(f"{flag}: {e}") from None
