"""
Tests for the basic ops of microgpt/engine.py and for microgpt/graph.py.

Every op is checked twice: its forward value against the same formula in plain float math, and
its gradient against central finite differences (tests/helpers.py), an oracle that shares no
code with backward(). A negative control proves that the finite-difference check can fail.
Then: diamonds, a very long chain, repeated backward(), the error messages, and the graph views.

Run: .venv/bin/python -m pytest -q tests/test_engine.py
"""

import math
import sys

import pytest

from helpers import check_grads, numeric_grad
from microgpt.engine import Tape, Value, topological_order, zero_grad
from microgpt.graph import graph_rows, graph_table, to_dot

pytestmark = pytest.mark.lesson  # the lesson's own files: `make test-lesson`

GRAD_TOL = 1e-6   # central differences with h = 1e-6 are good to ~1e-9 here; 1e-6 leaves margin
VALUE_TOL = 1e-15  # forward values: the engine does the same float operations as plain Python


# ---------------------------------------------------------------------------- the basic ops
# (id, expression on Values, the same expression on floats, inputs). Inputs stay away from the
# points where an op is undefined or has a kink (log at 0, relu at 0, division by 0).
BASIC_OPS = [
    ('add', lambda v: v[0] + v[1], lambda x: x[0] + x[1], [0.7, -1.3]),
    ('add_number_right', lambda v: v[0] + 2.5, lambda x: x[0] + 2.5, [0.7]),
    ('add_number_left', lambda v: 2.5 + v[0], lambda x: 2.5 + x[0], [0.7]),
    ('sub', lambda v: v[0] - v[1], lambda x: x[0] - x[1], [0.7, -1.3]),
    ('sub_number_right', lambda v: v[0] - 2.5, lambda x: x[0] - 2.5, [0.7]),
    ('sub_number_left', lambda v: 2.5 - v[0], lambda x: 2.5 - x[0], [0.7]),
    ('mul', lambda v: v[0] * v[1], lambda x: x[0] * x[1], [0.7, -1.3]),
    ('mul_number_right', lambda v: v[0] * -3.0, lambda x: x[0] * -3.0, [0.7]),
    ('mul_number_left', lambda v: -3.0 * v[0], lambda x: -3.0 * x[0], [0.7]),
    ('div', lambda v: v[0] / v[1], lambda x: x[0] / x[1], [0.7, -1.3]),
    ('div_number_right', lambda v: v[0] / 4.0, lambda x: x[0] / 4.0, [0.7]),
    ('div_number_left', lambda v: 4.0 / v[0], lambda x: 4.0 / x[0], [0.7]),
    ('pow_2', lambda v: v[0] ** 2, lambda x: x[0] ** 2, [-1.3]),
    ('pow_3', lambda v: v[0] ** 3, lambda x: x[0] ** 3, [-1.3]),
    ('pow_minus_1', lambda v: v[0] ** -1, lambda x: x[0] ** -1, [-1.3]),
    ('pow_half', lambda v: v[0] ** 0.5, lambda x: x[0] ** 0.5, [1.7]),
    ('pow_minus_1.5', lambda v: v[0] ** -1.5, lambda x: x[0] ** -1.5, [1.7]),
    ('pow_0', lambda v: v[0] ** 0, lambda x: x[0] ** 0, [1.7]),
    ('neg', lambda v: -v[0], lambda x: -x[0], [0.7]),
    ('exp', lambda v: v[0].exp(), lambda x: math.exp(x[0]), [0.7]),
    ('exp_negative', lambda v: v[0].exp(), lambda x: math.exp(x[0]), [-2.2]),
    ('log', lambda v: v[0].log(), lambda x: math.log(x[0]), [0.7]),
    ('log_large', lambda v: v[0].log(), lambda x: math.log(x[0]), [40.0]),
    ('relu_positive', lambda v: v[0].relu(), lambda x: max(0.0, x[0]), [0.7]),
    ('relu_negative', lambda v: v[0].relu(), lambda x: max(0.0, x[0]), [-0.7]),
    # a splits into two branches (exp and log) that meet again: a diamond, beside those below
    ('diamond_two_branches', lambda v: v[0].exp() * v[0].log() + v[1] * v[0],
     lambda x: math.exp(x[0]) * math.log(x[0]) + x[1] * x[0], [1.3, -0.4]),
    ('compound', lambda v: (v[0] * v[1] + v[1].exp()).relu() / (v[0] ** 2 + 1).log(),
     lambda x: max(0.0, x[0] * x[1] + math.exp(x[1])) / math.log(x[0] ** 2 + 1), [0.7, -1.3]),
]


@pytest.mark.parametrize('build, plain, inputs', [c[1:] for c in BASIC_OPS],
                         ids=[c[0] for c in BASIC_OPS])
def test_basic_op_value(build, plain, inputs):
    out = build([Value(x) for x in inputs])
    assert abs(out.data - plain(inputs)) <= VALUE_TOL * max(1.0, abs(plain(inputs)))


@pytest.mark.parametrize('build, inputs', [(c[1], c[3]) for c in BASIC_OPS],
                         ids=[c[0] for c in BASIC_OPS])
def test_basic_op_grad_matches_finite_differences(build, inputs):
    assert check_grads(build, inputs) < GRAD_TOL


def test_numeric_grad_matches_a_known_derivative():
    # the oracle itself, on a function whose derivative we know in closed form: d sin / dx = cos
    x = 0.4
    assert abs(numeric_grad(lambda xs: math.sin(xs[0]), [x], 0) - math.cos(x)) < GRAD_TOL


def _bad_square(v):
    """x^2 with a deliberately wrong local gradient: x instead of 2x."""
    x = v[0]
    return Value(x.data * x.data, (x,), (x.data,), 'bad_square')


def _good_square(v):
    """The same node with the right local gradient, so the control differs in one thing only."""
    x = v[0]
    return Value(x.data * x.data, (x,), (2 * x.data,), 'good_square')


def test_negative_control_wrong_local_grad_is_caught():
    # If this check passed, a green gradient test would prove nothing.
    assert check_grads(_good_square, [1.5]) < GRAD_TOL
    assert check_grads(_bad_square, [1.5]) > 1000 * GRAD_TOL


def test_negative_control_inside_a_larger_graph_is_caught():
    # a wrong node buried among correct ones still spoils the leaf gradients it feeds
    build = lambda v: (_bad_square([v[0] * v[1]]) + v[1].exp()).log()
    assert check_grads(build, [0.8, 0.3]) > 1000 * GRAD_TOL


def test_relu_slope_at_zero_is_zero():
    # the documented choice for the kink; finite differences cannot test this point (they give 1/2)
    x = Value(0.0)
    x.relu().backward()
    assert x.grad == 0.0


# ---------------------------------------------------------------------------- diamonds
def test_diamond_reused_operand():
    # y = a*a + a uses a three times: dy/da = 2a + 1, the sum of all three paths
    a = Value(1.5)
    y = a * a + a
    y.backward()
    assert a.grad == 2 * 1.5 + 1


def test_diamond_shared_intermediate():
    # b = a + 1 feeds y = b*b*b twice over: dy/da = 3 (a+1)^2
    a = Value(0.5)
    b = a + 1
    y = b * b * b
    y.backward()
    assert abs(a.grad - 3 * 1.5 ** 2) < VALUE_TOL * 10
    assert b.grad == a.grad  # b = a + 1 passes the gradient through unchanged


# ---------------------------------------------------------------------------- backward()
def test_long_chain_has_no_recursion_error():
    # 200,000 nodes deep, far beyond Python's recursion limit: a recursive topological sort
    # (micrograd's) would fail here, the engine's iterative one must not.
    n = 200_000
    assert sys.getrecursionlimit() < n
    factor = 1.000001
    x = Value(1.0)
    y = x
    for _ in range(n):
        y = y * factor
    y.backward()
    # dy/dx = factor^n, here ~ e^0.2; rounding in 200,000 products costs ~n * 1e-16
    assert abs(x.grad - factor ** n) < 1e-9
    assert abs(y.data - factor ** n) < 1e-9


def test_backward_twice_accumulates_as_micrograd_and_pytorch_do():
    a, b = Value(0.6), Value(-1.1)
    y = (a * b + a.exp()) * a
    y.backward()
    first = (a.grad, b.grad)
    zero_grad([a, b])
    assert (a.grad, b.grad) == (0.0, 0.0)
    y2 = (a * b + a.exp()) * a
    zero_grad(topological_order(y2))
    y2.backward()
    assert (a.grad, b.grad) == first          # zeroed first: the same grads
    y3 = (a * b + a.exp()) * a
    y3.backward()                              # not zeroed: added to the first
    assert (a.grad, b.grad) == (2 * first[0], 2 * first[1])


def test_backward_with_and_without_a_tape_both_accumulate_into_leaves():
    # the training-loop pattern: the same leaves (parameters), a new graph each step; the
    # optimizer zeroes the grads after using them, so a step without it would add up
    for use_tape in (False, True):
        a, b = Value(0.6), Value(-1.1)
        grads = []
        for _ in range(2):
            with Tape() as tape:
                y = (a * b + a.exp()) * a
            y.backward(tape if use_tape else None)
            grads.append((a.grad, b.grad))
        assert grads[1] == (2 * grads[0][0], 2 * grads[0][1])


def test_backward_grads_of_intermediate_nodes():
    a = Value(2.0)
    b = a * 3.0
    y = b * b
    y.backward()
    assert (y.grad, b.grad, a.grad) == (1.0, 2 * 6.0, 2 * 6.0 * 3.0)


def test_backward_of_a_leaf():
    x = Value(4.0)
    x.backward()
    assert x.grad == 1.0


def test_repr_shows_data_and_grad():
    x = Value(2.5)
    (x * x).backward()
    text = repr(x)
    assert 'data=2.5' in text and 'grad=5' in text


# ---------------------------------------------------------------------------- float semantics
# The engine checks nothing: each op computes exactly what Python's floats and math module
# compute, errors included. The oracle is that plain arithmetic; the checks live at the edges
# (the lab's explorer, training's loss check), tested there.
@pytest.mark.parametrize('make, plain', [
    (lambda: Value(1e200) * Value(1e200), lambda: 1e200 * 1e200),       # inf, as floats give
    (lambda: Value(1e308) + Value(1e308), lambda: 1e308 + 1e308),
    (lambda: Value(1000.0).exp(), lambda: math.exp(1000.0)),            # OverflowError
    (lambda: Value(1e200) ** 2, lambda: 1e200 ** 2),                    # float ** raises
    (lambda: Value(0.0).log(), lambda: math.log(0.0)),                  # ValueError
    (lambda: Value(-1.0).log(), lambda: math.log(-1.0)),
    (lambda: Value(0.0) ** -1, lambda: 0.0 ** -1),                      # ZeroDivisionError
    (lambda: Value(0.0) ** 0.5, lambda: 0.5 * 0.0 ** -0.5),             # its slope at 0
    (lambda: Value(1.0) / 0, lambda: 1.0 * 0 ** -1),
    (lambda: Value(-2.0) ** 0.5, lambda: (-2.0) ** 0.5),                # a complex number
], ids=['mul_inf', 'add_inf', 'exp', 'pow', 'log0', 'log_negative', 'zero_to_negative',
        'sqrt_slope_at_0', 'divide_by_0', 'negative_to_fraction'])
def test_each_op_does_what_plain_float_arithmetic_does(make, plain):
    try:
        expected = plain()
    except Exception as e:  # noqa: BLE001 - the oracle's own exception is the expectation
        with pytest.raises(type(e)):
            make()
        return
    got = make().data
    assert got == expected or (got != got and expected != expected)


def test_a_value_exponent_is_refused_by_python_itself():
    with pytest.raises(TypeError, match='unsupported operand'):
        Value(2.0) ** Value(3.0)


# ---------------------------------------------------------------------------- graph views
def _diamond():
    """y = relu(a*b + a) * 2 with names for the leaves; a is shared by two nodes."""
    a, b = Value(1.5), Value(-0.5)
    y = (a * b + a).relu() * 2
    y.backward()
    return y, a, b


def test_topological_order_children_first_and_once():
    y, a, b = _diamond()
    order = topological_order(y)
    position = {node: i for i, node in enumerate(order)}
    assert len(position) == len(order)  # no node twice
    assert order[-1] is y
    for node in order:
        for child in node._children:
            assert position[child] < position[node]


def test_graph_rows_topological_and_shared_node_once():
    y, a, b = _diamond()
    rows = graph_rows(y)
    for i, (_, _, _, _, children) in enumerate(rows):
        assert all(c < i for c in children)
    nodes = [row[0] for row in rows]
    assert nodes.count(a) == 1
    # a, b, the constant 2, a*b, +, relu, * : seven distinct nodes
    assert len(nodes) == 7
    assert rows[-1][0] is y and rows[-1][1] == '*'
    # rows carry the values and grads that backward() left in the nodes
    row_a = rows[nodes.index(a)]
    assert (row_a[2], row_a[3]) == (a.data, a.grad)


def test_graph_table_one_line_per_node_with_names():
    y, a, b = _diamond()
    table = graph_table(y, names={a: 'a', b: 'b'})
    lines = table.splitlines()
    assert len(lines) == 1 + len(graph_rows(y))  # a header, then one line per node
    assert any(line.split()[1] == 'a' for line in lines[1:])
    assert any(line.split()[1] == 'relu' for line in lines[1:])


def test_to_dot_is_a_digraph_with_one_edge_per_child_link():
    y, a, b = _diamond()
    x = Value(3.0)
    square = x * x  # the same child twice: two links, so two edges
    for root in (y, square):
        dot = to_dot(root, names={a: 'a|{b}'})  # record-label characters must be escaped
        links = sum(len(children) for *_, children in graph_rows(root))
        assert 'digraph' in dot
        assert dot.count('->') == links
    assert to_dot(square).count('n0 -> n1;') == 2
    assert 'a\\|\\{b\\}' in to_dot(y, names={a: 'a|{b}'})


# ---------------------------------------------------------------------------- the tape
def _diamond_with_params():
    """Two leaves made BEFORE any tape, as parameters are."""
    return Value(0.7), Value(-1.3)


def _build(a, b):
    """A small graph over a and b, with a constant leaf made inside the tape and a diamond."""
    c = a * b + Value(0.5)          # a constant leaf made inside the tape
    d = (c.exp() + a.relu()) * c    # c feeds two nodes: a diamond
    return (d * d / (b * b + 1.0) + 0.1).log()


def test_backward_with_a_tape_equals_backward_by_search():
    from microgpt.engine import Tape
    a, b = _diamond_with_params()
    y = _build(a, b)
    y.backward()
    expected = (a.grad, b.grad)
    a.grad = b.grad = 0.0           # leaves outside the tape are not reset by backward(tape)
    with Tape() as tape:
        y2 = _build(a, b)
    y2.backward(tape)
    assert (a.grad, b.grad) == expected
    assert a.grad != 0.0 and b.grad != 0.0


def test_tape_is_in_topological_order_and_records_only_inside():
    from microgpt.engine import Tape
    a, b = _diamond_with_params()
    with Tape() as tape:
        y = _build(a, b)
    outside = a * b
    position = {node: i for i, node in enumerate(tape.nodes)}
    assert a not in position and outside not in position and y in position
    for node in tape.nodes:
        for child in node._children:
            assert child not in position or position[child] < position[node]


def test_backward_of_a_node_not_on_the_tape_is_an_error():
    from microgpt.engine import Tape
    a, b = _diamond_with_params()
    with Tape() as tape:
        _build(a, b)
    with pytest.raises(ValueError, match='not recorded'):
        (a * b).backward(tape)


def test_tapes_cannot_be_nested_and_recording_stops_after_an_error():
    from microgpt.engine import Tape
    with Tape():
        with pytest.raises(RuntimeError, match='nested'):
            with Tape():
                pass
    with pytest.raises(ZeroDivisionError):
        with Tape():
            Value(1.0) / 0
    with Tape() as tape:  # the failed tape above let go of the recording
        Value(2.0)
    assert len(tape.nodes) == 1
