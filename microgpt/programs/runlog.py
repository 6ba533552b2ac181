"""
The log beside a checkpoint (out/model.json -> out/model.log.jsonl): its name, its lock, and
what a line may hold. train.py writes a JSON line per step, {"step", "loss", "lr"}, and per
evaluation, {"step", "val_loss", "train_loss", "val_bpc", "train_bpc"}. The log is also the
lock on its checkpoint: a second run on the same checkpoint, by any of its names, is refused.
"""

import json
import os

from ..edge.checks import Range, is_finite_number, short
from ..edge.errors import UserError
from ..edge.files import describe_os_error
from ..edge.limits import MAX_LOSS

try:
    import fcntl  # POSIX file locks, released by the kernel when the process ends, however it ends
except ImportError:  # Windows: runs are not locked against each other there
    fcntl = None


def _written(out):
    """(stem, extension) of the file actually written for `out`: a link's target's."""
    return os.path.splitext(os.path.realpath(out) if os.path.islink(out) else out)


def log_path_for(out):
    """The log beside the file actually written: every name of one checkpoint shares one log and lock."""
    stem, ext = _written(out)
    return (stem if ext == '.json' else stem + ext) + '.log.jsonl'


def best_path_for(out):
    """The checkpoint of a run's lowest validation loss: out/names.best.json for out/names.json."""
    stem, ext = _written(out)
    return stem + '.best' + ext


def log_record_problem(record):
    """What is wrong with one parsed log line (the end of a sentence starting "line N"), or None
    for a record train.py writes. `lab loss` refuses what this refuses; --resume drops it."""
    if not isinstance(record, dict) or not Range(int, 0).holds(record.get('step')):
        return " is not a train.py log line (a JSON object with an integer 'step')"
    if 'loss' in record:
        keys = ['loss'] + ['lr'] * ('lr' in record)
    elif 'val_loss' in record:  # older logs lack the last three
        keys = ['val_loss'] + [key for key in ('train_loss', 'val_bpc', 'train_bpc') if key in record]
    else:
        return " has neither 'loss' nor 'val_loss'"
    for key in keys:
        most = float('inf') if key == 'lr' else MAX_LOSS
        if not (is_finite_number(record[key]) and 0 <= record[key] <= most):
            return f": {key} is {short(record[key])}, not a finite number from 0 to {most:g}"
    return None


def open_locked_log(path, out):
    """The log at `path`, locked for this run and opened for appending."""
    try:
        try:
            fd, created = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o666), True
        except FileExistsError:
            fd, created = os.open(path, os.O_RDWR | os.O_APPEND), False
    except OSError as e:
        raise UserError(f"cannot open the log {path}: {describe_os_error(e)}: choose another --out") from None
    log = Log(os.fdopen(fd, 'ab'), path, created)
    if fcntl is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            log.created = False  # the file is the other run's now, whoever made it
            log.close()
            raise UserError(f"another train.py is writing {out} right now: wait for it to finish, "
                            "or choose another --out") from None
    return log


class Log:
    """The run's JSON-lines log, locked."""

    def __init__(self, f, path, created):
        self.f, self.path, self.created = f, path, created

    def trim(self, resume_step):
        """Keep the lines of the steps up to the resumed one, as `lab loss` reads them, and cut the
        file short at the first other line (a step the checkpoint never saved, a line a crash cut
        short); a fresh run starts empty. Nothing is written, so a full disk cannot garble it."""
        end = 0
        if resume_step:
            with open(self.f.fileno(), 'rb', closefd=False) as reader:
                reader.seek(0)
                for line in reader:
                    if not (line.endswith(b'\n') and _kept(line, resume_step)):
                        break
                    end += len(line)
        try:
            self.f.truncate(end)
        except OSError as e:
            raise UserError(f"could not write the log {self.path}: {describe_os_error(e)}: "
                            "choose another --out") from None

    def write(self, entry):
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


def _kept(line, resume_step):
    try:
        record = json.loads(line.decode('utf-8'))
    except (ValueError, RecursionError):  # not JSON, not UTF-8
        return False
    return log_record_problem(record) is None and record['step'] <= resume_step
