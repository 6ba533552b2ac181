"""
Installed with pip (not editable, not from a checkout), the programs still work.

`pip install --no-deps --target DIR .` builds the project as a user's `pip install .` would and
puts the package alone in DIR; the commands then run from another folder with DIR first on the
path, so what they import is the installed copy, not this checkout (checked). numpy and names
come from the test environment, as they would from the user's.
"""

import os
import shutil
import subprocess
import sys

import pytest

from helpers import REPO_DIR, TINY_NAMES
from microgpt.lab.exercises import catalog


@pytest.fixture(scope='module')
def installed(tmp_path_factory):
    target = tmp_path_factory.mktemp('site')
    # a copy of the source, so that the build's own folders (build/, *.egg-info) never land in
    # the checkout, where a later build could pick up their stale files
    source = tmp_path_factory.mktemp('source') / 'microgpt'
    shutil.copytree(REPO_DIR, source, ignore=shutil.ignore_patterns(
        '.git', '.venv', 'build', '*.egg-info', 'out', '__pycache__', '.hypothesis', '.pytest_cache', 'docs'))
    # build isolation, as a user's pip install does: the build tools come from the package index
    build = subprocess.run([sys.executable, '-m', 'pip', 'install', '--quiet', '--no-deps',
                            '--disable-pip-version-check', '--target', str(target), str(source)],
                           capture_output=True, text=True, timeout=300)
    if build.returncode != 0:
        pytest.skip(f"pip could not build the project here: {build.stderr.strip().splitlines()[-1:]}")
    env = dict(os.environ, PYTHONPATH=str(target))
    return target, env


def run(args, env, cwd):
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def test_the_installed_package_is_what_runs_under_its_own_name(installed, tmp_path):
    """Installing microgpt adds one top-level name: the numpy port, the numpy trainer and the
    PyTorch module are microgpt.inference, microgpt.backprop and microgpt.torchgpt, and a name
    another distribution owns (`inference` is one) is not taken."""
    target, env = installed
    where = run(['-c', 'import microgpt.inference, microgpt.backprop; '
                       'print(microgpt.__file__, microgpt.inference.__file__, microgpt.backprop.__file__)'], env, tmp_path)
    assert where.returncode == 0, where.stderr
    assert all(path.startswith(str(target)) for path in where.stdout.split()), where.stdout
    assert (target / 'microgpt' / 'torchgpt' / 'model.py').exists()  # importing it needs PyTorch
    assert sorted(p.name for p in target.iterdir() if not p.name.endswith('-info') and p.name != 'bin') == ['microgpt']
    for name in ('inference', 'backprop', 'torchgpt'):
        assert run(['-c', f'import {name}'], env, tmp_path).returncode != 0, name
    for script in ('microgpt-train', 'microgpt-sample', 'microgpt-lab'):
        assert (target / 'bin' / script).exists()


def test_train_and_sample_run_installed(installed, tmp_path):
    _, env = installed
    data = tmp_path / 'names.txt'
    data.write_text('\n'.join(TINY_NAMES) + '\n')
    train = run(['-m', 'microgpt.train', '--data', str(data), '--steps', '4', '--val-size', '3',
                 '--num-samples', '0', '--n-embd', '8', '--n-head', '2'], env, tmp_path)
    assert train.returncode == 0, train.stderr
    assert (tmp_path / 'out' / 'model.json').exists()
    sample = run(['-m', 'microgpt.sample', '--num', '2', '--engine', 'numpy'], env, tmp_path)
    assert sample.returncode == 0 and len(sample.stdout.splitlines()) == 2, sample.stderr


def test_the_web_labs_training_page_can_train_installed(installed, tmp_path):
    """The Training page starts `python -m microgpt.train`: installed, that finds the package."""
    _, env = installed
    code = ("from microgpt.lab import runs; import inspect; "
            "print(runs.PACKAGE_PARENT)")
    result = run(['-c', code], env, tmp_path)
    assert result.returncode == 0, result.stderr
    parent = result.stdout.strip()
    assert os.path.isdir(os.path.join(parent, 'microgpt')) and not parent.startswith(REPO_DIR)
    again = subprocess.run([sys.executable, '-m', 'microgpt.train', '--help'], cwd=tmp_path,
                           env=dict(env, PYTHONPATH=parent), capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and '--steps' in again.stdout


def test_the_exercises_ship_and_check_installed(installed, tmp_path):
    """The stubs are package data (files/*.py): installed, `start` writes them, and the checker's
    subprocess finds the installed package, not this checkout."""
    target, env = installed
    assert (target / 'bin' / 'microgpt-exercises').exists()
    start = run(['-m', 'microgpt.lab', 'exercises', 'start', 'mine'], env, tmp_path)
    shipped = len(catalog.NUMBERS)  # every exercise of the checkout's path, none left behind by the build
    assert start.returncode == 0 and f'wrote {shipped} exercises' in start.stdout, start.stderr
    check = run(['-m', 'microgpt.lab', 'exercises', 'check', '1', '--dir', 'mine'], env, tmp_path)
    assert check.returncode == 1 and 'not written yet: ex01_mul.py' in check.stdout, check.stderr
