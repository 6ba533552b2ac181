"""
The markers that say what a test needs (tests/conftest.py): a marked test skips where its extra
is missing, or MICROGPT_EXTRAS=none holds it back, and is an error under MICROGPT_EXTRAS=all; a
test that skips for want of an extra without its marker fails, since CI would run it in neither
of its two steps (.ci/run). Each case runs pytest on a small file beside a copy of conftest.py.
"""

import os
import shutil
import subprocess
import sys

import pytest

from helpers import TESTS_DIR

CASES = '''
import pytest

@pytest.mark.torch
def test_marked():
    pass

def test_unmarked_skips_for_torch():
    pytest.skip("could not import 'torch': No module named 'torch'")

def test_unmarked_skips_for_another_reason():
    pytest.skip("no IPv6 here")
'''


def outcomes(tmp_path, extras, source=CASES):
    """{test name: its outcome} of a pytest run on `source` with MICROGPT_EXTRAS=extras."""
    for name in ('conftest.py', 'helpers.py'):  # conftest imports its helpers
        shutil.copy(os.path.join(TESTS_DIR, name), tmp_path / name)
    (tmp_path / 'test_cases.py').write_text(source)
    env = dict(os.environ, MICROGPT_EXTRAS=extras)
    result = subprocess.run([sys.executable, '-m', 'pytest', '-v', '-p', 'no:cacheprovider', '-p', 'no:xdist',
                             '-o', 'markers=torch', str(tmp_path)], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=120)
    found = {}
    for line in result.stdout.splitlines():  # test_cases.py::test_marked SKIPPED (...)  [ 33%]
        words = line.split()
        if len(words) > 1 and words[0].startswith('test_cases.py::') and words[1] in ('PASSED', 'FAILED', 'SKIPPED', 'ERROR'):
            found[words[0].split('::')[1]] = words[1]
    return found, result.stdout + result.stderr


def test_a_marked_test_skips_when_held_back_and_an_unmarked_skip_for_an_extra_fails(tmp_path):
    found, out = outcomes(tmp_path, 'none')
    assert found == {'test_marked': 'SKIPPED', 'test_unmarked_skips_for_torch': 'FAILED',
                     'test_unmarked_skips_for_another_reason': 'SKIPPED'}, out
    assert "give it the extra's marker" in out


def test_a_missing_extra_is_an_error_when_every_extra_is_asked_for(tmp_path):
    source = CASES.replace('@pytest.mark.torch', '@pytest.mark.torch\n@pytest.mark.skip(reason="torch is missing")')
    found, out = outcomes(tmp_path, 'all', source)  # torch missing: refused at collection; present: the skip fails
    assert found.get('test_marked') in ('FAILED', 'ERROR') or 'MICROGPT_EXTRAS=all, but' in out, out
    assert 'MICROGPT_EXTRAS=all' in out


def test_an_unmarked_module_that_skips_for_an_extra_fails(tmp_path):
    found, out = outcomes(tmp_path, '', "import pytest\npytest.skip('could not import matplotlib', "
                                        "allow_module_level=True)\n\ndef test_a():\n    pass\n")
    assert 'ERROR' in out or 'FAILED' in out or 'failed' in out.splitlines()[-1], out
