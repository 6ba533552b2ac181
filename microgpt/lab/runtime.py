"""
How long a Training page run takes: said before it starts, and kept honest while it goes.

    probe(flags, 'model.json')   # before: train.py's own data and engine for these flags, timed briefly
    pace = Pace(params, probe_result)
    pace.see(time.monotonic(), records)   # during: each log record, stamped as the server reads it
    pace.estimate(now)        # {'left': seconds, 'text': how it was found}

Before the run, `probe` builds what train.py builds for the run's flags (programs/train.py's
settle and build: the same data, the same engine, the same first weights), then times a few of
its steps after one untimed one (on the numpy engine both ways the run may keep: one thread, and
the batch split over the cores, the faster counting, as train.py keeps the faster on its first
steps), one evaluation on part of the held-out data (train.py's validation_losses, scaled by how
much of the data the part is), one save of the checkpoint and the sample the page draws from it,
and (once per worker) a new Python's start. The whole run is then the start + the build +
steps x a step + evaluations x one + saves x one + samples x one. It runs in one of the lab's workers on a
shared machine, so the text says how it was made, and the run's own pace replaces it.

While the run goes, Pace stamps each of train.py's log records with the time the server read
it (the page asks every 0.4 s): a step's time is the run's own over its last WINDOW seconds
(the time between the steps read, less its evaluations; on the numpy engine from the end of its
first steps, which try slower ways to use the cores), an evaluation's the time from its step's
record to its val_loss record.
The time left is the steps left at the one and the evaluations left at the other (the probe's
until the run has timed one).
"""

import collections
import functools
import os
import subprocess
import sys
import tempfile
import time

from ..edge.checkpoint import Checkpoint, TrainState, write_checkpoint
from ..programs import train
from ..programs.settings import parse_args, settle
from ..training import learning_rate
from .runsamples import draw_sample

PROBE_STEPS = 6        # steps timed per way to use the cores, after one untimed (its first allocations)
PROBE_SECONDS = 1.0    # at most about this long on steps: a scalar engine's step on a large model takes seconds
EVAL_PART = 10         # an evaluation is timed on a tenth of the held-out data (at least EVAL_LEAST items)
EVAL_LEAST = 64
GAP = 2.0              # seconds between two reads of the log beyond which its records came in a heap
                       # (no page was looking): their evaluations are not timed
WINDOW = 5.0           # seconds of the run's latest steps its step time is measured on: a loaded
                       # machine changes speed, and the time left must follow


def probe(flags, name):
    """The time a run of train.py with these flags (runs.py's, without --out) writing the
    checkpoint `name` should take: a dict of the parts measured, the total in seconds, and a
    sentence saying how it was found."""
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        argv = [*flags, '--out', os.path.join(tmp, name)]
        if flags[flags.index('--engine') + 1] == 'numpy':
            argv += ['--threads', '1']  # the lab's worker computes on one BLAS thread (workers.start_worker)
        settings = settle(*parse_args(argv))
        built = train.build(settings, None)
        build_s = time.perf_counter() - t0
        trainer, data = built.trainer, built.data
        step_s = time_steps(trainer, data, settings)
        eval_s = time_evaluation(trainer, data)
        t = time.perf_counter()
        write_checkpoint(settings.out, Checkpoint.of(trainer, settings.data_mode, optimizer=trainer.optimizer_state(),
                                                     train_state=TrainState(1, settings.saved(), data.fingerprint)))
        save_s = time.perf_counter() - t
        t = time.perf_counter()
        draw_sample(settings.out)  # what the server samples from each save, on the same cores
        sample_s = time.perf_counter() - t
    start_s = python_start()
    evals = count_due(settings.steps, settings.eval_every) if eval_s is not None else 0
    samples = count_due(settings.steps, settings.save_every)
    saves = samples + evals  # each evaluation may keep the best, beside
    total = (start_s + build_s + settings.steps * step_s + evals * (eval_s or 0) + saves * save_s
             + samples * sample_s)
    text = (f"about {duration(total)}, from a probe on this server just now: {settings.steps} steps at "
            f"{1e3 * step_s:.1f} ms (the fastest of the ways the run may use the cores, a few steps each), "
            + (f"{evals} evaluation{'s' * (evals != 1)} at {eval_s:.2f} s (timed on a part of the held-out data), "
               if evals else "no held-out data to evaluate, ")
            + f"{saves} save{'s' * (saves != 1)} at {1e3 * save_s:.0f} ms, a sample from {samples} of them at "
            f"{sample_s:.2f} s, Python's start {start_s:.1f} s and the data and model built in {build_s:.1f} s; "
            "the machine is shared, and the run's own pace replaces this once it goes")
    return {'seconds': total, 'step_s': step_s, 'eval_s': eval_s, 'save_s': save_s, 'sample_s': sample_s,
            'start_s': start_s, 'build_s': build_s, 'evals': evals, 'saves': saves, 'samples': samples,
            'text': text}


@functools.lru_cache(maxsize=1)
def python_start():
    """Seconds a new Python takes to start and import what train.py imports (the numpy engine
    included), timed once per process: the part of a run before train.py builds anything."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    t = time.perf_counter()
    subprocess.run([sys.executable, '-c', 'import microgpt.programs.train, backprop, inference'], env=env,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    return time.perf_counter() - t


def time_steps(trainer, data, settings):
    """Seconds per step: the fastest way's mean over a few steps after an untimed one (or that
    one, if it alone took PROBE_SECONDS: the scalar engine on a large batch)."""
    lr = lambda step: learning_rate(settings.lr, step - 1, settings.steps)  # noqa: E731
    t = time.perf_counter()
    trainer.step(data.batch(1), lr(1))
    if time.perf_counter() - t >= PROBE_SECONDS:
        return time.perf_counter() - t
    ways = [1]
    if settings.engine == 'numpy' and settings.batch_size > 1:
        from microgpt.backprop.threads import cores
        ways.append(cores())  # the batch split over every core (backprop/parallel.py), if there are several
    best, step = None, 2
    for workers in ways:
        if hasattr(trainer, 'use_workers'):
            trainer.use_workers(workers)
        times, start = [], time.perf_counter()
        while len(times) < PROBE_STEPS and (len(times) < 2 or time.perf_counter() - start < PROBE_SECONDS):
            t = time.perf_counter()
            trainer.step(data.batch(step), lr(step))
            times.append(time.perf_counter() - t)
            step += 1
        mean = sum(times) / len(times)
        best = mean if best is None else min(best, mean)
    if hasattr(trainer, 'use_workers'):
        trainer.use_workers(1)  # its threads end with it
    return best


def time_evaluation(trainer, data):
    """Seconds one evaluation of train.py takes (the validation loss and the training loss on as
    many tokens), timed on a part of each and scaled; None without held-out data."""
    text = isinstance(data, train.RunningText)
    parts = [data.val_windows, data.train_sample] if text else [data.val_docs, data.train_sample]
    if not parts[0]:
        return None
    cut = [part[:min(len(part), max(EVAL_LEAST, len(part) // EVAL_PART))] for part in parts]
    t = time.perf_counter()
    train.validation_losses(trainer, cut, windows=text)  # on every core, as the run's (threads: its default)
    return (time.perf_counter() - t) * sum(map(len, parts)) / sum(map(len, cut))


def count_due(steps, every):
    """How many of steps 1..steps train.py evaluates (or saves) at: every `every`-th, and the last."""
    return (steps // every + (steps % every != 0)) if every else 1


def duration(seconds):
    """Seconds as a person says them: 45 s, 3 min 10 s."""
    seconds = round(seconds)
    return f"{seconds} s" if seconds < 60 else f"{seconds // 60} min {seconds % 60:02d} s"


def trial_steps(params):
    """How many first steps of a run train.py's numpy engine spends trying the ways to use the
    cores (backprop/threads.py's Trial, at most three ways), some of them slower than the one it
    keeps; 0 on the scalar engine."""
    if params.get('engine') != 'numpy':
        return 0
    from microgpt.backprop.threads import Trial
    return Trial.RUN * Trial.ROUNDS * 3


class Pace:
    """A run's own pace, from its log records as the server reads them."""

    def __init__(self, params, probed=None):
        self.steps, self.eval_every = params['steps'], params.get('eval_every', 0)
        self.trial = trial_steps(params)  # its first steps, which try ways to use the cores: not its pace
        self.probed = probed      # probe()'s dict for these settings, or None
        self.last = None          # (time read, step) of the latest step record
        self.marks = collections.deque()  # (time read, step, seconds evaluated so far), the last WINDOW s
        self.read_at = None       # when the log was last read
        self.step_read = {}       # evaluated step -> when its step record was read
        self.evaluations = []     # (step, seconds) of each evaluation timed
        self.evaluated = set()

    def see(self, now, records):
        """Stamp the records just read (any page's: each step counts once) with `now`."""
        heap = self.read_at is None or now - self.read_at > GAP
        self.read_at = now
        for r in records:
            step = r.get('step')
            if 'loss' in r and (self.last is None or step > self.last[1]):
                self.last = (now, step)
                if self._evaluates(step):
                    self.step_read[step] = now
            elif 'val_loss' in r and step not in self.evaluated:
                self.evaluated.add(step)
                if not heap and step in self.step_read:
                    self.evaluations.append((step, now - self.step_read[step]))
        if self.last is not None and self.last[1] > self.trial and (not self.marks or self.last[1] > self.marks[-1][1]):
            self.marks.append((*self.last, sum(s for _, s in self.evaluations)))
            while len(self.marks) > 2 and now - self.marks[1][0] >= WINDOW:
                self.marks.popleft()  # the oldest kept is the last one at least WINDOW s old

    def _evaluates(self, step):
        return step == self.steps or bool(self.eval_every and step % self.eval_every == 0)

    def estimate(self):
        """{'left': seconds, 'text'}: the time left by the run's pace (the probe's before it has
        one), or None before anything is known."""
        probed, said = self.probed, []
        step_s = eval_s = None
        if len(self.marks) > 1 and self.marks[-1][0] > self.marks[0][0]:
            (t0, step0, evaluated0), (t1, step1, evaluated1) = self.marks[0], self.marks[-1]
            step_s = max(t1 - t0 - (evaluated1 - evaluated0), 0) / (step1 - step0)
            said.append(f"this run's {1e3 * step_s:.1f} ms a step (its last {t1 - t0:.0f} s)")
        elif probed is not None:
            step_s = probed['step_s']
            said.append(f"the probe's {1e3 * step_s:.1f} ms a step")
        if step_s is None:
            return None
        done = self.last[1] if self.last is not None else 0
        evals_left = max(count_due(self.steps, self.eval_every) - len(self.evaluated), 0)
        if self.evaluations:
            eval_s = sum(s for _, s in self.evaluations) / len(self.evaluations)
            said.append(f"this run's {eval_s:.2f} s an evaluation")
        elif probed is not None and probed['eval_s'] is not None:
            eval_s = probed['eval_s']
            said.append(f"the probe's {eval_s:.2f} s an evaluation")
        elif evals_left:
            said.append("its evaluations not yet timed")
        left = (self.steps - done) * step_s + evals_left * (eval_s or 0)
        return {'left': left, 'text': f"about {duration(left)} left, at {', '.join(said)}"}
