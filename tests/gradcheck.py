"""
Central finite differences: the independent oracle that every gradient test checks backward() against.

backward() computes gradients by the chain rule from hand-written local derivatives; a mistake in
one of those derivatives gives wrong numbers without any error. Finite differences need no
derivatives at all, only the forward pass:

    df/dx_i ~ (f(x + h e_i) - f(x - h e_i)) / 2h

The central form is accurate to O(h^2) (the one-sided form only to O(h)), so with h ~ 1e-6 the
estimate agrees with the true derivative to roughly 1e-9 on well-scaled functions: truncation
costs ~h^2 = 1e-12, float rounding in the difference costs ~1e-16 / h = 1e-10.

This is a plain module, not a test file: tests import it with `from gradcheck import ...`, which
works because tests/conftest.py puts tests/ on sys.path (pytest's default "prepend" import mode
would too, for a tests/ directory without __init__.py).

    build = lambda vs: vs[0] * vs[1] + vs[0].exp()   # list of Values -> one scalar Value
    assert check_grads(build, [0.3, -1.2]) < 1e-6
"""

from microgpt.engine import Value

H = 1e-6  # finite-difference step: small enough for O(h^2) truncation, big enough for rounding


def numeric_grad(f, xs, i, h=H):
    """The central difference estimate of df/dx_i at xs, where f maps a list of floats to a float."""
    up = list(xs)
    up[i] += h
    down = list(xs)
    down[i] -= h
    return (f(up) - f(down)) / (2 * h)


def backprop_grads(build, xs):
    """(output value, [d output / d x_i for each i]) from the engine's backward().

    `build` maps a list of leaf Values to one scalar Value; the leaves are made here from xs.
    """
    leaves = [Value(x) for x in xs]
    out = build(leaves)
    out.backward()
    return out.data, [leaf.grad for leaf in leaves]


def grad_error(a, b):
    """How far apart two gradients are: absolute near 0, relative once they are larger than 1.

    A purely relative error would blow up for a gradient that should be 0; a purely absolute one
    would be too strict for a gradient of 1e4, whose finite-difference estimate is only good to a
    few digits in the last place times 1e4.
    """
    return abs(a - b) / max(1.0, abs(a), abs(b))


def grad_errors(build, xs, h=H, indices=None):
    """[(i, backprop grad, numeric grad, error)] for each input index i (all, or those in indices).

    Checking only some indices keeps a check of a model with thousands of parameters fast: every
    numeric gradient costs two forward passes.
    """
    _, grads = backprop_grads(build, xs)

    def f(values):
        return build([Value(v) for v in values]).data

    indices = range(len(xs)) if indices is None else indices
    report = []
    for i in indices:
        num = numeric_grad(f, xs, i, h)
        report.append((i, grads[i], num, grad_error(grads[i], num)))
    return report


def check_grads(build, inputs, h=H, indices=None):
    """The largest error between backward()'s gradients and central differences, over the inputs.

    Callers compare it with their own named tolerance, so the same function serves both the real
    checks (error must be tiny) and the negative controls (error must be large).
    """
    return max((err for _, _, _, err in grad_errors(build, inputs, h, indices)), default=0.0)
