"""
The scalar path needs only the standard library: train.py, sample.py and `lab autograd` run in
a Python where `import numpy` fails, and what does need numpy says so in one line.

Each command runs in a subprocess whose sitecustomize makes every import of numpy raise
ImportError (as in an environment where it was never installed), so nothing in this process,
where numpy is loaded, can leak in.
"""

import os
import subprocess
import sys

import pytest

from helpers import REPO_DIR, TINY_NAMES

NO_NUMPY = '''
import importlib.abc, sys
class _NoNumpy(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == 'numpy' or name.startswith('numpy.'):
            raise ImportError(f"No module named {name!r} (this test's Python has no numpy)")
        return None
sys.meta_path.insert(0, _NoNumpy())
'''


@pytest.fixture
def no_numpy_env(tmp_path):
    site = tmp_path / 'site'
    site.mkdir()
    (site / 'sitecustomize.py').write_text(NO_NUMPY)
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join([str(site), REPO_DIR])
    return env


def run(args, env, cwd):
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def test_numpy_is_really_gone_in_that_python(no_numpy_env, tmp_path):
    """The negative control: the same subprocess cannot import numpy."""
    result = run(['-c', 'import numpy'], no_numpy_env, tmp_path)
    assert result.returncode != 0 and 'no numpy' in result.stderr


def test_train_sample_and_autograd_work_without_numpy(no_numpy_env, tmp_path):
    data = tmp_path / 'names.txt'
    data.write_text('\n'.join(TINY_NAMES) + '\n')
    out = tmp_path / 'm.json'
    train = run([os.path.join(REPO_DIR, 'train.py'), '--data', str(data), '--out', str(out),
                 '--steps', '6', '--val-size', '3', '--eval-every', '3', '--num-samples', '2',
                 '--n-embd', '8', '--n-head', '2'], no_numpy_env, tmp_path)
    assert train.returncode == 0, train.stderr
    assert 'val loss' in train.stdout and 'samples:' in train.stdout
    sample = run([os.path.join(REPO_DIR, 'sample.py'), '--ckpt', str(out), '--num', '3'],
                 no_numpy_env, tmp_path)
    assert sample.returncode == 0 and len(sample.stdout.splitlines()) == 3, sample.stderr
    lab = run(['-m', 'microgpt.lab', 'autograd', 'a * b + exp(a)', 'a=1', 'b=2'], no_numpy_env, tmp_path)
    assert lab.returncode == 0 and 'grad' in lab.stdout, lab.stderr


@pytest.mark.parametrize('args', [
    ['train.py', '--engine', 'numpy', '--steps', '2'],
    ['sample.py', '--engine', 'numpy'],
    ['-m', 'microgpt.lab', 'overview', 'anna'],
], ids=['train-numpy', 'sample-numpy', 'lab-overview'])
def test_what_needs_numpy_says_so_in_one_line(no_numpy_env, tmp_path, args):
    data = tmp_path / 'names.txt'
    data.write_text('\n'.join(TINY_NAMES) + '\n')
    ckpt = tmp_path / 'm.json'
    trained = run([os.path.join(REPO_DIR, 'train.py'), '--data', str(data), '--out', str(ckpt),
                   '--steps', '2', '--val-size', '0', '--num-samples', '0', '--n-embd', '8',
                   '--n-head', '2'], no_numpy_env, tmp_path)
    assert trained.returncode == 0, trained.stderr
    script = [os.path.join(REPO_DIR, args[0])] + args[1:] if args[0].endswith('.py') else args
    extra = (['--data', str(data), '--out', str(tmp_path / 'n.json')] if args[0] == 'train.py'
             else ['--ckpt', str(ckpt)])
    result = run(script + extra, no_numpy_env, tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith('error: ') and result.stderr.count('\n') == 1, result.stderr
    assert 'pip install numpy' in result.stderr and 'Traceback' not in result.stderr
