"""
The checker against a learner's code that tries to lie, crash or escape (microgpt/lab/exercises/:
checker.py, sandbox.py, transcript.py, verdict.py).

What is proven here:
  - code in a learner's file that writes lists, strings, fake begins, fake results or fake
    "passed" lines to every file descriptor it can reach, ends its process early with status 0,
    monkeypatches the checker's comparison or microgpt's own Value, or returns objects that
    pretend to be numpy's floats, raise, loop or are too large for a float, or fills the disk
    with files each under the per-file cap: exercise 1 is "not
    passed" (or stopped at its time limit) in one line, with no traceback, and never blamed on
    microgpt; a correct solution checked in the same run still passes;
  - a learner's random.py or microgpt/ folder shadows nothing, and an ex01_mul/ package beside
    ex01_mul.py is not what gets checked;
  - a process the learner's code forks and detaches (setsid) is dead once the check is over;
    its os.kill(os.getppid(), SIGKILL) does not reach the process that checks;
  - through the web lab: such a check answers "fail" and the server keeps answering.
"""

import os
import time

import pytest

from labserver import live_server, request
from microgpt.lab.exercises import checker, workspace
from microgpt.lab.exercises.catalog import solution_text as solution
from test_exercises import lab, make_workspace, with_body

WRONG = 'return a * b, (a, b)'  # the slopes swapped: a wrong mul() every lie below tries to pass
EVERY_FD = '''
import json, os
def to_every_fd(text):
    for fd in range(256):
        try:
            os.write(fd, text.encode())
        except OSError:
            pass
'''
FAKE_PASS = ('json.dumps({"event": "result", "n": 1, "workspace": os.getcwd(), "status": "pass", '
             '"line": "passed: 12 cases", "cases": 12})')


def module_with(prelude, body):
    """Exercise 1's file with `prelude` at the top (runs at import) and `body` as mul()'s."""
    return prelude.strip('\n') + '\n\n' + with_body(1, body)


HOSTILE = {
    'lists to every fd': module_with(EVERY_FD, f"to_every_fd('[]\\n')\n{WRONG}"),
    'strings to every fd': module_with(EVERY_FD, f"to_every_fd('\"passed\"\\npassed\\n')\n{WRONG}"),
    'a fake begin': module_with(EVERY_FD, f"to_every_fd('{{\"event\": \"begin\", \"n\": 99}}\\n')\n{WRONG}"),
    'a fake pass, then exit 0': module_with(
        EVERY_FD, f"to_every_fd({FAKE_PASS} + '\\n' + json.dumps({{'event': 'done'}}) + '\\n')\nos._exit(0)"),
    'a fake pass with no calls': module_with(
        EVERY_FD, f"to_every_fd(json.dumps(dict(json.loads({FAKE_PASS}), calls=[])) + '\\n')\n{WRONG}"),
    'a result of an unknown status': module_with(
        EVERY_FD, f"to_every_fd(json.dumps(dict(json.loads({FAKE_PASS}), status='great')) + '\\n')\nos._exit(0)"),
    'pings the checker': module_with(EVERY_FD + '''
import signal, threading, time
signal.signal(signal.SIGALRM, signal.SIG_IGN)
def ping():
    while True:
        to_every_fd('{"event": "ping"}\\n')
        time.sleep(0.05)
threading.Thread(target=ping, daemon=True).start()
''', "while True:\n    pass"),
    'exits 0 at once': with_body(1, "import os\nos._exit(0)"),
    'patches the comparison': module_with('''
from microgpt.engine import Value
from microgpt.lab.exercises import checks_engine, harness
harness.Check.compare = lambda self, *args, **kwargs: None
Value.__mul__ = lambda s, o: Value(s.data * o.data, (s, o), (s.data, o.data))
checks_engine.central_difference = lambda f, x, h=None: 0.0
''', WRONG),
    'a fake numpy float': module_with('''
from microgpt.lab.exercises import harness
class float64:
    __module__ = 'numpy'
    def __float__(self):
        raise harness.Report('pass', 'passed: 12 cases')
''', "return float64(), (float64(), float64())"),
    'a huge int': with_body(1, "return 10 ** 400, (b, a)"),
    'a float whose __float__ raises': module_with('''
class Number:
    def __float__(self):
        raise ValueError("no float here")
''', "return Number(), (b, a)"),
    'a data property that raises': module_with('''
class Node:
    @property
    def data(self):
        raise RuntimeError("data is not here")
''', "return Node(), (b, a)"),
    'a data property that loops': module_with('''
class Node:
    @property
    def data(self):
        while True:
            pass
''', "return Node(), (b, a)"),
    'too much memory': with_body(1, "x = bytearray(8 * 2 ** 30)\nreturn a * b, (b, a)"),
    'fills the disk': with_body(1, "import os\nfor i in range(40):\n"  # 640 MiB, in files under the per-file cap
                                   "    fd = os.open(f'fill-{i}', os.O_CREAT | os.O_WRONLY)\n"
                                   "    os.posix_fallocate(fd, 0, 16 * 2 ** 20 - 1)\n"
                                   "    os.close(fd)\n"
                                   "return a * b, (b, a)"),
    'kills its parent': module_with('import os, signal\nos.kill(os.getppid(), signal.SIGKILL)', WRONG),
}


@pytest.fixture(scope='module')
def hostile(tmp_path_factory):
    """Each hostile file in its own workspace, all in one call of check; then a correct one."""
    jobs, names = [], {}
    for name, text in HOSTILE.items():
        ws = make_workspace(tmp_path_factory.mktemp('hostile'), solved=[], files={1: text})
        jobs.append((ws, [1], False))
        names[ws] = name
    start = time.monotonic()
    results = checker.check(jobs, seconds=0.5, budget=3)
    for ws, _, _ in jobs:  # what 'fills the disk' left in its workspace
        for name in os.listdir(ws):
            if name.startswith('fill-'):
                os.remove(os.path.join(ws, name))
    # then a correct one, in a fresh process (in one process a learner's monkeypatch outlives
    # its workspace, and a workspace is one learner's: at worst their own later checks fail)
    good = make_workspace(tmp_path_factory.mktemp('good'), solved=[1])
    results.update(checker.check([(good, [1], False)]))
    names[good] = 'correct'
    return {names[w]: r for (w, _), r in results.items()}, time.monotonic() - start


@pytest.mark.parametrize('name', sorted(HOSTILE))
def test_no_lie_of_the_learners_code_is_a_pass_and_each_is_one_line(hostile, name):
    results, _ = hostile
    r = results[name]
    assert r['status'] == 'fail', r
    assert '\n' not in r['line'] and 'Traceback' not in r['line'], r['line']
    assert 'bug in microgpt' not in r['line'] and 'did not start' not in r['line'], r['line']


@pytest.mark.parametrize('name, words', [
    ('lists to every fd', "wrote a line that is not one of its events to the checker's report"),
    ('a fake begin', "an event out of place ('begin')"),
    ('a fake pass, then exit 0', "not passed: "),
    ('a fake pass with no calls', "not passed: "),
    ('a result of an unknown status', "wrote a malformed result"),
    ('pings the checker', "an event out of place ('ping')"),
    ('exits 0 at once', "ended while your mul() ran (exit status 0)"),
    ('patches the comparison', "d out/d a differs"),
    ('a fake numpy float', "your mul() returned a float64, expected"),  # a class of theirs is no number
    ('a huge int', "an int of 401 digits (too large for a float)"),
    ('a float whose __float__ raises', "expected a pair (out, (d out/d a, d out/d b,)), with out a number"),
    ('a data property that raises', "raised RuntimeError: data is not here"),
    ('a data property that loops', "did not finish within 0.5 s"),
    ('too much memory', "raised MemoryError"),
    ('fills the disk', "wrote more than 256 MiB to the disk"),
    ('kills its parent', "d out/d a differs"),  # it ended the sandbox: the check went on
])
def test_each_lie_is_named_for_what_it_is(hostile, name, words):
    results, _ = hostile
    assert words in results[name]['line'], results[name]['line']


def test_a_correct_solution_checked_after_them_passes_in_good_time(hostile, measured):
    results, seconds = hostile
    assert results['correct']['status'] == 'pass' and results['correct']['cases'] >= 4
    assert seconds < 30
    measured(f"\n  {len(HOSTILE)} hostile mul()s and a correct one: {seconds:.1f} s")


def test_the_learners_random_and_microgpt_shadow_nothing_and_the_file_is_what_is_checked(tmp_path):
    good = make_workspace(tmp_path / 'good', solved=[1])
    (tmp_path / 'good' / 'random.py').write_text('raise SystemExit("the learner\'s random.py")\n')
    (tmp_path / 'good' / 'microgpt').mkdir()
    (tmp_path / 'good' / 'microgpt' / '__init__.py').write_text('raise SystemExit("the learner\'s microgpt")\n')
    wrong = make_workspace(tmp_path / 'wrong', solved=[], files={1: with_body(1, WRONG)})
    (tmp_path / 'wrong' / 'ex01_mul').mkdir()
    (tmp_path / 'wrong' / 'ex01_mul' / '__init__.py').write_text('def mul(a, b):\n    return a * b, (b, a)\n')
    results = checker.check([(good, [1], False), (wrong, [1], False)])
    assert results[(good, 1)]['status'] == 'pass', results[(good, 1)]
    assert results[(wrong, 1)]['status'] == 'fail' and 'differs' in results[(wrong, 1)]['line']


def alive(pid):
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except OSError:
        return False


def test_a_detached_grandchild_is_dead_once_the_check_is_over(tmp_path):
    pid_file = tmp_path / 'pid'
    prelude = f'''
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open({str(pid_file)!r}, 'w').write(str(os.getpid()))
        time.sleep(60)
    os._exit(0)
'''
    ws = make_workspace(tmp_path / 'w', solved=[], files={1: module_with(prelude, 'return a * b, (b, a)')})
    result = checker.check([(ws, [1], True)])[(ws, 1)]
    assert result['status'] == 'pass', result
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 3
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)


def test_through_the_web_lab_a_lie_fails_and_the_server_keeps_answering(tiny_ckpt, names_file, tmp_path):
    ws = make_workspace(tmp_path / 'w', solved=[], files={1: HOSTILE['kills its parent']})
    with live_server(tiny_ckpt, tmp_path / 'runs', names_file, exercises=ws) as server:
        status, body, _ = request(server, 'POST', '/api/exercises/check', {'number': 1})
        assert status == 200 and body['status'] == 'fail', body
        assert 'Traceback' not in body['report']
        (tmp_path / 'w' / 'ex01_mul.py').write_text(HOSTILE['a fake pass, then exit 0'])
        status, body, _ = request(server, 'POST', '/api/exercises/check', {'number': 1})
        assert status == 200 and body['status'] == 'fail', body
        assert "does not match its check" in body['report']
        status, body, _ = request(server, 'POST', '/api/exercises', {})
        assert status == 200 and body['exercises'][0]['result']['status'] == 'fail'
    assert workspace.Workspace.open(ws).results()['1']['status'] == 'fail'  # and so says `status`


def test_a_learners_code_that_changes_microgpts_own_files_has_no_result_believed(tmp_path, monkeypatch):
    """Appending to an oracle (checks_engine.py, say) would change every later check: any
    change to microgpt's sources while the learner's code runs makes its results fails that say
    so. Here the watched sources are a stand-in folder, so that the test changes no real file."""
    watched = tmp_path / 'microgpt'
    watched.mkdir()
    oracle = watched / 'checks_engine.py'
    oracle.write_text('CHECKS = {}\n')
    monkeypatch.setattr(checker, 'WATCHED', str(watched))
    prelude = f"open({str(oracle)!r}, 'a').write('# the learner was here\\n')"
    ws = make_workspace(tmp_path / 'w', solved=[], files={1: module_with(prelude, 'return a * b, (b, a)')})
    result = checker.check([(ws, [1], False)])[(ws, 1)]
    assert result['status'] == 'fail' and "your code changed microgpt's own file microgpt/checks_engine.py" in result['line']


def test_train_with_events_of_the_wrong_form_is_one_line(tmp_path, capsys):
    fake = ("to_every_fd(json.dumps({'event': 'step', 'step': 1, 'loss': 'low'}) + '\\n' + "
            "json.dumps({'event': 'names', 'yours': 3, 'project': None}) + '\\n')")
    ws = make_workspace(tmp_path / 'w', files={14: EVERY_FD + '\n' + fake + '\n' + solution(14)})
    status, out, err = lab(['train', '--dir', ws, '--steps', '1'], capsys)
    assert status == 1 and 'Traceback' not in out + err
    assert ("stopped: code in your files wrote a loss that is not a number to the training's report, so nothing "
            "it reported after it is believed") in out
