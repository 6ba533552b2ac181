"""
The checker: check() starts main() below in a subprocess, the only process the learner's code
runs in, reads what it reports, and answers for it when that code takes it down or past its time.

    results = check([(workspace, [1, 2, 3], True)])   # -> {(workspace, n): result dict}

The subprocess runs in a process group of its own, killed whole at the end, its address space
capped; it reports one JSON object a line on a pipe, and what it reports is believed. Past an
exercise's budget, or when the process ends early (os._exit, a crash), the exercise is one line,
and the rest is checked in a fresh process.
"""

import json
import os
import resource
import select
import signal
import subprocess
import sys
import tempfile
import time

from . import catalog, harness

STARTUP = 30.0         # seconds for a fresh Python to import the checker (and numpy) on a busy machine
TRAIN_SILENCE = 300.0  # seconds without a word from `train` (a step calls the learner's code three times)
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BOOT = ("import sys; sys.path[:0] = [p for p in {paths!r} if p not in sys.path]; "
        "from microgpt.lab.exercises.checker import main; sys.exit(main(sys.argv[1:]))")


class Child:
    """One checking process, started on `request`; events() until it ends, close() in any case."""

    def __init__(self, request, cwd):
        self.fd, write_fd = os.pipe()
        self.output = tempfile.TemporaryFile()
        # where it finds microgpt: this process's sys.path, microgpt's folder first, without the
        # current folder or the workspace (Python runs with -I, so PYTHONPATH does not reach it)
        paths = [PACKAGE_ROOT] + [p for p in sys.path if p not in ('', os.getcwd(), cwd) and os.path.isdir(p)]
        command = [sys.executable, '-I', '-c', BOOT.format(paths=paths), json.dumps(dict(request, report_fd=write_fd))]
        # one BLAS thread: checks are small, and their results then never depend on it
        env = dict(os.environ, OPENBLAS_NUM_THREADS='1', OMP_NUM_THREADS='1', PYTHONIOENCODING='utf-8')
        self.proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=self.output, stderr=self.output,
                                     cwd=cwd, env=env, pass_fds=(write_fd,), start_new_session=True)
        os.close(write_fd)

    def events(self, patience):
        """('event', dict) for each line reported, then ('ended', exit status, its last words) or
        ('stopped', seconds) once patience(last event or None) seconds pass without one."""
        buffer, last, since = b'', None, time.monotonic()
        while True:
            wait = since + patience(last) - time.monotonic()
            if wait <= 0:
                yield 'stopped', time.monotonic() - since
                return
            if not select.select([self.fd], [], [], wait)[0]:
                continue
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                yield 'ended', self.proc.wait(), self.last_words()
                return
            *lines, buffer = (buffer + chunk).split(b'\n')
            for line in lines:
                last, since = json.loads(line), time.monotonic()
                yield 'event', last

    def last_words(self):
        """The last line the process wrote on stdout or stderr (a crash's, say): for a report."""
        self.output.seek(max(0, self.output.seek(0, os.SEEK_END) - 2000))
        lines = [l for l in self.output.read().decode('utf-8', 'replace').splitlines() if l.strip()]
        return lines[-1][:200] if lines else ''

    def close(self):
        """The whole process group killed, whatever the learner's code left running in it."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass  # the group is gone already
        self.proc.wait()
        os.close(self.fd)
        self.output.close()


def check(jobs, seconds=harness.CASE_SECONDS, on_event=None, budget=None):
    """{(workspace, number): result} of jobs = [(workspace, [numbers], stop at the first failure)],
    on_event(workspace, number, result) as each one finishes. seconds: the limit of one call of a
    learner's function; budget: of one exercise's whole check (default: its catalog budget)."""
    results = {}
    pending = [(os.path.abspath(w), list(numbers), stop) for w, numbers, stop in jobs]
    while pending:
        child = Child({'mode': 'check', 'seconds': seconds, 'jobs': pending}, cwd=pending[0][0])
        current, last, ended = None, None, None
        try:
            for kind, *what in child.events(lambda _: budget or catalog.get(current[1]).budget if current
                                            else STARTUP):
                if kind != 'event':
                    ended = (kind, *what)
                    break
                event = what[0]
                if 'begin' in event:
                    current = tuple(event['begin'])
                elif 'result' in event:
                    last, current = tuple(event.pop('result')), None
                    finish(results, last, event, on_event)
                else:
                    break  # done
        finally:
            child.close()
        if ended is None:
            break
        if current is None and last is None:  # it never began checking: say so, for the first one
            why = (ended[2] if ended[0] == 'ended' else '') or f"no answer within {STARTUP:g} s"
            finish(results, (pending[0][0], pending[0][1][0]), {
                'status': 'error', 'line': f"the checking process did not start ({why})"}, on_event)
            break
        if current is not None:
            finish(results, current, stopped(catalog.get(current[1]), ended), on_event)
        # what is left: each job's exercises not yet checked, but none of a job stopped by a failure
        pending = [(w, [n for n in numbers if (w, n) not in results], stop) for w, numbers, stop in pending
                   if not (stop and any(results.get((w, n), {}).get('status', 'pass') != 'pass' for n in numbers))]
        pending = [job for job in pending if job[1]]
    return results


def stopped(e, ended):
    """The result of exercise e when the process was stopped, or ended, while it was checked."""
    if ended[0] == 'stopped':
        line = (f"stopped after {ended[1]:.0f} s: your {e.function}() (or a function it calls) ran past the "
                "time limit and did not give way; is there an endless loop that catches every exception?")
    else:
        status, words = ended[1], ended[2]
        line = (f"the checking process ended while your {e.function}() ran ("
                + (f"exit status {status}" if status >= 0 else f"killed by signal {-status}") +
                "): does your code call os._exit() or crash Python itself?" + (f" Its last words: {words}" if words else ''))
    return {'status': 'fail', 'line': line}


def finish(results, key, result, on_event):
    results[key] = result
    if on_event:
        on_event(key[0], key[1], result)


def train(workspace, on_event, **settings):
    """`exercises train` in a subprocess (trainer.run, with train's `settings`): on_event(event)
    for each event it reports; a process silent for TRAIN_SILENCE seconds, or one that ends before
    its 'done', is a 'failed' event in one line."""
    child = Child(dict(settings, mode='train', workspace=os.path.abspath(workspace)), cwd=os.path.abspath(workspace))
    try:
        for kind, *what in child.events(lambda last: STARTUP if last is None else TRAIN_SILENCE):
            if kind == 'event' and what[0]['event'] == 'done':
                return
            on_event(what[0] if kind == 'event' else {'event': 'failed', 'line': (
                f"the training process was stopped after {what[0]:.0f} s without a word" if kind == 'stopped' else
                f"the training process ended (exit status {what[0]})" + (f": {what[1]}" if what[1] else ''))})
    finally:
        child.close()


# ---------------------------------------------------------------------------- in the subprocess
def main(argv):
    request = json.loads(argv[0])
    resource.setrlimit(resource.RLIMIT_AS, (harness.MEMORY_BYTES, harness.MEMORY_BYTES))
    sys.dont_write_bytecode = True  # no __pycache__ left in the learner's folder
    pipe = os.fdopen(request['report_fd'], 'w', encoding='utf-8')

    def report(**event):
        pipe.write(json.dumps(event) + '\n')
        pipe.flush()
    if request['mode'] == 'train':
        from . import trainer
        harness.use_workspace(request['workspace'])
        trainer.run(request, report)
        return 0
    for workspace, numbers, stop in request['jobs']:
        harness.use_workspace(workspace)
        cache = {}
        for n in numbers:
            report(begin=[workspace, n])
            result = harness.check_one(n, workspace, request['seconds'], cache)
            report(result=[workspace, n], **result)
            if stop and result['status'] != 'pass':
                break
    report(done=True)  # check() ends the process, and a thread the learner's code left running
    return 0
