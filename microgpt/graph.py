"""
Looking inside a computation graph: list its nodes in order, or draw it with Graphviz.

engine.py builds the graph and runs backward(); this file only reads it. The autograd
explorer (`python -m microgpt.lab autograd ...`) prints `graph_table()` and writes `to_dot()`.

    from microgpt.engine import Value
    from microgpt.graph import graph_table, to_dot
    a, b = Value(2.0), Value(-3.0)
    y = (a + b) * 10
    y.backward()
    print(graph_table(y, names={a: 'a', b: 'b'}))
"""

from .engine import topological_order


def graph_rows(root):
    """One (node, op, data, grad, child numbers) tuple per node, children before parents.

    A node's number is its position in this list; a diamond's shared node appears once.
    """
    order = topological_order(root)
    number = {node: i for i, node in enumerate(order)}
    return [(node, node._op, node.data, node.grad, [number[c] for c in node._children])
            for node in order]


def graph_table(root, names=None):
    """The graph as aligned text: node number, op (or the leaf's name), data, grad, inputs."""
    names = names or {}
    lines = [f"{'node':>4}  {'op':<14} {'data':>12} {'grad':>12}  inputs"]
    for i, (node, op, data, grad, children) in enumerate(graph_rows(root)):
        label = names.get(node) or op or 'leaf'
        inputs = ', '.join(f'#{c}' for c in children)
        # + 0.0 turns -0.0 (e.g. 0 * -1) into 0.0, so the table never shows a "-0"
        row = f"{'#' + str(i):>4}  {label:<14} {data + 0.0:>12.6g} {grad + 0.0:>12.6g}  {inputs}"
        lines.append(row.rstrip())
    return '\n'.join(lines)


def to_dot(root, names=None):
    """Graphviz DOT text: a box per node (name or op, data, grad), an arrow from each input."""
    names = names or {}
    out = ['digraph autograd {', '  rankdir=LR;', '  node [shape=record, fontname="monospace"];']
    for i, (node, op, data, grad, children) in enumerate(graph_rows(root)):
        label = _escape(names.get(node) or op or 'leaf')
        out.append(f'  n{i} [label="{{ {label} | data {data + 0.0:.4g} | grad {grad + 0.0:.4g} }}"];')
        for c in children:
            out.append(f'  n{c} -> n{i};')
    out.append('}')
    return '\n'.join(out) + '\n'


def _escape(text):
    """Quote the characters that have a meaning inside a DOT record label."""
    for ch in '\\{}|<>"':
        text = text.replace(ch, '\\' + ch)
    return text
