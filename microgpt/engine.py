"""
The scalar autograd engine: a `Value` is one number that remembers how it was made.

Every number the GPT computes (a logit, a weight, the loss) is a `Value`. Each node keeps its
children and the local gradient d(node)/d(child) of each one, stored as plain numbers, not
closures. `backward()` walks the graph from the output back to the inputs and applies the
chain rule: child.grad += local_grad * node.grad. That is the whole engine.

Read this first. Then ops.py builds the model's blocks (linear, softmax, rmsnorm,
cross-entropy) out of these basic ops, model.py builds the GPT out of those, and fused.py
(read after training) shows the same blocks as one hand-differentiated node each, which is
what makes training fast. graph.py lists and draws a graph. Standard library only.
"""

import math
from itertools import count

from .errors import NonFiniteError, checked_power, is_finite, non_finite_message

# Every node gets a birth number. A node is always born after its children (they must exist
# before it can be computed from them), so sorting by birth number is a topological order.
_birth = count()
# The list of the Tape being recorded, if any: every new node is appended to it (see Tape).
_recording = None


class Value:
    """One scalar in the computation graph, with its gradient."""

    __slots__ = ('data', 'grad', '_children', '_local_grads', '_op', '_born')

    def __init__(self, data, children=(), local_grads=(), op=''):
        if not is_finite(data):  # an overflow stops here, at the op that made it
            raise NonFiniteError(non_finite_message(data, op))
        self.data = data                  # the number computed in the forward pass
        self.grad = 0.0                   # d(output)/d(this node), filled in by backward()
        self._children = children         # the nodes this one was computed from
        self._local_grads = local_grads   # d(this node)/d(child), one number per child
        self._op = op                     # name of the op that made this node ('' for a leaf)
        self._born = next(_birth)         # birth number: children are always born first
        if _recording is not None:
            _recording.append(self)

    # ------------------------------------------------------------------ basic ops
    # Each op returns a new node: its forward value, its children, and d(out)/d(child).

    def __add__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        return Value(self.data + other.data, (self, other), (1.0, 1.0), '+')  # d(a+b)/da = 1

    def __mul__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        return Value(self.data * other.data, (self, other), (other.data, self.data), '*')  # d(ab)/da = b

    def __pow__(self, exponent):
        out, local = checked_power(self.data, exponent)  # x^n and d(x^n)/dx = n x^(n-1)
        return Value(out, (self,), (local,), f'**{exponent}')

    def exp(self):
        try:
            out = math.exp(self.data)
        except OverflowError:
            raise NonFiniteError(f"exp({self.data}) overflows a float: the input is too large "
                                 "(are the logits diverging? lower the learning rate)") from None
        return Value(out, (self,), (out,), 'exp')  # d(e^x)/dx = e^x

    def log(self):
        if self.data <= 0:  # log(0) = -inf is a non-finite result; log of a negative is undefined
            error = NonFiniteError if self.data == 0 else ValueError
            raise error(f"log({self.data}) is undefined: log needs a positive input")
        return Value(math.log(self.data), (self,), (1.0 / self.data,), 'log')  # d(ln x)/dx = 1/x

    def relu(self):
        # the slope is 1 where the input is positive and 0 elsewhere (0 at exactly 0, by choice)
        return Value(max(0.0, self.data), (self,), (float(self.data > 0),), 'relu')

    # Everything else is written with the ops above, so it needs no gradient of its own.
    def __neg__(self): return self * -1
    def __radd__(self, other): return self + other
    def __sub__(self, other): return self + (-other)
    def __rsub__(self, other): return other + (-self)
    def __rmul__(self, other): return self * other
    def __rtruediv__(self, other): return other * self ** -1

    def __truediv__(self, other):
        if not isinstance(other, Value) and other == 0:
            raise ZeroDivisionError("division of a Value by 0")
        return self * other ** -1

    def __repr__(self):
        return f"Value(data={self.data:.6g}, grad={self.grad:.6g})"

    # ------------------------------------------------------------------ backward
    def backward(self, tape=None):
        """Fill in .grad of every node this one depends on with d(self)/d(node).

        The chain rule, from the output back: self.grad = 1, then each node, after every node
        that uses it, passes grad * local_grad to each child. A node used several times (a
        "diamond") receives the sum of those contributions.

        Without a tape, the graph is found by searching from self, and every node found
        (leaves included) is reset to 0 first: calling backward() twice gives the same grads.
        With a tape (what training uses), the recorded nodes are already in order, so there is
        nothing to search; only they are reset. Leaves made before the tape, the parameters,
        are not on it, so a second backward(tape) ADDS to their grads. That is why the
        optimizer sets each grad back to 0 once it has used it (optim.Adam.step), as microgpt
        does; it also covers the parameters a name never reaches (other letters' rows of wte).
        """
        if tape is None:
            order = topological_order(self)
        elif self in tape.nodes:
            order = tape.nodes
        else:
            raise ValueError("backward(tape): this node was not recorded on that tape")
        for node in order:
            node.grad = 0.0
        self.grad = 1.0
        for node in reversed(order):  # every node that uses `node` came later, so its grad is complete
            g = node.grad
            if g:  # a zero grad adds nothing to the children, so skip the loop
                for child, local in zip(node._children, node._local_grads):
                    child.grad += local * g


class Tape:
    """Records every Value created while it is active, in order of creation.

        with Tape() as tape:
            loss = doc_loss(model, tokens)
        loss.backward(tape)

    Children are created before the nodes made from them, so the recording is already a
    topological order: backward() walks it in reverse without searching the graph.
    """

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
        return False


def topological_order(root):
    """Every node `root` depends on (itself included), children before parents.

    An explicit stack, not micrograd's recursion, which overflows Python's stack on long
    chains; then a sort by birth number puts every child before the nodes made from it.
    """
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
