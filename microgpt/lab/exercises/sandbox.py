"""
The process between the checker and the learner's code: `python -I sandbox.py CONFIG`.

checker.py starts it (as the leader of a process group of its own) and it starts runner.py,
the process that imports the learner's files, so that:
  - the learner's parent is this process, never the command line's or the web lab's: a
    learner's os.kill(os.getppid(), ...) ends this one, and the checker reports that;
  - runner.py runs with a memory cap (RLIMIT_AS) and a cap on each file it writes
    (RLIMIT_FSIZE), in this process group, which the checker kills whole at the end;
  - what the learner's code starts and detaches (a fork that calls setsid() leaves the group)
    is re-parented here (PR_SET_CHILD_SUBREAPER, Linux) and killed when the check ends;
  - past CONFIG's deadline everything is killed, even if the checker itself is gone;
  - what the learner's code writes is watched (what CONFIG's 'folders', the workspaces, hold,
    every DISK_POLL_S): past CONFIG's 'disk' bytes more than at the start, everything is killed
    and the exit status is CONFIG's 'disk_status' (the disk's free space would count what other
    programs write too).
It imports nothing of the project (and runs with -I: no script folder or user site on its
path), so no file of the learner's can stand in for a module of it.
"""

import json
import os
import signal
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
POLL_S = 0.02  # how often the deadline is looked at
DISK_POLL_S = 0.1  # how often the folders' size is (written at 1 GB/s: 100 MB past the cap, caught at the result)


def bytes_held(folder, most_entries=100_000):
    """The disk a folder's files take (their allocated blocks), down its tree; at most
    most_entries entries are looked at (a learner's million tiny files stop the count, not us)."""
    total, seen, stack = 0, 0, [folder]
    while stack and seen < most_entries:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    seen += 1
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    elif entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_blocks * 512
        except OSError:
            continue
    return total


def become_subreaper():
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError, ImportError):
        pass  # not Linux: the process group is still killed whole


def limits(memory, file_size):
    """Runs in runner.py's process before Python starts."""
    def apply():
        import resource
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the cap fails (EFBIG) instead of killing
        for which, value in ((resource.RLIMIT_AS, memory), (resource.RLIMIT_FSIZE, file_size)):
            try:
                resource.setrlimit(which, (value, value))
            except (ValueError, OSError):
                pass
    return apply


def descendants():
    """Processes whose parent is this one, or that share its process group (pids)."""
    me, group, found = os.getpid(), os.getpgid(0), []
    try:
        pids = [int(p) for p in os.listdir('/proc') if p.isdigit()]
    except OSError:
        return found
    for pid in pids:
        try:
            with open(f'/proc/{pid}/stat', 'rb') as f:
                fields = f.read().rsplit(b')', 1)[1].split()
        except (OSError, IndexError):
            continue
        if pid != me and (int(fields[1]) == me or int(fields[2]) == group):
            found.append(pid)
    return found


def kill_all(runner):
    """The runner, then whatever it left: killed and reaped, until none is left."""
    try:
        runner.kill()
    except OSError:
        pass
    for _ in range(200):
        left = descendants()
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                pid = 0
            if not pid:
                break
        if not left:
            return
        time.sleep(0.01)


def main(argv):
    config = json.loads(argv[0])
    become_subreaper()
    runner = subprocess.Popen(config['command'], stdin=subprocess.DEVNULL, cwd=config['cwd'],
                              pass_fds=tuple(config['pass_fds']),
                              preexec_fn=limits(config['memory'], config['file_size']))
    signal.signal(signal.SIGTERM, lambda *_: (kill_all(runner), os._exit(143)))
    deadline = time.monotonic() + config['seconds']
    held = lambda: sum(bytes_held(folder) for folder in config['folders'])  # noqa: E731
    held_at_start, next_look = held(), time.monotonic() + DISK_POLL_S
    while True:
        try:
            status = runner.wait(timeout=max(0.005, min(POLL_S, deadline - time.monotonic())))
            break
        except subprocess.TimeoutExpired:
            if time.monotonic() > deadline:
                status = -signal.SIGKILL
                break
            if time.monotonic() >= next_look:
                next_look = time.monotonic() + DISK_POLL_S
                if held() - held_at_start > config['disk']:
                    kill_all(runner)
                    return config['disk_status']
    kill_all(runner)
    return status if status >= 0 else 128 - status


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
