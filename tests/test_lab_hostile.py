"""
The lab's commands and its web API on a learner's mistakes and a malformed request.

A mistake in what was typed or sent ends as one line: `error: ...` with exit status 2 and no
traceback for a command, a JSON 400 with one line for a request, never a traceback or a 500.
Where one part of an answer cannot be given (In phases' lines of model.py), the rest is
answered and that part says why.

README's Reliability section counts these cases; tests/test_readme.py checks its count.

Run: .venv/bin/python -m pytest -q tests/test_lab_hostile.py
"""

import shutil

import pytest

from helpers import BRIEF, assert_one_line, live_server, request, run_lab
from microgpt.lab import phases


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


@pytest.mark.parametrize('temperature', ['5e-324'])
def test_a_tiny_temperature_on_the_row_is_its_greedy_limit(temperature, capsys):
    """Was LinAlgError: the scores / temperature overflowed to inf, the softmax gave nan."""
    status, out, err = run_lab(['scaling', '--part', 'row', '--temperature', temperature], capsys)
    assert status == 0 and err == '', err
    rows = [line.split() for line in out.splitlines() if line[:3].strip().isdigit()]
    assert len(rows) == 8 and one_hot([float(r[-1]) for r in rows])


# ---------------------------------------------------------------------------- the requests
BROKEN_MODEL_PY = {  # what model.py holds -> what the page says of it
    'syntax': (b'def gpt(self:\n', 'microgpt/model.py does not parse: '),
    'renamed': (b'def forward(self, token_id):\n    return token_id\n', 'microgpt/model.py has no function gpt()'),
}


@pytest.mark.parametrize('case', list(BROKEN_MODEL_PY))
def test_phases_keeps_its_numbers_when_model_py_cannot_be_read(server, case, tmp_path, monkeypatch, capsys):
    """Was a 500 for the whole page. A copy of model.py is broken, never the real one: the
    numbers stand, and the code beside them says what failed (on the page and in the printout)."""
    body = {'text': 'emma', 'head': 1, 'query': 2}
    status, want, _ = request(server, 'POST', '/api/phases', body)
    assert status == 200 and 'error' not in want['code']
    content, words = BROKEN_MODEL_PY[case]
    copy = tmp_path / 'model.py'
    copy.write_bytes(content)
    monkeypatch.setattr(phases, 'MODEL_FILE', str(copy))
    status, got, _ = request(server, 'POST', '/api/phases', body)
    assert status == 200, got
    assert got['code']['error'].startswith(words) and got['code']['error'].endswith("gpt()'s lines are not shown")
    assert {k: v for k, v in got.items() if k != 'code'} == {k: v for k, v in want.items() if k != 'code'}
    status, out, err = run_lab(['phases', 'emma', '--head', '1', '--query', '2', '--ckpt', server.lab.checkpoints.path('start')],
                               capsys)
    assert status == 0 and err == '' and f"({got['code']['error']})" in out and 'softmax' in out


@pytest.mark.parametrize('route, body, words', [
    ('/api/sampling', {'temperature': 1.0},
     "unknown field 'temperature': this route takes prompt, temperatures, top_k, num, length, names_at, seed, ckpt"),
    ('/api/train/start', {'step': 5}, "unknown field 'step': this route takes steps, n_layer"),
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
