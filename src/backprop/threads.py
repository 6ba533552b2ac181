"""
BLAS threads for the numpy engine: chosen by measuring, not left to chance.

Every matrix product of a training step runs in OpenBLAS, numpy's matrix library, which by
default starts one thread per core. That pays off for wide matrices on an idle machine; for
the small matrices of a names model, or when other programs keep the cores busy, the extra
threads spin waiting for each other and a step can take several times longer (on the 2-core
machine this project is developed on, 400 names steps took 30.4 s with the default threads
under load and 7.7 s with one). So train.py's numpy engine decides:

  * --threads N, or OPENBLAS_NUM_THREADS / OMP_NUM_THREADS in the environment: the user's count;
  * otherwise `choose_threads` times a few forward-and-backward passes of the run's own model
    on its first batch three ways, interleaved: one thread; every core for BLAS; and the batch
    split into one part per core, each part in its own Python thread with one BLAS thread
    (parallel.py: that uses the cores for the elementwise work too, which BLAS threads never do).
    It keeps the fastest (the median of each; a tie goes to one thread, which leaves a core to
    everything else).

The count is set through OpenBLAS's own openblas_set_num_threads, found in the library numpy
loaded (its name differs between builds: scipy-openblas in numpy's wheels, plain OpenBLAS in
a distribution's numpy). Where it cannot be found (another BLAS), nothing is changed and the
resolved config line says so.
"""

import ctypes
import os
import statistics
import time

import numpy as np


# OpenBLAS's threads keep spinning for about 0.1 s after their last product (2^28 cycles, its
# THREAD_TIMEOUT), on the cores the next pass would use: the passes are this far apart
SPIN = 0.15

# openblas_set_num_threads under the names the builds of OpenBLAS that numpy ships with use
SETTERS = ('scipy_openblas_set_num_threads64_', 'scipy_openblas_set_num_threads',
           'openblas_set_num_threads64_', 'openblas_set_num_threads')
GETTERS = ('scipy_openblas_get_num_threads64_', 'scipy_openblas_get_num_threads',
           'openblas_get_num_threads64_', 'openblas_get_num_threads')


def _openblas():
    """(set, get) functions of the OpenBLAS numpy loaded, or None."""
    np.ones((2, 2)) @ np.ones((2, 2))  # make sure the library is loaded
    try:
        with open('/proc/self/maps') as f:
            paths = {line.split()[-1] for line in f if 'openblas' in line.lower() and '/' in line}
    except OSError:  # not Linux: look in the process itself (a static or already-loaded build)
        paths = {None}
    for path in sorted(paths, key=str):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        setter = next((getattr(lib, n) for n in SETTERS if hasattr(lib, n)), None)
        getter = next((getattr(lib, n) for n in GETTERS if hasattr(lib, n)), None)
        if setter is not None and getter is not None:
            setter.argtypes, getter.restype = [ctypes.c_int], ctypes.c_int
            return setter, getter
    return None


def set_threads(n):
    """Set OpenBLAS's thread count to n; False if this numpy's BLAS cannot be told."""
    blas = _openblas()
    if blas is None:
        return False
    blas[0](n)
    return True


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


def time_passes(trainer, batch, ways, repeats):
    """Seconds of each of `repeats` forward-and-backward passes each way, interleaved (1, 2, 3,
    1, 2, 3, ...) so that a change of load hits all alike. ways: {name: function that sets it up}.
    Each timed pass follows an untimed one the same way, as in training, where every pass
    follows one like it: a pass right after another way's would find the caches full of that
    way's arrays (on the recipe's model that made the split look 10% slower than one thread)."""
    times = {name: [] for name in ways}
    for _ in range(repeats):
        for name, set_up in ways.items():
            set_up()
            trainer.gradient(batch)
            t0 = time.perf_counter()
            trainer.gradient(batch)
            times[name].append(time.perf_counter() - t0)
            time.sleep(SPIN)
    return times


def choose_threads(trainer, batch, requested=None, repeats=5):
    """Set and describe the BLAS threads (and the trainer's workers) for training `trainer` on
    batches like `batch`.

    Returns the text train.py prints in its resolved config, e.g. '1 in each of 2 workers
    (measured: 1 thread 27 ms/pass, 2 threads 27 ms/pass, 2 workers 15 ms/pass)' or
    '1 (OPENBLAS_NUM_THREADS)'; it starts with the BLAS thread count now set.
    """
    n, source = user_threads(requested)
    blas = _openblas()
    if blas is None:
        return f"{n} ({source})" if n else "as the BLAS library chooses (not OpenBLAS: cannot set it)"
    set_to, _ = blas
    if n:
        set_to(n)
        trainer.use_workers(1)
        return f"{n} ({source})"
    most = cores()
    if most == 1:
        set_to(1)
        return "1 (one core)"
    ways = {'1 thread': lambda: (set_to(1), trainer.use_workers(1)),
            f'{most} threads': lambda: (set_to(most), trainer.use_workers(1)),
            f'{most} workers': lambda: (set_to(1), trainer.use_workers(most))}
    if len(batch) < 2:
        del ways[f'{most} workers']  # one name: nothing to split
    for set_up in ways.values():  # warm up: first-touch allocations, the workers' threads
        set_up()
        trainer.gradient(batch)
    times = time_passes(trainer, batch, ways, repeats)
    median = {k: statistics.median(v) for k, v in times.items()}
    best = min(median, key=lambda k: (median[k], k != '1 thread'))  # a tie keeps one thread
    ways[best]()
    measured = ', '.join(f"{k} {1e3 * median[k]:.1f} ms/pass" for k in median)
    chosen = f"1 in each of {most} workers" if best.endswith('workers') else best.split()[0]
    return f"{chosen} (measured: {measured})"
