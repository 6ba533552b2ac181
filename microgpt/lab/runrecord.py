"""
What a web lab run's folder says about the run, so that a server started later finds it: the
file run.json beside the run's checkpoint, written by runs.py when the run starts and when it
ends, and read back by every server that starts on the same runs folder.

    write(folder, {'number': 3, 'params': {...}, 'pid': 4242, 'process': identity(4242),
                   'server_pid': os.getpid(), 'server_process': identity(os.getpid()),
                   'state': 'running', 'exit_code': None, 'started': time.time()})
    read(folder)          # that dict, or None when there is none or it is damaged

A server killed with SIGKILL cannot stop its run (train.py in its own session goes on, its
parent now process 1), and a server started afterwards knows nothing of it unless the folder
says. A pid alone does not say it: once the run has ended, the system may give the number to
another program, which must never be sent the run's Ctrl-C. So the record keeps the process's
identity (identity(): the boot it belongs to and its start time, from /proc on Linux, from
`ps -o lstart=` elsewhere), and a pid is signalled only while its identity still matches
(Process below). Where neither can be read, the identity is None and the run is never
signalled by a later server: it is shown as ended once it is.
"""

import json
import os
import signal
import subprocess
import time

from ..edge.checkpoint import write_json_atomic
from ..edge.errors import UserError
from .limits import MAX_RUN_RECORD

NAME = 'run.json'
POLL = 0.2            # seconds between looks at a process that is not this server's child


def identity(pid):
    """A string naming process `pid` and no other process ever, or None if it is not running
    (or is a zombie, already ended) or this system does not say."""
    try:
        with open(f'/proc/{pid}/stat', 'rb') as f:
            stat = f.read().decode('ascii', 'replace')
        with open('/proc/sys/kernel/random/boot_id', encoding='ascii') as f:
            boot = f.read().strip()
    except OSError:
        return _identity_from_ps(pid) if not os.path.isdir('/proc/self') else None
    fields = stat[stat.rfind(')') + 2:].split()  # after "pid (command) ": state is field 3
    if len(fields) < 20 or fields[0] in ('Z', 'X'):
        return None
    return f'{boot}:{fields[19]}'  # field 22, the start time in clock ticks after boot


def _identity_from_ps(pid):
    """The start time `ps` prints for pid (systems without /proc: macOS, the BSDs)."""
    try:
        out = subprocess.run(['ps', '-o', 'lstart=', '-o', 'stat=', '-p', str(int(pid))],
                             capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    started, _, state = out.rpartition(' ')
    return started.strip() if started and not state.startswith('Z') else None


def is_alive(pid, process):
    """Whether the process recorded as (pid, identity) is still running."""
    return isinstance(pid, int) and pid > 0 and process is not None and identity(pid) == process


def write(folder, record):
    """run.json in folder, replaced whole (a reader sees the old record or the new one)."""
    write_json_atomic(os.path.join(folder, NAME), record)


def read(folder):
    """The record in folder, or None if there is none or it is not one this module wrote."""
    try:
        with open(os.path.join(folder, NAME), 'rb') as f:
            raw = f.read(MAX_RUN_RECORD + 1)
        record = json.loads(raw.decode('utf-8')) if len(raw) <= MAX_RUN_RECORD else None
    except (OSError, ValueError, RecursionError):
        return None
    ok = isinstance(record, dict) and isinstance(record.get('number'), int) and \
        isinstance(record.get('params'), dict) and isinstance(record.get('params').get('steps'), int)
    return record if ok else None


class Process:
    """A run's process that is not this server's child (an earlier server started it): what
    runs.py needs of a subprocess.Popen (poll, wait, send_signal, kill), each signal sent only
    while the pid is still the recorded process. Its exit status is unknown (only a parent
    learns it): returncode stays None, and runs.py reads how the run ended from its files."""

    returncode = None

    def __init__(self, pid, process):
        self.pid, self.process = pid, process

    def poll(self):
        """None while it runs, else 0 ("ended": how, the run's files tell)."""
        return None if is_alive(self.pid, self.process) else 0

    def wait(self, timeout=None):
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if end is not None and time.monotonic() >= end:
                raise subprocess.TimeoutExpired(f'pid {self.pid}', timeout)
            time.sleep(POLL)
        return None

    def send_signal(self, signum):
        # On Linux the process is held by a pidfd while it is checked and signalled, so the
        # number cannot pass to another program in between; elsewhere the gap is microseconds.
        pidfd = None
        try:
            if hasattr(os, 'pidfd_open'):
                pidfd = os.pidfd_open(self.pid)
            if not is_alive(self.pid, self.process):
                return  # ended, and the pid may be another program's by now
            if pidfd is not None:
                signal.pidfd_send_signal(pidfd, signum)
            else:
                os.kill(self.pid, signum)
        except ProcessLookupError:
            pass  # it ended just now
        except PermissionError:
            raise UserError(f"run process {self.pid} belongs to another user: stop it there") from None
        except OSError:  # no pidfd here (an old kernel): the plain signal, checked just before
            if is_alive(self.pid, self.process):
                os.kill(self.pid, signum)
        finally:
            if pidfd is not None:
                os.close(pidfd)

    def kill(self):
        self.send_signal(signal.SIGKILL)
