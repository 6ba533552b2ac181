"""
The log beside a checkpoint (out/model.json -> out/model.log.jsonl): its name, its lock, and
what a line may hold. train.py writes a JSON line per step, {"step", "loss", "lr"}, and per
evaluation, {"step", "val_loss", "train_loss", "val_bpc", "train_bpc"} (the last two in bits
per character); `lab loss` and the Training page read them. The
log is also the lock on its checkpoint: a run holds it (flock) while it writes, so a second run
on the same checkpoint, by any of its names, is refused.
"""

import json
import os
import stat

from ..edge.checks import Range, is_finite_number, short
from ..edge.errors import UserError
from ..edge.files import describe_os_error
from ..edge.limits import MAX_FILE_BYTES, MAX_LOG_LINE, MAX_LOSS, MAX_STEPS

try:
    import fcntl  # POSIX file locks, released by the kernel when the process ends, however it ends
except ImportError:  # Windows: runs are not locked against each other there
    fcntl = None


def _written(out):
    """(stem, extension) of the file actually written for `out`: a link's target's."""
    return os.path.splitext(os.path.realpath(out) if os.path.islink(out) else out)


def log_path_for(out):
    """The log beside the file actually written: every name of one checkpoint (a link's is its
    target's) shares one log and one lock, and two checkpoints never do."""
    stem, ext = _written(out)
    return (stem if ext == '.json' else stem + ext) + '.log.jsonl'


def best_path_for(out):
    """The checkpoint of a run's lowest validation loss, beside the one it writes (a link's,
    beside its target): out/names.best.json for out/names.json."""
    stem, ext = _written(out)
    return stem + '.best' + ext


def log_record_problem(record):
    """What is wrong with one parsed log line (the end of a sentence starting "line N"), or None
    for a record train.py writes. `lab loss` refuses what this refuses; --resume drops it."""
    if not isinstance(record, dict):
        return " is not a JSON object: not a train.py log line"
    if 'step' not in record:
        return " has no integer 'step': not a train.py log line"
    step = record['step']
    if not Range(int, 0, MAX_STEPS).holds(step):
        return f": 'step' is {short(step)}, not an integer from 0 to {MAX_STEPS:,}: not a train.py log line"
    if 'loss' in record:
        checks = [('loss', MAX_LOSS)] + ([('lr', None)] if 'lr' in record else [])
    elif 'val_loss' in record:  # and, since train.py measures it beside, perhaps a train_loss
        checks = [('val_loss', MAX_LOSS)] + [(key, MAX_LOSS) for key in ('train_loss', 'val_bpc', 'train_bpc')
                                             if key in record]  # older logs lack the last three
    else:
        return " has neither 'loss' nor 'val_loss'"
    for key, most in checks:
        value = record[key]
        if not is_finite_number(value) or value < 0 or (most is not None and value > most):
            limit = f"from 0 to {most:g}" if most is not None else "0 or more"
            return f": {key} is {short(value)}, not a finite number {limit}"
    return None


def open_locked_log(path, out):
    """The log at `path`, locked for this run and opened for appending (Log.trim empties it once
    the resumed step is known). A device (a link to /dev/null) is written to but never read,
    trimmed or locked; a pipe or socket is refused."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as e:
        raise UserError(f"cannot open the log {path}: {describe_os_error(e)}: choose another --out") from None
    if mode is not None and not (stat.S_ISREG(mode) or stat.S_ISCHR(mode)):
        raise UserError(f"the log path {path} is not a file (a pipe or socket): move it away or choose another --out")
    created = False
    try:
        if mode is None:
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o666)
                created = True
            except FileExistsError:  # made a moment ago by another run, or a link to a file to be made
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o666)
        else:
            fd = os.open(path, (os.O_RDWR if stat.S_ISREG(mode) else os.O_WRONLY) | os.O_APPEND)
    except OSError as e:
        raise UserError(f"cannot open the log {path}: {describe_os_error(e)}: choose another --out") from None
    log = Log(os.fdopen(fd, 'ab'), path, created, regular=mode is None or stat.S_ISREG(mode))
    if fcntl is not None and log.regular:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            log.close()
            raise UserError(f"another train.py is writing {out} right now: wait for it to finish, "
                            "or choose another --out") from None
    return log


class Log:
    """The run's JSON-lines log, locked."""

    def __init__(self, f, path, created, regular):
        self.f, self.path, self.created, self.regular = f, path, created, regular

    def trim(self, resume_step):
        """Keep the lines up to the resumed step that `lab loss` would read (later ones were never
        saved; a crash may have cut one short); a fresh run starts empty. Where the kept lines
        are the file's first ones, as they are unless a crash garbled one, the file is only cut
        short: nothing is written, so a full disk or `ulimit -f` cannot leave it half-made."""
        if not self.regular:
            return
        kept, end, leading = [], 0, True  # leading: every kept line so far starts where the last ended
        if resume_step:
            size = os.fstat(self.f.fileno()).st_size
            if size > MAX_FILE_BYTES:
                raise UserError(f"the log {self.path} is larger than {MAX_FILE_BYTES >> 20:,} MiB, the most "
                                "microgpt reads: move it away, then resume (a new log starts)")
            with open(self.f.fileno(), 'rb', closefd=False) as reader:
                reader.seek(0)
                for start, line, stop in _lines(reader):
                    if _kept(line, resume_step):
                        kept.append(line)
                        leading = leading and start == end and stop - start == len(line)  # not mended
                        end = stop
        try:
            if leading:
                self.f.truncate(end)
            else:  # a garbled line among the kept ones: the file is written anew
                self.f.truncate(0)
                self.f.writelines(kept)
                self.f.flush()
        except OSError as e:
            raise UserError(f"could not write the log {self.path}: {describe_os_error(e)}: "
                            "choose another --out") from None

    def write(self, entry):
        """Append one record as a JSON line."""
        self.f.write((json.dumps(entry) + '\n').encode('utf-8'))
        self.f.flush()

    def close(self):
        """Close (which releases the lock); a log this run made and never wrote to is removed,
        so a run that fails before its first step leaves no file behind."""
        try:
            if self.created and os.fstat(self.f.fileno()).st_size == 0:
                os.remove(self.path)  # still holding the lock: no other run can be using it
        except OSError:
            pass
        try:
            self.f.close()
        except OSError:  # a failed write's bytes are still buffered: that failure was reported
            pass


def _lines(f):
    """(start, line, stop) for each of f's lines: its bytes with a newline (added to a last line
    cut short), and where in the file it starts and stops. A line longer than MAX_LOG_LINE is
    skipped without being held in memory whole (a crash can leave gigabytes of NUL bytes)."""
    while True:
        start = f.tell()
        line = f.readline(MAX_LOG_LINE)
        if not line:
            return
        if len(line) == MAX_LOG_LINE and not line.endswith(b'\n'):
            while line and not line.endswith(b'\n'):
                line = f.readline(MAX_LOG_LINE)
            continue
        yield start, (line if line.endswith(b'\n') else line + b'\n'), f.tell()


def _kept(line, resume_step):
    try:
        record = json.loads(line.decode('utf-8'))
    except (ValueError, RecursionError):  # cut short, not UTF-8, or absurdly nested
        return False
    return log_record_problem(record) is None and record['step'] <= resume_step
