"""
README's Python examples run as written: each ```python block, in a fresh interpreter, in a
folder holding a freshly trained out/model.json (what `make run` leaves behind).

The blocks are the project's own text, run as a learner would paste them.
"""

import os
import re
import shlex
import subprocess
import sys

import pytest

from conftest import REPO_DIR, TINY_NAMES

with open(os.path.join(REPO_DIR, 'README.md'), encoding='utf-8') as f:
    BLOCKS = re.findall(r'```python\n(.*?)```', f.read(), flags=re.S)


@pytest.fixture(scope='module')
def trained_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp('readme')
    data = folder / 'names.txt'
    data.write_text('\n'.join(TINY_NAMES) + '\n')
    result = subprocess.run([sys.executable, os.path.join(REPO_DIR, 'train.py'), '--data', str(data),
                             '--steps', '3', '--num-samples', '0', '--val-size', '0'],
                            cwd=folder, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return folder


def test_readme_has_python_examples():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize('index', range(len(BLOCKS)))
def test_each_python_example_runs_as_written(trained_folder, index):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO_DIR, os.path.join(REPO_DIR, 'src')]))
    result = subprocess.run([sys.executable, '-c', BLOCKS[index]], cwd=trained_folder, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"README block {index} failed:\n{BLOCKS[index]}\n{result.stderr}"


def readme_commands():
    """Every `python ...` command of README's shell blocks, continuation lines joined, comments
    dropped; those with a `...` placeholder left out."""
    with open(os.path.join(REPO_DIR, 'README.md'), encoding='utf-8') as f:
        blocks = re.findall(r'```bash\n(.*?)```', f.read(), flags=re.S)
    commands = []
    for block in blocks:
        for line in block.replace('\\\n', ' ').split('\n'):
            line = re.split(r'\s#\s', line)[0].strip()
            if line.startswith('python ') and '...' not in line:
                commands.append(line)
    return commands


@pytest.fixture(scope='module')
def checkout(tmp_path_factory):
    """A copy of the source checkout with a trained out/model.json and a names.txt, as a
    learner's folder is after `make run` and README's download."""
    import shutil
    folder = tmp_path_factory.mktemp('checkout')
    for name in ('microgpt', 'src'):
        shutil.copytree(os.path.join(REPO_DIR, name), folder / name, ignore=shutil.ignore_patterns('__pycache__'))
    for name in ('train.py', 'sample.py'):
        shutil.copy(os.path.join(REPO_DIR, name), folder / name)
    (folder / 'names.txt').write_text('\n'.join(TINY_NAMES) + '\n')
    result = subprocess.run([sys.executable, 'train.py', '--data', 'names.txt', '--steps', '3',
                             '--num-samples', '0', '--val-size', '0'], cwd=folder, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return folder


def test_readmes_commands_work_or_name_the_fix_without_the_environment(checkout):
    """Issue 27.5: typed in a fresh shell that has not activated .venv, README's commands ended in
    ModuleNotFoundError tracebacks (`inference`). Run here with a Python that sees none of the
    environment's packages (no numpy, no `names`, no src/ on its path), each one either works or
    says in one line what is missing and how to get it (or, for `exercises check`, reports on
    stdout an exercise not yet passed, exit status 1)."""
    commands = readme_commands()
    assert len(commands) > 20
    bare = [sys.executable, '-S', '-s', '-E']  # no site-packages, no user site, no PYTHON* variables
    for command in commands:
        argv = bare + shlex.split(command)[1:]
        result = subprocess.run(argv, cwd=checkout, capture_output=True, text=True, timeout=120)
        err = result.stderr
        assert 'Traceback' not in err + result.stdout, (command, err)
        if result.returncode != 0 and err:
            assert err.startswith('error: ') and err.count('\n') == 1, (command, err)
        if result.returncode != 0 and not err:
            assert 'exercises check' in command and result.returncode == 1, (command, result.stdout)


def collected_cases(module):
    """The cases pytest collects from a test module: each test once per parametrized value."""
    cases = 0
    for name, test in vars(module).items():
        if name.startswith('test_') and callable(test):
            n = 1
            for mark in getattr(test, 'pytestmark', []):
                if mark.name == 'parametrize':
                    n *= len(mark.args[1])
            cases += n
    return cases


@pytest.mark.parametrize('module, words', [
    ('test_lab_hostile', "have {cases} more (`tests/test_lab_hostile.py`)"),
    ('test_refusals', "`tests/test_refusals.py` has {cases} cases"),
    ('test_lab_pictures', "(`tests/test_lab_pictures.py`, {cases} cases)"),
    ('test_exercises_hostile', "(`tests/test_exercises_hostile.py`, {cases} cases)"),
])
def test_reliabilitys_counts_of_hostile_cases_are_the_tests(module, words):
    """Reliability's figure for each hostile test file is the number of cases it collects."""
    import importlib
    cases = collected_cases(importlib.import_module(module))
    with open(os.path.join(REPO_DIR, 'README.md'), encoding='utf-8') as f:
        text = ' '.join(f.read().split())
    assert words.format(cases=cases) in text
