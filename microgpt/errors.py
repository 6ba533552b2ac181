"""
What can go wrong, and how it is said: the exceptions, and the checks that raise them.

A bad flag, a missing data file, a corrupt checkpoint: each is raised as a `UserError` whose
message says what is wrong and how to fix it, in one line. train.py, sample.py and the lab catch
it at the top, print `error: <message>` and exit with status 2, so nobody sees a traceback for a
mistake that is not a bug. Anything else that escapes is a bug and keeps its traceback.

The engine's numeric checks live here too, out of the ops' way in engine.py: a node whose
value is inf or nan raises NonFiniteError (in training: divergence), and a power that is
undefined (0 ** -1, (-2) ** 0.5) says so.

`read_user_file` is the one way microgpt reads a file a user named; it refuses special files
and anything over limits.MAX_FILE_BYTES.
"""

import math
import os
import stat


class UserError(Exception):
    """A problem with the input (flags, files, checkpoints), described in one line."""


class NonFiniteError(ValueError):
    """An op produced inf or nan. In training this means divergence: lower the learning rate."""


def read_user_file(path, what, hint, binary=False):
    """The contents of a file the user named (text, or bytes if binary), or a one-line
    UserError saying which file (`what`, e.g. 'checkpoint') and what is wrong with it.

    hint: what to do when the file does not exist, e.g. "train one first with ...".
    Every file a user names enters here, so this is where its limits are kept: only regular
    files are read (a device such as /dev/zero reads forever, a named pipe waits forever), and
    at most limits.MAX_FILE_BYTES of them.
    """
    from .limits import MAX_FILE_BYTES  # limits imports UserError from here
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
            data = _read_at_most(f, MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise UserError(f"{what} {path} does not exist: {hint}") from None
    except IsADirectoryError:
        raise UserError(f"{what} {path} is a directory: give the file itself") from None
    except OSError as e:
        raise UserError(f"cannot read {what} {path}: {e.strerror}") from None
    except ValueError:  # a path with a NUL byte in it
        raise UserError(f"{what} path {path!r} contains a NUL character") from None
    if len(data) > MAX_FILE_BYTES:
        raise UserError(f"{what} {path} is larger than {MAX_FILE_BYTES >> 20:,} MiB, the most "
                        f"microgpt reads: is it really a {what}?")
    if binary:
        return data
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError as e:
        raise UserError(f"{what} {path} is not UTF-8 text (byte {e.start}): is it really a "
                        f"{what}?") from None


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


# ---------------------------------------------------------------------------- the engine's numeric checks

def is_finite(x):
    try:
        return math.isfinite(x)
    except OverflowError:  # an int too big for any float (int data can grow past 1e308)
        return False


def non_finite_message(x, op):
    return (f"'{op or 'leaf'}' produced a non-finite number ({x}): an input is too large or "
            "already inf/nan (in training this means divergence: lower the learning rate)")


def checked_power(x, n):
    """(x ** n, n * x ** (n - 1)) for a plain number n, or a clear error where either is undefined."""
    if hasattr(n, 'data'):  # a Value
        raise TypeError("a Value exponent is not supported: use a plain number "
                        "(x ** 2), or write b ** x as (x * log(b)).exp()")
    if isinstance(n, bool) or not isinstance(n, (int, float)):
        raise TypeError(f"exponent must be an int or float, got {type(n).__name__}")
    try:
        out = x ** n
    except ZeroDivisionError:
        raise ValueError(f"0 ** {n} is undefined: keep the base away from 0") from None
    except OverflowError:  # float ** raises where float * gives inf
        raise NonFiniteError(f"{x} ** {n} overflows a float (non-finite)") from None
    if isinstance(out, complex):
        raise ValueError(f"{x} ** {n} is not a real number: a negative base needs an integer exponent")
    if not is_finite(out):
        raise NonFiniteError(non_finite_message(out, f'**{n}'))
    try:  # the slope can blow up where x ** n is fine, e.g. x ** 0.5 at x = 0
        local = n * x ** (n - 1) if n != 0 else 0.0
    except (ZeroDivisionError, OverflowError):
        local = math.inf
    if not is_finite(local):
        raise ValueError(f"the slope of x ** {n} at x = {x} is non-finite: keep the base away from 0")
    return out, local
