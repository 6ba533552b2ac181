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
      1) root.grad = 1: d(root)/d(root).
      2) Visit the nodes in reverse topological order (your exercise 6, reversed: root first,
         leaves last). When a node is visited, every node that uses it has already passed its
         share on, so node.grad is complete; pass node.grad * local_grad on to each child.
    ADD to a child's .grad, never assign: a node used twice (a in a * a + a) receives a share
    along each path, and its gradient is their sum. For the same reason nothing is reset: a
    .grad that held 0.5 before holds 0.5 + d(root)/d(node) after, as in microgpt and PyTorch.
    """
    # solution
    root.grad = 1.0
    for node in reversed(topological_order(root)):
        for child, local in zip(node._children, node._local_grads):
            child.grad += local * node.grad
    # end solution
