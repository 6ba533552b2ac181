"""
The scalar autograd engine: a `Value` is one number that remembers how it was made.

Every number the GPT computes (a logit, a weight, the loss) is a `Value`. Each node keeps its
children and the local gradient d(node)/d(child) of each one, stored as plain numbers, not
closures. `backward()` then walks the graph from the output back to the inputs and applies the
chain rule: child.grad += local_grad * node.grad.

Two kinds of operation live here:
  * basic ops (+ - * / ** exp log relu), one small node each, exactly as in micrograd;
  * fused primitives (dot, linear, vsum, softmax, rmsnorm, cross_entropy): ONE node for a
    whole n-ary expression (or one per output), whose local gradients are derived once by
    hand in the docstring. They compute the same math as their composition of basic ops
    (tests/test_fused.py checks that to 1e-12) with far fewer nodes, which is what makes
    training fast.

backward() finds the graph by searching from the output. A `Tape` is the faster way that
training uses: it records the nodes as they are created, which is already an order in which
every child comes before its parents, so there is nothing to search.

model.py builds the GPT out of these; graph.py lists and draws a graph; nothing here imports
anything but the standard library.
"""

import math
from itertools import count
from operator import mul


class NonFiniteError(ValueError):
    """An op produced inf or nan. In training this means divergence: lower the learning rate."""


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
        return Value(_finite(self.data + other.data, '+'), (self, other), (1.0, 1.0), '+')

    def __mul__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        # d(a*b)/da = b and d(a*b)/db = a
        return Value(_finite(self.data * other.data, '*'), (self, other),
                     (other.data, self.data), '*')

    def __pow__(self, exponent):
        if isinstance(exponent, Value):
            raise TypeError("a Value exponent is not supported: use a plain number "
                            "(x ** 2), or write b ** x as (x * log(b)).exp()")
        if not isinstance(exponent, (int, float)):
            raise TypeError(f"exponent must be an int or float, got {type(exponent).__name__}")
        try:
            out = self.data ** exponent
        except ZeroDivisionError:
            raise ValueError(f"0 ** {exponent} is undefined: keep the base away from 0") from None
        except OverflowError:  # float ** raises instead of returning inf, unlike float *
            raise NonFiniteError(
                f"{self.data} ** {exponent} overflows a float (non-finite)") from None
        if isinstance(out, complex):
            raise ValueError(f"{self.data} ** {exponent} is not a real number: "
                             "a negative base needs an integer exponent")
        out = _finite(out, '**')
        # d(x^n)/dx = n * x^(n-1); it can blow up where x^n is fine, e.g. x ** 0.5 at x = 0
        try:
            local = exponent * self.data ** (exponent - 1) if exponent != 0 else 0.0
        except (ZeroDivisionError, OverflowError):
            local = math.inf
        if not math.isfinite(local):
            raise ValueError(f"the slope of x ** {exponent} at x = {self.data} is non-finite: "
                             "keep the base away from 0")
        return Value(out, (self,), (local,), f'**{exponent}')

    def exp(self):
        try:
            out = math.exp(self.data)
        except OverflowError:
            raise NonFiniteError(f"exp({self.data}) overflows a float: the input is too large "
                             "(are the logits diverging? lower the learning rate)") from None
        return Value(_finite(out, 'exp'), (self,), (out,), 'exp')  # d(e^x)/dx = e^x

    def log(self):
        if self.data <= 0:
            raise ValueError(f"log({self.data}) is undefined: log needs a positive input")
        return Value(math.log(self.data), (self,), (1.0 / self.data,), 'log')  # d(ln x)/dx = 1/x

    def relu(self):
        # the slope is 1 where the input is positive and 0 elsewhere (0 at exactly 0, by choice)
        return Value(max(0.0, self.data), (self,), (float(self.data > 0),), 'relu')

    # Everything else is written with the ops above, so it needs no gradient of its own.
    def __neg__(self):
        return self * -1

    def __radd__(self, other):
        return self + other

    def __sub__(self, other):
        return self + (-other)

    def __rsub__(self, other):
        return other + (-self)

    def __rmul__(self, other):
        return self * other

    def __truediv__(self, other):
        if not isinstance(other, Value) and other == 0:
            raise ZeroDivisionError("division of a Value by 0")
        return self * other ** -1

    def __rtruediv__(self, other):
        return other * self ** -1

    def __repr__(self):
        return f"Value(data={self.data:.6g}, grad={self.grad:.6g})"

    # ------------------------------------------------------------------ backward
    def backward(self, tape=None):
        """Fill in .grad of every node this one depends on, with d(self)/d(node).

        First every grad in the graph is set to 0, then self.grad = 1, then the chain rule
        runs from the output back. So a second call, on this graph or on a freshly built one,
        gives the same gradients rather than doubling them; within one call, a node used by
        several others (a "diamond") receives the sum of their contributions.

        tape: optional, a Tape that recorded the computation of this node. Its nodes are
        already in topological order, so the graph search is skipped (training uses this).
        Leaves made before the tape, such as parameters, are not on it, so not reset here.

        note: a parameter that is not in the graph at all (the embedding row of a letter the
        name lacks) is never reached, so its grad is not touched either: that is why the
        optimizer sets each grad back to 0 once it has used it (optim.Adam.step), as
        microgpt does.
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
        # Walk from the output back: a node's grad is complete before it is passed on,
        # because every node that uses it comes later in `order`.
        for node in reversed(order):
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
    topological order: backward() can walk it in reverse without searching the graph.
    (Nodes recorded but not used by the loss just end up with grad 0.)
    """

    def __init__(self):
        self.nodes = []

    def __enter__(self):
        global _recording
        if _recording is not None:
            # the outer tape would miss the inner one's nodes, and its backward with them
            raise RuntimeError("a Tape is already recording: tapes cannot be nested")
        _recording = self.nodes
        return self

    def __exit__(self, *exc):
        global _recording
        _recording = None
        return False


def topological_order(root):
    """Every node that `root` depends on (itself included), children before parents.

    Iterative on purpose: a recursive depth-first search (micrograd's) overflows Python's
    stack on long chains. We collect the reachable nodes with an explicit stack, then sort
    them by birth number, which puts every child before the nodes made from it.
    """
    seen = {root}
    stack = [root]
    nodes = []
    while stack:
        node = stack.pop()
        nodes.append(node)
        for child in node._children:
            if child not in seen:
                seen.add(child)
                stack.append(child)
    nodes.sort(key=_born_of)
    return nodes


def _born_of(node):
    return node._born


def _finite(x, op):
    """Return x, or stop with a clear message if an op produced inf or nan."""
    try:
        if math.isfinite(x):
            return x
    except OverflowError:  # an int too big for a float (int data can grow past 1e308)
        pass
    raise NonFiniteError(f"'{op}' produced a non-finite number ({x}): an input is too large or "
                     "already inf/nan (in training this means divergence: lower the learning rate)")


# ====================================================================== fused primitives
# Each builds ONE node (or one node per output) for an expression that would otherwise take
# dozens of basic nodes. Their local gradients are derived in the docstrings.

def dot(ws, xs):
    """s = sum_i w_i * x_i as one node with 2n children.

    ds/dw_i = x_i and ds/dx_i = w_i: each factor's gradient is its partner's value.
    Used for every attention score q.k and every weighted sum of values.
    """
    w_data = [w.data for w in ws]
    x_data = [x.data for x in xs]
    if len(w_data) != len(x_data):
        raise ValueError(f"dot of vectors of different lengths ({len(w_data)} and {len(x_data)})")
    s = sum(map(mul, w_data, x_data))  # the loop runs in C: this is where the speed is
    return Value(_finite(s, 'dot'), (*ws, *xs), (*x_data, *w_data), 'dot')


def linear(x, w):
    """The matrix-vector product w @ x, w stored [n_out][n_in]: one dot node per row.

    Exactly [dot(row, x) for row in w], with the input's numbers read once rather than
    once per row (a linear layer is where nearly all of a step's time goes).
    """
    x_data = [xi.data for xi in x]
    x = tuple(x)
    out = []
    for row in w:
        if len(row) != len(x_data):
            raise ValueError(f"linear: a row of {len(row)} weights for an input of {len(x_data)}")
        w_data = [wi.data for wi in row]
        s = sum(map(mul, w_data, x_data))
        out.append(Value(_finite(s, 'dot'), (*row, *x), (*x_data, *w_data), 'dot'))
    return out


def vsum(xs):
    """s = sum_i x_i as one node: ds/dx_i = 1 for every i."""
    xs = list(xs)
    s = sum(x.data for x in xs)
    return Value(_finite(s, 'sum'), tuple(xs), (1.0,) * len(xs), 'sum')


def softmax(logits):
    """p_i = exp(z_i) / sum_j exp(z_j) = exp(z_i - L), with L = log sum_j exp(z_j).

    Built from n + 1 nodes rather than n nodes of n children each: one node for L, with
    dL/dz_j = exp(z_j) / sum exp = p_j, then one node per p_i with two children, z_i and L:
    dp_i/dz_i = p_i and dp_i/dL = -p_i. The chain rule through L gives back the full
    Jacobian dp_i/dz_j = p_i (delta_ij - p_j) without storing its n^2 entries.
    The max logit is subtracted before exp(): it cancels in the ratio and prevents overflow.
    """
    z = [v.data for v in logits]
    zmax = max(z)
    e = [math.exp(zi - zmax) for zi in z]
    total = sum(e)
    p = [ei / total for ei in e]
    lse = Value(_finite(zmax + math.log(total), 'softmax'), tuple(logits), p, 'logsumexp')
    return [Value(pi, (zi, lse), (pi, -pi), 'softmax') for zi, pi in zip(logits, p)]


def rmsnorm(xs, eps=1e-5):
    """y_i = x_i * s with s = (mean_j x_j^2 + eps)^(-1/2): x rescaled to root-mean-square ~1.

    Built from n + 1 nodes: one node for the scale s, with every x_j as a child,
    ds/dx_j = -1/2 (ms + eps)^(-3/2) * 2 x_j / n = -x_j s^3 / n; then one product node per
    output, y_i = x_i * s, with dy_i/dx_i = s and dy_i/ds = x_i. Through s, the chain rule
    gives the full Jacobian dy_i/dx_j = s delta_ij - x_i x_j s^3 / n with 3n stored numbers.
    """
    x = [v.data for v in xs]
    n = len(x)
    # checked: an overflowed mean square would make s = 0 and every output silently 0
    ms = _finite(sum(xi * xi for xi in x) / n, 'rmsnorm')
    s = (ms + eps) ** -0.5
    c = -s ** 3 / n
    scale = Value(s, tuple(xs), [c * xj for xj in x], 'rms_scale')
    return [Value(_finite(xi * s, 'rmsnorm'), (xv, scale), (s, xi), 'rmsnorm')
            for xv, xi in zip(xs, x)]


def cross_entropy(logits, target):
    """L = -log softmax(z)[t] = logsumexp(z) - z_t as one node.

    dL/dz_j = p_j - delta_jt, with p = softmax(z): the gradient pushes the target's logit up
    and every logit down in proportion to the probability the model gave it.
    """
    z = [v.data for v in logits]
    if not 0 <= target < len(z):
        raise IndexError(f"target {target} is outside the {len(z)} logits")
    zmax = max(z)
    e = [math.exp(zi - zmax) for zi in z]
    total = sum(e)
    loss = zmax + math.log(total) - z[target]
    local = [ei / total for ei in e]
    local[target] -= 1.0
    return Value(_finite(loss, 'cross_entropy'), tuple(logits), local, 'cross_entropy')
