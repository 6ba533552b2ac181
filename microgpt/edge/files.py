"""
Files: every file a user names is read here, and every file microgpt writes is written here.

Reading: `open_user_file` opens only regular files (a device such as /dev/zero reads forever, a
named pipe waits forever) and turns each problem into one UserError naming the file and what to
do; `read_user_file` reads at most limits.MAX_FILE_BYTES through it. The data, checkpoints of
either format and the training log all enter through these two.

Writing: `write_atomic` replaces a file whole or not at all (a temporary file beside it, then a
rename), so a crash or Ctrl-C mid-write leaves the old file as it was; a failed write (disk
full, read-only folder, file-size limit) is one WriteError saying so. Checkpoints, the web
lab's run records and nothing else are written this way; the log is appended to (run.py).
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
    """The file at `path`, opened for reading bytes, if it is a regular file; otherwise a
    one-line UserError naming it (`what`: 'checkpoint', 'data file', ...). hint: what to do
    when it does not exist, e.g. "train one first with ..."."""
    try:
        mode = os.stat(path).st_mode  # before opening: opening a named pipe would block
        if stat.S_ISDIR(mode):
            raise UserError(f"{what} {path} is a directory: give the file itself")
        if not stat.S_ISREG(mode):
            raise UserError(f"{what} {path} is not a regular file (a device, pipe or socket): give a file")
        f = open(path, 'rb')
    except FileNotFoundError:
        raise UserError(f"{what} {path} does not exist: {hint}") from None
    except OSError as e:
        raise UserError(f"cannot read {what} {path}: {describe_os_error(e)}") from None
    except ValueError:  # a NUL byte in the path
        raise UserError(f"{what} path {path!r} contains a NUL character") from None
    if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):  # replaced by something else since the stat
        f.close()
        raise UserError(f"{what} {path} is not a regular file: give a file")
    return f


def read_user_file(path, what, hint, binary=False):
    """The contents of a file the user named (text, or bytes if binary), at most
    limits.MAX_FILE_BYTES of it; every problem is a one-line UserError (open_user_file)."""
    with open_user_file(path, what, hint) as f:
        try:
            data = read_at_most(f, limits.MAX_FILE_BYTES + 1)
        except OSError as e:
            raise UserError(f"cannot read {what} {path}: {describe_os_error(e)}") from None
    if len(data) > limits.MAX_FILE_BYTES:
        raise UserError(f"{what} {path} is larger than {limits.MAX_FILE_BYTES >> 20:,} MiB, the most "
                        f"microgpt reads: is it really a {what}?")
    if binary:
        return data
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError as e:
        raise UserError(f"{what} {path} is not UTF-8 text (byte {e.start}): is it really a {what}?") from None


def read_at_most(f, limit, chunk=1 << 24):
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


def describe_os_error(e):
    """What an OSError means, in words a user can act on."""
    reasons = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exhausted",
               errno.EROFS: "the folder is on a read-only file system",
               errno.EACCES: "permission denied", errno.EPERM: "permission denied",
               errno.EFBIG: "the file would exceed the file-size limit (ulimit -f)",
               errno.ENAMETOOLONG: "the file name is too long",
               errno.ENOENT: "a folder on its path does not exist (was it deleted?)"}
    return reasons.get(e.errno, e.strerror or str(e))


# ---------------------------------------------------------------------------- writing, whole or not at all
class WriteError(UserError):
    """A write that failed part-way (disk full, read-only folder, file-size limit, name too
    long). The message says what failed and that the previous file, if any, is intact."""


def write_atomic(path, write):
    """Call write(f) on a binary file, so that a reader of path only ever sees the old file or
    the new one, whole.

    The bytes go to a temporary file beside the target (`.<name>.<random>.tmp`), are flushed
    to disk, then renamed over the target in one step. If `path` is a symbolic link, its
    target is what gets replaced, and the link stays. The new file gets the old file's
    permissions, or for a new file the umask's, like any file a program creates. Any OSError
    on the way removes the temporary file and becomes a WriteError; the previous file is untouched.
    """
    target = os.path.realpath(path)  # write through a symlink, do not replace it
    folder = os.path.dirname(target)
    existed = os.path.exists(target)
    tmp = None
    try:
        make_folders(folder)
        fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(target), suffix=TEMP_SUFFIX, dir=folder)
        with os.fdopen(fd, 'wb') as f:
            os.fchmod(f.fileno(), _mode_for(target))  # mkstemp makes 0600
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
        tmp = None
        _fsync_folder(folder)
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
    """Write obj as JSON to path atomically. Floats are written with repr, which reads back bit
    for bit (resume is exact); a row read from a .safetensors file (an array of float64) is
    written as the list it holds."""
    def write(f):
        text = io.TextIOWrapper(f, encoding='utf-8')
        json.dump(obj, text, allow_nan=False, default=lambda row: row.tolist())
        text.flush()
        text.detach()  # f stays open: write_atomic syncs it
    write_atomic(path, write)


# The temporary file of a save of out/model.json is out/.model.json.<8 random chars>.tmp
# (tempfile.mkstemp's random part: lowercase letters, digits and '_').
TEMP_SUFFIX = '.tmp'
_TEMP_RANDOM = re.compile(r'[a-z0-9_]{8}')


def _temp_prefix(target):
    return '.' + os.path.basename(target) + '.'


def probe_writable(path):
    """Create and remove a file beside `path` named as a save's temporary file is: an OSError
    now (folder not writable, name too long, disk refusing new files) is one before training."""
    target = os.path.realpath(path)
    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(target), suffix=TEMP_SUFFIX, dir=os.path.dirname(target))
    os.close(fd)
    os.remove(tmp)


def remove_stale_temporaries(path):
    """Delete the temporary files a killed save of `path` (or of its link's target) left behind,
    and return their paths: only names of our own pattern, only in that folder, only regular
    files. A save killed by SIGKILL (or a power cut) has no chance to clean up; the next run
    on the same output does it, while holding the output's lock (a save in progress has a
    temporary file of the same pattern)."""
    target = os.path.realpath(path)
    folder, prefix = os.path.dirname(target), _temp_prefix(target)
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    removed = []
    for name in names:
        middle = name[len(prefix):-len(TEMP_SUFFIX)]
        if name.startswith(prefix) and name.endswith(TEMP_SUFFIX) and _TEMP_RANDOM.fullmatch(middle):
            full = os.path.join(folder, name)
            try:
                if stat.S_ISREG(os.lstat(full).st_mode):  # never follow a link, never a folder
                    os.remove(full)
                    removed.append(full)
            except FileNotFoundError:
                pass
    return removed


def make_folders(folder):
    """os.makedirs(folder, exist_ok=True) without its recursion (one call per missing folder: a
    path 1,000 folders deep ended in RecursionError), and on failure (a name too long, say) the
    folders it made are removed again."""
    missing = []
    while folder and not os.path.isdir(folder):
        missing.append(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    made = []
    try:
        for path in reversed(missing):
            try:
                os.mkdir(path)
                made.append(path)
            except FileExistsError:
                if not os.path.isdir(path):
                    raise
    except OSError:
        for path in reversed(made):
            try:
                os.rmdir(path)
            except OSError:
                break
        raise


def _mode_for(target):
    """The permission bits the new file gets: the old file's, or those the umask leaves."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        umask = os.umask(0)  # the only way to read the umask is to set it; put it back at once
        os.umask(umask)
        return 0o666 & ~umask


def _fsync_folder(folder):
    """Make the rename itself durable (best effort: not every system can open a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
