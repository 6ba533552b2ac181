"""
Run bookkeeping for train.py: what makes a run safe to stop, resume and repeat, kept out of
the training loop's way.

    with Run(args) as run:                 # flags resolved, --out checked, Ctrl-C caught
        ...                                # data, model, trainer
        start = run.restore(trainer, docs) # the checkpoint's weights and Adam state; locks --out
        for step in range(start + 1, args.steps + 1):
            ...                            # one training step
            run.log_step(step, loss, lr)   # the JSON-lines log; stops a diverged run
            if run.evaluation_due(step): run.log_validation(step, val_loss, n_names)
            if run.save_due(step): run.save(step, trainer)
            if run.stop_signal: return run.stopped(step)

What it guarantees, so the loop need not think about it:
  * flags: unset ones come from the run being resumed, the checkpoint given to --init, or the
    defaults; a resumed run must keep the settings that decide its losses (data, split, seed, lr,
    batch size) and may change --steps, --engine and how often it evaluates and saves;
  * --out: checked before anything starts (a writable file name, not the data, not a file of
    someone else's) and locked while the run writes it, so two runs cannot interleave;
  * the checkpoint is only ever replaced whole (checkpoint.save_checkpoint) and a failed save is
    one line saying the last good checkpoint is intact; a non-finite loss stops the run before
    anything is saved;
  * Ctrl-C or SIGTERM (kill, a closed terminal, a job scheduler) ends the step in progress,
    saves it, and prints the command that resumes; a resumed run's log is the log an
    uninterrupted run would have written.
Standard library only, like the rest of microgpt/.
"""

import hashlib
import json
import math
import os
import shlex
import signal
import sys
import time

from . import original
from .checkpoint import (DATA_MODES, CheckpointWriteError, describe_os_error, is_our_checkpoint, probe_writable,
                         read_checkpoint, remove_stale_temporaries, save_checkpoint)
from .checks import encode
from .errors import UserError
from .limits import MAX_SEED
from .model import parameter_shapes
from .tokenizer import CharTokenizer

try:
    import fcntl  # POSIX file locks, released by the kernel when the process ends, however it ends
except ImportError:  # Windows: runs are not locked against each other there
    fcntl = None

# Settings that decide a run's losses: a resumed run must keep them. With their defaults.
RUN_DEFAULTS = {'data': None, 'val_size': None, 'shuffle': True, 'seed': 42, 'lr': 0.01,
                'steps': 1000, 'batch_size': 1, 'reproduce_original': False, 'data_mode': 'lines'}
# Settings a checkpoint written before they existed lacks: it ran with their defaults.
LATER_SETTINGS = ('batch_size', 'data_mode')
# Settings a resumed run takes from the run it continues unless told otherwise: they change
# how the run is computed, logged and saved, not its losses.
HABIT_DEFAULTS = {'engine': 'scalar', 'eval_every': 200, 'save_every': 100, 'dtype': 'float64'}
DTYPES = ('float64', 'float32')  # the numpy engine's number type; the scalar engine is float64
MODEL_DEFAULTS = {'n_layer': 1, 'n_embd': 16, 'n_head': 4, 'block_size': 16}
# What --reproduce-original fixes to the original script's values (microgpt/original.py).
ORIGINAL_FLAGS = ('seed', 'lr', 'steps', 'batch_size', 'val_size', 'n_layer', 'n_embd', 'n_head', 'block_size')
MAX_STEPS = 10 ** 9        # a billion steps: more than any run of this project will take
MAX_BATCH_SIZE = 100_000   # names per step


class Diverged(UserError):
    """The loss stopped being a finite number: exit status 1, the last checkpoint untouched."""
    status = 1


class Run:
    """One training run's bookkeeping: resolved flags, the checkpoint it continues, the log,
    the lock on --out, saving, and stopping on a signal."""

    def __init__(self, args):
        self.args = args
        self.ckpt = resolve(args)
        check_out(args.out, args.data)
        self.log_path = log_path_for(args.out)
        self.log = None
        self.stop_signal = None        # the signal (SIGINT or SIGTERM) that asked the run to stop
        self.saved_step = None         # the step the checkpoint at --out holds, once we saved
        self.val_loss = None
        self.progress = None
        self._previous_handlers = {}

    # ------------------------------------------------------------------ entering and leaving
    def __enter__(self):
        # A signal only raises a flag; the loop checks it between steps, so the checkpoint always
        # holds a whole step. A second one quits at once (the last saved checkpoint stays whole).
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous_handlers[signum] = signal.signal(signum, self._on_signal)
        if hasattr(signal, 'SIGXFSZ'):  # a file-size limit: make the write fail, not kill us
            self._previous_handlers[signal.SIGXFSZ] = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        return self

    def __exit__(self, *exc):
        for signum, handler in self._previous_handlers.items():
            signal.signal(signum, handler)
        if self.log is not None:
            self.log.close()  # closing also releases the lock
        return False

    def _on_signal(self, signum, frame):
        self.stop_signal = signum
        signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)

    # ------------------------------------------------------------------ before the first step
    def tokenizer(self, docs):
        """The vocabulary: the data's characters, or the checkpoint's (which must cover the data)."""
        if self.ckpt is None:
            return CharTokenizer.from_docs(docs)
        tokenizer = CharTokenizer(self.ckpt['vocab'])
        for doc in docs:
            encode(tokenizer, doc)  # a character the checkpoint never saw is an error, now
        return tokenizer

    def restore(self, trainer, docs):
        """Load --init's weights, or --resume's weights and Adam state, into the trainer; lock
        --out and open the log. Returns the number of steps already done."""
        args = self.args
        self.fingerprint = docs_fingerprint(docs)
        self.settings = {name: getattr(args, name) for name in (*RUN_DEFAULTS, *HABIT_DEFAULTS)}
        if args.data is not None:
            self.settings['data'] = os.path.abspath(args.data)  # so --resume works from any folder
        start = 0
        if self.ckpt is not None:
            trainer.load_weights(self.ckpt['state_dict'])
        if args.resume:
            state = self.ckpt['train_state']
            if state['data_sha256'] != self.fingerprint:
                raise UserError(f"the data ({args.data or 'bundled names'}) changed since {args.out} was "
                                "saved: resuming would train on a different order; start a new run")
            trainer.load_optimizer_state(state['adam'])
            start = state['step']
            self.val_loss = state.get('val_loss')
            if start >= args.steps:
                raise UserError(f"{args.out} is already trained for {start} steps: pass --steps "
                                f"greater than {start} to train further")
        self.log = open_locked_log(self.log_path, args.out, start)
        remove_stale_temporaries(args.out)  # a save cut short by SIGKILL left one behind
        self.progress = Progress(args.steps, start)
        return start

    # ------------------------------------------------------------------ during the run
    def log_step(self, step, loss, lr):
        """One log line per step, and the progress line; a non-finite loss ends the run."""
        if not math.isfinite(loss):
            self._diverged(f"the loss became non-finite at step {step}")
        self._write({'step': step, 'loss': loss, 'lr': lr})
        self.progress.update(step, loss, force=step == self.args.steps)

    def evaluation_due(self, step):
        return step == self.args.steps or bool(self.args.eval_every and step % self.args.eval_every == 0)

    def log_validation(self, step, val_loss, held_out):
        if not math.isfinite(val_loss):  # the step's loss was finite, the weights it left are not
            self._diverged(f"the validation loss became non-finite after step {step}")
        self.val_loss = val_loss
        self._write({'step': step, 'val_loss': val_loss})
        self.progress.message(f"step {step}: val loss {val_loss:.4f} ({held_out})")

    def save_due(self, step):
        every = self.args.save_every
        return step == self.args.steps or self.stop_signal is not None or bool(every and step % every == 0)

    def save(self, step, trainer):
        """Replace the checkpoint at --out, whole, with the state after `step`."""
        train_state = {'step': step, 'run': self.settings, 'data_sha256': self.fingerprint,
                       'adam': trainer.optimizer_state(), 'val_loss': self.val_loss}
        try:
            save_checkpoint(self.args.out, trainer, train_state, data_mode=self.args.data_mode)
        except CheckpointWriteError as e:  # the message says what failed and that the old file is intact
            self.progress.end_line()
            if self.saved_step:
                advice = f"it holds step {self.saved_step}; fix that, then resume: {self.resume_command()}"
            else:
                advice = "this run saved nothing yet; fix that and run again"
            raise UserError(f"after step {step}: {e}; {advice}") from None
        self.saved_step = step

    def stopped(self, step):
        """The message after a Ctrl-C or SIGTERM, and the exit status (130 or 143)."""
        name = 'interrupted' if self.stop_signal == signal.SIGINT else 'terminated'
        self.progress.message(f"{name} after step {step}; saved {self.args.out}. Resume with:\n"
                              f"  {self.resume_command()}")
        return 128 + self.stop_signal

    def resume_command(self):
        return f"python train.py --out {shlex.quote(self.args.out)} --resume"

    def _write(self, entry):
        try:
            self.log.write(json.dumps(entry) + '\n')
            self.log.flush()
        except OSError as e:  # the disk filled up, or a file-size limit: the log cannot grow
            self.progress.end_line()
            kept = (f"{self.args.out} holds step {self.saved_step}: resume with {self.resume_command()}"
                    if self.saved_step else "this run saved nothing yet")
            raise UserError(f"could not write the log {self.log_path}: {describe_os_error(e)}; {kept}") from None

    def _diverged(self, what):
        self.progress.end_line()
        kept = f"{self.args.out} was left as last saved"
        raise Diverged(f"{what} (training diverged): lower --lr (now {self.args.lr}); {kept}")


# ---------------------------------------------------------------------------- flags
def resolve(args):
    """Fill every unset flag: from the checkpoint when resuming, from the defaults otherwise.

    Returns the checkpoint read for --resume or --init (validated), or None for a fresh run.
    """
    saved = {}
    if args.resume:
        if args.init:
            raise UserError("--resume and --init cannot be combined: --resume continues --out, "
                            "--init starts a new run from another checkpoint")
        ckpt = read_checkpoint(args.out)
        if not ckpt['train_state']:
            raise UserError(f"{args.out} has no training state to resume: start a new run "
                            f"with --init {args.out} instead")
        check_train_state(args.out, ckpt['train_state'], ckpt['config'])
        saved = {**RUN_DEFAULTS, **HABIT_DEFAULTS, **ckpt['train_state']['run']}
        for name in RUN_DEFAULTS:  # everything but --steps must match the run being resumed
            given = getattr(args, name)
            if name == 'data' and given is not None:
                continue  # the same content at a new path is fine: restore() compares the hash
            if name != 'steps' and given is not None and given != saved[name]:
                raise UserError(f"--{name.replace('_', '-')} {given} differs from the run being "
                                f"resumed ({saved[name]}): drop the flag to resume exactly")
        if args.data is None and saved['data'] is not None and not os.path.exists(saved['data']):
            raise UserError(f"the run's data file {saved['data']} is gone: if it moved, pass "
                            "--data with its new path (its content is checked against the run's)")
    elif args.init:
        ckpt = read_checkpoint(args.init, n_head=args.n_head)  # n_head: for the tutorial's export
        if args.data_mode is None:  # a model of running text goes on reading running text
            args.data_mode = ckpt['data_mode']
    else:
        ckpt = None
    if args.reproduce_original or saved.get('reproduce_original'):
        # the original microgpt.py's recipe: refuse what would change it, then it sets the rest
        original.check_flags(**{name: getattr(args, name) for name in (*ORIGINAL_FLAGS, 'shuffle', 'init')})
        for name in ORIGINAL_FLAGS:
            if getattr(args, name) is None:
                setattr(args, name, original.ORIGINAL[name])
    for name, default in {**RUN_DEFAULTS, **HABIT_DEFAULTS}.items():
        if getattr(args, name) is None:
            setattr(args, name, saved.get(name, default))
    for name, default in MODEL_DEFAULTS.items():
        if ckpt is not None:
            given = getattr(args, name)
            if given is not None and given != getattr(ckpt['config'], name):
                raise UserError(f"--{name.replace('_', '-')} {given} contradicts the checkpoint's "
                                f"{name} {getattr(ckpt['config'], name)}: drop the flag")
            setattr(args, name, getattr(ckpt['config'], name))
        elif getattr(args, name) is None:
            setattr(args, name, default)
    return ckpt


def check_train_state(path, state, config):
    """--resume trusts the saved step, settings and Adam moments: check each one's type and range."""
    n_params = sum(n_out * n_in for n_out, n_in in parameter_shapes(config).values())
    run, adam = state.get('run'), state.get('adam')
    problem = None
    if not _is_int(state.get('step'), 0):
        problem = "its step is not a count"
    elif not isinstance(run, dict) or not all(name in run for name in RUN_DEFAULTS if name not in LATER_SETTINGS):
        problem = "its run settings are incomplete"
    elif not (run['data'] is None or isinstance(run['data'], str) and run['data'] and '\0' not in run['data']):
        problem = "its data path is not a file name"
    elif not (run['val_size'] is None or _is_int(run['val_size'], 0)
              or isinstance(run['val_size'], float) and 0 < run['val_size'] < 1) \
            or not isinstance(run['shuffle'], bool) or run.get('data_mode', 'lines') not in DATA_MODES:
        problem = "its validation split is not a count or fraction, its shuffle not true/false or its data mode unknown"
    elif not (_is_int(run['seed'], 0, MAX_SEED + 1) and _is_int(run['steps'], 1, MAX_STEPS + 1)
              and _is_int(run.get('batch_size', 1), 1, MAX_BATCH_SIZE + 1)):
        problem = "its seed, steps or batch size is out of range"
    elif not (isinstance(run['lr'], float) and math.isfinite(run['lr']) and run['lr'] > 0):
        problem = "its learning rate is not a positive number"
    elif not (run.get('engine', 'scalar') in ('scalar', 'numpy') and run.get('dtype', 'float64') in DTYPES
              and all(_is_int(run.get(k, 0), 0) for k in ('eval_every', 'save_every'))):
        problem = "its engine or evaluation/saving rhythm is unknown"
    elif not isinstance(run.get('reproduce_original', False), bool):
        problem = "its reproduction flag is not true/false"
    elif not (isinstance(state.get('data_sha256'), str) and len(state['data_sha256']) == 64):
        problem = "its data fingerprint is missing"
    elif not (isinstance(adam, dict) and _is_int(adam.get('t'), 0)
              and all(isinstance(adam.get(k), list) and len(adam[k]) == n_params
                      and all(isinstance(x, float) and math.isfinite(x) for x in adam[k])
                      for k in ('m', 'v'))
              and min(adam['v'], default=0.0) >= 0):  # a mean of squares: negative would make sqrt complex
        problem = "its Adam moments are missing, the wrong size, or not finite"
    elif state['step'] > run['steps'] or not (state.get('val_loss') is None
                                               or isinstance(state['val_loss'], float)):
        problem = "its step or validation loss is inconsistent"
    if problem:
        raise UserError(f"{path} has a damaged training state ({problem}): it cannot be resumed; "
                        f"start a new run with --init {path}")


def _is_int(x, lo, hi=2 ** 63):
    return isinstance(x, int) and not isinstance(x, bool) and lo <= x < hi


# ---------------------------------------------------------------------------- --out and its log
def check_out(out, data):
    """Fail now, not after an hour of training, if the checkpoint cannot or must not be written."""
    if not out:
        raise UserError("--out is empty: give a file name such as out/model.json")
    if out.endswith(os.sep) or os.path.isdir(out):
        raise UserError(f"--out {out} is a directory: give a file name such as {os.path.join(out, 'model.json')}")
    target = os.path.realpath(out)  # a symlink is written through to its target
    for path, what in ((target, 'checkpoint'), (os.path.realpath(log_path_for(out)), 'log')):
        if data is not None and os.path.exists(data) and os.path.exists(path) and os.path.samefile(path, data):
            raise UserError(f"--out {out} would overwrite the data file {data} with the {what}: "
                            "choose another --out")
    if os.path.isdir(log_path_for(out)):
        raise UserError(f"the log path {log_path_for(out)} is a directory: move it away or choose another --out")
    folder = os.path.dirname(target)
    try:
        os.makedirs(folder, exist_ok=True)
        probe_writable(target)
    except OSError as e:
        raise UserError(f"cannot write the checkpoint to {out}: {describe_os_error(e)}: choose another --out") from None
    if os.path.exists(target) and not is_our_checkpoint(target):
        raise UserError(f"--out {out} exists and is not a microgpt checkpoint: it is never replaced; "
                        "choose another --out (or move that file away)")


def log_path_for(out):
    """out/model.json -> out/model.log.jsonl"""
    stem = out[:-len('.json')] if out.endswith('.json') else out
    return stem + '.log.jsonl'


def open_locked_log(path, out, resume_step):
    """The log file, locked for this run and opened for appending. A fresh run starts it
    empty; a resumed one keeps only the lines up to the resumed step (later ones were never
    saved in a checkpoint), and drops lines that are damaged (cut short by a crash)."""
    try:
        log = open(path, 'a+b')
    except OSError as e:
        raise UserError(f"cannot open the log {path}: {describe_os_error(e)}: choose another --out") from None
    if fcntl is not None:
        try:
            fcntl.flock(log.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            log.close()
            raise UserError(f"another train.py is writing {out} right now: wait for it to finish, "
                            "or choose another --out") from None
    kept = []
    if resume_step:
        log.seek(0)
        for line in log:
            entry = _parse_log_line(line)
            if entry is not None and entry['step'] <= resume_step:
                kept.append(line if line.endswith(b'\n') else line + b'\n')
    log.seek(0)
    log.truncate()
    log.writelines(kept)
    log.flush()
    return _TextLog(log)


def _parse_log_line(line):
    """The JSON object on one log line, or None if the line is damaged."""
    try:
        entry = json.loads(line.decode('utf-8'))
    except (ValueError, RecursionError):  # cut short, not UTF-8, or absurdly nested
        return None
    if isinstance(entry, dict) and isinstance(entry.get('step'), int):
        return entry
    return None


class _TextLog:
    """Text lines written to the locked binary log file."""

    def __init__(self, f):
        self.f = f

    def write(self, text):
        self.f.write(text.encode('utf-8'))

    def flush(self):
        self.f.flush()

    def close(self):
        self.f.close()


def docs_fingerprint(docs):
    """A hash of the documents, so --resume can refuse data that changed under it."""
    return hashlib.sha256('\n'.join(docs).encode('utf-8')).hexdigest()


# ---------------------------------------------------------------------------- progress
class Progress:
    """One self-overwriting status line on a terminal; a plain line now and then otherwise."""

    def __init__(self, total, start):
        self.total, self.start_step = total, start
        self.t0 = time.time()
        self.last = 0.0
        self.tty = sys.stdout.isatty()

    def update(self, step, loss, force=False):
        now = time.time()
        if not force and now - self.last < (0.1 if self.tty else 10.0):
            return
        self.last = now
        rate = (step - self.start_step) / max(now - self.t0, 1e-9)
        left = (self.total - step) / rate if rate > 0 else float('inf')
        line = (f"step {step:>{len(str(self.total))}}/{self.total} | loss {loss:.4f} | "
                f"{rate:.1f} steps/s | {left:.0f}s left")
        print(('\r' + line + ' ' * 4) if self.tty else line, end='' if self.tty else '\n', flush=True)

    def message(self, text):
        """Print a line without mangling the status line."""
        print(('\r' + ' ' * 70 + '\r' + text) if self.tty else text, flush=True)

    def end_line(self):
        """End the status line, so an error printed next starts on a line of its own."""
        if self.tty:
            print(flush=True)
