"""
The exercises' stubs and hints: a stub gives the contract, the shapes and the math, never its
solution line by line; the way there is behind `exercises hint N`, one level at a time, the level
remembered in the workspace; the stubs say what a Value offers; the figures they teach are the
ones computed.
"""

import ast
import json
import math
import os
import re

import pytest

from helpers import lab, make_workspace, read_repo_file
from microgpt.lab.exercises import catalog, hints, workspace
from microgpt.lab.example import SCORES

SHORT = 12  # a solution line shorter than this (`x = [a]`, `total = 0`) may well appear in any prose


def docstrings(text):
    """The module's docstring and every function's, joined."""
    tree = ast.parse(text)
    return '\n'.join(ast.get_docstring(node) or '' for node in ast.walk(tree)
                     if isinstance(node, (ast.Module, ast.FunctionDef)))


def squeezed(text):
    return re.sub(r'\s+', '', text)


def code_lines(n):
    """Exercise n's solution lines worth comparing: comments and spaces aside, no return line, none short."""
    lines = [line.split('#')[0].strip() for line in catalog.solution_body(n).split('\n')]
    return [line for line in lines if len(line) >= SHORT and not line.startswith('return')]


# ---------------------------------------------------------------------------- the stubs
@pytest.mark.parametrize('e', catalog.EXERCISES, ids=lambda e: e.stem)
def test_no_stub_gives_its_solution_line_by_line(e):
    docs = squeezed(docstrings(catalog.stub_text(e.number)))
    given = [line for line in code_lines(e.number) if squeezed(line) in docs]
    assert not given, f"{e.filename}'s docstring gives its solution's lines {given}: move them to a hint"


def test_the_comparison_sees_a_solution_line_in_a_docstring():
    """The negative control: a line pasted into a docstring is found (and most solutions have lines to compare)."""
    assert len([n for n in catalog.NUMBERS if code_lines(n)]) >= 10
    line = next(line for line in code_lines(15) if 'beta1 * m[i]' in line)
    pasted = catalog.stub_text(15).replace('One Adam update', f'One Adam update: {line}', 1)
    assert squeezed(line) in squeezed(docstrings(pasted)) and squeezed(line) not in squeezed(
        docstrings(catalog.stub_text(15)))


@pytest.mark.parametrize('n', [8, 9, 10, 11, 12, 13, 14])
def test_the_value_rungs_stubs_say_what_a_value_offers(n):
    """A learner composing blocks from Values reads which ops a Value has, and where."""
    docs = docstrings(catalog.stub_text(n))
    for op in ('.exp()', '.log()', '.relu()', '**', 'microgpt/engine.py', '.data'):
        assert op in docs, f"{catalog.get(n).filename} does not say a Value has {op}"


def test_the_softmax_figures_taught_are_the_computed_ones_rounded():
    """softmax(q3 . k / 2) of the three tokens by hand, rounded to 3 decimals, is the figure
    ex10, ex12, ex17 and the reading guide's table teach (0.394521 rounds to 0.395, not 0.394)."""
    exps = [math.exp(s - max(SCORES)) for s in SCORES]
    weights = [round(x / math.fsum(exps), 3) for x in exps]
    assert weights == [0.309, 0.297, 0.395]
    figure = '[' + ', '.join(f'{w:.3f}' for w in weights) + ']'
    for n in (10, 12, 17):
        docs = docstrings(catalog.stub_text(n))
        assert figure in docs and '0.394]' not in docs, (catalog.get(n).filename, figure)
    guide = read_repo_file('docs/reading-guide.md')
    row = next(line for line in guide.split('\n') if line.startswith('| 10 | `ex10_softmax.py`'))
    assert ', '.join(f'{w:.3f}' for w in weights) in row, row
    assert f'softmax {figure}' in guide  # the worked example's own line, in section 3's words


# ---------------------------------------------------------------------------- hint N
@pytest.mark.parametrize('e', catalog.EXERCISES, ids=lambda e: e.stem)
def test_hint_gives_each_of_two_or_more_levels_in_turn_then_says_there_is_no_more(e, tmp_path, capsys):
    assert sorted(hints.HINTS) == list(catalog.NUMBERS)
    ws = make_workspace(tmp_path / 'w', solved=[])
    levels = hints.HINTS[e.number]
    assert len(levels) >= 2 and len(set(levels)) == len(levels) and all(len(h) > 20 for h in levels)
    for level, text in enumerate(levels, start=1):
        status, out, err = lab(['hint', str(e.number), '--dir', ws], capsys)
        assert status == 0 and not err, err
        assert f"{e.label}, hint {level} of {len(levels)}:" in out
        assert squeezed(text) in squeezed(out)  # the whole hint, wrapped
        assert all(squeezed(other) not in squeezed(out) for other in levels if other != text)
    status, out, _ = lab(['hint', str(e.number), '--dir', ws], capsys)
    assert status == 0 and out.startswith(f"no more hints for {e.label}") and out.count('\n') == 1
    assert f'solution {e.number}' in out


def test_the_level_is_kept_in_the_record_level_asks_one_and_one_past_the_last_is_one_line(tmp_path, capsys):
    ws, record = make_workspace(tmp_path / 'w', solved=[]), tmp_path / 'w' / workspace.MANIFEST
    lab(['hint', '13', '--dir', ws], capsys)
    assert json.loads(record.read_text())['hints'] == {'13': 1}
    status, out, _ = lab(['hint', '13', '--level', '3', '--dir', ws], capsys)
    assert status == 0 and 'hint 3 of 4' in out and squeezed(hints.HINTS[13][2]) in squeezed(out)
    assert 'hint 4 of 4' in lab(['hint', '13', '--dir', ws], capsys)[1]  # the next after the highest seen
    assert 'hint 1 of 3' in lab(['hint', '6', '--dir', ws], capsys)[1]  # each exercise has its own level
    assert json.loads(record.read_text())['hints'] == {'13': 4, '6': 1}
    before = record.read_bytes()  # a level past the last: one line, and nothing changed
    status, out, err = lab(['hint', '1', '--level', '3', '--dir', ws], capsys)
    assert status == 2 and not out and err.startswith('error: ') and err.count('\n') == 1
    assert 'exercise 1 (mul) has 2 hints' in err and '--level 2' in err and record.read_bytes() == before


def test_without_a_workspace_a_level_is_still_shown(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    status, out, _ = lab(['hint', '4', '--level', '1'], capsys)
    assert status == 0 and 'hint 1 of 2' in out and '--level 2' in out
    assert os.listdir(tmp_path) == []  # nothing made, nothing remembered
    status, _, err = lab(['hint', '4'], capsys)  # the next level needs a workspace to follow
    assert status == 2 and 'exercises start' in err


@pytest.mark.parametrize('n, formulas, hinted', [
    (2, ['n * x^(n - 1)'], True), (3, ['d(e^x)/dx = e^x'], True), (4, ['1/x'], True),
    (5, ['slope is 1 on the right'], True), (19, ['p_i * (dp_i - sum_j dp_j * p_j)'], True),
    (18, ['dx = dy @ w', 'dw = dy.T @ x'], False), (22, ['dx = f * dy'], False),
    (26, ['a * c - b * s'], True), (27, ['dx = M^T dy', 'turn by -theta'], True), (28, ['h // group'], True)])
def test_the_stub_leaves_the_derivative_to_the_learner_and_a_later_hint_gives_it(n, formulas, hinted):
    """Was: stubs 2 to 5 and 19 stated the derivative they asked for, stubs 18 and 22 the backward.
    The stub gives the idea to reach for; the formula comes at `hint N`'s later levels, never its
    first."""
    for formula in formulas:
        assert formula not in catalog.stub_text(n) and formula not in hints.HINTS[n][0]
        assert not hinted or any(formula in level for level in hints.HINTS[n][1:])
