"""
What makes a training run safe to stop, resume and repeat, kept out of the loop's way: Output
checks and locks --out, Run logs, saves and stops on a signal. docs/reliability.md, "What makes
a run safe", says where each guarantee lives.
"""

import collections
import math
import os
import shlex
import signal
import sys
import time

from ..edge.checkpoint import (Checkpoint, TrainState, checkpoint_format, is_our_checkpoint, read_checkpoint,
                               write_checkpoint)
from ..edge.errors import UserError
from ..edge.files import (describe_os_error, make_folders, probe_writable, remove_empty_folders,
                          remove_stale_temporaries)
from ..edge.limits import MAX_LOSS
from ..training import learning_rate
from . import original
from .runlog import best_path_for, log_path_for, open_locked_log
from .settings import torchrun_rank_world


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


# ---------------------------------------------------------------------------- --out: checked, locked, read, written
class Output:
    """The checkpoint file a run writes: checked and locked on entering (by rank 0, which alone
    writes), read once for --resume or --init, replaced whole by each save."""

    def __init__(self, out, fresh, force, protected=(), what='--out'):
        self.rank_world = torchrun_rank_world(os.environ)  # (rank, world_size), read once: resolve_settings takes it from here
        self.out, self.rank = out, self.rank_world[0]
        self.log_path = log_path_for(out)
        self.log, self.made = None, []
        if self.rank == 0:
            self.made = check_out(out, fresh, force, protected, what)  # the folders it made for --out
            self.log = open_locked_log(self.log_path, out)  # the lock first, then read what it guards
            if what == '--out' and fresh and not force and not os.path.exists(out):
                try:
                    check_leftovers(out)
                except UserError:
                    self.__exit__()
                    raise

    def __enter__(self):
        if self.rank != 0:  # rank 0 alone prints, to the end of the process (the samples too)
            sys.stdout = open(os.devnull, 'w')
        return self

    def __exit__(self, *exc):
        if self.log is not None:
            self.log.close()  # also releases the lock
        remove_empty_folders(self.made)  # a refused run leaves no folder it made
        return False

    def read(self, flags, given):
        """The Checkpoint --resume continues or --init starts from, or None."""
        if flags.resume and not flags.init:
            return read_checkpoint(flags.out, training=True)
        if flags.init:
            return read_checkpoint(flags.init, n_head=flags.n_head if 'n_head' in given else None)
        return None

    def begin(self, start, best_step=None):
        """The run is settled and built, its first step next: only now does anything at --out
        change. The best checkpoint beside is kept if it holds best_step, the checkpoint's record
        of it; otherwise (another run's, over which --force starts; or one past the step resumed
        from) it is removed. Returns whether the run's best is still there."""
        if self.log is None:
            return True
        self.log.trim(start)
        remove_stale_temporaries(self.out)
        best = best_path_for(self.out)
        if not os.path.isfile(best):  # one that is not ours was refused by check_out, before the lock
            return False
        state = read_checkpoint(best).train_state
        if best_step is not None and state is not None and state.step == best_step:
            return True
        os.remove(best)
        return False

    def write(self, ckpt, best=False):
        write_checkpoint(best_path_for(self.out) if best else self.out, ckpt)


def check_out(out, fresh, force, protected=(), what='--out'):
    """Fail now, not after an hour of training, if the checkpoint cannot or must not be written.
    protected: (path, whose) pairs it must never overwrite. Returns the folders it made."""
    if not out:
        raise UserError(f"{what} is empty: give a file name such as out/model.json")
    if out.endswith(os.sep) or os.path.isdir(out):
        raise UserError(f"{what} {out} is a directory: give a file name such as {os.path.join(out, 'model.json')}")
    target = os.path.realpath(out)  # a symlink is written through to its target
    best = os.path.realpath(best_path_for(out))  # a run's best checkpoint, beside (what='--out' only)
    written = [(target, 'checkpoint'), (os.path.realpath(log_path_for(out)), 'log')]
    for path, kind in written + ([(best, 'best checkpoint')] if what == '--out' else []):
        for other, whose in protected:
            if other is not None and os.path.exists(other) and os.path.exists(path) and os.path.samefile(path, other):
                raise UserError(f"{what} {out} would overwrite {whose} {other} with the {kind}: "
                                f"choose another {what}")
    checkpoint_format(target, f"{what} {out}" + (f" (a link to {target})" if os.path.islink(out) else ""))
    made = []
    try:
        made = make_folders(os.path.dirname(target))
        probe_writable(target)
    except OSError as e:
        remove_empty_folders(made)
        raise UserError(f"cannot write the checkpoint to {out}: {describe_os_error(e)}: "
                        f"choose another {what}") from None
    if os.path.exists(target) and not is_our_checkpoint(target):
        raise UserError(f"{what} {out} exists and is not a microgpt checkpoint: it is never replaced; "
                        f"choose another {what} (or move that file away)")
    if what == '--out':
        check_best(out, target, best, resume=not fresh)
    if fresh and not force and os.path.exists(target):
        ways = ("continue it with --resume, write this run elsewhere with another --out"
                if what == '--out' else "choose another target")
        raise UserError(f"{what} {out} already holds a trained model: {ways}, or replace it with --force")
    return made


def check_best(out, target, best, resume):
    """The best file beside --out is the run's own, or is refused, whatever the flags; and a best
    file's name is never a run's --out."""
    stem, ext = os.path.splitext(target)
    if stem.endswith('.best'):
        then = (f"it cannot be resumed; start a new run from it with --init {out} and another --out" if resume
                else "choose another --out")
        raise UserError(f"--out {out}: a name ending in .best{ext} is where the run at {stem[:-5]}{ext} keeps its "
                        f"best validation's weights, never a run's own checkpoint: {then}")
    if os.path.exists(best) and not (os.path.isfile(best) and is_our_checkpoint(best)):
        raise UserError(f"{best_path_for(out)}, where this run keeps its best validation's weights, exists and "
                        "is not a microgpt checkpoint: it is never replaced; move it away or choose another --out")
    if os.path.exists(best) and os.path.exists(log_path_for(best)):
        raise UserError(f"{best_path_for(out)}, where this run would keep its best validation's weights, is the "
                        f"checkpoint of another run (its log {log_path_for(best)} is beside it): it is never "
                        "replaced; choose another --out, or move that run away")


def check_leftovers(out):
    """A fresh run without --force keeps what an earlier run at --out left where it saved no
    checkpoint: its best file, or its log. (Checked under the lock.)"""
    best, log = best_path_for(out), log_path_for(out)
    if os.path.exists(best):
        raise UserError(f"{best} holds the best weights of an earlier run at {out}, which saved no checkpoint: "
                        f"sample from it with sample.py --ckpt {best}, write this run elsewhere with another "
                        "--out, or replace it with --force")
    if os.path.isfile(log) and os.path.getsize(log):
        raise UserError(f"{log} holds the log of an earlier run at {out}, which saved no checkpoint: write this "
                        "run elsewhere with another --out, or replace it with --force")


# ---------------------------------------------------------------------------- the run, step by step
class Run:
    """One training run's bookkeeping from its first step to its last save: the log, saving,
    and stopping on a signal."""

    def __init__(self, settings, output, built, ckpt=None):
        trainer, start = built.trainer, built.start
        self.settings, self.output, self.world = settings, output, trainer.world
        self.vocab_size, self.fingerprint = trainer.config.vocab_size, built.data.fingerprint
        self.val_loss = ckpt.train_state.val_loss if settings.resume else None  # the last measured, until the next
        state = ckpt.train_state if settings.resume else None
        self.best = (state.best_step, state.best_val_loss) if state and state.best_step else None  # (step, loss)
        self.start = start         # the step --out holds before this run's first save
        self.saved_step = None     # the step the checkpoint at --out holds, once we saved
        self.caught = None         # a signal caught, or a closed stdout: a key of STOPS
        self._agreed = None        # under torchrun: the one the ranks agreed on (log_step)
        self.progress = Progress(settings.steps, start, self)
        self.recent = collections.deque(maxlen=RECENT)
        self.diverging_said = set()  # 'is' (during the run), 'ended'
        self._previous_handlers = {}

    def __enter__(self):
        if not self.output.begin(self.start, self.best and self.best[0]):  # every refusal is behind us
            self.best = None  # no file holds the recorded best any more: kept anew from here
        # A signal only raises a flag; the loop checks it between steps, so the checkpoint always
        # holds a whole step. A second one quits at once (the last saved checkpoint stays whole).
        for signum in STOPS:
            if signum != SIGPIPE:  # a closed stdout is found by Progress, where it is written
                self._previous_handlers[signum] = signal.signal(signum, self._on_signal)
        return self

    def __exit__(self, *exc):
        for signum, handler in self._previous_handlers.items():
            signal.signal(signum, handler)
        return False

    @property
    def stop_signal(self):
        """Why the run must stop after this step (a key of STOPS), or None: the signal caught;
        under torchrun, the one every rank agreed on after this step, so that all stop together."""
        return self.caught if self.world is None else self._agreed

    def _on_signal(self, signum, frame):
        self.caught = signum
        if self.settings.world_size is None:  # torchrun sends its ranks a second signal, and kills them itself
            signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)

    def say(self, text):  # a closed stdout stops the run: see Progress
        self.progress.message(text)

    # ------------------------------------------------------------------ during the run
    def log_step(self, step, loss, lr):  # a diverged run ends here
        if not (math.isfinite(loss) and loss <= MAX_LOSS):
            self._diverged(f"the loss became {_loss_words(loss)} at step {step}")
        if self.world is not None:  # every rank learns of a signal any rank caught, after the same step
            # note: the handler often runs while agree waits for the other ranks, after this
            # rank's number was sent; `caught` keeps it for the next step's agreement (writing the
            # answer over it lost it, and the ranks then trained on to the end)
            self._agreed = self.world.agree(self.caught)
            if self._evaluates(step) or self._saves(step):  # rank 0 then works alone, for as long as it takes
                self.world.rank0_works_alone()
        self._write({'step': step, 'loss': loss, 'lr': lr})
        self.recent.append(loss)
        if len(self.recent) == RECENT or step == self.settings.steps:
            self._check_diverging(sum(self.recent) / len(self.recent), f"the mean of the last "
                                  f"{len(self.recent)} training losses", step)
        self.progress.update(step, loss, force=step == self.settings.steps)

    def evaluation_due(self, step):  # rank 0 alone validates
        return self.settings.rank == 0 and self._evaluates(step)

    def _evaluates(self, step):
        every = self.settings.eval_every
        return step == self.settings.steps or bool(every and step % every == 0)

    def log_validation(self, step, val_loss, train_loss, held_out, bits):
        """The validation loss after `step` and the training loss measured alike, on as many
        tokens of the training data; bits: the two in bits per character."""
        for loss in (val_loss, train_loss):
            if not (math.isfinite(loss) and loss <= MAX_LOSS):  # the weights the step left are not usable
                self._diverged(f"the validation loss became {_loss_words(loss)} after step {step}")
        self.val_loss = val_loss
        self._write({'step': step, 'val_loss': val_loss, 'train_loss': train_loss,
                     'val_bpc': bits[0], 'train_bpc': bits[1]})
        self.say(f"step {step}: val loss {val_loss:.4f} ({held_out}), train loss {train_loss:.4f} "
                 f"(as many training tokens); {bits[0]:.4f} and {bits[1]:.4f} bits per character")
        self._check_diverging(val_loss, "the validation loss", step)

    def keep_if_best(self, step, trainer):
        """After a validation: if it is the lowest yet, the weights go to the best checkpoint
        beside --out. The validation loss is exact (every held-out token), so lower is better."""
        if self.settings.rank != 0 or (self.best is not None and not self.val_loss < self.best[1]):
            return
        self._save(step, trainer, best=True)
        self.best = (step, self.val_loss)

    def best_line(self):
        if self.best is None:
            return None
        return f"best val {self.best[1]:.4f} at step {self.best[0]}: {best_path_for(self.settings.out)}"

    def save_due(self, step):  # rank 0 alone saves
        return self.settings.rank == 0 and self._saves(step)

    def _saves(self, step):
        every = self.settings.save_every
        return step == self.settings.steps or self.stop_signal is not None or bool(every and step % every == 0)

    def save(self, step, trainer):
        self._save(step, trainer)
        self.saved_step = step

    def _save(self, step, trainer, best=False):
        """The checkpoint at --out (weights, Adam, where the run stands), or with best the best
        file beside it (the weights and their step, no Adam: a model to sample, not to resume)."""
        s = self.settings
        state = TrainState(step, s.saved(), self.fingerprint, self.val_loss,
                           *((step, self.val_loss) if best else self.best or (None, None)))
        try:
            self.output.write(Checkpoint.of(trainer, s.data_mode, None if best else trainer.optimizer_state(),
                                            state, weights=trainer.weights()), best)
        except UserError as e:  # files.WriteError: it says what failed and that the old file is intact
            self._write_failed(step, e)

    def _write_failed(self, step, e):
        """A save could not be written: the log goes back to the step the checkpoint holds, and
        one line says what failed and how to resume."""
        self.progress.end_line()
        self._log_back_to_checkpoint()
        if self.saved_step:
            advice = f"it holds step {self.saved_step}; fix that, then resume: {self.resume_command()}"
        else:
            advice = "this run saved nothing yet; fix that and run again"
        raise UserError(f"after step {step}: {e}; {advice}") from None

    def stopped(self, step):
        """The message after a signal or a closed stdout, and the exit status (128 + the signal).
        A closed terminal or pipe cannot show it: it goes to stderr then. Under torchrun every
        rank waits here until rank 0 has saved (a rank that left first would have torchrun stop
        the others, rank 0 in the middle of its save), and rank 0 alone says it."""
        if self.world is not None:
            self.world.wait_for_rank0()
            if self.settings.rank != 0:
                return 128 + self.stop_signal
        text = (f"{STOPS[self.stop_signal]} after step {step}; saved {self.settings.out}. Resume with:\n"
                f"  {self.resume_command()}")
        if self.stop_signal in (signal.SIGINT, signal.SIGTERM):
            self.say(text)
        else:
            _print_quietly(text, sys.stderr)
        return 128 + self.stop_signal

    def _log_back_to_checkpoint(self):
        """After a failed save, the log keeps only the steps the checkpoint holds (a truncation:
        it needs no space on a full disk)."""
        try:
            if self.output.log is not None:
                self.output.log.trim(self.saved_step or self.start)
        except UserError:  # said already by the save's own message: the next --resume trims it
            pass

    def resume_command(self):
        return f"python train.py --out {shlex.quote(self.settings.out)} --resume"

    def _write(self, entry):
        log = self.output.log
        if log is None:  # not rank 0
            return
        try:
            log.write(entry)
        except OSError as e:  # the disk filled up, or a file-size limit: the log cannot grow
            self.progress.end_line()
            kept = (f"{self.settings.out} holds step {self.saved_step}: resume with {self.resume_command()}"
                    if self.saved_step else "this run saved nothing yet")
            raise UserError(f"could not write the log {log.path}: {describe_os_error(e)}; {kept}") from None

    def _check_diverging(self, loss, what, step):
        """Warn (on stderr, once while the run goes and once at its end) of a loss far above
        ln(vocab_size). As the learning rate decays, a run may recover: the end says whether."""
        uniform, when = math.log(self.vocab_size), 'ended' if step == self.settings.steps else 'is'
        if loss > DIVERGING * uniform and when not in self.diverging_said and self.settings.rank == 0:
            self.diverging_said.add(when)
            self.progress.end_line()
            _print_quietly(f"warning: the run {when} diverging: after step {step}, {what} is {loss:.4g}, far "
                           f"above ln({self.vocab_size}) = {uniform:.2f}, what a model that guesses every token "
                           f"evenly scores; lower --lr (now {self.settings.lr})", sys.stderr)

    def _diverged(self, what):
        self.progress.end_line()
        raise Diverged(f"{what} (training diverged): lower --lr (now {self.settings.lr}); "
                       f"{self.settings.out} was left as last saved")


def resume_notes(settings, ckpt):
    """What a resumed run with more steps says before its first: the learning rate's new decay,
    and that a reproduction of the original goes past the original's run."""
    if not settings.resume or settings.steps == ckpt.train_state.run.steps:
        return []
    run, start = ckpt.train_state.run, ckpt.train_state.step
    notes = [f"note: the learning rate now decays to 0 over {settings.steps} steps instead of {run.steps}: "
             f"step {start} trained at lr {learning_rate(run.lr, start - 1, run.steps):.3g}, "
             f"step {start + 1} trains at {learning_rate(run.lr, start, settings.steps):.3g}"]
    if run.reproduce_original:
        notes.append(f"note: the original microgpt.py trains {original.ORIGINAL['steps']} steps: "
                     f"from step {start + 1} this is no longer the original's run")
    return notes


def _loss_words(loss):
    return 'non-finite' if not math.isfinite(loss) else f"{loss:.3g}, more than any log keeps ({MAX_LOSS:g})"


def _print_quietly(text, stream):
    """Print, where the stream may be gone (a closed terminal or pipe): then say nothing."""
    try:
        print(text, file=stream, flush=True)
    except (OSError, ValueError):
        pass


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

    def message(self, text):  # a line, without mangling the status line
        self._print(('\r' + ' ' * 70 + '\r' + text) if self.tty else text)

    def end_line(self):  # so that an error printed next starts on a line of its own
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
    """Point stdout at /dev/null, so that what is buffered for the closed pipe does not fail at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # not a real file (a test's capture)
        pass
