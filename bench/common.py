"""
What the benchmarks share: where ../shared/data's files are, and the environment their child
processes run in. (Each script runs with bench/ on sys.path, as `python bench/NAME.py` puts it.)
"""

import os
import subprocess

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def shared_data(name):
    """../shared/data/NAME beside the checkout (or beside a worktree's parent), else None."""
    for up in (('..',), ('..', '..')):
        path = os.path.join(REPO_DIR, *up, 'shared', 'data', name)
        if os.path.exists(path):
            return os.path.normpath(path)
    return None


def child_env(**variables):
    """This environment for a child process, with `variables` set (OPENBLAS_NUM_THREADS='1', ...)
    and OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE UNSET: this machine sets them for old OpenBLAS
    bugs; users' machines do not, and they slow numpy's matrix products."""
    env = {k: v for k, v in os.environ.items() if k not in ('OPENBLAS_CORETYPE', 'OPENBLAS_L2_SIZE')}
    return dict(env, **variables)


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
