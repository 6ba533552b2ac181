"""
Installed by `pip install --no-deps --target DIR .` (not editable), the programs still work, run
from another folder with DIR on the path: what they import is the installed copy (checked).
"""

import os
import shutil
import subprocess
import sys

import pytest

from helpers import REPO_DIR, TINY_NAMES, python
from microgpt.lab.exercises import catalog


def test_the_installed_package_trains_samples_and_ships_the_lab(tmp_path):
    """Installing microgpt adds one top-level name (src/'s packages are microgpt.inference,
    .backprop and .torchgpt); train, sample and the Training page's `python -m microgpt.train`
    run; the exercise stubs ship as package data and the checker finds the installed package."""
    target = tmp_path / 'site'
    # a copy of the source, so that the build's own folders (build/, *.egg-info) never land in
    # the checkout, where a later build could pick up their stale files
    source = tmp_path / 'source' / 'microgpt'
    shutil.copytree(REPO_DIR, source, ignore=shutil.ignore_patterns(
        '.git', '.venv', 'build', '*.egg-info', 'out', '__pycache__', '.hypothesis', '.pytest_cache', 'docs'))
    # build isolation, as a user's pip install does: the build tools come from the package index
    # (a fresh venv's own setuptools may lack bdist_wheel)
    build = subprocess.run([sys.executable, '-m', 'pip', 'install', '--quiet', '--no-deps',
                            '--disable-pip-version-check', '--target', str(target), str(source)],
                           capture_output=True, text=True, timeout=300)
    if build.returncode != 0:
        pytest.skip(f"pip could not build the project here: {build.stderr.strip().splitlines()[-1:]}")
    env, work = dict(os.environ, PYTHONPATH=str(target)), tmp_path / 'work'
    work.mkdir()

    where = python(['-c', 'import importlib.util, microgpt.inference, microgpt.backprop, microgpt.lab.runs as runs; '
                       'print(microgpt.__file__, microgpt.inference.__file__, microgpt.backprop.__file__, '
                       'runs.PACKAGE_PARENT, *(importlib.util.find_spec(n) for n in ("inference", "backprop", '
                       '"torchgpt")))'], env, work)
    assert where.returncode == 0, where.stderr
    assert where.stdout.split() == where.stdout.split()[:4] + ['None'] * 3, where.stdout
    assert all(path.startswith(str(target)) for path in where.stdout.split()[:4]), where.stdout
    assert (target / 'microgpt' / 'torchgpt' / 'model.py').exists()  # importing it needs PyTorch
    assert sorted(p.name for p in target.iterdir() if not p.name.endswith('-info') and p.name != 'bin') == ['microgpt']
    for script in ('microgpt-train', 'microgpt-sample', 'microgpt-lab'):
        assert (target / 'bin' / script).exists()

    data = work / 'names.txt'
    data.write_text('\n'.join(TINY_NAMES) + '\n')
    train = python(['-m', 'microgpt.train', '--data', str(data), '--steps', '4', '--val-size', '3',
                    '--num-samples', '0', '--n-embd', '8', '--n-head', '2'], env, work)
    assert train.returncode == 0 and (work / 'out' / 'model.json').exists(), train.stderr
    sample = python(['-m', 'microgpt.sample', '--num', '2', '--engine', 'numpy'], env, work)
    assert sample.returncode == 0 and len(sample.stdout.splitlines()) == 2, sample.stderr
    # the Training page's command, with the path runs.py adds
    again = python(['-m', 'microgpt.train', '--help'], dict(env, PYTHONPATH=where.stdout.split()[3]), work)
    assert again.returncode == 0 and '--steps' in again.stdout

    start = python(['-m', 'microgpt.lab', 'exercises', 'start', 'mine'], env, work)
    shipped = len(catalog.NUMBERS)  # every exercise of the checkout's path, none left behind by the build
    assert start.returncode == 0 and f'wrote {shipped} exercises' in start.stdout, start.stderr
    check = python(['-m', 'microgpt.lab', 'exercises', 'check', '1', '--dir', 'mine'], env, work)
    assert check.returncode == 1 and 'not written yet: ex01_mul.py' in check.stdout, check.stderr
