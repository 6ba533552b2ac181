"""
What the benchmarks share: the data's place, the children's environment and launch, the clocks,
the processor's name. Each script runs as `python bench/NAME.py`, which puts bench/ on sys.path;
importing this module puts the checkout there too, installed or not.
"""

import json
import os
import resource
import subprocess
import sys
import time

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_DIR)
TORCH_HINT = "pip install -e '.[torch]'"  # PyTorch, optional: the extra pins its version


def shared_data(name):
    """../shared/data/NAME beside the checkout (or beside a worktree's parent), else None."""
    for up in (('..',), ('..', '..')):
        path = os.path.join(REPO_DIR, *up, 'shared', 'data', name)
        if os.path.exists(path):
            return os.path.normpath(path)
    return None


def read_text(path):
    with open(path, encoding='utf-8') as f:
        return f.read()


def train_flags(settings):
    """train.py's flags for a dict of its settings: --name value, or --name alone for a switch
    that is on (rope=True: --rope)."""
    flags = []
    for name, value in settings.items():
        flag = f"--{name.replace('_', '-')}"
        flags += [flag] if value is True else [] if value is False else [flag, str(value)]
    return flags


def child_env(threads=None, **variables):
    """This environment for a child process, with `variables` set, OPENBLAS_NUM_THREADS and
    OMP_NUM_THREADS set to `threads` if given, and OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE UNSET:
    this machine sets them for old OpenBLAS bugs; users' machines do not, and they slow numpy's
    matrix products."""
    env = {k: v for k, v in os.environ.items() if k not in ('OPENBLAS_CORETYPE', 'OPENBLAS_L2_SIZE')}
    if threads is not None:
        variables.update(OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    return dict(env, **variables)


def run_child(script, args, env=None, what='child', prefix=()):
    """Run `script` (a path) with `args` in a fresh Python, and return the JSON object its stdout
    ends with, or None (the child's stderr printed) where it failed."""
    result = subprocess.run([sys.executable, *prefix, os.path.abspath(script), *map(str, args)],
                            capture_output=True, text=True, env=env or child_env())
    lines = [line for line in result.stdout.splitlines() if line.startswith('{')]
    if result.returncode != 0 or not lines:
        print(f"  the {what} failed:\n{result.stderr[-2000:]}")
        return None
    return json.loads(lines[-1])


def peak_rss_bytes():
    """This process's peak resident memory so far, in bytes: VmHWM, the kernel's high-water mark
    (getrusage's ru_maxrss where /proc is missing, e.g. macOS: on Linux it survives fork and exec
    and would report the parent's size)."""
    try:
        with open('/proc/self/status') as f:
            for line in f:
                if line.startswith('VmHWM:'):
                    return int(line.split()[1]) * 1024  # reported in kB
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == 'darwin' else peak * 1024  # macOS reports bytes, others KiB


def best_time(fn, repeats):
    """The shortest of `repeats` wall-clock timings of fn(), in seconds, and fn's last result: the
    minimum is the least disturbed by whatever else the machine is doing."""
    best = float('inf')
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def timed_saves(path, steps, every, folder, repeats):
    """(how many saves a run of `steps` made, saving every `every` steps and at its end; the mean
    seconds one takes): the run's own final checkpoint at path written again into folder, the
    same file, `repeats` times."""
    from microgpt.edge.checkpoint import read_checkpoint, write_checkpoint
    ckpt = read_checkpoint(path, training=True)
    start = time.perf_counter()
    for _ in range(repeats):
        write_checkpoint(os.path.join(folder, 'copy' + os.path.splitext(path)[1]), ckpt)
    return steps // every + (steps % every != 0), (time.perf_counter() - start) / repeats


def load():
    """The load averages, for a printout: the machine is shared, and a busy one is slower."""
    return ' '.join(f'{x:.2f}' for x in os.getloadavg())


def processor():
    """lscpu's model name (with its family, model and AVX-512), or platform's: every figure
    names the processor it was measured on."""
    try:
        out = subprocess.run(['lscpu'], capture_output=True, text=True).stdout
        field = {k.strip(): v.strip() for k, _, v in (line.partition(':') for line in out.splitlines())}
        avx512 = ', AVX-512' if 'avx512f' in field.get('Flags', '').split() else ''
        return f"{field['Model name']} (family {field.get('CPU family', '?')} model {field.get('Model', '?')}{avx512})"
    except (OSError, KeyError):
        import platform
        return platform.processor() or 'unknown'
