"""
BASELINE FOR COMPARISON ONLY: the GPT trained the way the original single-file microgpt does it,
for bench/train_speed.py to time and tests/test_baseline_agrees.py to hold to the same losses and
gradients. Nothing in microgpt/ imports it. Slow in the original's ways: a two-input node for
every + and * (softmax, rmsnorm and the loss composed from them), a recursive topological sort,
a Value with a __dict__. It starts from GPT(config, seed).weights(), {name: [[float]]}, and uses
the standard library only: it must not share code with the engine it is an oracle for.
"""

import math
import sys

# The recursive sort nests one call per node of the graph's longest path: hundreds here, near the
# default limit of 1000 for a wider model. Python 3.11 recurses without growing the C stack.
sys.setrecursionlimit(max(sys.getrecursionlimit(), 20_000))


# ---------------------------------------------------------------------------- autograd
class Value:
    """A scalar node: its value, its gradient, its (up to two) inputs and d(self)/d(input)."""

    def __init__(self, data, children=(), local_grads=()):
        self.data = data
        self.grad = 0
        self._children = children        # tuple of the input nodes
        self._local_grads = local_grads  # tuple of d(self)/d(input), one per input

    def __add__(self, other):
        if not isinstance(other, Value):
            other = Value(other)
        return Value(self.data + other.data, (self, other), (1, 1))

    def __mul__(self, other):
        if not isinstance(other, Value):
            other = Value(other)
        return Value(self.data * other.data, (self, other), (other.data, self.data))

    def __pow__(self, k):
        # k is a plain number; d(x^k)/dx = k x^(k-1)
        return Value(self.data ** k, (self,), (k * self.data ** (k - 1),))

    def log(self):
        return Value(math.log(self.data), (self,), (1 / self.data,))

    def exp(self):
        e = math.exp(self.data)
        return Value(e, (self,), (e,))

    def relu(self):
        return Value(max(0, self.data), (self,), (float(self.data > 0),))

    # the rest are spelled with the ops above, each adding its own nodes
    def __neg__(self):
        return self * -1

    def __radd__(self, other):
        return self + other

    def __sub__(self, other):
        return self + (-other)

    def __rmul__(self, other):
        return self * other

    def __truediv__(self, other):
        return self * other ** -1

    def backward(self):
        """Accumulate d(self)/d(node) into every node's .grad (callers zero leaf grads)."""
        order = []
        visited = set()

        # note: visit() refers to itself, a reference cycle that also holds `order`, so this
        # graph outlives the step until Python's garbage collector finds it (so does the original's)
        def visit(node):  # post-order DFS: a node is listed after everything it was made from
            if node not in visited:
                visited.add(node)
                for child in node._children:
                    visit(child)
                order.append(node)

        visit(self)
        self.grad = 1
        for node in reversed(order):
            for child, local in zip(node._children, node._local_grads):
                child.grad += local * node.grad


# ---------------------------------------------------------------------------- composed layers
def linear(x, w):
    """w @ x with w stored [n_out][n_in]: each row is a chain of n_in products and n_in adds."""
    return [sum(wi * xi for wi, xi in zip(row, x)) for row in w]


def softmax(logits):
    # the max is taken from the plain numbers: it cancels in the ratio and only keeps exp() small
    biggest = max(z.data for z in logits)
    exps = [(z - biggest).exp() for z in logits]
    total = sum(exps)
    return [e / total for e in exps]


def rmsnorm(x):
    ms = sum(xi * xi for xi in x) / len(x)
    scale = (ms + 1e-5) ** -0.5
    return [xi * scale for xi in x]


# ---------------------------------------------------------------------------- the model
class BaselineGPT:
    """The GPT of microgpt/model.py over two-input nodes, started from given weights.

    weights: {name: [[float]]} with microgpt's state_dict names, each [n_out][n_in].
    The sizes are read from the weights; n_head cannot be, so it is passed in.
    """

    def __init__(self, weights, n_head):
        self.state_dict = {name: [[Value(float(x)) for x in row] for row in matrix]
                           for name, matrix in weights.items()}
        self.params = [p for matrix in self.state_dict.values() for row in matrix for p in row]
        self.n_layer = sum(1 for name in weights if name.endswith('.attn_wq'))
        self.block_size = len(weights['wpe'])
        self.n_embd = len(weights['wte'][0])
        self.n_head = n_head
        self.head_dim = self.n_embd // n_head

    def gpt(self, token_id, pos_id, keys, values):
        sd, hd = self.state_dict, self.head_dim
        x = [t + p for t, p in zip(sd['wte'][token_id], sd['wpe'][pos_id])]
        x = rmsnorm(x)
        for li in range(self.n_layer):
            # attention block
            residual = x
            x = rmsnorm(x)
            q = linear(x, sd[f'layer{li}.attn_wq'])
            k = linear(x, sd[f'layer{li}.attn_wk'])
            v = linear(x, sd[f'layer{li}.attn_wv'])
            keys[li].append(k)
            values[li].append(v)
            x_attn = []
            for h in range(self.n_head):
                lo, hi = h * hd, (h + 1) * hd
                q_h = q[lo:hi]
                scores = [sum(qj * kj for qj, kj in zip(q_h, k_t[lo:hi])) / hd ** 0.5
                          for k_t in keys[li]]
                weights = softmax(scores)
                for j in range(lo, hi):
                    x_attn.append(sum(w * v_t[j] for w, v_t in zip(weights, values[li])))
            x = linear(x_attn, sd[f'layer{li}.attn_wo'])
            x = [a + b for a, b in zip(x, residual)]
            # MLP block
            residual = x
            x = rmsnorm(x)
            x = linear(x, sd[f'layer{li}.mlp_fc1'])
            x = [xi.relu() for xi in x]
            x = linear(x, sd[f'layer{li}.mlp_fc2'])
            x = [a + b for a, b in zip(x, residual)]
        return linear(x, sd['lm_head'])

    def loss(self, tokens):
        """Mean over positions of -log p(next token), as one Value."""
        n = min(self.block_size, len(tokens) - 1)
        keys = [[] for _ in range(self.n_layer)]
        values = [[] for _ in range(self.n_layer)]
        losses = []
        for pos in range(n):
            probs = softmax(self.gpt(tokens[pos], pos, keys, values))
            losses.append(-probs[tokens[pos + 1]].log())
        return (1 / n) * sum(losses)


# ---------------------------------------------------------------------------- training
class BaselineTrainer:
    """Adam in the original's form, with the learning rate decayed linearly to 0 over `steps`."""

    def __init__(self, model, steps, lr=0.01, beta1=0.85, beta2=0.99, eps=1e-8):
        self.model = model
        self.steps, self.lr = steps, lr
        self.beta1, self.beta2, self.eps = beta1, beta2, eps
        self.m = [0.0] * len(model.params)
        self.v = [0.0] * len(model.params)

    def train_step(self, tokens, step):
        """Forward, backward and update for one name at `step` (from 0); returns the loss."""
        loss = self.model.loss(tokens)
        loss.backward()
        lr_t = self.lr * (1 - step / self.steps)
        b1, b2 = self.beta1, self.beta2
        for i, p in enumerate(self.model.params):
            self.m[i] = b1 * self.m[i] + (1 - b1) * p.grad
            self.v[i] = b2 * self.v[i] + (1 - b2) * p.grad ** 2
            m_hat = self.m[i] / (1 - b1 ** (step + 1))
            v_hat = self.v[i] / (1 - b2 ** (step + 1))
            p.data -= lr_t * m_hat / (v_hat ** 0.5 + self.eps)
            p.grad = 0  # backward() accumulates, so the leaves must start the next step at 0
        # returning the float lets the whole graph be freed here, inside the timed step
        return loss.data
