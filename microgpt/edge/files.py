"""
Files: every file a user names is read here, each problem one UserError naming the file, and
every file microgpt writes is replaced whole or not at all (`write_atomic`).
"""

import errno
import io
import json
import os
import re
import stat
import tempfile

from . import limits
from .errors import UserError


# ---------------------------------------------------------------------------- reading
def open_user_file(path, what, hint):
    """The file at `path` opened for reading bytes, or a one-line UserError (hint: what to do if it is missing)."""
    try:
        f = open(path, 'rb')
    except FileNotFoundError:
        raise UserError(f"{what} {path} does not exist: {hint}") from None
    except OSError as e:
        raise UserError(f"cannot read {what} {path}: {describe_os_error(e)}") from None
    if os.fstat(f.fileno()).st_size > limits.MAX_FILE_BYTES:
        f.close()
        raise UserError(f"{what} {path} is larger than {limits.MAX_FILE_BYTES >> 20:,} MiB, the most "
                        f"microgpt reads: is it really a {what}?")
    return f


def read_user_file(path, what, hint, binary=False):
    with open_user_file(path, what, hint) as f:
        data = f.read()
    if binary:
        return data
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError as e:
        raise UserError(f"{what} {path} is not UTF-8 text (byte {e.start}): is it really a {what}?") from None


def read_head(path, n):
    """The first n bytes of `path` if it is a regular file, else None (never an error)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, 'rb') as f:
            return f.read(n)
    except (OSError, ValueError):  # unreadable, or a NUL in the path
        return None


def describe_os_error(e):  # in words a user can act on
    reasons = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exhausted",
               errno.EROFS: "the folder is on a read-only file system", errno.EACCES: "permission denied",
               errno.EPERM: "permission denied", errno.EISDIR: "it is a directory",
               errno.ENAMETOOLONG: "the file name is too long"}
    return reasons.get(e.errno, e.strerror or str(e))


def parse_json(text, where, hint="the file is damaged or not one of microgpt's"):
    """The value `text` holds, or a one-line UserError beginning with `where`."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        at = f"line {e.lineno}, column {e.colno}" if '\n' in text.rstrip('\n') else f"column {e.colno}"
        raise UserError(f"{where} is not valid JSON ({at}): {hint}") from None
    except (ValueError, RecursionError):  # an integer of over 4,300 digits, or nesting past Python's stack
        raise UserError(f"{where} is not JSON microgpt can read: {hint}") from None


# ---------------------------------------------------------------------------- writing, whole or not at all
class WriteError(UserError):
    """A write that failed part-way; the previous file, if any, is intact."""


def write_atomic(path, write):
    """Call write(f) on a binary file so that a reader of `path` only ever sees the old file or
    the new one, whole: a synced temporary file beside the target, renamed over it. A link's
    target is replaced; an old file's permissions stay."""
    target = os.path.realpath(path)
    folder, existed, tmp = os.path.dirname(target), os.path.exists(target), None
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(target), suffix='.tmp', dir=folder)
        with os.fdopen(fd, 'wb') as f:
            os.fchmod(f.fileno(), mode_for(target))  # mkstemp makes 0600
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
        tmp = None
        _fsync_folder(folder)  # the rename itself, made durable
    except OSError as e:
        kept = f"the previous {path} is intact" if existed else f"no file was left at {path}"
        raise WriteError(f"could not write {path}: {describe_os_error(e)}; {kept}") from None
    finally:
        if tmp is not None:
            try:
                os.remove(tmp)
            except OSError:  # already gone, or cannot be removed: the next run's cleanup will
                pass


def write_json_atomic(path, obj):
    """obj as JSON, atomically. Floats are written with repr, which reads back bit for bit
    (resume is exact); a row read from safetensors (an array of float64) as its list."""
    def write(f):
        text = io.TextIOWrapper(f, encoding='utf-8')
        json.dump(obj, text, allow_nan=False, default=lambda row: row.tolist())
        text.flush()
        text.detach()  # f stays open: write_atomic syncs it
    write_atomic(path, write)


def _temp_prefix(target):
    return '.' + os.path.basename(target) + '.'


def probe_writable(path):
    """Make and remove a file named as a save's temporary one: a folder that refuses it (not
    writable, a name too long) fails now, before training."""
    target = os.path.realpath(path)
    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(target), suffix='.tmp', dir=os.path.dirname(target))
    os.close(fd)
    os.remove(tmp)


def remove_stale_temporaries(path):
    """Delete (and return) the temporary files a killed save of `path` left: regular files of
    mkstemp's name pattern beside it. Called under the output's lock: no save is in progress."""
    target = os.path.realpath(path)
    folder, prefix = os.path.dirname(target), _temp_prefix(target)
    removed = []
    for name in sorted(os.listdir(folder)):  # mkstemp's random part: 8 of lowercase letters, digits and '_'
        full = os.path.join(folder, name)
        if name.startswith(prefix) and re.fullmatch(r'[a-z0-9_]{8}\.tmp', name[len(prefix):]) \
                and stat.S_ISREG(os.lstat(full).st_mode):  # never a link, never a folder
            os.remove(full)
            removed.append(full)
    return removed


def make_folders(folder):  # os.makedirs(folder), returning the folders it made
    missing = []
    while folder and not os.path.isdir(folder) and os.path.dirname(folder) != folder:
        missing.insert(0, folder)
        folder = os.path.dirname(folder)
    for made, path in enumerate(missing):
        try:
            os.mkdir(path)
        except OSError:
            remove_empty_folders(missing[:made])
            raise
    return missing


def remove_empty_folders(made):  # a refused run leaves no folder it made
    for path in reversed(made):
        try:
            os.rmdir(path)
        except OSError:
            break


def mode_for(target):
    """The permission bits a new file at target gets: the old file's, or those the umask leaves."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        umask = os.umask(0)  # the only way to read the umask is to set it; put it back at once
        os.umask(umask)
        return 0o666 & ~umask


def _fsync_folder(folder):
    try:
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:  # not every system can open or sync a folder; the file itself is whole
        pass
