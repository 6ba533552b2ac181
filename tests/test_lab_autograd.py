"""
The autograd explorer (microgpt/lab/autograd.py): gradients against hand-derived values and
central finite differences, the graph it reports, and the parser's refusal of everything that
is not arithmetic. What is not arithmetic fails as one line, never runs.
"""

import math
import os
import stat

import pytest

from microgpt.engine import Value
from microgpt.edge.errors import UserError
from microgpt.lab import autograd
from microgpt.lab.__main__ import main

GRAD_TOL = 1e-6     # backward() against central differences with step FD_STEP
FD_STEP = 1e-6
EXACT_TOL = 1e-12   # the explorer's value against the same expression in plain Python


def grads(text, **values):
    root, leaves, _ = autograd.explore(text, [f'{k}={v}' for k, v in values.items()])
    return root.data, {name: leaf.grad for name, leaf in leaves.items()}


def test_command_prints_the_guides_hand_derived_grads_and_graph(capsys):
    # (a + b) * c at a=2, b=-3, c=10: d/da = d/db = c = 10, d/dc = a + b = -1
    assert main(['autograd', '(a + b) * c', 'a=2', 'b=-3', 'c=10']) == 0
    out = capsys.readouterr().out
    assert 'a.grad = 10   b.grad = 10   c.grad = -1' in out
    assert 'value: -10' in out
    # topological order: the three leaves, then +, then *
    ops = [line.split()[1] for line in out.splitlines() if line.strip().startswith('#')]
    assert ops == ['a', 'b', 'c', '+', '*']


def test_a_negative_zero_prints_as_0(capsys):
    # -a at a = 0 is -0.0 in floating point, and so is b * 0 * -1: real values of the engine,
    # which the explorer prints as 0
    value, _ = grads('-a', a=0)
    assert value == 0 and math.copysign(1, value) == -1  # the engine's value keeps its sign
    assert main(['autograd', '--', '-a', 'a=0']) == 0  # an expression starting with - follows --
    assert 'value: 0\n' in capsys.readouterr().out
    assert main(['autograd', 'a - b * 0', 'a=0', 'b=2']) == 0
    out = capsys.readouterr().out
    assert not any(cell == '-0' for line in out.splitlines() for cell in line.split())


# Each expression twice: once for the explorer, once as plain Python math (the oracle).
ORACLE_CASES = [
    ('relu(x * w + b) ** 2 / 3 - exp(-x)',
     lambda x, w, b: max(0.0, x * w + b) ** 2 / 3 - math.exp(-x), dict(x=1.5, w=-2.0, b=4.0)),
    ('log(a * a + 1) / (b - 3) ** -0.5', lambda a, b: math.log(a * a + 1) / (b - 3) ** -0.5,
     dict(a=0.7, b=5.0)),
    ('-(x - y) * (x / y) + 2 ** 3 * x', lambda x, y: -(x - y) * (x / y) + 2 ** 3 * x,
     dict(x=-1.25, y=0.5)),
    ('exp(log(z) * 2.5) - z ** (1 / 2)', lambda z: math.exp(math.log(z) * 2.5) - z ** 0.5,
     dict(z=1.7)),
]


@pytest.mark.parametrize('text, oracle, values', ORACLE_CASES)
def test_grads_match_finite_differences(text, oracle, values):
    value, g = grads(text, **values)
    assert abs(value - oracle(**values)) < EXACT_TOL
    for name in values:
        up, down = dict(values), dict(values)
        up[name] += FD_STEP
        down[name] -= FD_STEP
        numeric = (oracle(**up) - oracle(**down)) / (2 * FD_STEP)
        assert abs(g[name] - numeric) < GRAD_TOL, (text, name, g[name], numeric)
        assert abs(g[name] * 1.01 - numeric) > GRAD_TOL  # negative control: an off gradient fails


# what is not arithmetic: code, Python the explorer does not take, a typo, an input too big
NOT_ARITHMETIC = [
    "__import__('os').system('x')", 'a.__class__', 'lambda: 1', '[1]', "'x'", 'a if b else c',
    'exp.__globals__', '1e309', '(' * 500 + '1' + ')' * 500, 'a[0]', 'a < b', 'a and b', 'a % b',
    'a // b', 'exp(a, b)', 'exp(x=a)', "f'{a}'", 'a; b', '(a := 1)', 'exp', 'print(a)', 'a ** b',
    'a\x00', 'x' * 1001, '',
]


@pytest.mark.parametrize('text', NOT_ARITHMETIC)
def test_what_is_not_arithmetic_is_refused(text):
    with pytest.raises(UserError) as info:
        autograd.explore(text, ['a=1', 'b=2', 'c=3'])
    message = str(info.value)
    assert '\n' not in message and len(message) < 400
    assert 'not used' not in message and 'no value' not in message  # refused for itself


def test_refusal_happens_before_anything_runs(tmp_path, monkeypatch):
    # if the parser ever ran the input, this file would appear
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError):
        autograd.explore("__import__('os').system('touch pwned')", [])
    with pytest.raises(UserError):
        autograd.explore("open('pwned', 'w')", [])
    assert not os.path.exists(tmp_path / 'pwned')


def test_refusals_name_the_construct():
    with pytest.raises(UserError, match='not finite'):
        autograd.explore('1e309 * a', ['a=1'])
    with pytest.raises(UserError, match='nested'):
        autograd.explore('(' * 300 + 'a' + ')' * 300, ['a=1'])
    with pytest.raises(UserError, match=r'exp\(\), log\(\) and relu\(\)'):
        autograd.explore("__import__('os')", [])


@pytest.mark.parametrize('assignments, pattern', [
    (['a=2'], 'no value for b'),
    (['a=2', 'b=1', 'c=5'], 'not used in the expression: c'),
    (['a=2', 'b'], 'not an assignment'),
    (['a=2', 'b=x'], "'b=x': the value must be a number in"),
    (['a=2', 'b=inf'], "'b=inf': the value must be a number in"),
    (['a=2', 'b=nan'], "'b=nan': the value must be a number in"),
    (['a=2', 'a=3', 'b=1'], 'twice'),
    (['a=1', '__class__=1', 'b=1'], 'cannot be a variable'),
])
def test_bad_assignments(assignments, pattern):
    with pytest.raises(UserError, match=pattern):
        autograd.explore('a * b', assignments)


@pytest.mark.parametrize('text, values', [
    ('log(a)', ['a=-1']), ('a / 0', ['a=1']), ('exp(a)', ['a=1000']), ('a ** -1', ['a=0']),
])
def test_math_errors_are_user_errors(text, values):
    with pytest.raises(UserError, match='cannot compute'):
        autograd.explore(text, values)


def test_dot_file_is_written(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv('PATH', str(tmp_path / 'empty'))  # no Graphviz on this PATH
    path = tmp_path / 'graph.dot'
    assert main(['autograd', 'a * b + a', 'a=2', 'b=3', '--dot', str(path)]) == 0
    dot = path.read_text()
    assert dot.startswith('digraph') and '{ a | data 2 | grad 4 }' in dot
    assert 'not installed' in capsys.readouterr().out


def test_dot_is_rendered_when_graphviz_is_there(tmp_path, capsys, monkeypatch):
    # a stand-in `dot` that prints its "picture" (as `dot -Tpng FILE` does), so the test needs no Graphviz
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    fake = bin_dir / 'dot'
    fake.write_text('#!/bin/sh\nprintf rendered\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv('PATH', str(bin_dir))
    path = tmp_path / 'graph.dot'
    assert main(['autograd', 'relu(a)', 'a=2', '--dot', str(path)]) == 0
    assert (tmp_path / 'graph.png').read_text() == 'rendered'
    assert 'rendered' in capsys.readouterr().out


def test_constants_and_engine_nodes_are_labelled():
    # a - b is a + (b * -1) in the engine: the -1 is labelled with its value, not 'leaf'
    root, _, names = autograd.explore('a - 2 * b', ['a=1', 'b=1'])
    assert sorted(v for v in names.values() if not v.isalpha()) == ['-1', '2']
    assert isinstance(root, Value) and root.data == -1
