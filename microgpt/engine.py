"""
The scalar autograd engine: a `Value` is one number that remembers how it was made.

Every number the GPT computes (a logit, a weight, the loss) is a Value. Each node keeps its
children and the local gradient d(node)/d(child) of each, as plain numbers, not closures;
`backward()` walks the graph from the output back and applies the chain rule: child.grad +=
local_grad * node.grad. That is the whole engine, and the first file to read (the order is in
docs/reading-guide.md). It imports nothing from the project and checks nothing: a Value computes
what Python's floats compute (exp() of too large a number raises OverflowError, as math.exp
does); training checks its loss once per step.
"""

import math
from itertools import count

# Every node gets a birth number. A node is always born after its children (they must exist
# before it can be computed from them), so sorting by birth number is a topological order.
_birth = count()
# The list of the Tape being recorded, if any: every new node is appended to it (see Tape).
_recording = None


class Value:
    """One scalar in the computation graph, with its gradient."""

    __slots__ = ('data', 'grad', '_children', '_local_grads', '_op', '_born')
    def __init__(self, data, children=(), local_grads=(), op=''):
        self.data = data                  # the number computed in the forward pass
        self.grad = 0.0                   # d(output)/d(this node), summed up by backward()
        self._children = children         # the nodes this one was computed from
        self._local_grads = local_grads   # d(this node)/d(child), one number per child
        self._op = op                     # name of the op that made this node ('' for a leaf)
        self._born = next(_birth)         # birth number: children are always born first
        if _recording is not None:
            _recording.append(self)

    # ---- basic ops: each returns a new node, its forward value, children and d(out)/d(child)
    def __add__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        return Value(self.data + other.data, (self, other), (1.0, 1.0), '+')  # d(a+b)/da = 1

    def __mul__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        return Value(self.data * other.data, (self, other), (other.data, self.data), '*')  # d(ab)/da = b

    def __pow__(self, n):  # n is a plain number: x ** 2, x ** -0.5
        return Value(self.data ** n, (self,), (n * self.data ** (n - 1),), f'**{n}')  # n x^(n-1)

    def exp(self):
        out = math.exp(self.data)
        return Value(out, (self,), (out,), 'exp')  # d(e^x)/dx = e^x

    def log(self):
        return Value(math.log(self.data), (self,), (1.0 / self.data,), 'log')  # d(ln x)/dx = 1/x

    def relu(self):  # the slope is 1 where the input is positive, 0 elsewhere (0 at 0, by choice)
        return Value(max(0.0, self.data), (self,), (float(self.data > 0),), 'relu')

    # Everything else is written with the ops above, so it needs no gradient of its own.
    def __neg__(self): return self * -1
    def __radd__(self, other): return self + other
    def __sub__(self, other): return self + (-other)
    def __rsub__(self, other): return other + (-self)
    def __rmul__(self, other): return self * other
    def __truediv__(self, other): return self * other ** -1
    def __rtruediv__(self, other): return other * self ** -1

    def __repr__(self):
        return f"Value(data={self.data:.6g}, grad={self.grad:.6g})"

    def backward(self, tape=None):
        """Add d(self)/d(node) to the .grad of every node this one depends on.

        The chain rule, from the output back: self.grad = 1, then each node, after every node
        that uses it, passes grad * local_grad to each child; a node used twice (a "diamond")
        gets the sum. As in micrograd and PyTorch, grads ACCUMULATE: nothing is reset, so the
        same graph twice needs zero_grad() between (training zeroes the parameters after each
        update: optim.Adam.step). With a tape, the order is recorded: no graph to search.
        """
        order = topological_order(self) if tape is None else tape.nodes
        if tape is not None and self not in order:
            raise ValueError("backward(tape): this node was not recorded on that tape")
        self.grad = 1.0
        for node in reversed(order):  # every node that uses `node` came later, so its grad is complete
            g = node.grad
            if g:  # a zero grad adds nothing to the children, so skip the loop
                for child, local in zip(node._children, node._local_grads):
                    child.grad += local * g


def zero_grad(nodes):
    """Set every node's grad back to 0, so that the next backward() starts afresh."""
    for node in nodes:
        node.grad = 0.0


class Tape:
    """Records every Value created while it is active, in order of creation: `with Tape() as
    tape: loss = doc_loss(model, tokens)`, then `loss.backward(tape)`. Children are created
    before the nodes made from them, so the recording is already a topological order."""

    def __init__(self):
        self.nodes = []

    def __enter__(self):
        global _recording
        if _recording is not None:  # the outer tape would miss the inner one's nodes
            raise RuntimeError("a Tape is already recording: tapes cannot be nested")
        _recording = self.nodes
        return self

    def __exit__(self, *exc):
        global _recording
        _recording = None


def topological_order(root):
    """Every node `root` depends on (itself included), children before parents: an explicit
    stack (recursion would overflow on long chains), then a sort by birth number."""
    seen, stack, nodes = {root}, [root], []
    while stack:
        node = stack.pop()
        nodes.append(node)
        for child in node._children:
            if child not in seen:
                seen.add(child)
                stack.append(child)
    nodes.sort(key=lambda node: node._born)
    return nodes
