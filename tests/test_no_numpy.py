"""
The scalar path needs only the standard library: train.py, sample.py and `lab autograd` run in a
subprocess whose sitecustomize makes `import numpy` fail, and what needs numpy says so in one line.
"""

import os
import sys

from helpers import REPO_DIR, TINY_NAMES, python

NO_NUMPY = '''
import importlib.abc, sys
class _NoNumpy(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == 'numpy' or name.startswith('numpy.'):
            raise ImportError(f"No module named {name!r} (this test's Python has no numpy)")
        return None
sys.meta_path.insert(0, _NoNumpy())
'''


def test_the_scalar_path_runs_without_numpy_and_what_needs_it_says_so(tmp_path):
    (tmp_path / 'site').mkdir()
    (tmp_path / 'site' / 'sitecustomize.py').write_text(NO_NUMPY)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / 'site'), REPO_DIR]))
    result = python(['-c', 'import numpy'], env, tmp_path)  # the negative control: numpy is really gone
    assert result.returncode != 0 and 'no numpy' in result.stderr
    data, out = tmp_path / 'names.txt', tmp_path / 'm.json'
    data.write_text('\n'.join(TINY_NAMES) + '\n')
    train = python([os.path.join(REPO_DIR, 'train.py'), '--data', str(data), '--out', str(out),
                    '--steps', '6', '--val-size', '3', '--eval-every', '3', '--num-samples', '2',
                    '--n-embd', '8', '--n-head', '2'], env, tmp_path)
    assert train.returncode == 0, train.stderr
    assert 'val loss' in train.stdout and 'samples:' in train.stdout
    sample = python([os.path.join(REPO_DIR, 'sample.py'), '--ckpt', str(out), '--num', '3'], env, tmp_path)
    assert sample.returncode == 0 and len(sample.stdout.splitlines()) == 3, sample.stderr
    lab = python(['-m', 'microgpt.lab', 'autograd', 'a * b + exp(a)', 'a=1', 'b=2'], env, tmp_path)
    assert lab.returncode == 0 and 'grad' in lab.stdout, lab.stderr
    for args in ([os.path.join(REPO_DIR, 'train.py'), '--engine', 'numpy', '--steps', '2', '--data', str(data),
                  '--out', str(tmp_path / 'n.json')],
                 [os.path.join(REPO_DIR, 'sample.py'), '--engine', 'numpy', '--ckpt', str(out)],
                 ['-m', 'microgpt.lab', 'overview', 'anna', '--ckpt', str(out)]):
        result = python(args, env, tmp_path)
        assert result.returncode == 2 and result.stderr.startswith('error: '), (args, result.stderr)
        assert result.stderr.count('\n') == 1 and 'pip install numpy' in result.stderr, result.stderr
