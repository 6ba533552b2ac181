"""
The checker's parent half: starts runner.py in a subprocess, reads its reports, decides what
passed, and answers for it when the learner's code takes the process down or past its time.

    results = check([(workspace, [1, 2, 3], True)])   # -> {(workspace, n): result dict}

The subprocess runs under sandbox.py (the learner's parent is the sandbox, never this process):
its own process group, killed whole at the end, with whatever it detached; a memory cap; its
stdout and stderr to a file of at most OUTPUT_FILE_BYTES (RLIMIT_FSIZE: a write past it fails
in the learner's code instead of filling the disk); at most DISK_BYTES more held by the workspaces
in all (the sandbox watches them while the code runs, and this process looks again at each
result); `python -I` with the workspace last on its sys.path. Its reports come on a pipe of
their own, but the learner's code runs in that process
and can write to the pipe too, so nothing it says is taken on trust: an event must be a JSON
object of a known kind, for the exercise due next, in order and bounded in size (anything
else ends that exercise as "not passed" in one line), and a pass is decided here
(verdict.replay), by the check run again on the values the learner's functions returned.
Each exercise has its catalog budget of seconds (harness.CASE_SECONDS per call already stops an
endless loop inside the process); past the budget, or at a silence longer than SILENCE, or past
the hard limit of the whole request that no event moves, the process is killed and the exercise
reported as stopped, in one line; in a run that does not stop at the first failure (status), a
fresh process carries on with the next exercise. The command line, the web lab and `exercises
train` all check through here.
"""

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time

from . import catalog
from .harness import CASE_SECONDS
from .sandbox import bytes_held

STARTUP = 30.0               # seconds for a fresh Python to import the checker (and numpy) on a busy machine
SILENCE = 60.0               # seconds without a report between exercises, or between training steps
OUTPUT_FILE_BYTES = 16 * 2 ** 20  # what the learner's code may write to its stdout and stderr files
MEMORY_BYTES = 2 * 2 ** 30   # the address space of the learner's process (numpy and a check need ~0.5 GiB)
DISK_BYTES = 256 * 2 ** 20   # what the learner's code may take of the disk while it runs, in all its files
DISK_STATUS = 125            # the sandbox's exit status when it stopped the runner for taking more
REPORT_BYTES = 96 * 2 ** 20  # what the process may report in all (the calls of every check, all passing: ~9 MB)
EVENT_BYTES = 32 * 2 ** 20   # one event, at most (gpt()'s recorded calls: ~3 MB)
TRAIN_SECONDS = 6 * 3600.0  # `exercises train`, at most (its default run takes minutes)
STATUSES = ('pass', 'fail', 'todo', 'error')
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
WATCHED = os.path.join(PACKAGE_ROOT, 'microgpt')  # microgpt's own sources, which no learner's code may change
SANDBOX = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'sandbox.py')
BOOT = ("import sys; sys.path[:0] = [p for p in {paths!r} if p not in sys.path]; "
        "from microgpt.lab.exercises.runner import main; sys.exit(main(sys.argv[1:]))")


def child_environment():
    """The parent's environment, with no bytecode written into the learner's folder, and one
    BLAS thread (checks are small; results then never depend on it). Python runs with -I, so
    the PYTHON* variables do not reach it: its sys.path is given in BOOT."""
    env = dict(os.environ)
    env.update(PYTHONDONTWRITEBYTECODE='1', OPENBLAS_NUM_THREADS='1', OMP_NUM_THREADS='1',
               PYTHONIOENCODING='utf-8')
    return env


def import_paths(workspace):
    """Where the runner finds microgpt: this process's own sys.path without its current folder
    or the workspace, microgpt's folder first."""
    skip = {'', os.getcwd(), workspace}
    return [PACKAGE_ROOT] + [p for p in sys.path if p not in skip and os.path.isdir(p)]


class Child:
    """One runner process, behind sandbox.py: start(request), then events() until it ends or is
    stopped. `seconds`: a hard limit on the whole process, whatever it reports."""

    def __init__(self, request, cwd, seconds):
        """cwd: the process's folder (the first job's workspace); every job's workspace, and it,
        are the folders whose growth the disk cap counts."""
        self.read_fd, write_fd = os.pipe()
        # the runner waits on this pipe after each result until this process has looked at the
        # disk, so that the next exercise's writes never count against the one just reported
        ack_read, self.ack_fd = os.pipe()
        self.output = tempfile.TemporaryFile()
        request = dict(request, report_fd=write_fd, ack_fd=ack_read)
        command = [sys.executable, '-I', '-c', BOOT.format(paths=import_paths(cwd)), json.dumps(request)]
        self.folders = sorted({cwd, *(w for w, _, _ in request.get('jobs', []))})
        # what they hold before any code of the learner's runs, then after each result
        self.held_before = self.held()
        config = {'command': command, 'cwd': cwd, 'pass_fds': [write_fd, ack_read], 'memory': MEMORY_BYTES,
                  'file_size': OUTPUT_FILE_BYTES, 'disk': DISK_BYTES, 'disk_status': DISK_STATUS,
                  'folders': self.folders, 'seconds': seconds + 10}
        self.proc = subprocess.Popen(
            [sys.executable, '-I', SANDBOX, json.dumps(config)],
            stdin=subprocess.DEVNULL, stdout=self.output, stderr=self.output, cwd=cwd,
            env=child_environment(), pass_fds=(write_fd, ack_read), start_new_session=True)
        os.close(write_fd)
        os.close(ack_read)
        self.deadline = time.monotonic() + seconds
        self.buffer, self.received, self.killed = b'', 0, False

    def events(self, deadline_of):
        """Yield ('event', dict) for each line that is a JSON object, ('bad', why) for one that
        is not (the last thing yielded), ('stopped', seconds[, why]) past the hard limit or
        deadline_of(last event or None, since) -> monotonic time, ('ended', status, stderr)."""
        last, since, began = None, time.monotonic(), time.monotonic()
        try:
            while True:
                wait = min(deadline_of(last, since), self.deadline) - time.monotonic()
                if wait <= 0:
                    self.stop()
                    yield ('stopped', time.monotonic() - began if time.monotonic() >= self.deadline
                           else time.monotonic() - since)
                    return
                ready, _, _ = select.select([self.read_fd], [], [], min(wait, 1.0))
                if not ready:
                    continue
                chunk = os.read(self.read_fd, 1 << 20)
                if not chunk:
                    self.proc.wait()
                    yield ('ended', self.proc.returncode, self.stderr_tail())
                    return
                self.received += len(chunk)
                self.buffer += chunk
                if self.received > REPORT_BYTES or len(self.buffer) > EVENT_BYTES:
                    self.stop()
                    yield ('bad', "more than the checker's report may hold")
                    return
                *lines, self.buffer = self.buffer.split(b'\n')
                for line in lines:
                    try:
                        event = json.loads(line)
                    except (ValueError, RecursionError):
                        event = None
                    if type(event) is not dict or type(event.get('event')) is not str:
                        self.stop()
                        yield ('bad', "a line that is not one of its events")
                        return
                    last, since = event, time.monotonic()
                    yield ('event', event)
        finally:
            self.close()

    def held(self):
        """What the folders the sandbox watches hold: every job's workspace and the process's own."""
        return sum(bytes_held(folder) for folder in self.folders)

    def took_the_disk(self):
        """Whether those folders grew by more than DISK_BYTES while the exercise just reported
        ran (since the last result, or the start); what they hold now is where the next one is
        measured from. The sandbox looks every DISK_POLL_S, against the start; this is asked
        again at each result, since a few fast writes (posix_fallocate) can fall between two of
        its looks."""
        held, before = self.held(), self.held_before
        self.held_before = held
        return held - before > DISK_BYTES

    def go_on(self):
        """Let the runner start the next exercise (it waits after each result on the ack pipe)."""
        try:
            os.write(self.ack_fd, b'.')
        except OSError:
            pass  # the runner is gone: its end is reported from the events

    def stop(self):
        """The sandbox kills the runner and what it left (SIGTERM); then the whole group, in any case."""
        if self.proc.poll() is None:
            self.killed = True
            try:
                os.kill(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=3)
            except (OSError, subprocess.TimeoutExpired):
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the runner, if the learner's code ended the sandbox
        except OSError:
            pass
        self.proc.wait()

    def close(self):
        self.stop()
        if self.ack_fd is not None:
            os.close(self.ack_fd)
            self.ack_fd = None
        if self.read_fd is not None:
            os.close(self.read_fd)
            self.output.close()
            self.read_fd = None

    def stderr_tail(self):
        """The last line the process wrote on stderr (the learner's, or a crash's): for a report."""
        self.output.seek(0, os.SEEK_END)
        size = self.output.tell()
        self.output.seek(max(0, size - 2000))
        lines = [l for l in self.output.read().decode('utf-8', 'replace').splitlines() if l.strip()]
        return lines[-1][:200] if lines else ''


def expected(pending):
    """The (workspace, number, stop) of each exercise the runner will report, in order."""
    for workspace, numbers, stop in pending:
        for n in numbers:
            yield workspace, n, stop


def short(text, most):
    return text if type(text) is str and len(text) <= most else None


def well_formed(event):
    """The result an event reports, copied field by field, or None if it is not one."""
    result = {'status': event.get('status'), 'line': short(event.get('line'), 2000),
              'cases': event.get('cases')}
    if result['status'] not in STATUSES or result['line'] is None or type(result['cases']) is not int:
        return None
    details = event.get('details', [])
    if details is not None:
        if (type(details) is not list or len(details) > 40 or
                any(type(d) is not list or len(d) != 2 or any(short(x, 20000) is None for x in d) for d in details)):
            return None
        result['details'] = [tuple(d) for d in details]
    for key in ('hint', 'note'):
        if event.get(key) not in (None, '') and short(event.get(key), 2000) is None:
            return None
        if event.get(key):
            result[key] = event[key]
    return result


def interfered(e, why):
    return {'status': 'fail', 'cases': 0,
            'line': f"not passed: code in your files wrote {why} to the checker's report while your "
                    f"{e.function}() was checked, so nothing that process said is believed"}


def check(jobs, seconds=CASE_SECONDS, on_event=None, budget=None):
    """Check exercises in a subprocess: jobs = [(workspace, [numbers], stop_at_first_failure)].
    Returns {(workspace, number): result} for every exercise checked (a stopped run's last
    exercise included); on_event(workspace, number, result) as each one finishes. seconds: the
    limit of one call of a learner's function; budget: of one exercise's whole check (default:
    its catalog budget). The runner's events are believed only in their form and order: a
    pass is the verdict of verdict.replay here, on the values it recorded."""
    from . import runner, verdict
    results = {}
    pending = [(os.path.abspath(w), list(numbers), stop) for w, numbers, stop in jobs]
    for _, numbers, _ in pending:  # the oracles, imported before any learner's code runs
        for n in numbers:
            _import_checks(runner, n)
    before = package_files()
    while pending:
        request = {'mode': 'check', 'seconds': seconds, 'jobs': pending}
        hard = STARTUP + sum(budget or catalog.get(n).budget for _, n, _ in expected(pending)) + SILENCE
        child = Child(request, cwd=pending[0][0], seconds=hard)
        order = expected(pending)
        nxt = next(order, None)
        current, heard, ended = None, False, None

        def deadline_of(last, since):
            if last is None:
                return since + STARTUP
            if current is not None:
                return since + (budget or catalog.get(current[1]).budget)
            return since + SILENCE
        for kind, *what in child.events(deadline_of):
            if kind != 'event':
                ended = (kind, *what)
                break
            event, heard = what[0], True
            name = event['event']
            if name == 'begin' and current is None and nxt is not None and \
                    event.get('n') == nxt[1] and event.get('workspace') == nxt[0]:
                current = nxt
                continue
            if name == 'result' and current is not None and \
                    event.get('n') == current[1] and event.get('workspace') == current[0]:
                result = well_formed(event)
                if result is None:
                    ended = ('bad', "a malformed result")
                    break
                if child.took_the_disk():
                    child.stop()
                    ended = ('ended', DISK_STATUS, '')
                    break
                if result['status'] == 'pass':
                    result = verdict.replay(current[1], event.get('calls'), runner.checks_for)
                finish_checked(results, current[:2], result, on_event, before)
                child.go_on()
                workspace, _, stop = current
                current, nxt = None, next(order, None)
                if stop and result['status'] != 'pass':
                    while nxt is not None and nxt[0] == workspace:
                        nxt = next(order, None)
                continue
            if name == 'done' and current is None and nxt is None:
                break  # everything asked is reported (a thread the learner left running is stopped with it)
            ended = ('bad', f"an event out of place ({name[:20]!r})")
            break
        child.close()
        if ended is None:
            break  # every job done
        if not heard and ended[0] != 'bad':  # the process did not even start checking: say so, for the first one
            first = (pending[0][0], pending[0][1][0])
            why = (ended[2] if ended[0] == 'ended' else '') or f"no answer within {STARTUP:g} s"
            finish_checked(results, first, {'status': 'error', 'cases': 0,
                                            'line': f"the checking process did not start ({why})"},
                           on_event, before)
            break
        at = current or nxt
        if at is None:
            break  # all reported; what came after does not change it
        e = catalog.get(at[1])
        if ended[0] == 'bad':
            result = interfered(e, ended[1])
        elif ended[0] == 'stopped':
            result = {'status': 'fail', 'cases': 0,
                      'line': (f"stopped after {ended[1]:.0f} s: your {e.function}() (or a function it calls) "
                               "ran past the time limit and did not give way; is there an endless loop that "
                               "catches every exception?")}
        elif ended[1] == DISK_STATUS:
            result = {'status': 'fail', 'cases': 0,
                      'line': (f"stopped while your {e.function}() ran: your code wrote more than "
                               f"{DISK_BYTES >> 20} MiB to the disk, the most a check allows")}
        else:
            result = {'status': 'fail', 'cases': 0,
                      'line': (f"the checking process ended while your {e.function}() ran (exit status "
                               f"{ended[1]}): does your code call os._exit() or crash Python itself?"
                               + (f" Its last words: {ended[2]}" if ended[2] else ''))}
        finish_checked(results, at[:2], result, on_event, before)
        pending = remaining(pending, at[:2])
    return results


def _import_checks(runner, number):
    try:
        runner.checks_for(number)
    except ImportError:  # numpy missing: the numpy rung's checks say so where they run
        pass


def package_files():
    """{path: (size, mtime)} of microgpt's own source files: a learner's code that changes one
    (an oracle appended to, say) has every result of its check refused."""
    found = {}
    for folder, _, names in os.walk(WATCHED):
        for name in names:
            if name.endswith('.py'):
                path = os.path.join(folder, name)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                found[path] = (st.st_size, st.st_mtime_ns)
    return found


def finish_checked(results, current, result, on_event, before):
    """finish(), unless microgpt's own files changed since the check began (package_files):
    then the result is a fail that says so, whatever the replay found."""
    after = package_files()
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    if changed:
        result = {'status': 'fail', 'cases': 0,
                  'line': (f"your code changed microgpt's own file {os.path.relpath(changed[0], os.path.dirname(WATCHED))}"
                           f"{f' (and {len(changed) - 1} more)' if len(changed) > 1 else ''}: no result is "
                           "believed; restore microgpt's files (git checkout, or reinstall) and check again")}
    finish(results, current, result, on_event)


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
    """`exercises train`: the learner's side in a subprocess (trainer.run), microgpt's here
    (trainer.Project), which judges each step the subprocess reports. on_event(event) for each
    event to show (trainer.Project.follow's), then a 'failed' event if the subprocess reported
    something out of form or order, 'stopped' if it fell silent for SILENCE seconds, or 'ended'
    with its exit status."""
    from . import trainer
    project = trainer.Project(steps, seed, lr, num_samples, temperature)
    on_event(project.start())
    request = {'mode': 'train', 'workspace': os.path.abspath(workspace), 'steps': steps, 'seed': seed,
               'lr': lr, 'num_samples': num_samples, 'temperature': temperature, 'seconds': seconds}
    child = Child(request, cwd=os.path.abspath(workspace), seconds=TRAIN_SECONDS)
    for kind, *what in child.events(lambda last, since: since + (STARTUP if last is None else SILENCE)):
        if kind == 'event':
            if what[0]['event'] == 'done':
                break
            try:
                shown = project.follow(what[0])
            except trainer.Malformed as e:
                kind, what = 'bad', [str(e)]
            else:
                for event in shown:
                    on_event(event)
                continue
        if kind == 'ended' and what[0] == 0:
            break  # ended without its 'done': judged below, as a run cut short if it is one
        on_event({'event': 'stopped', 'seconds': what[0]} if kind == 'stopped' else
                 {'event': 'ended', 'status': what[0], 'stderr': what[1]} if kind == 'ended' else
                 {'event': 'failed', 'line': f"code in your files wrote {what[0]} to the training's report, "
                                             "so nothing it reported after it is believed"})
        if kind == 'bad':
            child.stop()
        return
    if not project.finished():  # 'done' (or a status 0) before every step and the names: a run cut short
        on_event({'event': 'failed', 'line': f"the training process stopped after {project.done} of {steps} "
                                             "steps without saying why, so no verdict is given"})
