"""
The checker's parent half: starts runner.py in a subprocess, reads its reports, and answers
for it when the learner's code takes the process down or past its time.

    results = check([(workspace, [1, 2, 3], True)])   # -> {(workspace, n): result dict}

The subprocess gets the learner's code, nothing else of ours to break: its stdin is empty, its
stdout and stderr go to a file of at most OUTPUT_FILE_BYTES (RLIMIT_FSIZE: a write past it fails
in the learner's code instead of filling the disk), its reports come on a pipe of their own.
Each exercise has its catalog budget of seconds (harness.CASE_SECONDS per call already stops an
endless loop inside the process); past the budget, or at a silence longer than SILENCE, the
process is killed and the exercise reported as stopped, in one line; in a run that does not
stop at the first failure (status), a fresh process carries on with the next exercise.
The command line, the web lab and `exercises train` all check through here: no learner code
ever runs in their own process.
"""

import json
import os
import select
import subprocess
import sys
import tempfile
import time

from . import catalog
from .harness import CASE_SECONDS

STARTUP = 30.0               # seconds for a fresh Python to import the checker (and numpy) on a busy machine
SILENCE = 60.0               # seconds without a report between exercises, or between training steps
OUTPUT_FILE_BYTES = 16 * 2 ** 20  # what the learner's code may write to its stdout and stderr files
REPORT_BYTES = 8 * 2 ** 20   # what the process may report in all (a report is a few KB)
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def child_environment():
    """The parent's environment, with the project importable, no bytecode written into the
    learner's folder, and one BLAS thread (checks are small; results then never depend on it)."""
    env = dict(os.environ)
    paths = [PACKAGE_ROOT] + [p for p in env.get('PYTHONPATH', '').split(os.pathsep) if p]
    paths += [p for p in sys.path if p and os.path.isdir(p) and p not in paths]
    env.update(PYTHONPATH=os.pathsep.join(paths), PYTHONDONTWRITEBYTECODE='1', OPENBLAS_NUM_THREADS='1',
               OMP_NUM_THREADS='1', PYTHONIOENCODING='utf-8')
    return env


def limit_child():
    """Runs in the child before Python starts: a write past OUTPUT_FILE_BYTES fails (EFBIG)."""
    try:
        import resource
        import signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (OUTPUT_FILE_BYTES, OUTPUT_FILE_BYTES))
    except (ImportError, ValueError, OSError):
        pass


class Child:
    """One runner process: start(request), then events() until it ends or is stopped."""

    def __init__(self, request, cwd):
        self.read_fd, write_fd = os.pipe()
        self.output = tempfile.TemporaryFile()
        request = dict(request, report_fd=write_fd)
        self.proc = subprocess.Popen(
            [sys.executable, '-m', 'microgpt.lab.exercises.runner', json.dumps(request)],
            stdin=subprocess.DEVNULL, stdout=self.output, stderr=self.output, cwd=cwd,
            env=child_environment(), pass_fds=(write_fd,),
            preexec_fn=limit_child if os.name == 'posix' else None)
        os.close(write_fd)
        self.buffer, self.received, self.killed = b'', 0, False

    def events(self, deadline_of):
        """Yield each event as it comes. deadline_of(last event or None) -> the monotonic time by
        which the next must come; past it the process is killed and ('stopped', seconds) yielded."""
        last, since = None, time.monotonic()
        try:
            while True:
                wait = deadline_of(last, since) - time.monotonic()
                if wait <= 0:
                    self.stop()
                    yield {'event': 'stopped', 'seconds': time.monotonic() - since}
                    return
                ready, _, _ = select.select([self.read_fd], [], [], min(wait, 1.0))
                if not ready:
                    continue
                chunk = os.read(self.read_fd, 65536)
                if not chunk:
                    self.proc.wait()
                    yield {'event': 'ended', 'status': self.proc.returncode, 'stderr': self.stderr_tail()}
                    return
                self.received += len(chunk)
                if self.received > REPORT_BYTES:
                    self.stop()
                    yield {'event': 'stopped', 'seconds': time.monotonic() - since, 'why': 'too much output'}
                    return
                self.buffer += chunk
                *lines, self.buffer = self.buffer.split(b'\n')
                for line in lines:
                    try:
                        event = json.loads(line)
                    except ValueError:
                        continue
                    last, since = event, time.monotonic()
                    yield event
        finally:
            self.close()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.killed = True
        self.proc.wait()

    def close(self):
        self.stop()
        os.close(self.read_fd)
        self.output.close()

    def stderr_tail(self):
        """The last line the process wrote on stderr (the learner's, or a crash's): for a report."""
        self.output.seek(0, os.SEEK_END)
        size = self.output.tell()
        self.output.seek(max(0, size - 2000))
        lines = [l for l in self.output.read().decode('utf-8', 'replace').splitlines() if l.strip()]
        return lines[-1][:200] if lines else ''


def check(jobs, seconds=CASE_SECONDS, on_event=None, budget=None):
    """Check exercises in a subprocess: jobs = [(workspace, [numbers], stop_at_first_failure)].
    Returns {(workspace, number): result} for every exercise checked (a stopped run's last
    exercise included); on_event(workspace, number, result) as each one finishes. seconds: the
    limit of one call of a learner's function; budget: of one exercise's whole check (default:
    its catalog budget)."""
    results = {}
    pending = [(os.path.abspath(w), list(numbers), stop) for w, numbers, stop in jobs]
    while pending:
        request = {'mode': 'check', 'seconds': seconds, 'jobs': pending}
        child = Child(request, cwd=pending[0][0])
        current = None

        def deadline_of(last, since):
            if last is None:
                return since + STARTUP
            if last['event'] == 'begin':
                return since + (budget or catalog.get(last['n']).budget)
            return since + SILENCE
        ended = None
        for event in child.events(deadline_of):
            if event['event'] == 'done':
                break  # everything asked is reported (a thread the learner left running is stopped with it)
            if event['event'] == 'begin':
                current = (event['workspace'], event['n'])
            elif event['event'] == 'result':
                result = {k: v for k, v in event.items() if k not in ('event', 'workspace', 'n')}
                finish(results, current, result, on_event)
                current = None
            elif event['event'] in ('stopped', 'ended'):
                ended = event
        if ended is None:
            break  # every job done
        if current is None:  # the process did not even start checking: say so, for the first one
            current = (pending[0][0], pending[0][1][0])
            why = ended.get('stderr') or f"no answer within {STARTUP:g} s"
            finish(results, current, {'status': 'error', 'cases': 0,
                                      'line': f"the checking process did not start ({why})"}, on_event)
            break
        e = catalog.get(current[1])
        if ended['event'] == 'stopped':
            line = (f"stopped after {ended['seconds']:.0f} s: your {e.function}() (or a function it calls) "
                    "ran past the time limit and did not give way; is there an endless loop that "
                    "catches every exception?")
        else:
            line = (f"the checking process ended while your {e.function}() ran (exit status "
                    f"{ended['status']}): does your code call os._exit() or crash Python itself?"
                    + (f" Its last words: {ended['stderr']}" if ended['stderr'] else ''))
        finish(results, current, {'status': 'fail', 'line': line, 'cases': 0}, on_event)
        pending = remaining(pending, current)
    return results


def finish(results, current, result, on_event):
    results[current] = result
    if on_event:
        on_event(current[0], current[1], result)


def remaining(pending, current):
    """The jobs left after `current` took the process down: those before it are done; its own
    goes on with its next exercise unless it stops at the first failure; the later ones wait."""
    i = next(i for i, (w, numbers, _) in enumerate(pending) if w == current[0] and current[1] in numbers)
    workspace, numbers, stop = pending[i]
    rest = numbers[numbers.index(current[1]) + 1:]
    return ([(workspace, rest, stop)] if rest and not stop else []) + pending[i + 1:]


def train(workspace, steps, seed, lr, num_samples, temperature, on_event, seconds=CASE_SECONDS):
    """`exercises train` in a subprocess (trainer.py): on_event(event) for each event it reports,
    then a 'stopped' event if it fell silent for SILENCE seconds, or 'ended' with its exit status."""
    request = {'mode': 'train', 'workspace': os.path.abspath(workspace), 'steps': steps, 'seed': seed,
               'lr': lr, 'num_samples': num_samples, 'temperature': temperature, 'seconds': seconds}
    child = Child(request, cwd=os.path.abspath(workspace))
    for event in child.events(lambda last, since: since + (STARTUP if last is None else SILENCE)):
        if event['event'] == 'done':
            break
        on_event(event)
