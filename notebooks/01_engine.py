# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 1. The engine: a number that remembers how it was made
#
# The first lesson of microgpt, and the first file of the reading order
# ([docs/reading-guide.md](../docs/reading-guide.md), file 1): `microgpt/engine.py`. Every number
# the GPT computes is a `Value`: it keeps the numbers it was made from and the local derivative
# toward each one, and `backward()` applies the chain rule from the output back.
#
# This notebook builds one expression, draws its graph, takes its derivatives three ways (by hand,
# by `backward()`, by finite differences) and ends with the exercises 1 to 7, checked from a cell.
# Run it top to bottom (Run, Run All Cells): it needs nothing prepared, no checkpoint and no data.
# Its source is `notebooks/01_engine.py` ([docs/notebooks.md](../docs/notebooks.md)).

# %%
import matplotlib.pyplot as plt

from microgpt.engine import Value, topological_order
from microgpt.graph import graph_table
from microgpt.lab import autograd

# %% [markdown]
# ## An expression of Values
#
# `(a + b) * c` at a = 2, b = −3, c = 10: the autograd sandbox's example
# (`python -m microgpt.lab autograd "(a + b) * c" a=2 b=-3 c=10`). Each operation makes a new
# node; nothing is computed later, each node holds its number at once.

# %%
a, b, c = Value(2.0), Value(-3.0), Value(10.0)
s = a + b  # a node with children (a, b) and local gradients (1, 1)
y = s * c  # children (s, c), local gradients (c, s) as numbers: (10, -1)
names = {a: 'a', b: 'b', c: 'c', s: 's = a + b', y: 'y = s * c'}
print(y)
print(graph_table(y, names))  # the nodes in topological order: every node after its inputs

# %% [markdown]
# ## Its graph, drawn
#
# The lab's `compute()` returns the same graph as data: each node's label, value, gradient and the
# numbers of the nodes it reads (`--dot FILE` writes it for Graphviz). The picture below draws
# that answer, inputs on the left, the output on the right, after `backward()` has filled every
# grad.


# %%
def draw_graph(answer, title):
    """The nodes of an autograd.compute() answer as boxes, an arrow from each input."""
    nodes = answer['nodes']
    depth = []  # a node's column: one more than its deepest input, so inputs sit to its left
    for node in nodes:  # topological order: its inputs already have a depth
        depth.append(1 + max((depth[i] for i in node['inputs']), default=-1))
    rows = {}
    place = []
    for d in depth:
        place.append((d, rows.get(d, 0)))
        rows[d] = rows.get(d, 0) + 1
    fig, ax = plt.subplots(figsize=(2.4 * (max(depth) + 1), 1.3 * max(rows.values()) + 0.6))
    for k, node in enumerate(nodes):
        x, y_ = place[k]
        for n, i in enumerate(node['inputs']):
            # an input read twice gets two arrows, one bent; one from further left bends round the rest
            bend = 0.25 * node['inputs'][:n].count(i) + 0.35 * (x - place[i][0] > 1)
            ax.annotate('', xy=(x - 0.32, y_), xytext=(place[i][0] + 0.32, place[i][1]),
                        arrowprops={'arrowstyle': '->', 'color': 'tab:gray',
                                    'connectionstyle': f'arc3,rad={bend}'})
        ax.text(x, y_, f"{node['label']}\ndata {node['data']:.4g}\ngrad {node['grad']:.4g}", ha='center',
                va='center', fontsize=9, family='monospace',
                bbox={'boxstyle': 'round', 'facecolor': 'tab:orange' if node['variable'] else 'white'})
    ax.set_xlim(-0.6, max(depth) + 0.6)
    ax.set_ylim(max(rows.values()) - 0.4, -0.6)
    ax.axis('off')
    ax.set_title(title)
    plt.show()


expression = autograd.compute("(a + b) * c", {'a': 2, 'b': -3, 'c': 10})
draw_graph(expression, "(a + b) * c: orange = the inputs")

# %% [markdown]
# ## Backward by hand
#
# With pen and paper: y = s · c and s = a + b, so ∂y/∂c = s = −1, ∂y/∂s = c = 10, and since
# ∂s/∂a = ∂s/∂b = 1, the chain rule gives ∂y/∂a = ∂y/∂b = 10 · 1 = 10. These are the reading
# guide's numbers (section 3: `a.grad = 10`, `b.grad = 10`, `c.grad = -1`).

# %%
by_hand = {'a': c.data * 1.0, 'b': c.data * 1.0, 'c': a.data + b.data}
print("by hand:", by_hand)
assert by_hand == {'a': 10.0, 'b': 10.0, 'c': -1.0}

# %% [markdown]
# ## Backward by `backward()`
#
# `y.backward()` sets y.grad = 1 and walks the nodes in reverse topological order, adding
# `local * grad` into each child's grad. The order is `topological_order(y)`: children first.

# %%
print("order:", [names[node] for node in topological_order(y)])
y.backward()
by_backward = {'a': a.grad, 'b': b.grad, 'c': c.grad}
print("backward():", by_backward)
assert by_backward == by_hand

# %% [markdown]
# Grads **accumulate**: `backward()` adds and resets nothing. A node used twice, a diamond, gets
# the sum of both uses: in `a * a + a` at a = 3, ∂/∂a = 2a + 1 = 7 (the reading guide's
# `autograd "a * a + a" a=3`). Had `backward()` assigned instead of adding, it would say 1.

# %%
diamond = autograd.compute("a * a + a", {'a': 3})
print(diamond['_table'])
assert diamond['variables']['a']['grad'] == 7.0
draw_graph(diamond, "a * a + a: a is read twice, so its grad is a sum")

# %% [markdown]
# ## Checked against finite differences
#
# An independent oracle: nudge one input by ±h and see how much the output moves,
# (f(x + h) − f(x − h)) / 2h. It knows nothing of the graph, so it catches a wrong local
# derivative as surely as a wrong order. The lab's `compute()` evaluates the expression at each
# nudged point (it parses the text with `ast`, never `eval`).

# %%
H, TOLERANCE = 1e-6, 1e-6


def finite_difference(text, values, name):
    up = autograd.compute(text, {**values, name: values[name] + H})['value']
    down = autograd.compute(text, {**values, name: values[name] - H})['value']
    return (up - down) / (2 * H)


cases = [("(a + b) * c", {'a': 2, 'b': -3, 'c': 10}),
         ("a * a + a", {'a': 3}),
         ("a / b - exp(a) * log(b)", {'a': 0.5, 'b': 4}),
         ("relu(x * w + b)", {'x': 1.5, 'w': -2, 'b': 4}),   # x * w + b = 1: the ReLU passes
         ("relu(x * w + b)", {'x': 1.5, 'w': -2, 'b': 2})]   # x * w + b = -1: every grad is 0
for text, values in cases:
    answer = autograd.compute(text, values)
    print(f"{text:<26} value {answer['value']:+.6f}")
    for name in values:
        grad, fd = answer['variables'][name]['grad'], finite_difference(text, values, name)
        print(f"    d/d{name}: backward() {grad:+.6f}   finite difference {fd:+.6f}")
        assert abs(grad - fd) < TOLERANCE

# %% [markdown]
# Behind a ReLU whose input is negative every gradient is exactly 0: the last case. The reading
# guide asks you to try it; both methods agree.
#
# ## Your turn: exercises 1 to 7
#
# Write the engine yourself: the local derivatives of `*`, `**`, `exp`, `log` and `relu`, the
# topological order and `backward()`. The cell below writes the stubs into your exercises folder
# once (the checkout's `exercises/`, as `python -m microgpt.lab exercises start` does; never
# overwriting a file) and checks them in order, stopping at the first one not passed, with the case
# that failed and a hint. Edit the file it names, then run the cell again. The same check from a
# terminal: `python -m microgpt.lab exercises check 1`.

# %%
from microgpt.lab.notebook import check_exercises

LESSON_EXERCISES = (1, 2, 3, 4, 5, 6, 7)
check_exercises(LESSON_EXERCISES)  # the stubs written once into exercises/, then checked in order
