"""
Exercise 6: a graph's nodes in topological order (the real one: microgpt/engine.py,
topological_order).

backward() must visit a node only after every node that uses it has passed its gradient on.
Listing the nodes children-before-parents, then walking that list backwards, guarantees it.

Reading: docs/reading-guide.md, section 1, files 1 and 2 (engine.py, graph.py). See it live:
`python -m microgpt.lab autograd "a * a + a" a=3` lists the nodes in this order.
Then run `python -m microgpt.lab exercises check 6`.
"""


def topological_order(root):
    """Every node `root` depends on, root included, each once, children before parents.

    A node is a Value: node._children is the tuple of nodes it was computed from (empty for a
    leaf). Walk from root through _children and collect each node once (in a * a + a, `a` is
    used three times but is one node), in an order where every node comes after all of its
    children; root, which depends on everything, comes last.
    Returns a list of nodes.

    Mind the depth: a long sum is a chain of thousands of nodes, deeper than Python lets
    functions call themselves (about 1000 calls). Keep your own stack in a list, as engine.py
    does, rather than a recursive function.
    """
    # solution
    order, seen = [], set()
    stack = [(root, False)]  # (node, whether its children are already in `order`)
    while stack:
        node, children_done = stack.pop()
        if children_done:
            order.append(node)
        elif node not in seen:
            seen.add(node)
            stack.append((node, True))  # comes back once everything pushed after it is done
            for child in node._children:
                if child not in seen:
                    stack.append((child, False))
    return order
    # end solution
