"""
Training runs started from the web lab's Training page: train.py in a subprocess, one at a time.

    runs = RunManager('out/lab-runs', checkpoints)
    runs.start({'steps': 300, 'n_embd': 16})   # out/lab-runs/1/model.json
    runs.status(offset=0)   # new log lines since byte `offset`, a few sampled names, the state
    runs.stop()             # SIGINT: exactly Ctrl-C, so train.py saves the last whole step

The run is the learner's own `python train.py --out ...`, so the page watches the very program
the terminal runs. Progress comes from the JSON-lines log train.py writes beside the checkpoint
({"step", "loss", "lr"} per step, {"step", "val_loss"} per evaluation), read from where the
page last stopped reading. train.py saves the checkpoint every tenth of the run; each time
it changes, a few names are sampled from it with microgpt.sampling, so the page can watch the
names improve. When the run ends (finished, or stopped with Stop) its checkpoint is added to
the server's list, and the other pages can open it by its id, `run<n>`.

RunProcess is one such subprocess, RunManager the page's one-at-a-time keeper of them (named
apart from microgpt/run.py's Run, the training loop's own bookkeeping, and backprop's Trainer).
The request never names a path: every run writes to a new numbered folder inside the runs
folder given when the server started.
"""

import json
import os
import signal
import subprocess
import sys
import threading

from ..checkpoint import read_checkpoint
from ..errors import UserError
from ..run import log_path_for
from ..sampling import sample_names
from ..tokenizer import CharTokenizer
from . import loss
from .api import ApiError, field

# The package's parent folder: where `python -m microgpt.train` finds microgpt/ (and, in a source
# checkout, src/ beside it) whether or not the project is installed.
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# What the page may ask for: (low, high, default). Ranges a learner's laptop trains in minutes.
LIMITS = {
    'steps': (1, 20_000, 300),
    'n_layer': (1, 4, 1),
    'n_embd': (2, 64, 16),       # must divide by n_head
    'n_head': (1, 8, 4),
    'block_size': (2, 32, 16),
    'batch_size': (1, 256, 1),   # names per step; more than one is the numpy engine's strength
}
ENGINES = ('scalar', 'numpy')    # train.py --engine: the Value graph, or src/backprop's arrays
LR_LIMITS = (1e-5, 1.0, 0.01)
NUM_SAMPLES = 5                  # names shown after each save
READ_LIMIT = 1 << 18             # bytes of log returned per status call; the page asks again


class RunProcess:
    """One subprocess of train.py and what the page has been told about it."""

    def __init__(self, number, folder, params, proc, output):
        self.number, self.folder, self.params = number, folder, params
        self.proc, self.output = proc, output
        self.out = os.path.join(folder, 'model.json')
        self.log = log_path_for(self.out)  # where train.py writes the log beside its checkpoint
        self.state = 'running'   # -> stopping -> finished / stopped / failed
        self.stop_sent = False   # Stop was pressed (a SIGINT sent)
        self.exit_code = None
        self.ckpt_id = None      # set once the finished run's checkpoint is listed
        self.samples = []        # [{'step', 'names'}], one per checkpoint save
        self.sampled_mtime = None
        self.waiter = None       # the thread that waits for the process to end


class RunManager:
    """The Training page's runs: starts one at a time, reports on it, stops it, and at the
    server's end stops the one still going."""

    def __init__(self, runs_dir, checkpoints, data=None):
        self.runs_dir = os.path.abspath(runs_dir)
        self.checkpoints = checkpoints
        self.data = None if data is None else os.path.abspath(data)
        self.lock = threading.Lock()
        self.run = None

    def options(self):
        """What the Training page offers: whether train.py is here, the engines, the limits."""
        return {'available': True, 'engines': list(ENGINES),
                'limits': {**LIMITS, 'lr': LR_LIMITS}}

    def params(self, body):
        """The run's settings from the request, each range-checked; train.py's flags for them."""
        p = {name: field(body, name, int, default, low, high) for name, (low, high, default) in LIMITS.items()}
        p['lr'] = field(body, 'lr', float, LR_LIMITS[2], LR_LIMITS[0], LR_LIMITS[1])
        if p['n_embd'] % p['n_head']:
            raise ApiError(400, f"n_embd {p['n_embd']} does not divide by n_head {p['n_head']}")
        p['engine'] = field(body, 'engine', str, 'scalar')
        if p['engine'] not in ENGINES:
            raise ApiError(400, f"engine {p['engine']!r:.40} is unknown: choose from {', '.join(ENGINES)}")
        flags = ['--steps', p['steps'], '--n-layer', p['n_layer'], '--n-embd', p['n_embd'],
                 '--n-head', p['n_head'], '--block-size', p['block_size'], '--lr', p['lr'],
                 '--eval-every', max(1, p['steps'] // 10), '--save-every', max(1, p['steps'] // 10),
                 '--num-samples', 0, '--engine', p['engine'], '--batch-size', p['batch_size']]
        return p, [str(f) for f in flags]

    def start(self, body):
        params, flags = self.params(body)
        with self.lock:
            if self.run is not None and self.run.state in ('running', 'stopping'):
                raise ApiError(409, f"run {self.run.number} is still going: stop it or wait, one run at a time")
            try:
                number = self._next_number()
                folder = os.path.join(self.runs_dir, str(number))
                os.makedirs(folder)
                output = open(os.path.join(folder, 'train.txt'), 'w', encoding='utf-8')
            except OSError as e:  # the server's --runs-dir, not the request, is at fault
                raise ApiError(500, f"cannot make a run folder in {self.runs_dir}: {e.strerror}: "
                                    "start the server with another --runs-dir") from None
            argv = [sys.executable, '-m', 'microgpt.train', '--out', os.path.join(folder, 'model.json'), *flags]
            if self.data:
                argv += ['--data', self.data]
            env = dict(os.environ)
            # microgpt/ and, in a source checkout, `inference` in src/: found even when the project
            # is not installed (installed, they are on the path already)
            env['PYTHONPATH'] = os.pathsep.join(filter(None, [PACKAGE_PARENT, os.path.join(PACKAGE_PARENT, 'src'),
                                                              env.get('PYTHONPATH')]))
            # its own session: a Ctrl-C in the server's terminal reaches the server only, which
            # then sends the run exactly one SIGINT (a second one would make train.py quit at once)
            try:
                proc = subprocess.Popen(argv, cwd=folder, env=env, stdin=subprocess.DEVNULL,
                                        stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
            except OSError:
                output.close()
                raise
            self.run = RunProcess(number, folder, params, proc, output)
            print(f"run {number}: {' '.join(argv[1:])}", flush=True)
            self.run.waiter = threading.Thread(target=self._wait, args=(self.run,), daemon=True)
            self.run.waiter.start()
            return {'run': number, 'params': params, 'state': 'running'}

    def _next_number(self):
        os.makedirs(self.runs_dir, exist_ok=True)
        taken = [int(n) for n in os.listdir(self.runs_dir) if n.isdigit()]
        return max(taken, default=0) + 1

    def _wait(self, run):
        """Wait for train.py to end; list its checkpoint if it saved one (finished or stopped)."""
        code = run.proc.wait()
        run.output.close()
        label = f"run {run.number}: {run.params['steps']} steps"
        saved = code in (0, 130) and os.path.exists(run.out)
        if saved:
            self.checkpoints.add(f'run{run.number}', run.out,
                                 label + ('' if code == 0 else ' (stopped early)'))
        with self.lock:
            run.exit_code = code
            run.ckpt_id = f'run{run.number}' if saved else None
            run.state = {0: 'finished', 130: 'stopped'}.get(code, 'failed')
            if run.state == 'failed' and run.stop_sent:
                # Stop came while Python was still starting, before train.py could catch
                # Ctrl-C: it quits with a traceback, but the learner asked for exactly that
                run.state = 'stopped'
        print(f"run {run.number} {run.state} (exit status {code}): {run.out}", flush=True)

    def stop(self):
        with self.lock:
            run = self.run
            if run is None or run.state != 'running':
                raise ApiError(409, "no run is going")
            run.state = 'stopping'
            run.stop_sent = True
            run.proc.send_signal(signal.SIGINT)  # train.py's Ctrl-C: save the last whole step, exit 130
            return {'run': run.number, 'state': run.state}

    def status(self, offset):
        """The run's state, log records after byte `offset` (whole lines) and the samples."""
        with self.lock:
            run = self.run
            if run is None:
                return {'state': 'idle', 'records': [], 'offset': 0, 'smooth': [], 'samples': []}
            state, code, ckpt_id = run.state, run.exit_code, run.ckpt_id
        records, offset = read_records(run.log, offset)
        self._sample(run)
        return {'run': run.number, 'params': run.params, 'state': state, 'exit_code': code,
                'records': records, 'offset': offset, 'smooth': smoothed(run, records),
                'samples': list(run.samples),
                'ckpt': ckpt_id, 'error': last_error(run) if state == 'failed' else None}

    def _sample(self, run):
        """Sample a few names from the run's checkpoint whenever it has been saved anew."""
        try:
            mtime = os.stat(run.out).st_mtime_ns
        except OSError:
            return  # not saved yet
        with self.lock:
            if mtime == run.sampled_mtime:
                return
            run.sampled_mtime = mtime
        import inference
        try:
            ckpt = read_checkpoint(run.out)  # also gives the step it was saved at
            model = inference.NumpyGPT(ckpt['config'], ckpt['state_dict'],
                                       tokenizer=CharTokenizer(ckpt['vocab']))
            names = sample_names(model, num=NUM_SAMPLES, temperature=0.5, seed=42)
        except UserError:
            return  # a diverged model: the log shows it
        step = (ckpt['train_state'] or {}).get('step')
        with self.lock:
            if not any(s['step'] == step for s in run.samples):
                run.samples.append({'step': step, 'names': names})

    def shutdown(self, timeout=30):
        """Stop a run that is still going (as Ctrl-C would) and wait for it to save.

        The run is in its own session, out of the terminal's reach, so the server never exits
        without passing its stop on: a second Ctrl-C while waiting goes to the run as a second
        SIGINT (train.py then quits at once, its last saved checkpoint whole), and a run that
        has not ended after `timeout` seconds is killed.
        """
        with self.lock:
            run = self.run
        if run is None:
            return
        if run.proc.poll() is None:
            if run.state == 'running':
                run.proc.send_signal(signal.SIGINT)
            try:
                run.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                run.proc.kill()
            except KeyboardInterrupt:
                run.proc.send_signal(signal.SIGINT)
                raise
        run.waiter.join(timeout)  # the run's last line is printed before the server's


def read_records(path, offset):
    """The JSON records of whole lines in `path` from byte `offset`, and the offset after them."""
    try:
        with open(path, 'rb') as f:
            f.seek(offset)
            chunk = f.read(READ_LIMIT)
    except OSError:
        return [], offset
    end = chunk.rfind(b'\n') + 1  # a line still being written waits for the next call
    records = []
    for line in chunk[:end].splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            pass
    return records, offset + end


def smoothed(run, records):
    """For each training record in `records`: the running mean that `lab loss` draws, over
    lab.loss.smoothing_window(steps) steps of the whole log so far. [[step, mean], ...]"""
    steps = {r['step'] for r in records if 'loss' in r}
    if not steps:
        return []
    try:
        train, _ = loss.read_log(run.log)  # the log is small: one short line per step
    except UserError:
        return []
    means = loss.running_mean([l for _, l, _ in train], loss.smoothing_window(run.params['steps']))
    return [[s, m] for (s, _, _), m in zip(train, means) if s in steps]


def last_error(run):
    """The last `error: ...` line train.py printed, or its last line."""
    try:
        with open(os.path.join(run.folder, 'train.txt'), encoding='utf-8', errors='replace') as f:
            lines = [l.strip() for l in f if l.strip()]
    except OSError:
        return None
    errors = [l for l in lines if l.startswith('error:')]
    return (errors or lines or [f"train.py exited with status {run.exit_code}"])[-1]
