"""
Learner code that loops, crashes, eats memory or floods the terminal (microgpt/lab/exercises/:
checker.py, harness.py): each mistake is one line that names it, never a traceback; the checker
carries on (status) or stops (check) as documented, and nothing hangs the command line or the lab.

The checker does not defend against code that forges its own pass (docs/reliability.md, the
threat model): no test here does that.
"""

import time

import pytest

from helpers import live_server, make_workspace, request, with_body
from microgpt.lab.exercises import checker, harness

SECONDS = 1.0  # the time limit of one call, in these tests (2 s by default)
MISTAKES = {  # mul()'s body -> the words of its one line
    'loops': ('while True:\n    pass', f"did not finish within {SECONDS:g} s (an endless loop?)"),
    'swallows the time limit': ('import time\nwhile True:\n    try:\n        time.sleep(10)\n'
                                '    except BaseException:\n        pass', "stopped after 2 s"),
    'raises': ('raise ValueError("boom")', "raised ValueError: boom (ex01_mul.py line"),
    'floods': ('for i in range(1_000_000):\n    print("line", i)\nreturn a * b, (b, a)',
               "printed more than 100,000 characters"),
    'a string': ('return "a * b"', "returned a str ('a * b')"),
    'exits': ('import os\nos._exit(3)', "the checking process ended while your mul() ran (exit status 3): "
                                        "does your code call os._exit()"),
    'eats memory': ('x = bytearray(8 * 2 ** 30)\nreturn a * b, (b, a)',
                    f"took more than {harness.MEMORY_BYTES >> 20} MiB of memory"),
    'prints a pass': ('print("passed: 12 cases " * 100)\nreturn a * b, (a, b)', "d out/d a differs"),
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
    start = time.monotonic()
    results = checker.check(jobs, seconds=SECONDS, budget=2)
    return {(names[w], n): r for (w, n), r in results.items()}, time.monotonic() - start


@pytest.mark.parametrize('name', MISTAKES)
def test_each_mistake_is_one_line_and_the_checker_carries_on(mistakes, name):
    results, _ = mistakes
    one = results[(name, 1)]
    assert one['status'] == 'fail' and MISTAKES[name][1] in one['line'], one['line']
    assert '\n' not in one['line'] and 'Traceback' not in one['line']
    assert results[(name, 2)]['status'] == 'pass'  # status carries on


def test_they_take_their_time_limits_not_more(mistakes, measured):
    _, seconds = mistakes
    assert seconds < 30
    measured(f"\n  {len(MISTAKES)} mistaken mul()s, each followed by a passing exercise 2: {seconds:.1f} s")


def test_what_a_case_printed_is_shown_bounded_beside_the_checkers_words(mistakes):
    results, _ = mistakes
    printed = dict(results[('prints a pass', 1)]['details'])['printed']
    assert len(printed) < harness.OUTPUT_SHOWN + 40 and printed.endswith(f"({17 * 100 + 1:,} characters in all)")


def test_a_thread_the_learner_leaves_running_does_not_hold_the_checker(tmp_path):
    body = 'import threading, time\nthreading.Thread(target=time.sleep, args=(600,)).start()\nreturn a * b, (b, a)'
    ws = make_workspace(tmp_path / 'w', solved=[2], files={1: with_body(1, body)})
    start = time.monotonic()
    results = checker.check([(ws, [1, 2], True)])
    assert [r['status'] for r in results.values()] == ['pass', 'pass'] and time.monotonic() - start < 20


def test_the_learners_random_numpy_and_microgpt_shadow_nothing(tmp_path):
    """Exercise 13's check imports numpy after the workspace is on sys.path: last, it shadows nothing."""
    ws = make_workspace(tmp_path / 'w')
    for name in ('random', 'numpy'):
        (tmp_path / 'w' / f'{name}.py').write_text(f'raise SystemExit("the learner\'s {name}.py")\n')
    (tmp_path / 'w' / 'microgpt').mkdir()
    (tmp_path / 'w' / 'microgpt' / '__init__.py').write_text('raise SystemExit("the learner\'s microgpt")\n')
    results = checker.check([(ws, [1, 13], False)])
    assert [r['status'] for r in results.values()] == ['pass', 'pass'], results


def test_through_the_web_lab_a_crash_is_a_fail_and_the_server_keeps_answering(tiny_ckpt, names_file, tmp_path):
    ws = make_workspace(tmp_path / 'w', solved=[], files={1: with_body(1, MISTAKES['exits'][0])})
    with live_server(tiny_ckpt, tmp_path / 'runs', names_file, exercises=ws) as server:
        status, body, _ = request(server, 'POST', '/api/exercises/check', {'number': 1})
        assert status == 200 and body['status'] == 'fail' and 'os._exit()' in body['report'], body
        status, body, _ = request(server, 'POST', '/api/exercises', {})
        assert status == 200 and body['exercises'][0]['result']['status'] == 'fail'
