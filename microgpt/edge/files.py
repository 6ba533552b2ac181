"""
Reading the files a user names: the data, a checkpoint, a training log.

Every such file enters through `read_user_file`, so its limits are kept in one place: only
regular files are read (a device such as /dev/zero reads forever, a named pipe waits forever),
at most limits.MAX_FILE_BYTES of them, and each problem is one UserError that names the file
and what to do. data.py, checkpoint.py and the lab's loss reader call it; the core never reads
a file.
"""

import os
import stat

from . import limits
from .errors import UserError


def read_user_file(path, what, hint, binary=False):
    """The contents of a file the user named (text, or bytes if binary), or a one-line
    UserError saying which file (`what`, e.g. 'checkpoint') and what is wrong with it.

    hint: what to do when the file does not exist, e.g. "train one first with ...".
    Every file a user names enters here, so this is where its limits are kept: only regular
    files are read (a device such as /dev/zero reads forever, a named pipe waits forever), and
    at most limits.MAX_FILE_BYTES of them.
    """
    try:
        # stat first: opening a named pipe would already block until someone writes to it
        mode = os.stat(path).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError
        if not stat.S_ISREG(mode):
            raise UserError(f"{what} {path} is not a regular file (a device, pipe or socket): "
                            "give a file")
        with open(path, 'rb') as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):  # replaced since the stat
                raise UserError(f"{what} {path} is not a regular file: give a file")
            data = _read_at_most(f, limits.MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise UserError(f"{what} {path} does not exist: {hint}") from None
    except IsADirectoryError:
        raise UserError(f"{what} {path} is a directory: give the file itself") from None
    except OSError as e:
        raise UserError(f"cannot read {what} {path}: {e.strerror}") from None
    except ValueError:  # a path with a NUL byte in it
        raise UserError(f"{what} path {path!r} contains a NUL character") from None
    if len(data) > limits.MAX_FILE_BYTES:
        raise UserError(f"{what} {path} is larger than {limits.MAX_FILE_BYTES >> 20:,} MiB, the most "
                        f"microgpt reads: is it really a {what}?")
    if binary:
        return data
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError as e:
        raise UserError(f"{what} {path} is not UTF-8 text (byte {e.start}): is it really a "
                        f"{what}?") from None


def read_head(path, n):
    """The first n bytes of `path` if it is a regular file, else None; never an error. What a
    writer asks before it replaces a file: is it one of ours?"""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, 'rb') as f:
            return f.read(n)
    except (OSError, ValueError):  # unreadable, or a NUL in the path
        return None


def _read_at_most(f, limit, chunk=1 << 24):
    """Up to `limit` bytes of f, read in chunks of 16 MiB: f.read(limit) would reserve all of
    `limit` at once (a gigabyte), and a file still growing could outrun its size from stat."""
    parts, total = [], 0
    while total < limit:
        part = f.read(min(chunk, limit - total))
        if not part:
            break
        parts.append(part)
        total += len(part)
    return b''.join(parts)
