"""
Exercise 7: backward(), the chain rule over a whole graph (the real one: microgpt/engine.py,
Value.backward).

Reading: docs/reading-guide.md, section 1, file 1, and section 2's autograd table. See it live:
`python -m microgpt.lab autograd "a * a + a" a=3` gives a.grad = 7 (2a + 1), the diamond.
Then run `python -m microgpt.lab exercises check 7`.
"""

from ex06_topological_order import topological_order


def backward(root):
    """Add d(root)/d(node) to the .grad of every node root depends on. Returns nothing.

    Each node has .grad (a float), ._children and ._local_grads: _local_grads[i] is
    d(node)/d(_children[i]), the numbers of exercises 1 to 5.
    The chain rule: d(root)/d(child) = sum over the nodes n that use child of
    d(root)/d(n) * d(n)/d(child), and d(root)/d(root) = 1. A node's gradient is complete once
    every node that uses it has passed its share on: your exercise 6 gives an order in which
    that holds. A node used twice (a in a * a + a) receives a share along each path, and its
    gradient is their sum. Nothing is reset: a .grad that held 0.5 before holds
    0.5 + d(root)/d(node) after, as in microgpt and PyTorch.
    `python -m microgpt.lab exercises hint 7` gives the way there, one step at a time.
    """
    # solution
    root.grad = 1.0
    for node in reversed(topological_order(root)):
        for child, local in zip(node._children, node._local_grads):
            child.grad += local * node.grad
    # end solution
