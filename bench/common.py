"""
What the benchmarks share: where ../shared/data's files are, and the environment their child
processes run in. (Each script runs with bench/ on sys.path, as `python bench/NAME.py` puts it.)
"""

import os

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
