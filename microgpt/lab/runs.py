"""
Training runs started from the web lab's Training page: train.py in a subprocess, one at a time.

    runs = RunManager('out/lab-runs', checkpoints)
    runs.start({'steps': 300, 'n_embd': 16})   # out/lab-runs/1/model.json
    runs.status(offset=0)   # new log lines since byte `offset`, the samples, the state, the time left
    runs.stop()             # SIGINT: exactly Ctrl-C, so train.py saves the last whole step

Progress is read from the log train.py writes beside the checkpoint; each new save is sampled.
Every run writes to a new numbered folder, where a restarted server finds it again.
"""

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

from ..edge.checkpoint import DATA_MODES, read_checkpoint
from ..edge.checks import RUNGS, make_config
from ..edge.errors import UserError
from ..programs.run import log_path_for
from ..programs.settings import CORE_ENGINES as ENGINES, ENGINE_DTYPES, FLAGS, SWITCH, flag_default, flag_name
from ..sampling import TEMPERATURE, generate, sample_names
from . import loss
from .api import ApiError, field, model_size, only_known
from .limits import MAX_RUN_LOG_READ, RUN_LIMITS, TEXT_RUN_LIMITS
from .loading import load
from .sampling import context

# where `python -m microgpt.train` finds microgpt/, whether or not the project is installed
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# A run's engine is one of train.py's CORE_ENGINES, not PyTorch (an optional extra). Its checkpoint,
# by data mode: names in JSON, a file to read; running text in the compact binary format, as the
# command line's recipe (docs/training.md: its model is 55 MB as JSON, 19.1 MB as .safetensors)
CHECKPOINT = {'lines': 'model.json', 'text': 'model.safetensors'}
NUM_SAMPLES = 5    # names shown after each save
TEXT_SAMPLE = 120  # characters of running text sampled after each save


def rung_fields():
    """The Training page's controls for the rungs, each a train.py flag declared once there
    (programs/settings.py): {'name', 'help'} and 'switch' (a checkbox), 'choices' (mlp's) or
    'low', 'high' (n_kv_head's number; empty: one for each head, microgpt's)."""
    out = []
    for name in RUNGS:
        kind, field = FLAGS[name]['kind'], {'name': name, 'help': FLAGS[name]['help']}
        if kind is SWITCH:
            field['switch'] = True
        elif getattr(kind, 'choices', None):
            field['choices'] = list(kind.choices)
        else:
            field.update(low=kind.low, high=RUN_LIMITS['n_head'][1])  # at most the form's heads
        out.append(field)
    return out


def time_left(run):
    """{'left': seconds, 'text'} at the run's pace between the first and the latest steps the
    server read of its log, or None before two reads have found steps."""
    if run.first is None or run.latest[1] == run.first[1]:
        return None
    (t0, step0), (t1, step1) = run.first, run.latest
    step_s = (t1 - t0) / (step1 - step0)
    left = round((run.params['steps'] - step1) * step_s)
    said = f"{left} s" if left < 60 else f"{left // 60} min {left % 60:02d} s"
    return {'left': left, 'text': f"about {said} left, at this run's {1e3 * step_s:.1f} ms a step"}


class RunProcess:
    """One subprocess of train.py and what the page has been told about it."""

    def __init__(self, number, folder, params, proc):
        self.number, self.folder, self.params, self.proc = number, folder, params, proc
        self.out = os.path.join(folder, CHECKPOINT[params.get('data_mode', 'lines')])
        self.log = log_path_for(self.out)  # where train.py writes the log beside its checkpoint
        self.state = 'running'   # -> stopping (Stop pressed) -> finished / stopped / failed
        self.exit_code = None
        self.ckpt_id = None      # set once the finished run's checkpoint is listed
        self.samples = []        # [{'step', 'names'}], one per checkpoint save
        self.sampled_mtime = None
        self.waiter = None       # the thread that waits for the process to end
        self.started = time.time()
        self.first = self.latest = None  # (time read, step): the first and latest steps read, its pace


class RunManager:
    """The Training page's runs: starts one at a time, reports on it, stops it, and at the
    server's end stops the one still going."""

    def __init__(self, runs_dir, checkpoints, data=None, text=None):
        self.runs_dir = os.path.abspath(runs_dir)
        self.checkpoints = checkpoints
        self.data = None if data is None else os.path.abspath(data)
        self.text = None if text is None else os.path.abspath(text)  # running text, or None: names only
        self.lock = threading.Lock()
        self.run = None
        if checkpoints is not None:
            self.list_earlier_runs()

    def options(self):
        """What the Training page offers: engines, dtypes, fields and their limits, the data."""
        return {'engines': list(ENGINES), 'data_modes': list(DATA_MODES),
                'dtypes': {e: list(ENGINE_DTYPES[e]) for e in ENGINES},
                'fields': [{'name': name, 'integer': isinstance(default, int), 'help': FLAGS[name]['help']}
                           for name, (_, _, default) in RUN_LIMITS.items()],
                'limits': RUN_LIMITS, 'text_limits': TEXT_RUN_LIMITS, 'rungs': rung_fields(),
                'data': self.data,  # the file of names the runs train on; None: the bundled names
                'text': self.text}  # the running text they train on in text mode; None: no text mode

    def params(self, body):
        """The run's settings from the request, each range-checked, and train.py's flags for them."""
        only_known(body, [*RUN_LIMITS, *RUNGS, 'engine', 'dtype', 'data_mode'])
        mode = field(body, 'data_mode', str, 'lines')
        if mode not in DATA_MODES:
            raise ApiError(400, f"data_mode {mode!r:.40} is unknown: choose from {', '.join(DATA_MODES)}")
        if mode == 'text' and self.text is None:
            raise ApiError(400, "this server has no running text to train on: start it with `lab serve --text FILE`")
        limits = TEXT_RUN_LIMITS if mode == 'text' else RUN_LIMITS
        p = {name: field(body, name, type(default), default, low, high) for name, (low, high, default) in limits.items()}
        p['data_mode'] = mode
        if p['n_embd'] % p['n_head']:
            raise ApiError(400, f"n_embd {p['n_embd']} does not divide by n_head {p['n_head']}")
        rungs = {name: body[name] for name in RUNGS if body.get(name) is not None}  # as train.py's flags
        try:  # checked as train.py checks them; the vocabulary, which no rung depends on, is a stand-in
            make_config(vocab_size=2, **{name: p[name] for name in ('n_layer', 'n_embd', 'n_head', 'block_size')},
                        **rungs)
        except UserError as e:
            raise ApiError(400, str(e)) from None
        p.update(rungs)
        p['engine'] = field(body, 'engine', str, flag_default('engine'))
        if p['engine'] not in ENGINES:
            raise ApiError(400, f"engine {p['engine']!r:.40} is unknown: choose from {', '.join(ENGINES)}")
        p['dtype'] = field(body, 'dtype', str, flag_default('dtype'))
        if p['dtype'] not in ENGINE_DTYPES[p['engine']]:
            raise ApiError(400, f"dtype {p['dtype']!r:.40} is not one the {p['engine']} engine computes in: "
                                f"choose {' or '.join(ENGINE_DTYPES[p['engine']])}")
        run = {**{name: p[name] for name in (*limits, 'engine', 'dtype')}, 'num_samples': 0}
        if mode == 'text':
            run.update(data_mode='text', data=self.text)
        elif self.data:
            run['data'] = self.data
        flags = [str(word) for name, value in run.items() for word in (flag_name(name), value)]
        flags += [word for name, value in rungs.items() for word in  # a switch is its flag alone
                  ([flag_name(name)] * value if FLAGS[name]['kind'] is SWITCH else [flag_name(name), str(value)])]
        return p, flags

    def start(self, body):
        params, flags = self.params(body)
        with self.lock:
            if self.run is not None and self.run.state in ('running', 'stopping'):
                raise ApiError(409, f"run {self.run.number} is still going: stop it or wait, one run at a time")
            try:
                os.makedirs(self.runs_dir, exist_ok=True)
                number = max(run_numbers(self.runs_dir), default=0) + 1
                folder = os.path.join(self.runs_dir, str(number))
                os.makedirs(folder)
                output = open(os.path.join(folder, 'train.txt'), 'w', encoding='utf-8')
            except OSError as e:  # the server's --runs-dir, not the request, is at fault
                raise ApiError(500, f"cannot make a run folder in {self.runs_dir}: {e.strerror}: "
                                    "start the server with another --runs-dir") from None
            argv = [sys.executable, '-m', 'microgpt.train', '--out', os.path.join(folder, CHECKPOINT[params['data_mode']]),
                    *flags]
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [PACKAGE_PARENT, os.environ.get('PYTHONPATH')])))
            # its own session: a Ctrl-C in the server's terminal reaches the server only, which
            # then sends the run exactly one SIGINT (a second one would make train.py quit at once)
            with output:  # the child holds its own copy
                proc = subprocess.Popen(argv, cwd=folder, env=env, stdin=subprocess.DEVNULL,
                                        stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
            self.run = RunProcess(number, folder, params, proc)
            print(f"run {number}: {' '.join(argv[1:])}", flush=True)
            self.run.waiter = threading.Thread(target=self._wait, args=(self.run,), daemon=True)
            self.run.waiter.start()
            return {'run': number, 'params': params, 'state': 'running'}

    def _wait(self, run):
        """Wait for train.py to end; list its checkpoint if it saved one (finished or stopped)."""
        code = run.proc.wait()
        state = {0: 'finished', 130: 'stopped'}.get(code, 'failed')
        if state == 'failed' and run.state == 'stopping':
            # Stop came while Python was still starting, before train.py could catch Ctrl-C:
            # it quits with a traceback, but the learner asked for exactly that
            state = 'stopped'
        label = saved_label(run.number, run.out) if state != 'failed' else None
        if label is not None:
            self.checkpoints.add(f'run{run.number}', run.out, label)
        with self.lock:
            run.exit_code = code
            run.ckpt_id = f'run{run.number}' if label is not None else None
            run.state = state
        print(f"run {run.number} {run.state} (exit status {code}): {run.out}", flush=True)

    def list_earlier_runs(self):
        """The checkpoint each run in the runs folder saved, listed again as run<n>."""
        for number in sorted(run_numbers(self.runs_dir)):
            for path in [os.path.join(self.runs_dir, str(number), name) for name in CHECKPOINT.values()]:
                label = os.path.exists(path) and saved_label(number, path)
                if label:
                    self.checkpoints.add(f'run{number}', path, label)

    def going(self):
        """The number of the run still going (its process not ended), or None."""
        run = self.run
        return run.number if run is not None and run.proc.poll() is None else None

    def stop(self):
        with self.lock:
            run = self.run
            if run is None or run.state != 'running':
                raise ApiError(409, "no run is going")
            run.state = 'stopping'
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
        step = max((r['step'] for r in records if 'loss' in r), default=None)
        with self.lock:
            if step is not None:
                run.latest = (time.monotonic(), step)
                run.first = run.first or run.latest
            estimate = time_left(run) if state in ('running', 'stopping') else None
        self._sample(run)
        return {'run': run.number, 'params': run.params, 'state': state, 'exit_code': code,
                'records': records, 'offset': offset, 'smooth': smoothed(run, records),
                'samples': list(run.samples), 'elapsed': time.time() - run.started, 'estimate': estimate,
                'ckpt': ckpt_id, 'error': last_error(run) if state == 'failed' else None}

    def _sample(self, run):
        """Sample the run's checkpoint (draw_sample) whenever it has been saved anew."""
        try:
            mtime = os.stat(run.out).st_mtime_ns
        except OSError:
            return  # not saved yet
        with self.lock:
            if mtime == run.sampled_mtime:
                return
            run.sampled_mtime = mtime
        try:
            sample = draw_sample(run.out)
        except UserError:
            return  # a diverged model: the log shows it
        with self.lock:
            if not any(s['step'] == sample['step'] for s in run.samples):
                run.samples.append(sample)

    def shutdown(self, timeout=30):
        """Stop a run still going (as Ctrl-C would) and wait for it to save. It is in its own
        session, out of the terminal's reach: a second Ctrl-C while waiting goes to it as a second
        SIGINT (train.py then quits at once, its last save whole); after `timeout` s it is killed."""
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
        if run.waiter is not None:
            run.waiter.join(timeout)  # the run's last line is printed before the server's


def draw_sample(path):
    """What the page shows of a save: {'step', and a few 'names' or a line or two of running
    'text' (after a newline, as sample.py starts)}, on one BLAS thread: the run beside it has
    the cores."""
    from microgpt.backprop.threads import blas_threads
    ckpt, model = load(path)
    step = ckpt.train_state and ckpt.train_state.step
    with blas_threads(1):
        if ckpt.data_mode == 'text':
            start = context(model, '', 'text')
            return {'step': step, 'text': ''.join(generate(model, TEXT_SAMPLE, random.Random(42), TEMPERATURE, start))}
        return {'step': step, 'names': sample_names(model, num=NUM_SAMPLES, temperature=TEMPERATURE, seed=42)}


def run_numbers(runs_dir):
    try:
        return [int(n) for n in os.listdir(runs_dir) if n.isdigit()]
    except OSError:
        return []


def read_records(path, offset):
    """The JSON records of whole lines in `path` from byte `offset`, and the offset after them."""
    try:
        with open(path, 'rb') as f:
            f.seek(offset)
            chunk = f.read(MAX_RUN_LOG_READ)
    except OSError:
        return [], offset
    end = chunk.rfind(b'\n') + 1  # a line still being written waits for the next call
    return [json.loads(line) for line in chunk[:end].splitlines()], offset + end  # train.py's own lines


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
    """The last `error: ...` line train.py printed, else its last line."""
    try:
        with open(os.path.join(run.folder, 'train.txt'), encoding='utf-8', errors='replace') as f:
            lines = [l.strip() for l in f if l.strip()]
    except OSError:
        return None
    errors = [l for l in lines if l.startswith('error:')]
    return (errors or lines or [f"train.py exited with status {run.exit_code}"])[-1]


def saved_label(number, path):
    """How the header's list names run `number`'s checkpoint: the step it reached, of how many,
    and its size (n_layer x n_embd); None where no run's checkpoint reads there."""
    try:
        state = (ckpt := read_checkpoint(path)).train_state
    except (OSError, UserError):
        return None
    if state is None:
        return None
    if state.step >= state.run.steps:
        return f"run {number}: {state.run.steps} steps, {model_size(ckpt.config)}"
    return f"run {number}: step {state.step} of {state.run.steps} (stopped), {model_size(ckpt.config)}"
