"""
Run bookkeeping for train.py: what makes a run safe to stop, resume and repeat, kept out of
the training loop's way. The reading guide's appendix, "What makes a run safe", walks through it.

    with Run(args, given) as run:          # --out checked and locked, flags settled, signals caught
        tokenizer = run.tokenizer(docs)    # the data's vocabulary (or the checkpoint's)
        ...                                # model and trainer
        start = run.restore(trainer)       # the checkpoint's weights and Adam state; the log trimmed
        for step in range(start + 1, args.steps + 1):
            ...                            # one training step
            run.log_step(step, loss, lr)   # the JSON-lines log; stops a diverged run
            if run.evaluation_due(step): run.log_validation(step, val_loss, held_out)
            if run.save_due(step): run.save(step, trainer)
            if run.stop_signal: return run.stopped(step)

What it guarantees, so the loop need not think about it:
  * --out: checked before anything starts (a .json name that can be written, not the data, not
    the --init checkpoint, not someone else's file, not a trained model unless --force) and
    locked, through the log beside the file actually written, before the checkpoint is read;
  * flags: resume.ON_RESUME says what a resumed run keeps; a model whose checkpoint could not be
    read back is refused before the first step (checkpoint.check_fits);
  * the checkpoint is only ever replaced whole (checkpoint.save_checkpoint); a failed save is
    one line saying the last good checkpoint is intact; a loss that is not finite, or beyond
    what a log may hold (limits.MAX_LOSS), stops the run before anything is saved, and a loss
    far above ln(vocab_size) is reported as diverging;
  * Ctrl-C, SIGTERM (kill, a job scheduler), SIGHUP (a closed terminal) and a closed stdout
    (`train.py | head`) end the step in progress, save it and print the command that resumes;
    a resumed run's log is the log an uninterrupted run would have written;
  * under torchrun (`--engine torch`), rank 0 alone prints, logs, validates and saves, and a
    signal to any rank stops every rank after the same step (torchgpt/distributed.py).
Standard library only, like the rest of microgpt/.
"""

import collections
import errno
import hashlib
import json
import math
import os
import shlex
import signal
import sys
import time

from . import original
from ..edge.checkpoint import (CheckpointWriteError, check_fits, checkpoint_format, describe_os_error,
                         is_our_checkpoint, probe_writable, remove_stale_temporaries, save_checkpoint)
from ..edge.checks import encode, make_config
from ..edge.errors import UserError
from ..edge.limits import MAX_LOSS
from .resume import SAVED, resolve
from .runlog import log_path_for, open_locked_log
from ..tokenizer import CharTokenizer
from ..training import learning_rate

class Diverged(UserError):
    """The loss stopped being a number a log can hold: exit status 1, the last checkpoint untouched."""
    status = 1


# A run is reported as diverging when its loss is this many times ln(vocab_size), the loss of a
# model that gives every token the same probability (where every run starts). On the bundled
# names with the default model (numpy engine, 1000 steps), lr 0.01 and 0.03 only fall from
# there; lr 0.1 climbs to 7.1 (the mean of 50 steps) before the decay brings it back to 2.4,
# lr 1.0 to 7,884, ending at 9.2 (measured with train.py --engine numpy --lr LR).
DIVERGING = 2.0
RECENT = 50  # training losses averaged for that judgement: one name's loss is noisy

# Why a run stopped early: a signal's number (the exit status is 128 + it), and the words.
SIGPIPE = getattr(signal, 'SIGPIPE', 13)  # stdout closed: what a shell reports a pipe's writer killed by
STOPS = {signal.SIGINT: 'interrupted', signal.SIGTERM: 'terminated', SIGPIPE: 'its output closed'}
if hasattr(signal, 'SIGHUP'):
    STOPS[signal.SIGHUP] = 'the terminal closed'


class Run:
    """One training run's bookkeeping: settled flags, the checkpoint it continues, the lock on
    --out and the log, saving, and stopping on a signal."""

    def __init__(self, args, given):
        self.args = args
        self.rank, self.world_size = torchrun_place()  # (0, None) outside torchrun
        self.world = None              # the trainer's torchgpt World under torchrun
        self.log_path = log_path_for(args.out)
        self.log = None                # rank 0's: the one rank that writes
        if self.rank == 0:
            check_out(args.out, args.data, args.init, fresh=not args.resume, force=args.force)
            self.log = open_locked_log(self.log_path, args.out)  # the lock first, then read what it guards
        try:
            self.ckpt = resolve(args, given)
        except BaseException:
            if self.log is not None:
                self.log.close()
            raise
        self.caught = None             # a signal caught, or a closed stdout: a key of STOPS
        self._agreed = None            # under torchrun: the one the ranks agreed on (log_step)
        self.saved_step = None         # the step the checkpoint at --out holds, once we saved
        self.val_loss = None
        self.progress = Progress(args.steps, 0, self)  # restore() makes the one that counts from the start
        self.recent = collections.deque(maxlen=RECENT)
        self.diverging_said = set()  # 'is' (during the run), 'ended'
        self._previous_handlers = {}

    # ------------------------------------------------------------------ entering and leaving
    def __enter__(self):
        # A signal only raises a flag; the loop checks it between steps, so the checkpoint always
        # holds a whole step. A second one quits at once (the last saved checkpoint stays whole).
        for signum in STOPS:
            if signum != SIGPIPE:  # a closed stdout is found by Progress, where it is written
                self._previous_handlers[signum] = signal.signal(signum, self._on_signal)
        if self.rank != 0:  # rank 0 alone prints, to the end of the process (the samples too)
            sys.stdout = open(os.devnull, 'w')
        return self

    def __exit__(self, *exc):
        for signum, handler in self._previous_handlers.items():
            signal.signal(signum, handler)
        if self.log is not None:
            self.log.close()  # also releases the lock
        return False

    @property
    def stop_signal(self):
        """Why the run must stop after this step (a key of STOPS), or None: the signal caught;
        under torchrun, the one every rank agreed on after this step, so that all stop together."""
        return self.caught if self.world is None else self._agreed

    def _on_signal(self, signum, frame):
        self.caught = signum
        if self.world_size is None:  # torchrun sends its ranks a second signal, and kills them itself
            signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)

    def say(self, text):
        """Print a line of the run's report (a closed stdout stops the run: see Progress)."""
        self.progress.message(text)

    # ------------------------------------------------------------------ before the first step
    def tokenizer(self, docs):
        """The vocabulary: the data's characters, or the checkpoint's (which must cover the data).
        Also refuses, before any model is built, one whose checkpoint could not be read back."""
        args = self.args
        self.fingerprint = docs_fingerprint(docs)
        if args.resume and self.ckpt['train_state']['data_sha256'] != self.fingerprint:
            raise UserError(f"the data ({args.data or 'bundled names'}) changed since {args.out} was "
                            "saved: resuming would train on a different order; start a new run")
        if self.ckpt is None:
            tokenizer = CharTokenizer.from_docs(docs)
        else:
            tokenizer = CharTokenizer(self.ckpt['vocab'])
            for doc in docs:
                encode(tokenizer, doc)  # a character the checkpoint never saw is an error, now
        self.vocab_size = tokenizer.vocab_size
        check_fits(args.out, make_config(vocab_size=tokenizer.vocab_size, n_layer=args.n_layer,
                                         n_embd=args.n_embd, n_head=args.n_head, block_size=args.block_size))
        return tokenizer

    def restore(self, trainer):
        """Load --init's weights, or --resume's weights and Adam state, into the trainer, and
        trim the log to the resumed step. Returns the number of steps already done."""
        args = self.args
        self.settings = {name: getattr(args, name) for name in SAVED}
        if args.data is not None:
            self.settings['data'] = os.path.abspath(args.data)  # so --resume works from any folder
        start = 0
        if self.ckpt is not None:
            trainer.load_weights(self.ckpt['state_dict'])
        if args.resume:
            state = self.ckpt['train_state']
            trainer.load_optimizer_state(state['adam'])
            start = state['step']
            self.val_loss = state.get('val_loss')
            if start >= args.steps:
                raise UserError(f"{args.out} is already trained for {start} steps: pass --steps "
                                f"greater than {start} to train further")
            self._say_what_changes(start, state['run'])
        self.world = getattr(trainer, 'world', None)
        if self.rank == 0:
            self.log.trim(start)
            remove_stale_temporaries(args.out)  # a save cut short by SIGKILL left one behind
        self.progress = Progress(args.steps, start, self)
        return start

    def _say_what_changes(self, start, run):
        """A resume with more steps spreads the learning rate's decay over the new total: say so,
        with the jump it makes, and that a reproduction of the original goes past it."""
        before = run['steps']
        if self.args.steps == before:
            return
        self.say(f"note: the learning rate now decays to 0 over {self.args.steps} steps instead of "
                 f"{before}: step {start} trained at lr {learning_rate(run['lr'], start - 1, before):.3g}, "
                 f"step {start + 1} trains at {learning_rate(run['lr'], start, self.args.steps):.3g}")
        if run.get('reproduce_original'):
            self.say(f"note: the original microgpt.py trains {original.ORIGINAL['steps']} steps: "
                     f"from step {start + 1} this is no longer the original's run")

    # ------------------------------------------------------------------ during the run
    def log_step(self, step, loss, lr):
        """One log line per step, and the progress line; a diverged run ends here."""
        if not (math.isfinite(loss) and loss <= MAX_LOSS):
            self._diverged(f"the loss became {_loss_words(loss)} at step {step}")
        if self.world is not None:  # every rank learns of a signal any rank caught, after the same step
            # note: the handler often runs while agree waits for the other ranks, after this
            # rank's number was sent; `caught` keeps it for the next step's agreement (writing the
            # answer over it lost it, and the ranks then trained on to the end)
            self._agreed = self.world.agree(self.caught)
        self._write({'step': step, 'loss': loss, 'lr': lr})
        self.recent.append(loss)
        if len(self.recent) == RECENT or step == self.args.steps:
            self._check_diverging(sum(self.recent) / len(self.recent), f"the mean of the last "
                                  f"{len(self.recent)} training losses", step)
        self.progress.update(step, loss, force=step == self.args.steps)

    def evaluation_due(self, step):  # rank 0 alone validates
        return self.rank == 0 and (step == self.args.steps
                                   or bool(self.args.eval_every and step % self.args.eval_every == 0))

    def log_validation(self, step, val_loss, held_out):
        if not (math.isfinite(val_loss) and val_loss <= MAX_LOSS):  # the weights the step left are not usable
            self._diverged(f"the validation loss became {_loss_words(val_loss)} after step {step}")
        self.val_loss = val_loss
        self._write({'step': step, 'val_loss': val_loss})
        self.say(f"step {step}: val loss {val_loss:.4f} ({held_out})")
        self._check_diverging(val_loss, "the validation loss", step)

    def save_due(self, step):
        every = self.args.save_every
        return self.rank == 0 and (step == self.args.steps or self.stop_signal is not None
                                   or bool(every and step % every == 0))

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
        """The message after a signal or a closed stdout, and the exit status (128 + the signal).
        A closed terminal or pipe cannot show it: it goes to stderr then."""
        text = (f"{STOPS[self.stop_signal]} after step {step}; saved {self.args.out}. Resume with:\n"
                f"  {self.resume_command()}")
        if self.stop_signal in (signal.SIGINT, signal.SIGTERM):
            self.say(text)
        else:
            _print_quietly(text, sys.stderr)
        return 128 + self.stop_signal

    def resume_command(self):
        return f"python train.py --out {shlex.quote(self.args.out)} --resume"

    def _write(self, entry):
        if self.log is None:  # not rank 0
            return
        try:
            self.log.write(json.dumps(entry) + '\n')
        except OSError as e:  # the disk filled up, or a file-size limit: the log cannot grow
            self.progress.end_line()
            kept = (f"{self.args.out} holds step {self.saved_step}: resume with {self.resume_command()}"
                    if self.saved_step else "this run saved nothing yet")
            raise UserError(f"could not write the log {self.log_path}: {describe_os_error(e)}; {kept}") from None

    def _check_diverging(self, loss, what, step):
        """Warn (on stderr, once while the run goes and once at its end) of a loss far above
        ln(vocab_size). As the learning rate decays, a run may recover: the end says whether."""
        uniform, when = math.log(self.vocab_size), 'ended' if step == self.args.steps else 'is'
        if loss > DIVERGING * uniform and when not in self.diverging_said and self.rank == 0:
            self.diverging_said.add(when)
            self.progress.end_line()
            _print_quietly(f"warning: the run {when} diverging: after step {step}, {what} is {loss:.4g}, far "
                           f"above ln({self.vocab_size}) = {uniform:.2f}, what a model that guesses every token "
                           f"evenly scores; lower --lr (now {self.args.lr})", sys.stderr)

    def _diverged(self, what):
        self.progress.end_line()
        kept = f"{self.args.out} was left as last saved"
        raise Diverged(f"{what} (training diverged): lower --lr (now {self.args.lr}); {kept}")


def _loss_words(loss):
    return 'non-finite' if not math.isfinite(loss) else f"{loss:.3g}, more than any log keeps ({MAX_LOSS:g})"


def _print_quietly(text, stream):
    """Print, where the stream may be gone (a closed terminal or pipe): then say nothing."""
    try:
        print(text, file=stream, flush=True)
    except (OSError, ValueError):
        pass


def torchrun_place():
    """(rank, world_size) from the environment torchrun gives each process it starts, or
    (0, None) when torchrun did not start this one."""
    if 'RANK' not in os.environ or 'WORLD_SIZE' not in os.environ:
        return 0, None
    try:
        rank, size = int(os.environ['RANK']), int(os.environ['WORLD_SIZE'])
    except ValueError:
        rank = size = -1
    if not 0 <= rank < size:
        raise UserError(f"RANK={os.environ['RANK']!r} and WORLD_SIZE={os.environ['WORLD_SIZE']!r} are not "
                        "a rank and a number of ranks: start train.py with torchrun, or unset them")
    return rank, size


# ---------------------------------------------------------------------------- --out and its log
def check_out(out, data, init, fresh, force):
    """Fail now, not after an hour of training, if the checkpoint cannot or must not be written."""
    if not out:
        raise UserError("--out is empty: give a file name such as out/model.json")
    if out.endswith(os.sep) or os.path.isdir(out):
        raise UserError(f"--out {out} is a directory: give a file name such as {os.path.join(out, 'model.json')}")
    try:
        os.stat(out)
    except OSError as e:
        if e.errno == errno.ELOOP:  # a link that leads back to itself: writing "through" it is impossible
            raise UserError(f"--out {out} is a symbolic link that loops back on itself: remove it, "
                            "or choose another --out") from None
    except ValueError:
        raise UserError(f"--out {out!r} contains a NUL character: choose another --out") from None
    target = os.path.realpath(out)  # a symlink is written through to its target
    for path, what in ((target, 'checkpoint'), (os.path.realpath(log_path_for(out)), 'log')):
        for other, whose in ((data, 'the data file'), (init, 'the checkpoint --init starts from')):
            if other is not None and os.path.exists(other) and os.path.exists(path) and os.path.samefile(path, other):
                raise UserError(f"--out {out} would overwrite {whose} {other} with the {what}: "
                                "choose another --out")
    checkpoint_format(target, f"--out {out}" + (f" (a link to {target})" if os.path.islink(out) else ""))
    if os.path.isdir(log_path_for(out)):
        raise UserError(f"the log path {log_path_for(out)} is a directory: move it away or choose another --out")
    try:
        make_folders(os.path.dirname(target))
        probe_writable(target)
    except OSError as e:
        raise UserError(f"cannot write the checkpoint to {out}: {describe_os_error(e)}: choose another --out") from None
    if os.path.exists(target) and not is_our_checkpoint(target):
        raise UserError(f"--out {out} exists and is not a microgpt checkpoint: it is never replaced; "
                        "choose another --out (or move that file away)")
    if fresh and not force and os.path.exists(target):
        raise UserError(f"--out {out} already holds a trained model: continue it with --resume, "
                        "write this run elsewhere with another --out, or replace it with --force")


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


def docs_fingerprint(docs):
    """A hash of the documents, so --resume can refuse data that changed under it."""
    return hashlib.sha256('\n'.join(docs).encode('utf-8')).hexdigest()


# ---------------------------------------------------------------------------- progress
class Progress:
    """One self-overwriting status line on a terminal; a plain line now and then otherwise.
    A stdout that has gone away (the reader of a pipe left) asks the run to stop and save."""

    def __init__(self, total, start, run):
        self.total, self.start_step, self.run = total, start, run
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
        self._print(('\r' + line + ' ' * 4) if self.tty else line, end='' if self.tty else '\n')

    def message(self, text):
        """Print a line without mangling the status line."""
        self._print(('\r' + ' ' * 70 + '\r' + text) if self.tty else text)

    def end_line(self):
        """End the status line, so an error printed next starts on a line of its own."""
        if self.tty:
            self._print('')

    def _print(self, text, end='\n'):
        try:
            print(text, end=end, flush=True)
        except BrokenPipeError:  # `train.py | head`: save like Ctrl-C, and say so on stderr
            self.run.caught = self.run.caught or SIGPIPE
            _silence_stdout()
        except OSError:  # a terminal that closed (EIO): SIGHUP has asked the run to stop
            pass


def _silence_stdout():
    """Point stdout at /dev/null, so that what is still buffered for the closed pipe does not
    fail again when Python exits."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # not a real file (a test's capture)
        pass
