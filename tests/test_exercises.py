"""
The exercises (microgpt/lab/exercises/): the stubs and their solutions, each exercise's typical
slip and its hint, check, start, reset, status, and bad input in one line (learner code that
loops, crashes or floods: test_exercises_hostile.py).
"""

import ast
import os
import shlex
import time

import pytest

from microgpt.lab import registry
from microgpt.lab.__main__ import parse_args
from microgpt.lab.exercises import catalog, checker, workspace
from helpers import SLIPS, lab, make_workspace, read_repo_file, replaced, request, with_body

N = len(catalog.EXERCISES)


def snapshot(folder):
    return {name: (folder / name).read_bytes() for name in sorted(os.listdir(folder))}


# ---------------------------------------------------------------------------- the catalog and its files
@pytest.mark.parametrize('e', catalog.EXERCISES, ids=lambda e: e.stem)
def test_each_file_is_a_stub_and_a_solution_of_its_function(e):
    source = catalog.source(e.number)
    assert e.filename == f'ex{e.number:02d}_{e.stem[5:]}.py' and catalog.STEM_PATTERN.match(e.filename)
    assert source.startswith(f'"""\nExercise {e.number}') and f"def {e.function}({e.signature}):" in source
    assert f"exercises check {e.number}" in source  # the docstring says how to check it
    stub, solution = catalog.stub_text(e.number), catalog.solution_text(e.number)
    for text in (stub, solution):
        tree = ast.parse(text)
        assert [f.name for f in tree.body if isinstance(f, ast.FunctionDef)] == [e.function]
        assert ast.get_docstring(tree.body[-1])  # the function says what it computes
    assert 'raise NotImplementedError("' in stub and 'raise NotImplementedError("' not in solution
    assert catalog.SOLUTION_START not in solution and catalog.SOLUTION_END not in stub
    # the learner's file imports the standard library, numpy, and earlier exercises that it uses
    for node in ast.walk(ast.parse(stub)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            name = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
            if name.startswith('ex'):
                assert int(name[2:4]) in e.uses, f"{e.filename} imports {name}, not in its uses"
            else:
                assert name in ('math', 'numpy'), f"{e.filename} imports {name}"
    assert all(d < e.number for d in e.uses)
    assert e.page in dict(registry.pages()), f"{e.label} links /{e.page}, not a page of the lab"
    words = shlex.split(e.command)  # and points at a lab command that exists: argparse exits on one that does not
    assert words[:3] == ['python', '-m', 'microgpt.lab']
    parse_args(words[3:])


def test_the_path_follows_the_reading_guide():
    """Engine, then the model on Values, then the numpy rung, then what keeps the model from
    memorizing, then the byte pairs, then two modern rungs (each function's name: the reading
    guide's table, below)."""
    rungs = [e.rung for e in catalog.EXERCISES]
    assert list(catalog.RUNGS) == ['engine', 'model', 'numpy', 'regularization', 'tokens', 'modern']
    assert rungs == sorted(rungs, key=list(catalog.RUNGS).index)  # each part of the path in one piece
    assert [e.number for e in catalog.EXERCISES] == list(range(1, N + 1)) == catalog.NUMBERS
    assert sorted(SLIPS) == catalog.NUMBERS  # the reference test's negative control: a slip of each fails


# ---------------------------------------------------------------------------- the reference solutions
def test_the_reference_solutions_pass_every_check_and_status_says_where_to_go(tmp_path, capsys, measured):
    """Was: "all pass: train, and quiz", and nothing beyond the path."""
    ws = make_workspace(tmp_path / 'solved')
    start = time.monotonic()
    status, out, _ = lab(['status', '--dir', ws], capsys)
    seconds = time.monotonic() - start
    saved = workspace.Workspace.open(ws).results()
    failed = {n: r['line'] for n, r in saved.items() if r['status'] != 'pass'}
    assert len(saved) == N and not failed, failed
    assert all(int(r['line'].split()[1]) >= 4 for r in saved.values())  # 'passed: 13 cases (...)'
    assert status == 0 and f'{N} of {N} pass' in out and 'beyond the path' in out
    assert all(step in out for step in catalog.WHAT_NEXT)
    from microgpt.lab.exercises.web import ExercisesPage
    assert ExercisesPage(ws).listing({})['next'] == list(catalog.WHAT_NEXT)  # status recorded every pass
    assert ExercisesPage(make_workspace(tmp_path / 'v', solved=[1])).listing({})['next'] is None
    measured(f"\n  `status` of all {N} reference solutions, one subprocess: {seconds:.2f} s")


# ---------------------------------------------------------------------------- a typical slip per exercise


ORDER = with_body(6, '''
seen, order, stack = set(), [], [root]
while stack:
    node = stack.pop()
    if node not in seen:
        seen.add(node)
        order.append(node)
        stack.extend(node._children)
return order''')  # parents before children
ALL_SLIPS = [(n, *slip) for n, slip in SLIPS.items()] + [  # and a second classic slip of some of them
    (6, ORDER, "(a + b) * c", "Children before parents"),
    (11, replaced(11, 'ms = sum(xi * xi for xi in x) / len(x)', 'ms = sum(xi.data * xi.data for xi in x) / len(x)'),
     "fixed 1", "not from their .data"),  # the scale computed from .data
    (26, replaced(26, 'a, b = x[2 * m], x[2 * m + 1]', 'a, b = x[m], x[m + head_dim // 2]'), "position 0",
     "two neighbours"),  # GPT-NeoX's halves, appended in turn
    (26, replaced(26, 'a * c - b * s, a * s + b * c', 'a * c + b * s, b * c - a * s'), "one radian", "wrong way"),
    (27, replaced(27, 'theta = pos[:, None] * ', 'theta = '), "position 0", "grows with the position"),
    (28, replaced(28, 'ks = h // group * head_dim', 'ks = h * head_dim'), "multi-query", "not n_head")]


MORE = {  # more wrong files ({exercise: text}), and the exercise checked over them
    'log10': ({4: replaced(4, 'return math.log(x), (1.0 / x,)', 'return math.log10(x), (1.0 / x,)')}, 4),
    'a bare slope': ({2: replaced(2, '(n * x ** (n - 1),)', 'n * x ** (n - 1)')}, 2),
    'a wrong dot under linear': ({8: SLIPS[8][0]}, 9),
    'no colon': ({1: catalog.stub_text(1).replace('def mul(a, b):', 'def mul(a, b)')}, 1),
    'renamed': ({2: catalog.solution_text(2).replace('def power(', 'def pow_(')}, 2),
    'exits at import': ({3: 'import math\nprint("hello")\nraise SystemExit(4)\n'}, 3),
}


@pytest.fixture(scope='module')
def slip_results(tmp_path_factory):
    """Each slip in a workspace of its own (the reference solutions elsewhere), all checked by
    one subprocess: {its index in ALL_SLIPS, or its name in MORE: result}."""
    jobs = [(i, make_workspace(tmp_path_factory.mktemp(f'slip{n}'), files={n: text}), n)
            for i, (n, text, _, _) in enumerate(ALL_SLIPS)]
    jobs += [(name, make_workspace(tmp_path_factory.mktemp('more'), files=files), n)
             for name, (files, n) in MORE.items()]
    results = checker.check([(ws, [n], True) for _, ws, n in jobs])
    return {key: results[(ws, n)] for key, ws, n in jobs}


@pytest.mark.parametrize('i', range(len(ALL_SLIPS)), ids=[f'{n}-{i}' for i, (n, *_) in enumerate(ALL_SLIPS)])
def test_a_typical_slip_fails_on_its_case_with_its_hint(slip_results, i):
    n, _, case, hint = ALL_SLIPS[i]
    result = slip_results[i]
    assert result['status'] == 'fail', result
    assert result['line'].startswith('case ') and case in result['line'].split(':')[0], result['line']
    assert hint in result['hint'], (result['line'], result['hint'])
    if result['line'].endswith('differs'):  # shown whole: the inputs, both answers, how far apart
        labels = [label for label, _ in result['details']]
        assert {'inputs', 'expected', 'yours', 'largest difference'} <= set(labels), labels


# the derivative each of exercises 1 to 5 asks for, as a hint would write it out; and as the last
# level of `hint N` writes it
ANSWERS = {1: ('= b', 'is b'), 2: ('n * x ** (n - 1)', 'n * x^(n - 1)'), 3: ('own derivative', 'e^x itself'),
           4: ('1/x,', '= 1/x', '(1 / x'), 5: ('1 where x > 0', '1 or 0')}
RECIPES = {1: 'toward a is the other input, b', 2: 'd(x^n)/dx = n * x^(n - 1)', 3: 'd(e^x)/dx = e^x',
           4: 'd ln(x)/dx = 1/x', 5: '1.0 only where x > 0'}


def test_a_slips_hint_points_at_the_idea_and_hint_n_ends_with_the_answer(slip_results):
    """Was: each op's failure hint wrote the derivative out ("d(a * b)/da is b ... you have
    them swapped"), leaving the learner nothing to think through. The recipe is hint N's last level."""
    from microgpt.lab.exercises.hints import HINTS
    for i, (n, *_) in enumerate(ALL_SLIPS):
        if n in ANSWERS:
            hint = slip_results[i]['hint']
            assert not any(answer in hint for answer in ANSWERS[n]), (n, hint)
            assert RECIPES[n] in HINTS[n][-1], n


def test_a_report_names_the_slip_where_it_is(slip_results):
    """Was: log10 for ln, with 1/x as its slope, agrees with ln at x = 1, and the checker said the
    derivative differed ("A missing 1/x"); a pair whose slopes were a bare float was "your power()
    returned a float (6.0)"; "compared: the output" stood above 7 numbers, 4 of out and 3 weights."""
    result = slip_results['log10']
    assert result['line'] == "case 'fixed 1': the slope of your forward value (d out/d x by central differences) differs"
    assert 'your forward value is not' in result['hint'] and 'math.log(x)' in result['hint']
    assert slip_results['a bare slope']['line'] == (
        "case 'fixed 1': your power() returned (out, a float (6.0)): the local derivatives go in a tuple, even "
        "one alone: (d out/d x,)")
    attention = slip_results[next(i for i, slip in enumerate(ALL_SLIPS) if slip[0] == 12)]
    assert ['compared', 'out (4 numbers), then the weights (3)'] in attention['details'], attention['details']
    result = slip_results['a wrong dot under linear']  # a slip in an exercise it calls is named
    assert result['status'] == 'fail' and 'your dot (exercise 8), which does not pass yet' in result['note']


# ---------------------------------------------------------------------------- check, and what it says
def test_check_stops_at_the_first_exercise_not_passed(tmp_path, capsys):
    ws = make_workspace(tmp_path / 'w', solved=[1, 3], files={2: with_body(2, 'raise KeyError("x")')})
    status, out, err = lab(['check', '--dir', ws], capsys)
    assert status == 1 and err == ''
    assert '✓ exercise 1 (mul): passed' in out
    assert "✗ exercise 2 (power): case 'fixed 1': your power() raised KeyError: 'x' (ex02_power.py line" in out
    assert 'exercise 3' not in out.replace('check 3', '') and 'stopped at exercise 2' in out


def test_a_file_that_does_not_load_is_one_line(slip_results):
    line = catalog.stub_text(1).split('\n').index('def mul(a, b):') + 1
    assert slip_results['no colon']['line'].startswith('ex01_mul.py does not load: SyntaxError')
    assert slip_results['no colon']['line'].endswith(f'(ex01_mul.py line {line})')
    assert slip_results['renamed']['line'] == "ex02_power.py has no function power(): keep the stub's line `def power(x, n):`"
    assert slip_results['exits at import']['line'].startswith('ex03_exp.py does not load: SystemExit: 4')


# ---------------------------------------------------------------------------- start, reset, status
def test_from_inside_the_workspace_the_commands_find_it(tmp_path, capsys, monkeypatch):
    """Was: `cd exercises && ... check 1` said "no exercises at exercises: run start exercises
    first", and following it made exercises/exercises/ with fresh stubs beside the learner's work."""
    ws = make_workspace(tmp_path / 'exercises', solved=[1])
    monkeypatch.chdir(ws)
    status, out, err = lab(['check', '1'], capsys)
    assert status == 0 and err == '' and '✓ exercise 1 (mul): passed' in out
    status, out, err = lab(['start'], capsys)
    assert status == 0 and not os.path.exists(os.path.join(ws, 'exercises'))
    assert lab(['check', '1'], capsys)[0] == 0  # the solution is still the learner's, not a stub


def test_start_writes_the_stubs_and_never_overwrites(tmp_path, capsys):
    folder = tmp_path / 'ex'
    status, out, _ = lab(['start', str(folder)], capsys)
    assert status == 0 and f'wrote {N} exercises into' in out
    assert sorted(os.listdir(folder)) == sorted([e.filename for e in catalog.EXERCISES] + [workspace.MANIFEST])
    assert (folder / 'ex04_log.py').read_text() == catalog.stub_text(4)
    (folder / 'ex04_log.py').write_text('# my log\n')
    (folder / 'ex05_relu.py').unlink()
    status, out, _ = lab(['start', str(folder)], capsys)
    assert status == 0 and 'added 1 missing: ex05_relu.py' in out and f'kept the {N - 1}' in out
    assert (folder / 'ex04_log.py').read_text() == '# my log\n'
    status, out, _ = lab(['start', str(folder)], capsys)
    assert 'nothing written' in out and (folder / 'ex04_log.py').read_text() == '# my log\n'
    assert oct((folder / 'ex05_relu.py').stat().st_mode & 0o777) != oct(0o600)  # a plain file's permissions


def test_reset_restores_only_after_confirmation(tmp_path, capsys, monkeypatch):
    ws = make_workspace(tmp_path / 'w', solved=[3])
    status, out, _ = lab(['reset', '3', '--dir', ws], capsys, answers=['n'], monkeypatch=monkeypatch)
    assert status == 1 and 'left as it was' in out
    assert (tmp_path / 'w' / 'ex03_exp.py').read_text() == catalog.solution_text(3)
    status, out, _ = lab(['reset', '3', '--dir', ws], capsys, answers=['y'], monkeypatch=monkeypatch)
    assert status == 0 and 'is the stub again' in out
    assert (tmp_path / 'w' / 'ex03_exp.py').read_text() == catalog.stub_text(3)
    status, out, _ = lab(['reset', '3', '--dir', ws], capsys)
    assert status == 0 and 'is the stub already' in out
    (tmp_path / 'w' / 'ex03_exp.py').write_text(catalog.solution_text(3))
    assert lab(['reset', '3', '--dir', ws, '--yes'], capsys)[0] == 0
    assert (tmp_path / 'w' / 'ex03_exp.py').read_text() == catalog.stub_text(3)


def test_status_reflects_what_passes(tmp_path, capsys):
    ws = make_workspace(tmp_path / 'w', solved=[1, 2, 3, 5], files={4: SLIPS[4][0]})
    status, out, _ = lab(['status', '--dir', ws], capsys)
    assert status == 0 and f'4 of {N} pass' in out
    lines = {line.split()[1]: line for line in out.split('\n') if line.startswith('    ')}
    assert all(lines[str(n)].lstrip().startswith('✓') for n in (1, 2, 3, 5))
    assert lines['4'].lstrip().startswith('✗') and "case 'fixed 2'" in lines['4']
    assert lines['6'].lstrip().startswith('·') and 'not written yet' in lines['6']
    assert 'next: python -m microgpt.lab exercises check 4' in out
    unwritten = ', '.join(str(n) for n in range(6, 17))  # what `train` still needs written
    assert f'train (microgpt trained with your engine) uses 1 to 16: 11 of them not written yet ({unwritten})' in out
    saved = workspace.Workspace.open(ws).results()  # what the web lab's page shows
    assert saved['1']['status'] == 'pass' and saved['4']['status'] == 'fail' and saved['6']['status'] == 'todo'


def test_solution_is_shown_only_when_asked_and_is_the_whole_function(tmp_path, capsys):
    status, out, _ = lab(['solution', '4'], capsys)
    assert status == 0 and 'def log(x):\n    return math.log(x), (1.0 / x,)' in out
    assert 'microgpt/engine.py, Value.log' in out and 'whole function' in out and 'replace your def log()' in out
    ws = make_workspace(tmp_path / 'w', solved=[])
    status, out, _ = lab(['check', '4', '--dir', ws], capsys)
    assert 'not written yet' in out and '1.0 / x' not in out  # a check never gives the answer away


# ---------------------------------------------------------------------------- bad input
def unwritable_folder(tmp_path):
    """A folder this process cannot write in: read-only for a user; /sys/kernel for root, whom
    permissions do not stop."""
    if os.geteuid() == 0:
        return '/sys/kernel'
    folder = tmp_path / 'ro'
    folder.mkdir()
    folder.chmod(0o500)
    return str(folder)


def test_bad_places_are_one_line_and_exit_2(tmp_path, capsys):
    a_file = tmp_path / 'notes.txt'
    a_file.write_text('mine\n')
    package = os.path.join(os.path.dirname(workspace.PACKAGE_DIR), 'microgpt', 'lab', 'my-exercises')
    cases = [(['start', str(a_file)], 'is a file, not a folder'),
             (['check', '--dir', str(a_file)], 'is a file, not a folder'),
             (['start', package], 'is inside the microgpt package'),
             (['start', unwritable_folder(tmp_path)], 'cannot write in'),
             (['status', '--dir', str(tmp_path / 'none')], 'no exercises at'),
             (['check', '--dir', str(tmp_path)], 'is not a folder of microgpt\'s exercises')]
    for argv, words in cases:
        status, out, err = lab(argv, capsys)
        assert status == 2 and out == '' and err.startswith('error: ') and words in err, (argv, err)
        assert err.count('\n') == 1, err
    assert a_file.read_text() == 'mine\n' and not os.path.exists(package)


@pytest.mark.parametrize('argv', [['check', '0'], ['check', str(catalog.NUMBERS[-1] + 1)], ['solution', '99'],
                                  ['reset', '-1']])
def test_a_number_out_of_range_is_one_line(argv, capsys):
    status, out, err = lab(argv, capsys)
    assert status == 2 and f'give an integer from 1 to {catalog.NUMBERS[-1]}' in err and err.count('\n') == 1


@pytest.mark.parametrize('change, words', [
    ('missing', "ex07_backward.py is missing: run `python -m microgpt.lab exercises start"),
    ('renamed', "ex07_my_backward.py looks like ex07_backward.py renamed: rename it back"),
    ('extra', "ex21_gelu.py is not one of this version's exercises"),
    ('version', "was made by another version of microgpt's exercises (version 0; this microgpt has version"),
    ('damaged', "is not valid JSON (column 1): delete it and run `python -m microgpt.lab exercises start"),
])
def test_a_workspace_of_another_version_is_refused_and_left_alone(tmp_path, capsys, change, words):
    folder = tmp_path / 'w'
    ws = make_workspace(folder, solved=[1, 7])
    if change == 'missing':
        (folder / 'ex07_backward.py').unlink()
    elif change == 'renamed':
        (folder / 'ex07_backward.py').rename(folder / 'ex07_my_backward.py')
    elif change == 'extra':
        (folder / 'ex21_gelu.py').write_text('def gelu(x): ...\n')
    elif change == 'version':
        manifest = (folder / workspace.MANIFEST).read_text().replace(f'"version": {catalog.VERSION}', '"version": 0')
        assert '"version": 0' in manifest
        (folder / workspace.MANIFEST).write_text(manifest)
    else:
        (folder / workspace.MANIFEST).write_text('half a record')
    before = snapshot(folder)
    commands = [['check', '--dir', ws], ['status', '--dir', ws], ['train', '--dir', ws], ['reset', '1', '--dir', ws]]
    if change != 'missing':
        commands.append(['start', ws])  # start adds what is missing; it refuses the rest
    for argv in commands:
        status, out, err = lab(argv, capsys)
        assert status == 2 and err.startswith('error: ') and words in err and err.count('\n') == 1, (argv, err)
    assert snapshot(folder) == before


# ---------------------------------------------------------------------------- the web lab's routes
def test_without_a_workspace_the_routes_list_the_path_and_run_nothing(server):
    status, got, _ = request(server, 'POST', '/api/exercises', {})
    assert status == 200 and got['workspace'] is None and len(got['exercises']) == N
    assert all(e['result'] is None and e['page'] in dict(registry.pages()) for e in got['exercises'])
    status, got, _ = request(server, 'POST', '/api/exercises/check', {'number': 1})
    assert status == 400 and 'started without --exercises DIR' in got['error']
    status, got, _ = request(server, 'POST', '/api/exercises/check', {'number': N + 1})
    assert status == 400 and got['error'] == f"'number' is {N + 1}: give an integer from 1 to {N}"


def test_a_folder_that_is_not_a_workspace_stops_the_server_from_starting(tiny_ckpt, names_file, tmp_path):
    from microgpt.edge.errors import UserError
    from microgpt.lab.serve import make_server
    with pytest.raises(UserError, match='no exercises at'):
        make_server(tiny_ckpt, port=0, runs_dir=str(tmp_path / 'runs'), data=names_file,
                    exercises=str(tmp_path / 'none'))


# ---------------------------------------------------------------------------- documented
def test_the_reading_guide_maps_every_exercise_to_its_file_and_lesson():
    section = read_repo_file('docs/reading-guide.md').split('## 12. Learn by doing: the exercises')[1].split('\n## ')[0]
    rows = [line for line in section.split('\n') if line.startswith('| ') and line[2:3].isdigit()]
    assert len(rows) == N
    for e, row in zip(catalog.EXERCISES, rows):
        cells = [c.strip() for c in row.strip('|').split('|')]
        assert cells[0] == str(e.number) and cells[1] == f'`{e.filename}`' and cells[2].startswith(f'`{e.function}(')
        assert e.real.split(',')[0] in cells[3], (e.label, cells[3])
        assert dict(registry.pages())[e.page] in cells[6], (e.label, cells[6])
    readme = read_repo_file('README.md')
    assert 'python -m microgpt.lab exercises start' in readme and 'python -m microgpt.lab exercises check 1' in readme
