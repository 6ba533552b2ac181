"""
Learner code that loops, crashes, eats memory or floods the terminal (checker.py, harness.py):
each mistake is one line that names it, and a correct exercise checked afterwards still passes.
"""

import pytest

from helpers import make_workspace, with_body
from microgpt.lab.exercises import checker, harness

SECONDS = 1.0  # the time limit of one call, in these tests (2 s by default)
MISTAKES = {  # mul()'s body -> the words of its one line
    'loops': ('while True:\n    pass', f"did not finish within {SECONDS:g} s (an endless loop?)"),
    'swallows the time limit': ('import time\nwhile True:\n    try:\n        time.sleep(10)\n'
                                '    except BaseException:\n        pass', "stopped after 2 s"),
    'raises': ('raise ValueError("boom")', "raised ValueError: boom (ex01_mul.py line"),
    'floods': ('for i in range(1_000_000):\n    print("line", i)\nreturn a * b, (b, a)',
               "printed more than 100,000 characters"),
    'exits': ('import os\nos._exit(3)', "the checking process ended while your mul() ran (exit status 3): "
                                        "does your code call os._exit()"),
    'a string': ('return "a * b"', "returned a str ('a * b')"),
    'eats memory': ('x = bytearray(8 * 2 ** 30)\nreturn a * b, (b, a)',
                    f"took more than {harness.MEMORY_BYTES >> 20} MiB of memory"),
}


@pytest.fixture(scope='module')
def mistakes(tmp_path_factory):
    """Each mul() in its own workspace, with exercise 2 solved after it: status mode, so the
    checker must carry on to exercise 2 whatever exercise 1 did."""
    jobs, names = [], {}
    for name, (body, _) in MISTAKES.items():
        ws = make_workspace(tmp_path_factory.mktemp('w'), solved=[2], files={1: with_body(1, body)})
        jobs.append((ws, [1, 2], False))
        names[ws] = name
    results = checker.check(jobs, seconds=SECONDS, budget=2)
    return {(names[w], n): r for (w, n), r in results.items()}


@pytest.mark.parametrize('name', MISTAKES)
def test_each_mistake_is_one_line_and_the_checker_carries_on(mistakes, name):
    one = mistakes[(name, 1)]
    assert one['status'] == 'fail' and MISTAKES[name][1] in one['line'], one['line']
    assert '\n' not in one['line'] and 'Traceback' not in one['line']
    assert mistakes[(name, 2)]['status'] == 'pass'  # status carries on


def test_the_learners_random_numpy_and_microgpt_shadow_nothing(tmp_path):
    """A learner's own random.py or numpy.py (an accident, not a forgery): exercise 13's check
    imports numpy after the workspace is on sys.path, last, so it shadows nothing."""
    ws = make_workspace(tmp_path / 'w')
    for name in ('random', 'numpy'):
        (tmp_path / 'w' / f'{name}.py').write_text(f'raise SystemExit("the learner\'s {name}.py")\n')
    (tmp_path / 'w' / 'microgpt').mkdir()
    (tmp_path / 'w' / 'microgpt' / '__init__.py').write_text('raise SystemExit("the learner\'s microgpt")\n')
    results = checker.check([(ws, [1, 13], False)])
    assert [r['status'] for r in results.values()] == ['pass', 'pass'], results

