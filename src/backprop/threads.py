"""
BLAS threads for the numpy engine: chosen by measuring, not left to chance.

OpenBLAS starts a thread per core. That pays for wide matrices on an idle machine; for a names
model's small ones, or beside busy cores, the threads spin waiting for each other (on the 2-core
machine, 400 names steps: 30.4 s with the default threads under load, 7.7 s with one). So the
user's count is taken (--threads, OPENBLAS_NUM_THREADS, OMP_NUM_THREADS), or else the run's own
first steps are timed three ways (`Trial`: one thread; every core for BLAS; the batch split over
the cores, one BLAS thread each, parallel.py) and the fastest kept. threadpoolctl sets the count.
"""

import contextlib
import functools
import os
import statistics
import time

import numpy as np
from threadpoolctl import ThreadpoolController

SPIN = 0.15  # OpenBLAS's threads spin ~0.1 s after their last product (its THREAD_TIMEOUT): the next way waits


@functools.cache
def _blas():
    """threadpoolctl's controller of numpy's BLAS, or None where it finds none (nothing is set)."""
    np.ones((2, 2)) @ np.ones((2, 2))  # make sure the library is loaded
    blas = ThreadpoolController().select(user_api='blas')
    return blas if blas.lib_controllers else None


def set_threads(n):  # nothing where this numpy's BLAS cannot be told
    if _blas() is not None:
        _blas().limit(limits=n)


def get_threads():  # the BLAS thread count now, or None where threadpoolctl finds no BLAS
    return _blas().info()[0]['num_threads'] if _blas() else None


def blas_threads(n):
    """BLAS at n threads inside the `with` (work spread over Python threads), as it was after."""
    return _blas().limit(limits=n) if _blas() else contextlib.nullcontext()


def for_generation():
    """One BLAS thread for sampling and the lab (a token's products are one row, too small to
    share: bench/sampling_speed.py), unless the user chose a count."""
    if user_threads()[0] is None:
        set_threads(1)


def cores():
    """The cores this process may run on (anywhere but Linux, the machine's)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count() or 1


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
    """(the trainer, or a Trial timing the ways on its first steps; what train.py prints of it)."""
    n, source = user_threads(requested)
    if _blas() is None:
        return trainer, (f"{n} ({source})" if n else "as the BLAS library chooses (threadpoolctl finds none to set)")
    most = 1 if n else cores()
    set_threads(n or 1)
    if n or most == 1:
        trainer.use_workers(1)
        return trainer, f"{n} ({source})" if n else "1 (one core)"
    ways = {'1 thread': lambda: (set_threads(1), trainer.use_workers(1)),
            f'{most} threads': lambda: (set_threads(most), trainer.use_workers(1))}
    if batch_size > 1:  # one name: nothing to split
        ways[f'{most} workers'] = lambda: (set_threads(1), trainer.use_workers(most))
    trial = Trial(trainer, ways)
    return trial, f"timed on the first {len(trial.schedule)} steps: {', '.join(trial.ways)}"


class Trial:
    """The numpy trainer, to the loop, trying each way on the run's first steps (real ones: only
    the order of additions changes) in turns of RUN steps, ROUNDS times, so that a change of load
    hits all alike, then keeping the fastest. A turn's first step (the last way's arrays in the
    caches) is not timed."""
    RUN, ROUNDS = 3, 3

    def __init__(self, trainer, ways):
        self.trainer, self.ways = trainer, ways
        self.schedule = [way for _ in range(self.ROUNDS) for way in ways for _ in range(self.RUN)]
        self.times = {way: [] for way in ways}
        self.steps, self.chosen = 0, None  # chosen: the line to print once decided, until notice() says it

    def __getattr__(self, name):  # weights(), optimizer_state(), config, ... are the trainer's
        return getattr(self.trainer, name)

    def notice(self):  # the way chosen, once the trial has decided (said once), else None
        notice, self.chosen = self.chosen, None
        return notice

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
        if self.steps == len(self.schedule):  # keep the fastest (a tie keeps one thread, a core left free)
            median = {way: statistics.median(t) for way, t in self.times.items()}
            best = min(median, key=lambda way: (median[way], way != '1 thread'))
            self.ways[best]()
            measured = ', '.join(f"{way} {1e3 * median[way]:.1f} ms/step" for way in median)
            chosen = f"1 in each of {best.split()[0]} workers" if best.endswith('workers') else best.split()[0]
            self.chosen = f"threads: {chosen} from step {self.steps + 1} (measured: {measured})"
        return loss
