"""
BLAS threads for the numpy engine: chosen by measuring, not left to chance.

Every matrix product of a training step runs in OpenBLAS, numpy's matrix library, which by
default starts one thread per core. That pays off for wide matrices on an idle machine; for
the small matrices of a names model, or when other programs keep the cores busy, the extra
threads spin waiting for each other and a step can take several times longer (on the 2-core
machine this project is developed on, 400 names steps took 30.4 s with the default threads
under load and 7.7 s with one). So train.py's numpy engine decides:

  * --threads N, or OPENBLAS_NUM_THREADS / OMP_NUM_THREADS in the environment: the user's count;
  * otherwise the run's first steps are its measurement (`Trial`): they are trained three
    ways in turn, timed: one thread; every core for BLAS; and the batch split into one part per
    core, each part in its own Python thread with one BLAS thread (parallel.py: that uses the
    cores for the elementwise work too, which BLAS threads never do). From then on the run keeps
    the fastest (the median of each; a tie goes to one thread, which leaves a core to everything
    else). Timing real steps costs the run only the slower ways' few steps and at most three
    pauses of SPIN, and the first step starts at once (timing passes of their own before it
    took 3.2 s of the Shakespeare recipe's start on an AMD EPYC).

The count is set through threadpoolctl, which finds the BLAS library numpy loaded (OpenBLAS
in numpy's wheels, MKL or BLIS elsewhere). Where it finds none, nothing is changed and the
resolved config line says so. Generating (sample.py, the lab) simply takes one thread, unless the
user chose: its products are one position wide (for_generation).
"""

import contextlib
import functools
import os
import statistics
import time

import numpy as np
from threadpoolctl import ThreadpoolController


# OpenBLAS's threads keep spinning for about 0.1 s after their last product (2^28 cycles, its
# THREAD_TIMEOUT), on the cores the next way would use: the way after them waits this long
SPIN = 0.15


@functools.cache
def _blas():
    """The BLAS libraries numpy loaded, as threadpoolctl's controller, or None where it finds
    none (looked for once: each evaluation and each way the trial tries sets the threads)."""
    np.ones((2, 2)) @ np.ones((2, 2))  # make sure the library is loaded
    blas = ThreadpoolController().select(user_api='blas')
    return blas if blas.lib_controllers else None


def set_threads(n):
    """Set the BLAS thread count to n; False if this numpy's BLAS cannot be told."""
    blas = _blas()
    if blas is None:
        return False
    blas.limit(limits=n)
    return True


def get_threads():
    """The BLAS thread count now, or None where threadpoolctl finds no BLAS."""
    blas = _blas()
    return blas.info()[0]['num_threads'] if blas else None


@contextlib.contextmanager
def blas_threads(n):
    """BLAS at n threads inside the `with`, and as it was after (unchanged where this numpy's
    BLAS cannot be told): for work that spreads itself over Python threads."""
    before = get_threads()
    set_threads(n)
    try:
        yield
    finally:
        if before is not None:
            set_threads(before)


def for_generation():
    """One BLAS thread for sampling and the lab, unless the user chose a count in the
    environment: a generated token's products are one row, too small to share, and a thread
    per core waits on every core, a busy one too (bench/sampling_speed.py)."""
    if user_threads()[0] is None:
        set_threads(1)


def cores():
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def user_threads(requested=None):
    """(count, where it came from) if the user chose the threads, else (None, None)."""
    if requested is not None:
        return requested, '--threads'
    for name in ('OPENBLAS_NUM_THREADS', 'OMP_NUM_THREADS'):
        value = os.environ.get(name, '').strip()
        if value.isdigit() and int(value) > 0:
            return int(value), name
    return None, None


def choose_threads(trainer, batch_size, requested=None):
    """Set the BLAS threads the user asked for and return (trainer, what to print): the trainer
    itself, or a Trial that measures the ways to use the cores on the run's first steps.

    The text is what train.py prints in its resolved config, e.g. '1 (OPENBLAS_NUM_THREADS)' or
    'timed on the first 27 steps: 1 thread, 2 threads, 2 workers'.
    """
    n, source = user_threads(requested)
    if _blas() is None:
        return trainer, (f"{n} ({source})" if n else "as the BLAS library chooses (threadpoolctl finds none to set)")
    set_to = set_threads
    if n:
        set_to(n)
        trainer.use_workers(1)
        return trainer, f"{n} ({source})"
    most = cores()
    if most == 1:
        set_to(1)
        return trainer, "1 (one core)"
    ways = {'1 thread': lambda: (set_to(1), trainer.use_workers(1)),
            f'{most} threads': lambda: (set_to(most), trainer.use_workers(1))}
    if batch_size > 1:  # one name: nothing to split
        ways[f'{most} workers'] = lambda: (set_to(1), trainer.use_workers(most))
    trial = Trial(trainer, ways)
    return trial, f"timed on the first {len(trial.schedule)} steps: {', '.join(trial.ways)}"


class Trial:
    """The numpy trainer, trying each way to use the cores on the run's first steps, then
    keeping the fastest. It is the trainer to the loop (every method but step is the trainer's),
    and each step is a real one: only the thread counts change, and with them the order in
    which the numbers are added (float64 losses to 1e-12, tests/test_backprop_parallel.py).

    The ways take turns in runs of RUN steps, ROUNDS times, so that a change of load hits all
    alike. Only a run's last RUN - 1 steps are timed: its first finds the caches full of the
    previous way's arrays (on the recipe's model that made the split look 10% slower than one
    thread). After the BLAS threads' way the next waits SPIN, for those threads to stop.
    """
    RUN, ROUNDS = 3, 3

    def __init__(self, trainer, ways):
        self.trainer, self.ways = trainer, ways
        self.schedule = [way for _ in range(self.ROUNDS) for way in ways for _ in range(self.RUN)]
        self.times = {way: [] for way in ways}
        self.steps = 0
        self.chosen = None  # the line to print once the trial has decided, until news() says it

    def __getattr__(self, name):  # weights(), optimizer_state(), config, ... are the trainer's
        return getattr(self.trainer, name)

    def news(self):
        """The way chosen, once the trial has decided (said once), else None."""
        news, self.chosen = self.chosen, None
        return news

    def step(self, batch, lr, masks=None):
        if self.steps >= len(self.schedule):
            return self.trainer.step(batch, lr, masks)
        way, first = self.schedule[self.steps], self.steps % self.RUN == 0
        if first:
            if self.steps and self.schedule[self.steps - 1].endswith(' threads'):
                time.sleep(SPIN)
            self.ways[way]()
        t0 = time.perf_counter()
        loss = self.trainer.step(batch, lr, masks)
        if not first:
            self.times[way].append(time.perf_counter() - t0)
        self.steps += 1
        if self.steps == len(self.schedule):
            self.chosen = self.choose()
        return loss

    def choose(self):
        """Keep the fastest way; the line that says so."""
        median = {way: statistics.median(t) for way, t in self.times.items()}
        best = min(median, key=lambda way: (median[way], way != '1 thread'))  # a tie keeps one thread
        self.ways[best]()
        measured = ', '.join(f"{way} {1e3 * median[way]:.1f} ms/step" for way in median)
        chosen = f"1 in each of {best.split()[0]} workers" if best.endswith('workers') else best.split()[0]
        return f"threads: {chosen} from step {self.steps + 1} (measured: {measured})"
