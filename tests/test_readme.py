"""
README's Python examples run as written: each ```python block, in a fresh interpreter, in a
folder holding a freshly trained out/model.json (what `make run` leaves behind).

The blocks are the project's own text, run as a learner would paste them.
"""

import os
import re
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
