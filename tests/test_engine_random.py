"""
The engine on random expression graphs written by hypothesis (test_engine.py checks each op
alone): each step applies one op to earlier nodes, so the graph is a DAG with diamonds, and
backward() must match central differences. A program near a relu kink, a pole of 1/x or huge
values, where finite differences mean nothing, is rejected, never loosely checked.
"""

import pytest
from hypothesis import HealthCheck, assume, given, reject, settings
from hypothesis import strategies as st

from helpers import check_grads
from microgpt.engine import Value, topological_order, zero_grad
from microgpt.graph import graph_rows

pytestmark = pytest.mark.lesson  # the lesson's own files: `make test-lesson`

GRAD_TOL = 1e-6     # as for single ops: 5,000 random programs within these bounds stayed under 2e-9
MAX_ABS = 100.0     # reject a program once any node leaves [-100, 100]: rounding in f(x +- h)
                    # is ~1e-16 * |f| / h, so this keeps it below ~1e-8
MIN_DENOM = 0.25    # reject division by anything closer to 0: 1/x and its derivatives explode
MIN_KINK = 1e-3     # reject relu inputs this close to the kink at 0
MAX_EXP_INPUT = 4.0  # exp only on a bounded input: keeps e^x (and its slope) under ~55

OPS = ('add', 'sub', 'mul', 'div', 'exp', 'relu', 'square', 'log')

# hypothesis settings for every test here: deterministic examples (derandomize) so that CI runs
# the same programs every time, no deadline because the first run pays for imports
SETTINGS = settings(max_examples=100, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.filter_too_much])


class IllConditioned(Exception):
    """Raised while building a program that strays where finite differences are unreliable."""


@st.composite
def programs(draw):
    """(inputs, steps): 1-3 leaf values and 1-10 steps (op, index of a, index of b)."""
    inputs = draw(st.lists(st.floats(-2.0, 2.0), min_size=1, max_size=3))
    steps = []
    n_nodes = len(inputs)
    for _ in range(draw(st.integers(1, 10))):
        op = draw(st.sampled_from(OPS))
        a = draw(st.integers(0, n_nodes - 1))  # any earlier node, so nodes get reused
        b = draw(st.integers(0, n_nodes - 1))
        steps.append((op, a, b))
        n_nodes += 1
    return inputs, steps


def run(steps, leaves, kinks=None):
    """The last node of the steps applied to the leaves, or IllConditioned; `kinks` collects the
    side of 0 of every relu input, so that two runs can be seen to take the same branches."""
    nodes = list(leaves)
    for op, i, j in steps:
        a, b = nodes[i], nodes[j]
        if op == 'add':
            out = a + b
        elif op == 'sub':
            out = a - b
        elif op == 'mul':
            out = a * b
        elif op == 'div':
            if abs(b.data) < MIN_DENOM:
                raise IllConditioned
            out = a / b
        elif op == 'exp':
            if abs(a.data) > MAX_EXP_INPUT:
                raise IllConditioned
            out = a.exp()
        elif op == 'relu':
            if abs(a.data) < MIN_KINK:
                raise IllConditioned
            if kinks is not None:
                kinks.append(a.data > 0)
            out = a.relu()
        elif op == 'square':
            out = a ** 2
        elif op == 'log':
            out = (a * a + 0.5).log()  # a*a + 0.5 >= 0.5: positive by construction
        if abs(out.data) > MAX_ABS:
            raise IllConditioned
        nodes.append(out)
    return nodes[-1]


@SETTINGS
@given(programs())
def test_random_graph_grads_match_finite_differences(program):
    inputs, steps = program
    patterns = []  # one list of relu branches per run: the backprop run and every f(x +- h)

    def build(leaves):
        kinks = []
        patterns.append(kinks)
        return run(steps, leaves, kinks)

    try:
        error = check_grads(build, inputs)
    except IllConditioned:
        reject()
    # a relu whose input changed sign between f(x - h) and f(x + h) makes the difference
    # quotient straddle the kink; such a program tests nothing, so draw another
    assume(all(p == patterns[0] for p in patterns))
    assert error < GRAD_TOL


@SETTINGS
@given(programs())
def test_random_graph_backward_twice_and_topological_rows(program):
    inputs, steps = program
    leaves = [Value(x) for x in inputs]
    try:
        out = run(steps, leaves)
    except IllConditioned:
        reject()
    out.backward()
    first = [leaf.grad for leaf in leaves]
    zero_grad(topological_order(out))  # backward() accumulates: zeroing in between is explicit
    out.backward()
    assert [leaf.grad for leaf in leaves] == first
    rows = graph_rows(out)
    assert rows[-1][0] is out
    for i, (*_, children) in enumerate(rows):
        assert all(c < i for c in children)
