"""
The checks of exercises 1 to 7, the engine: each op's forward value and local derivatives,
the topological order, and backward().

The project's own answers come from microgpt/engine.py (a Value computed with the same inputs);
the independent oracle is central finite differences: of the learner's own forward for the
local derivatives (is your derivative the slope of your function?), of the whole expression for
backward(). Each check runs fixed small cases first, random ones after, and stops at the first
case that fails (harness.Report).
"""

import math
import random
from collections import Counter

from ...engine import Value, topological_order as project_order
from .harness import FD_CLOSE, agrees, central_difference, fd_step, fmt, is_number, kind_of

RANDOM_CASES = 8


# ---------------------------------------------------------------------------- exercises 1 to 5
def check_op(t, fn, cases, project, mistakes, forward_hint, slope_hint, names='x', nodes=None, kink=None):
    """An op's check: forward value and each local derivative, against the engine's Value and
    against central differences of the learner's own forward (skipped at a kink). names: the
    arguments ('ab'; 'xn' for x ** n); nodes: those that are nodes, with a local derivative
    (power's n is a constant); mistakes(*args): for each node, its (label, value, hint) slips."""
    nodes = nodes or names
    wanted = f"a pair (out, ({', '.join(f'd out/d {n}' for n in nodes)},))"

    def result(args):  # (out, [local derivatives]), their form checked
        got = t.call(fn, *args)
        t.expect(type(got) in (tuple, list) and len(got) == 2, got, wanted)
        t.expect(is_number(got[0]), got[0], f"{wanted}, with out a number")
        if type(got[1]) not in (tuple, list):  # the pair is right, its second half is not a tuple
            t.fail_line(f"your {t.exercise.function}() returned (out, {kind_of(got[1])}): the local derivatives "
                        f"go in a tuple, even one alone: ({', '.join(f'd out/d {n}' for n in nodes)},)",
                        hint="A tuple of one is written with a comma: (slope,).")
        t.expect(len(got[1]) == len(nodes), got[1],
                 f"{len(nodes)} local derivative{'s' * (len(nodes) > 1)} in a tuple, one per input: "
                 f"({', '.join(f'd out/d {n}' for n in nodes)},)")
        return float(got[0]), t.numbers(got[1], len(nodes), "numbers as the local derivatives")
    for label, args, fixed in cases:
        t.case(label, ', '.join(f"{n} = {fmt(a)}" for n, a in zip(names, args)), fixed)
        out, grads = result(args)
        node = project(*args)
        t.compare('the forward value', out, node.data, hint=forward_hint)
        for i, name in enumerate(nodes):
            oracle, want = None, node._local_grads[i]
            if kink is None or abs(args[i] - kink) > 2 * fd_step(args[i]):  # no slope to measure at a kink
                fd = central_difference(lambda z: result(args[:i] + (z,) + args[i + 1:])[0], args[i])
                oracle = ('central differences of your forward', fd)
                if agrees(grads[i], want) and not agrees(fd, want, FD_CLOSE):  # the slip is the forward's
                    t.fail(f"the slope of your forward value (d out/d {name} by central differences)", want, fd,
                           abs(fd - want), hint=f"Your local derivative is right; your forward value is not, "
                                                f"even where it happens to agree: {forward_hint}")
            t.compare(f"d out/d {name}", grads[i], want, hint=slope_hint,
                      mistakes=mistakes(*args)[i], oracle=oracle)


def cases_of(fixed, draw, seed):
    rng = random.Random(seed)
    return ([(f"fixed {i + 1}", args, True) for i, args in enumerate(fixed)] +
            [(f"random {i + 1}", draw(rng), False) for i in range(RANDOM_CASES)])


def check_mul(t, fn):
    def mistakes(a, b):
        swapped = ("Your two slopes are swapped: nudge a alone by a small h and see which number multiplies h "
                   "in the product's change")
        return [[('a', a, swapped), ('1', 1.0, "1 would be a sum's slope: nudge a by a small h and see how far "
                                               "the product moves")],
                [('b', b, swapped), ('1', 1.0, "1 would be a sum's slope: nudge b by a small h and see how far "
                                               "the product moves")]]
    check_op(t, fn, cases_of([(3.0, -2.0), (0.0, 5.0), (1.5, 1.5), (-0.5, 4.0)],
                             lambda r: (r.uniform(-3, 3), r.uniform(-3, 3)), 101),
             lambda a, b: Value(a) * Value(b), mistakes, names='ab',
             forward_hint="The forward value of a * b is the product of the two numbers.",
             slope_hint="Nudge one input by a small h, keep the other fixed, and divide the product's change "
                        "by h (`hint 1` walks through it).")


def check_power(t, fn):
    """x ** n has one input node, x: n is a constant, so there is one local derivative."""
    check_op(t, fn, cases_of([(3.0, 2), (2.0, -1), (4.0, -0.5), (-2.0, 3), (9.0, 0.5), (1.5, 0)],
                             lambda r: (r.uniform(0.2, 3.0), r.choice([2, 3, -1, -0.5, 0.5, 1.5])), 102),
             lambda x, n: Value(x) ** n,
             lambda x, n: [[('n x^n', n * x ** n, "Close: check the power of x in your slope. Work out x ** 2 "
                                                  "by hand, nudging x by h: which power of x is left?"),
                            ('x^(n-1)', x ** (n - 1), "Close: a factor is missing in front. Work out x ** 2 by "
                                                      "hand: (x + h) ** 2 - x ** 2 is about how many x's times h?"),
                            ('x^n', x ** n, "That is the forward value again, not its slope.")]],
             forward_hint="x ** n, with n a plain number.", names='xn', nodes='x',
             slope_hint="Work out n = 2 and n = 3 by hand, nudging x by a small h, and find the pattern "
                        "in n (`hint 2`).")


def check_exp(t, fn):
    check_op(t, fn, cases_of([(0.0,), (1.0,), (-2.0,), (3.5,)], lambda r: (r.uniform(-5, 5),), 103),
             lambda x: Value(x).exp(),
             lambda x: [[('1', 1.0, "A slope of 1 would make e^x grow by the same h everywhere. Compare "
                                    "e^(x + h) with e^x: by what factor does it grow?"),
                         ('x e^(x-1)', x * math.exp(x - 1), "e^x is not a power of x, so the power rule does "
                                                             "not apply: compare e^(x + h) with e^x instead.")]],
             forward_hint="e ** x: math.exp(x).",
             slope_hint="Compare e^(x + h) with e^x: e^(x + h) = e^x * e^h, and e^h is about 1 + h for a "
                        "small h (`hint 3`).")


def check_log(t, fn):
    check_op(t, fn, cases_of([(1.0,), (2.0,), (0.5,), (10.0,), (1e-3,)], lambda r: (r.uniform(0.05, 20),), 104),
             lambda x: Value(x).log(),
             lambda x: [[('1', 1.0, "A missing factor: the log's slope changes with x, steep near 0 and "
                                    "flat far out. Nudge x by h: ln(x + h) - ln(x) = ln(1 + h/x)."),
                         ('ln x', math.log(x), "That is the forward value again, not its slope."),
                         ('-1/x', -1.0 / x, "Mind the sign: the log grows as x grows, so its slope is positive."),
                         ('1/x^2', x ** -2, "Too steep: that is the slope of another function. Nudge x by h: "
                                            "ln(x + h) - ln(x) = ln(1 + h/x).")]],
             forward_hint="ln x: math.log(x), the natural logarithm.",
             slope_hint="Nudge x by a small h: ln(x + h) - ln(x) = ln(1 + h/x), and ln(1 + u) is about u "
                        "for a small u (`hint 4`).")


def check_relu(t, fn):
    check_op(t, fn, cases_of([(3.0,), (-2.0,), (0.0,), (1e-9,), (-1e-9,)], lambda r: (r.uniform(-3, 3),), 105),
             lambda x: Value(x).relu(),
             lambda x: [[('1', 1.0, "The slope is not the same on both sides of 0: what does relu do to a "
                                    "negative input?" + (" And at exactly 0 microgpt picks 0."
                                                         if x == 0 else "")),
                         ('x', x, "Each of relu's two pieces is a straight line: its slope is a constant, "
                                  "not x itself.")]],
             forward_hint="max(0, x): a negative x gives 0.",
             slope_hint="Two straight pieces, one on each side of 0: what is the slope of each? (`hint 5`)",
             kink=0.0)


# ---------------------------------------------------------------------------- graphs to test on
OPS = {'+': lambda x, y: x + y, '-': lambda x, y: x - y, '*': lambda x, y: x * y, '/': lambda x, y: x / y,
       '**': lambda x, y: x ** y, 'exp': lambda x, _: x.exp(), 'log': lambda x, _: x.log(),
       'relu': lambda x, _: x.relu()}
CHAIN = 3000


def build(recipe, data):
    """A graph of Values: leaves a, b, c ... holding `data`, then one node per (op, i, j) of
    the recipe, on earlier nodes i and j (or the number j). (root, leaves, {id: name})."""
    nodes = [Value(x) for x in data]
    names = {id(v): name for v, name in zip(nodes, 'abcdefgh')}
    for k, (op, i, j) in enumerate(recipe):
        x, y = nodes[i], nodes[j] if type(j) is int else j
        said = [names[id(v)].split(' =')[0] if isinstance(v, Value) else f'{v:g}' for v in (x, y) if v is not None]
        nodes.append(OPS[op](x, y))
        names[id(nodes[-1])] = f"n{k + 1} = " + (f"{op}({said[0]})" if y is None else f" {op} ".join(said))
    return nodes[-1], nodes[:len(data)], names


def random_recipe(rng):
    """4 to 9 ops over 3 leaves, each on earlier nodes (so that nodes are reused)."""
    ops = [rng.choice(['+', '*', '*', 'exp', 'relu', '-', '**']) for _ in range(rng.randint(4, 9))]
    return [(op, rng.randrange(3 + k), 2.0 if op == '**' else None if op in ('exp', 'relu') else rng.randrange(3 + k))
            for k, op in enumerate(ops)]


def graph_cases(seed):
    """(label, recipe, data, fixed): the fixed graphs first, then random ones."""
    rng = random.Random(seed)
    cases = [('a leaf alone', [], [2.0], True),
             ('(a + b) * c', [('+', 0, 1), ('*', 3, 2)], [2.0, -3.0, 10.0], True),
             ('a * a + a (a diamond)', [('*', 0, 0), ('+', 1, 0)], [3.0], True),
             ('e = a*b, f = e + a, g = f * e', [('*', 0, 1), ('+', 2, 0), ('*', 3, 2)], [1.5, -2.0], True),
             ('a * b + a * c', [('*', 0, 1), ('*', 0, 2), ('+', 3, 4)], [2.0, 3.0, -4.0], True),
             ('log(exp(a) + relu(b)) * c - a / c', [('exp', 0, None), ('relu', 1, None), ('+', 3, 4),
              ('log', 5, None), ('*', 6, 2), ('/', 0, 2), ('-', 7, 8)], [0.5, 1.5, 2.0], True),
             (f'a chain of {CHAIN} steps (x * 1.0001 + 0.001)',
              [op for k in range(CHAIN) for op in (('*', 2 * k, 1.0001), ('+', 2 * k + 1, 0.001))], [0.5], True)]
    while len(cases) < 11:
        recipe, data = random_recipe(rng), [rng.uniform(-2, 2) for _ in range(3)]
        try:  # keep the graphs whose every number stays modest (squares of squares grow fast)
            ok = all(abs(n.data) < 1e6 for n in project_order(build(recipe, data)[0]))
        except (OverflowError, ZeroDivisionError):
            ok = False
        if ok:
            cases.append((f'random {len(cases) - 6}', recipe, data, False))
    return cases


def describe_graph(label, data):
    return f"{label}, with " + ', '.join(f"{n} = {x:g}" for n, x in zip('abcdefgh', data))


def node_name(node, names):
    return f"{names.get(id(node), node._op or 'leaf')} (data {node.data:.6g})"


# ---------------------------------------------------------------------------- exercise 6
def check_topological_order(t, fn):
    for label, recipe, data, fixed in graph_cases(106):
        t.case(label, describe_graph(label, data), fixed)
        root, leaves, names = build(recipe, data)
        got = t.call(fn, root)
        t.expect(type(got) in (list, tuple), got, "a list of the graph's nodes")
        want = project_order(root)
        mine = {id(n) for n in want}
        stray = next((x for x in got if id(x) not in mine), None)
        if stray is not None or any(x is None for x in got):
            t.fail_line(f"your order holds {'None' if stray is None else kind_of(stray)}, which is "
                        "not a node of this graph", hint="Collect the nodes themselves (root, its _children, "
                        "theirs ...), not their .data or new Values.")
        counts = Counter(id(x) for x in got)
        twice = next((x for x in got if counts[id(x)] > 1), None)
        if twice is not None:
            t.fail_line(f"the node {node_name(twice, names)} is in your order {counts[id(twice)]} times",
                        hint="List each node once: remember the nodes you have already seen (a set) and "
                             "skip them; a node used twice is still one node.")
        missing = [n for n in want if id(n) not in counts]
        if missing:
            t.fail('the set of nodes', [node_name(n, names) for n in want], [node_name(n, names) for n in got],
                   hint=f"{len(missing)} of the graph's {len(want)} nodes are missing, e.g. "
                        f"{node_name(missing[0], names)}: follow _children all the way down to the leaves, "
                        "and include root itself.")
        position = {id(n): i for i, n in enumerate(got)}
        for node in got:  # the oracle: every edge child -> parent points forward in the order
            late = next((c for c in node._children if position[id(c)] > position[id(node)]), None)
            if late is not None:
                t.fail_line(f"{node_name(node, names)} comes before its child {node_name(late, names)}",
                            hint="Children before parents: add a node to the order only after all of its "
                                 "children are in it (root comes last).")


# ---------------------------------------------------------------------------- exercise 7
def graph_with(recipe, data, preset):
    """build(recipe, data), its leaves' .grad set to `preset` first."""
    root, leaves, names = build(recipe, data)
    for leaf, g in zip(leaves, preset):
        leaf.grad = g
    return root, leaves


def variant_backward(root, kind):
    """The usual slips, run on a fresh graph: which one did the learner make?"""
    order = project_order(root)
    root.grad = root.grad if kind == 'no root grad' else 1.0
    for node in order if kind == 'reset first' else ():
        node.grad = node.grad if node is root else 0.0
    for node in order if kind == 'forward order' else reversed(order):
        for child, local in zip(node._children, node._local_grads):
            child.grad = local * node.grad + (0.0 if kind == 'assigned' else child.grad)


BACKWARD_HINTS = {
    'assigned': "A gradient assigned instead of added: a node used twice (a in a * a + a) gets a share "
                "along each path, and its gradient is their sum: child.grad += local * node.grad.",
    'forward order': "Walk the order backwards (reversed): root first. A node may pass its gradient on "
                     "only once every node that uses it has passed theirs to it.",
    'no root grad': "Start with root.grad = 1: d(root)/d(root) is 1, and every other gradient is a "
                    "multiple of it.",
    'reset first': "Do not reset the gradients: backward() adds to what .grad holds (training zeroes "
                   "them after each update, in Adam).",
}


def check_backward(t, fn):
    for label, recipe, data, fixed in graph_cases(107):
        preset = [0.0] * len(data)
        if label.startswith('a * b + a * c'):  # gradients accumulate across calls
            preset = [0.5, 0.0, 0.0]
            label = 'a * b + a * c, with a.grad = 0.5 before'
        t.case(label, describe_graph(label, data) + (f"; leaves' .grad before: {preset}" if any(preset) else ''),
               fixed)
        root, leaves = graph_with(recipe, data, preset)
        got = t.call(fn, root)
        if got is not None:
            t.fail_line(f"your backward() returned {kind_of(got)}; it should return nothing and leave "
                        "the answers in the nodes' .grad")
        expected_root, expected_leaves = graph_with(recipe, data, preset)
        expected_root.backward()
        mine_nodes, want_nodes = project_order(root), project_order(expected_root)
        variants = {}
        for kind in BACKWARD_HINTS:
            v_root, _ = graph_with(recipe, data, preset)
            try:
                variant_backward(v_root, kind)
                variants[kind] = [n.grad for n in project_order(v_root)]
            except (OverflowError, ZeroDivisionError, ValueError):
                pass
        mistakes = [(k, v, BACKWARD_HINTS[k]) for k, v in variants.items()]
        t.compare('the gradients of every node, in topological order', [n.grad for n in mine_nodes],
                  [n.grad for n in want_nodes], mistakes=mistakes,
                  hint="Each node passes node.grad * local_grad to each child, adding to what the child "
                       "already has; root.grad = 1 first; the nodes visited from root back to the leaves.")
        if not label.startswith('a chain'):  # (its 3000 steps would take as many forward passes)
            for i, leaf in enumerate(leaves):  # the oracle: finite differences of the whole graph
                def f(z, i=i):
                    moved = list(data)
                    moved[i] = z
                    return build(recipe, moved)[0].data
                fd = preset[i] + central_difference(f, data[i])
                t.compare(f"the gradient of {'abcdefgh'[i]}", leaf.grad, expected_leaves[i].grad,
                          oracle=('central differences of the expression', fd),
                          hint="See the docstring's two steps.")


CHECKS = {1: check_mul, 2: check_power, 3: check_exp, 4: check_log, 5: check_relu,
          6: check_topological_order, 7: check_backward}
