"""
The web lab's computing processes: the sandboxes' arithmetic runs here, not in the server.

serve.py answers each connection in a thread, and Python runs one thread of a process at a
time (its interpreter lock). With the computing done in those threads too, a burst of 200
requests for attention kept the thread that accepts connections waiting, and a page loaded
during the burst arrived after most of it had been computed: 0.55 to 1.16 s on the 2-core
machine (tests/test_lab_burst.py prints it). So api.Lab hands each sandbox's computation to a
Pool of WORKERS processes, each with its own interpreter: the server's threads only read
requests and write answers (the same page load: 0.31 to 0.44 s over six runs), and two
computations really run at once on two cores.

What crosses between the processes is plain data: going in, the sandbox's name, the
checkpoint's path and the request's parameters, already checked; coming back, the JSON-ready
answer, or the one-line error to send. `answer` is what runs in a worker, and also in the
server itself for a Pool of 0 workers (a test's made-up sandbox lives in the test's process).

Each process keeps the models it has read (Models; a file changed on disk since is read
afresh), so the next request for the same checkpoint starts computing at once: the Step
page's GPT of Values (200,000 of them at n_layer 4, n_embd 64: 0.7 s to build) is built once,
and its weights put back before each step. A worker ignores Ctrl-C and a closed terminal (the
server stops the pool as it stops), and exits by itself if the server dies without stopping it.
"""

import collections
import concurrent.futures
import contextlib
import importlib
import importlib.util
import math
import multiprocessing
import os
import signal
import threading
import time

import numpy as np

from ..engine import zero_grad
from ..edge.errors import UserError
from ..edge.limits import parameter_count
from ..programs.run import log_path_for
from . import registry
from .loading import load, no_overflow

WORKERS = 2       # processes computing: this machine's 2 cores (serve.BUSY_SLOTS requests at once)
KEEP_MODELS = 4   # models each process keeps read: the start checkpoint, and the latest runs'


class ApiError(Exception):
    """A request the API refuses, with the HTTP status to answer and a one-line message;
    retry_after: the seconds a 503 tells the client to wait before it asks again."""

    def __init__(self, status, message, retry_after=None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


# ---------------------------------------------------------------------------- the models a process has read
class Models:
    """Checkpoints read once and kept, as loading.Loaded (the record and its model), by (kind,
    path, n_head): kind 'numpy' is the numpy port, 'scalar' microgpt's own GPT of Values
    (compute may change its weights, so `get` puts the file's back, and zeroes the gradients,
    before handing it out)."""

    def __init__(self, keep=KEEP_MODELS):
        self.keep = keep
        self.lock = threading.Lock()
        self.kept = collections.OrderedDict()  # key -> (the file's mtime and size, Loaded)

    def get(self, kind, path, n_head=None):
        try:
            st = os.stat(path)
        except OSError:
            raise ApiError(404, "this checkpoint no longer exists on the server: pick another") from None
        key, stamp = (kind, path, n_head), (st.st_mtime_ns, st.st_size)
        with self.lock:
            kept = self.kept.get(key)
            if kept is not None and kept[0] == stamp:
                self.kept.move_to_end(key)
        if kept is None or kept[0] != stamp:
            loaded = load(path, kind, n_head)
            kept = (stamp, loaded)
            with self.lock:
                self.kept[key] = kept
                while len(self.kept) > self.keep:
                    self.kept.popitem(last=False)
        _, loaded = kept
        if kind == 'scalar':  # as the file has it (the record's), whatever the last step did to it
            loaded.model.load_weights(loaded.ckpt.weights)
            zero_grad(loaded.model.params)
        return loaded


MODELS = Models()  # this process's


# ---------------------------------------------------------------------------- one computation
def answer(name, path, n_head, params):
    """The sandbox's compute() on the model it looks at (by path: a checkpoint, or its training
    log), as ('ok', the dict made JSON-ready) or ('error', HTTP status, message, Retry-After):
    the same in a worker as in the server."""
    try:
        s = registry.get(name)
        module = importlib.import_module(s.module_name)
        if s.model is None:
            return 'ok', public(module.compute(**params))
        if s.model == 'log':  # path: the checkpoints whose logs are drawn (api.Lab.sandbox)
            return 'ok', public(module.compute([log_path_for(p) for p in path], **params))
        ckpt, model = MODELS.get(s.model, path, n_head)
        registry.check_against_model(s, params, model.config, spell=lambda p: repr(p.name))
        # the numpy port's arithmetic overflows as one line; the scalar step says so itself
        with no_overflow() if s.model == 'numpy' else contextlib.nullcontext():
            return 'ok', public(module.compute(model, ckpt=ckpt, **params))
    except ApiError as e:
        return 'error', e.status, str(e), e.retry_after
    except UserError as e:  # the lab's own one-line message about what was asked
        return 'error', 400, str(e), None


def estimate_run(flags, name):
    """The Training page's estimate of a run (runtime.probe), as answer() answers: computed here
    because it trains a few steps, which the server's threads must not wait behind."""
    from .runtime import probe
    try:
        return 'ok', public(probe(flags, name))
    except UserError as e:  # train.py would refuse the run the same way (too large for memory, ...)
        return 'error', 400, str(e), None


# ---------------------------------------------------------------------------- the answer, JSON-ready
def jsonable(x):
    """numpy arrays and numbers as plain lists and floats; NaN and infinities become null
    (JSON has no NaN: a masked attention cell is null, "no weight", never 0)."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(x) else None
    return x


def public(data):
    """A compute() dict as the API sends it: JSON-ready, without its terminal-only '_' keys."""
    return jsonable({k: v for k, v in data.items() if not str(k).startswith('_')})


# ---------------------------------------------------------------------------- the pool
class Pool:
    """`compute(name, path, n_head, params)` in one of `workers` processes, started when first
    asked; 0 workers: in the calling process. A worker that dies (out of memory, killed) is
    replaced by a fresh pool for the next request."""

    def __init__(self, workers=WORKERS):
        self.workers = workers
        self.lock = threading.Lock()
        self.executor = None

    def start(self):
        """The processes, started (spawned: a fresh interpreter each, on every system)."""
        with self.lock:
            if self.executor is None and self.workers:
                self.executor = concurrent.futures.ProcessPoolExecutor(
                    self.workers, mp_context=multiprocessing.get_context('spawn'),
                    initializer=start_worker, initargs=(os.getpid(),))
            return self.executor

    def warm(self, path, n_head=None):
        """Have each worker prepare what each page's registry entry says (registry.WarmUp: the
        imports, PyTorch too where installed, 1.6 s the first time; the checkpoint read as the
        pages read it), in the background, so that the first click does not wait for it. The
        futures, for a caller that wants to wait."""
        executor = self.start()
        return [executor.submit(warm_up, path, n_head) for _ in range(self.workers)]

    def compute(self, name, path, n_head, params):
        return self.call(answer, name, path, n_head, params)

    def call(self, function, *args):
        """function(*args) in a worker (answer's, or another that returns ('ok', result) or
        ('error', status, message, retry_after)): its result, or its error as an ApiError."""
        executor = self.start()
        if executor is None:
            result = function(*args)
        else:
            try:
                result = executor.submit(function, *args).result()
            except concurrent.futures.process.BrokenProcessPool:
                with self.lock:
                    if self.executor is executor:
                        self.executor = None  # the next request starts a fresh pool
                executor.shutdown(wait=False)
                raise ApiError(500, "the process computing this died (out of memory?): try again, "
                                    "or a smaller input") from None
        if result[0] == 'error':
            raise ApiError(*result[1:])
        return result[1]

    def shutdown(self):
        with self.lock:
            executor, self.executor = self.executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)


def start_worker(server_pid):
    """A worker's first act: leave Ctrl-C and a closed terminal to the server (which stops the
    pool, so the worker ends when its work is done), watch that the server is alive, and take
    one BLAS thread (unless OPENBLAS_NUM_THREADS says otherwise): WORKERS processes already share
    the cores, and OpenBLAS's default of a thread per core in each of them leaves threads
    spinning while they wait for each other (backprop/threads.py: as in training, on a busy
    machine, several times slower)."""
    for name in ('SIGINT', 'SIGHUP'):
        if hasattr(signal, name):  # Windows has no SIGHUP
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    from microgpt.backprop.threads import for_generation
    for_generation()
    threading.Thread(target=exit_with, args=(server_pid,), daemon=True).start()


def exit_with(server_pid, every=1.0):
    """End this worker once the server is gone (killed: nobody stops the pool); its parent
    becomes another process then, on every system that has os.getppid."""
    while os.getppid() == server_pid:
        time.sleep(every)
    os._exit(0)


def warm_up(path, n_head):
    """Pool.warm's work in one worker: what each page's registry entry says to prepare
    (registry.WarmUp), in the navigation's order."""
    for s in registry.SANDBOXES:
        if not s.page:
            continue
        try:
            prepare(s, path, n_head)
        except (ApiError, UserError, OSError):  # the page's own request will say what is wrong
            pass


def prepare(s, path, n_head):
    """Sandbox s's WarmUp: its module, more modules where installed, its model, then its own."""
    w = s.warm_up
    module = importlib.import_module(s.module_name)
    for name in w.imports:
        if importlib.util.find_spec(name) is None:
            break  # an optional extra not installed (PyTorch): nor what comes after, which needs it
        importlib.import_module(name)
    if not s.reads_a_checkpoint:
        return
    loaded = MODELS.get('numpy', path, n_head)  # read once for every page: its config says the size
    if w.model_at_most is not None and parameter_count(loaded.model.config) > w.model_at_most:
        return
    loaded = MODELS.get(s.model, path, n_head)
    if w.then:
        getattr(module, w.then)(loaded.ckpt)
