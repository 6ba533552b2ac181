"""
The lab's commands and its web API on hostile or unlucky input.

A mistake in what was typed or sent ends as one line: `error: ...` with exit status 2 and no
traceback for a command, a JSON 400 with one line for a request, never a traceback or a 500;
a message quotes at most a short piece of what it was handed (edge.checks.short). Where one
part of an answer cannot be given (In phases' lines of model.py), the rest is answered and
that part says why. The commands run through cli.run, as `python -m microgpt.lab` runs them,
or in a subprocess where the process itself is the case (a deleted folder, a stopped server);
the requests go to a live server (tests/helpers.py).

README's Reliability section counts these cases; tests/test_readme.py checks its count.

Run: .venv/bin/python -m pytest -q tests/test_lab_hostile.py
"""

import shutil
import signal

import pytest

from helpers import BRIEF, assert_one_line, live_server, request, run_lab, server_process
from microgpt.lab import phases

LONG = 'a' * 100_000  # a pasted file, say: each message quotes a few dozen characters of it


def one_hot(weights):
    """The greedy limit of a softmax: weight 1 on the best key (shared by a tie), 0 elsewhere."""
    top = max(weights)
    return top > 0.49 and abs(sum(weights) - 1) < 1e-12 and all(w in (0.0, top) for w in weights)


# ---------------------------------------------------------------------------- the commands
@pytest.mark.parametrize('rows, words', [
    (['1,0', '1'], "W_O must be 4 x 4 (d x d), got 2 rows"),
    (['1 0 0 0', '0 1 0 0', '0 0 1 0', '0 0 0'], "W_O row 4 has 3 numbers but k1 has 4"),
])
def test_a_ragged_w_o_is_one_line(rows, words, capsys):
    """Was a ValueError from numpy (an inhomogeneous shape) and its traceback."""
    assert_one_line(*run_lab(['byhand', '--w-o', *rows], capsys)[::2], words)


@pytest.mark.parametrize('temperature', ['1e-308', '5e-324'])
def test_a_tiny_temperature_on_the_row_is_its_greedy_limit(temperature, capsys):
    """Was LinAlgError: the scores / temperature overflowed to inf, the softmax gave nan."""
    status, out, err = run_lab(['scaling', '--part', 'row', '--temperature', temperature], capsys)
    assert status == 0 and err == '', err
    rows = [line.split() for line in out.splitlines() if line[:3].strip().isdigit()]
    assert len(rows) == 8 and one_hot([float(r[-1]) for r in rows])


@pytest.mark.parametrize('argv, words', [
    (['overview', LONG], 'TEXT'), (['attention', LONG], 'TEXT'), (['phases', LONG], 'TEXT'),
    (['step', 'emma', '--engine', LONG], '--engine'), (['step', 'emma', '--param', LONG], '--param'),
    (['step', 'emma', '--param', f"wte[{'1' * 5000}][1]"], '--param'),  # was a ValueError: 5000 digits
    (['scaling', '--part', LONG], '--part'), (['scaling', '--part', 'index', '--tab', LONG], '--tab'),
    (['scaling', '--part', 'index', f'h=3{LONG}'], "'h=3aaa"),
    (['autograd', 'a', 'a=1', f'{LONG}=2'], 'variable name'), (['autograd', 'a', 'a=1', f'b={LONG}'], 'not a number'),
    (['autograd', 'b' * 900], 'variable name'),
])
def test_an_input_of_100000_characters_is_quoted_in_a_few(argv, words, tiny_ckpt, capsys):
    """Each message once quoted the whole input: 100,000 characters on one line."""
    model_free = argv[0] in ('scaling', 'autograd')
    assert_one_line(*run_lab(argv + ([] if model_free else ['--ckpt', tiny_ckpt]), capsys)[::2], words)


def test_stopping_a_server_with_no_run_going_says_nothing_of_one(tiny_ckpt, names_file, tmp_path):
    """Ctrl-C said "a training run still going is saved as with Ctrl-C" with no run at all."""
    with server_process(tiny_ckpt, tmp_path, names_file) as (proc, address):
        assert request(address, 'GET', '/api/config')[0] == 200  # serving, its Ctrl-C handler on
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out.endswith('\nstopping\n') and 'run' not in out.split('\n', 1)[1], out


# ---------------------------------------------------------------------------- the requests
@pytest.fixture(scope='module')
def here(tiny_ckpt, names_file, tmp_path_factory):
    """A live server of its own (it computes in this process), so that a test may change what it reads."""
    with live_server(tiny_ckpt, tmp_path_factory.mktemp('runs'), names_file) as s:
        yield s


@pytest.mark.parametrize('rows, words', [
    (['1, 0', '1'], "W_O must be 4 x 4 (d x d), got 2 rows"),
    (['1 0 0 0', '0 1 0 0', '0 0 1 0', '0 0 0'], "W_O row 4 has 3 numbers but k1 has 4"),
])
def test_a_ragged_w_o_request_is_a_400(server, rows, words):
    """Was a 500 for the same ValueError."""
    status, body, _ = request(server, 'POST', '/api/byhand', {'w_o': rows})
    assert status == 400 and words in body['error'] and '\n' not in body['error']


@pytest.mark.parametrize('temperature', [1e-308, 5e-324])
def test_a_tiny_temperature_request_answers_the_greedy_row(server, temperature):
    """Was a 500 for the same LinAlgError, on a random row and on a model's own scores."""
    for extra in ({}, {'scores': [0.5, 2.0, -1.0], 'row_d': 4}):
        status, body, _ = request(server, 'POST', '/api/scaling',
                                  {'part': 'row', 'temperature': temperature, **extra})
        assert status == 200, body
        assert one_hot(body['weights']) and body['weights'][body['raw'].index(max(body['raw']))] == 1.0


BROKEN_MODEL_PY = {  # what model.py holds -> what the page says of it
    'syntax': (b'def gpt(self:\n', 'microgpt/model.py does not parse: '),
    'renamed': (b'def forward(self, token_id):\n    return token_id\n', 'microgpt/model.py has no function gpt()'),
    'not UTF-8': (b'# caf\xe9\ndef gpt():\n    pass\n', 'microgpt/model.py is not UTF-8 text (byte 0xe9'),
    'missing': (None, 'microgpt/model.py cannot be read: No such file or directory'),
}


@pytest.mark.parametrize('case', list(BROKEN_MODEL_PY))
def test_phases_keeps_its_numbers_when_model_py_cannot_be_read(here, case, tmp_path, monkeypatch, capsys):
    """Was a 500 for the whole page. A copy of model.py is broken, never the real one: the
    numbers stand, and the code beside them says what failed (on the page and in the printout)."""
    body = {'text': 'emma', 'head': 1, 'query': 2}
    status, want, _ = request(here, 'POST', '/api/phases', body)
    assert status == 200 and 'error' not in want['code']
    content, words = BROKEN_MODEL_PY[case]
    copy = tmp_path / 'model.py'
    if content is not None:
        copy.write_bytes(content)
    monkeypatch.setattr(phases, 'MODEL_FILE', str(copy))
    status, got, _ = request(here, 'POST', '/api/phases', body)
    assert status == 200, got
    assert got['code']['error'].startswith(words) and got['code']['error'].endswith("gpt()'s lines are not shown")
    assert {k: v for k, v in got.items() if k != 'code'} == {k: v for k, v in want.items() if k != 'code'}
    status, out, err = run_lab(['phases', 'emma', '--head', '1', '--query', '2', '--ckpt', here.lab.checkpoints.path('start')],
                               capsys)
    assert status == 0 and err == '' and f"({got['code']['error']})" in out and 'softmax' in out


@pytest.mark.parametrize('route, body, words', [
    ('/api/sampling', {'temperature': 1.0},
     "unknown field 'temperature': this route takes prompt, temperatures, top_k, num, length, names_at, seed, ckpt"),
    ('/api/sampling', {'data': '/etc/passwd'}, "unknown field 'data'"),  # the command line's alone
    ('/api/overview', {'text': 'emma', 'x' * 5000: 1}, "unknown field 'xxxxxxxx"),
    ('/api/train/start', {'step': 5}, "unknown field 'step': this route takes steps, n_layer"),
    ('/api/train/status', {'ofset': 0}, "unknown field 'ofset': this route takes offset"),
    ('/api/train/stop', {'now': True}, "unknown field 'now': this route takes no fields"),
])
def test_a_field_the_route_does_not_take_is_a_400_naming_the_ones_it_does(server, route, body, words):
    """Was 200 with the default: "temperature" for "temperatures" drew at 0, 0.5, 1 and 2."""
    status, answer, _ = request(server, 'POST', route, body)
    assert status == 400 and answer['error'].startswith(words) and len(answer['error']) < BRIEF, answer
    assert request(server, 'POST', '/api/train/status', {})[1]['state'] == 'idle'  # no run was started


def test_the_listing_says_which_checkpoint_has_no_log(server, tiny_ckpt, names_file, tmp_path):
    """The Loss page asked /api/loss of a checkpoint without a log (any converted one) and the
    browser logged its 400; the listing now says, and the page asks nothing
    (test_lab_pages_browser.py checks the page)."""
    assert request(server, 'GET', '/api/config')[1]['checkpoints'][0]['log'] is True
    bare = tmp_path / 'converted' / 'model.json'
    bare.parent.mkdir()
    shutil.copy(tiny_ckpt, bare)
    with live_server(str(bare), tmp_path / 'runs', names_file) as other:
        assert request(other, 'GET', '/api/config')[1]['checkpoints'][0]['log'] is False
