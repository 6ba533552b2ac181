"""
Training runs started from the web lab's Training page: train.py in a subprocess, one at a time.

    runs = RunManager('out/lab-runs', checkpoints)
    runs.start({'steps': 300, 'n_embd': 16})   # out/lab-runs/1/model.json
    runs.status(offset=0)   # new log lines since byte `offset`, a few sampled names, the state, the time left
    runs.stop()             # SIGINT: exactly Ctrl-C, so train.py saves the last whole step

The run is the learner's own `python train.py --out ...`, so the page watches the very program
the terminal runs, with the very flags a learner would type: every field of the page is one of
train.py's flags (limits.RUN_LIMITS declares them, with the page's bounds), its dtype and its
evaluation and save schedule included, which start at train.py's own defaults. It trains on
names (the server's --data, else the bundled ones), or on running text (--data-mode text on the
server's --text file, else the text the checkpoint given at start was trained on), in windows
of block_size + 1 characters, a batch of them a step; a run of running text writes
model.safetensors, as the command line's recipe does, one of names model.json. Progress comes
from the JSON-lines log train.py writes beside the checkpoint ({"step", "loss", "lr"} per step,
{"step", "val_loss", "train_loss"} per evaluation), read from where the page last stopped
reading. Each time the checkpoint is saved anew, a few names (or a line or two of running text)
are sampled from it with sample.py's sampler, so the page can watch them improve. When the run
ends (finished, or stopped with Stop) its checkpoint is added to the server's list, and the
other pages can open it by its id, `run<n>`. While it goes, Pace says how long it has left.

RunProcess is one such subprocess, RunManager the page's one-at-a-time keeper of them (named
apart from microgpt/programs/run.py's Run, the training loop's own bookkeeping, and backprop's Trainer).
The request never names a path: every run writes to a new numbered folder inside the runs
folder given when the server started. A server started on a runs folder lists again the
checkpoint each earlier run saved there, so they open on the other pages as before; a run is
watched by the server that started it, which stops it as Ctrl-C would when it stops itself.
"""

import collections
import json
import os
import signal
import subprocess
import sys
import threading
import time

from ..edge.checkpoint import DATA_MODES, read_checkpoint
from ..edge.errors import UserError
from ..programs.run import log_path_for
from ..programs.settings import CORE_ENGINES as ENGINES, ENGINE_DTYPES, FLAGS, flag_default, flag_name
from . import loss
from .api import ApiError, field, model_size, only_known
from .limits import MAX_RUN_LOG_READ, RUN_LIMITS, TEXT_RUN_LIMITS
from .runsamples import draw_sample

# The package's parent folder: where `python -m microgpt.train` finds microgpt/ whether or not
# the project is installed.
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# A run's engine is one of train.py's CORE_ENGINES (the Value graph, or src/backprop's arrays),
# not PyTorch: an optional extra, which a page offering it would have to say is missing. Its data
# mode is one of the checkpoint's DATA_MODES: names, one a line, or running text.
# The checkpoint a run writes, by data mode: names in JSON, a file to open and read; running text
# in the compact binary format, as the command line's recipe (docs/training.md: a JSON save of
# its model takes 2.3 s, a .safetensors one 45 to 71 ms)
CHECKPOINT = {'lines': 'model.json', 'text': 'model.safetensors'}
WINDOW = 5.0  # seconds of the run's latest steps its pace is measured on: a loaded machine changes speed


class Pace:
    """How long a run has left at its own pace: the steps it logged over the last WINDOW
    seconds, stamped with the time the server read them (the page asks every 0.4 s), its
    evaluations included as they come."""

    def __init__(self, steps):
        self.steps = steps
        self.marks = collections.deque()  # (time read, latest step), the last WINDOW s

    def see(self, now, records):
        step = max((r['step'] for r in records if 'loss' in r), default=None)
        if step is not None and (not self.marks or step > self.marks[-1][1]):
            self.marks.append((now, step))
            while len(self.marks) > 2 and now - self.marks[1][0] >= WINDOW:
                self.marks.popleft()  # the oldest kept is the last one at least WINDOW s old

    def estimate(self):
        """{'left': seconds, 'text'}, or None before two reads of the log have found steps."""
        if len(self.marks) < 2:
            return None
        (t0, step0), (t1, step1) = self.marks[0], self.marks[-1]
        step_s = (t1 - t0) / (step1 - step0)
        left = (self.steps - step1) * step_s
        return {'left': left, 'text': f"about {duration(left)} left, at this run's {1e3 * step_s:.1f} ms "
                                      f"a step (its last {t1 - t0:.0f} s)"}


def duration(seconds):
    """Seconds as a person says them: 45 s, 3 min 10 s."""
    seconds = round(seconds)
    return f"{seconds} s" if seconds < 60 else f"{seconds // 60} min {seconds % 60:02d} s"


class RunProcess:
    """One subprocess of train.py and what the page has been told about it."""

    def __init__(self, number, folder, params, proc):
        self.number, self.folder, self.params, self.proc = number, folder, params, proc
        self.out = os.path.join(folder, CHECKPOINT[params.get('data_mode', 'lines')])
        self.log = log_path_for(self.out)  # where train.py writes the log beside its checkpoint
        self.state = 'running'   # -> stopping -> finished / stopped / failed
        self.stop_sent = False   # Stop was pressed (a SIGINT sent)
        self.exit_code = None
        self.ckpt_id = None      # set once the finished run's checkpoint is listed
        self.samples = []        # [{'step', 'names'}], one per checkpoint save
        self.sampled_mtime = None
        self.waiter = None       # the thread that waits for the process to end
        self.started = time.time()
        self.pace = Pace(params['steps'])


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
        """What the Training page offers: the engines and the dtypes each computes in, the
        fields (in order, each with train.py's help) and their limits, the data."""
        return {'engines': list(ENGINES), 'data_modes': list(DATA_MODES),
                'dtypes': {e: list(ENGINE_DTYPES[e]) for e in ENGINES},
                'fields': [{'name': name, 'integer': isinstance(default, int), 'help': FLAGS[name]['help']}
                           for name, (_, _, default) in RUN_LIMITS.items()],
                'limits': RUN_LIMITS, 'text_limits': TEXT_RUN_LIMITS,
                'data': self.data,  # the file of names the runs train on; None: the bundled names
                'text': self.text}  # the running text they train on in text mode; None: no text mode

    def params(self, body):
        """The run's settings from the request, each range-checked; train.py's flags for them
        (all but --out): every field of RUN_LIMITS as its flag, as the command line takes it."""
        only_known(body, [*RUN_LIMITS, 'engine', 'dtype', 'data_mode'])
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
        return p, [str(word) for name, value in run.items() for word in (flag_name(name), value)]

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
            env = dict(os.environ)
            # microgpt/: found even when the project is not installed (installed, it is on the path)
            env['PYTHONPATH'] = os.pathsep.join(filter(None, [PACKAGE_PARENT, env.get('PYTHONPATH')]))
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
        if state == 'failed' and run.stop_sent:
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
        """The checkpoint each run in the runs folder saved, listed again (run<n>), so that the
        runs of an earlier server open on the other pages as they did."""
        for number in sorted(run_numbers(self.runs_dir)):
            for name in CHECKPOINT.values():
                path = os.path.join(self.runs_dir, str(number), name)
                label = saved_label(number, path) if os.path.exists(path) else None
                if label is not None:
                    self.checkpoints.add(f'run{number}', path, label)

    def going(self):
        """The number of the run still going (its process not ended), or None."""
        with self.lock:
            run = self.run
        return run.number if run is not None and run.proc.poll() is None else None

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
        with self.lock:
            run.pace.see(time.monotonic(), records)
            estimate = run.pace.estimate() if state in ('running', 'stopping') else None
        self._sample(run)
        return {'run': run.number, 'params': run.params, 'state': state, 'exit_code': code,
                'records': records, 'offset': offset, 'smooth': smoothed(run, records),
                'samples': list(run.samples), 'elapsed': time.time() - run.started, 'estimate': estimate,
                'ckpt': ckpt_id, 'error': last_error(run) if state == 'failed' else None}

    def _sample(self, run):
        """Sample a few names (or a line or two of running text) from the run's checkpoint
        whenever it has been saved anew."""
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
        if run.waiter is not None:
            run.waiter.join(timeout)  # the run's last line is printed before the server's


def run_numbers(runs_dir):
    """The numbers of the run folders in runs_dir (none if it does not exist yet)."""
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


def saved_label(number, path):
    """How the header's list names run `number`'s checkpoint: the step it reached, of how many,
    and its size (n_layer x n_embd), so that two runs drawn side by side say how they differ;
    None where no checkpoint of a run reads there."""
    try:
        ckpt = read_checkpoint(path)
    except (OSError, UserError):
        return None
    state = ckpt.train_state
    if state is None:
        return None
    if state.step >= state.run.steps:
        return f"run {number}: {state.run.steps} steps, {model_size(ckpt.config)}"
    return f"run {number}: step {state.step} of {state.run.steps} (stopped), {model_size(ckpt.config)}"
