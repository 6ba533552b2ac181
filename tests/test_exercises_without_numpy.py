"""
The exercises run by a fresh venv's Python (no packages) in a copy of the checkout: what needs no
numpy is still checked, what needs it says so in one line, and `status` never counts a pass as a
failure for want of numpy.
"""

import os
import shutil
import subprocess
import sys

import pytest

from helpers import REPO_DIR, make_workspace
from microgpt.lab.exercises import catalog

N = len(catalog.EXERCISES)
NEEDS_NUMPY = [e.number for e in catalog.EXERCISES if e.needs_numpy]
BARE = []  # the venv's python, once the checkout fixture has made it


@pytest.fixture(scope='module')
def checkout(tmp_path_factory):
    """A copy of the checkout (microgpt/, src/, pyproject.toml) with a workspace `ws` of the
    reference solutions, where exercise 11 is a stub; and a fresh venv without packages."""
    venv = tmp_path_factory.mktemp('venv')
    subprocess.run([sys.executable, '-m', 'venv', '--without-pip', str(venv)], check=True)
    BARE[:] = [str(venv / 'bin' / 'python')]
    folder = tmp_path_factory.mktemp('checkout')
    for name in ('microgpt', 'src'):
        shutil.copytree(os.path.join(REPO_DIR, name), folder / name, ignore=shutil.ignore_patterns('__pycache__'))
    shutil.copy(os.path.join(REPO_DIR, 'pyproject.toml'), folder / 'pyproject.toml')
    make_workspace(folder / 'ws', solved=[n for n in catalog.NUMBERS if n != 11])
    return folder


def bare(checkout, *argv, folder='ws'):
    return subprocess.run(BARE + (['-m', 'microgpt.lab', 'exercises', *argv, '--dir', folder] if argv[0] != '-c'
                                  else list(argv)), cwd=checkout, capture_output=True, text=True, timeout=300)


def test_an_exercise_that_needs_numpy_says_so_in_one_line(checkout):
    result = bare(checkout, '-c', 'import numpy')  # the negative control: that Python really lacks numpy
    assert result.returncode != 0 and 'numpy' in result.stderr
    for n in (13, 17):
        result = bare(checkout, 'check', str(n))
        err = result.stderr
        assert result.returncode == 2 and err.startswith('error: ') and err.count('\n') == 1, err
        assert f'exercise {n} ' in err and 'lacks numpy' in err
        assert '.venv/bin/python -m microgpt.lab exercises check' in err and 'pip install -e .' in err
        assert 'Traceback' not in err + result.stdout


def test_status_and_check_count_no_pass_as_a_failure_for_want_of_numpy(checkout):
    result = bare(checkout, 'status')
    out = result.stdout
    assert result.returncode == 0 and 'Traceback' not in out + result.stderr, result.stderr
    checkable = N - len(NEEDS_NUMPY) - 1  # every one this Python can check passes, but the stub 11
    assert f"{checkable} of {N} pass, {len(NEEDS_NUMPY)} not checked here (they need numpy)" in out, out
    lines = {line.split()[1]: line for line in out.split('\n') if line.startswith('    ')}
    for n in NEEDS_NUMPY:
        assert lines[str(n)].lstrip().startswith('–') and 'not checked: it needs numpy' in lines[str(n)]
    assert lines['11'].lstrip().startswith('·') and 'not written yet' in lines['11']
    assert not any(line.lstrip().startswith(('✗', '!')) for line in lines.values()), out  # 1..10, 21 pass
    assert 'to check them: ' in out and '.venv/bin/python' in out
    result = bare(checkout, 'check')  # check all: what it can, up to the stub
    assert result.returncode == 1 and 'Traceback' not in result.stdout + result.stderr
    assert 'stopped at exercise 11' in result.stdout and '✓ exercise 10 (softmax): passed' in result.stdout


def test_train_lists_no_unchecked_exercise_as_not_passing(checkout, tmp_path):
    ws = make_workspace(tmp_path / 'ws')  # every exercise solved: train's check has nothing to stop it
    out = bare(checkout, 'train', '--steps', '1', folder=ws).stdout
    assert 'Traceback' not in out and 'not passing' not in out, out
    assert 'not checked here: exercise 13 (gpt), exercise 14 (name_loss)' in out
