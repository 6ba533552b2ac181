"""
Exercise 2: the local derivative of a power (the real one: microgpt/engine.py, Value.__pow__).

The engine needs x ** n only for a constant exponent: x ** 2 in a square, x ** -1 in every
division (a / b is a * b ** -1) and x ** -0.5 in rmsnorm. So there is one input node, x.

Reading: docs/reading-guide.md, section 1, file 1. See it live:
`python -m microgpt.lab autograd "a / b" a=1 b=4`: the ** node and its gradient.
Then run `python -m microgpt.lab exercises check 2`.
"""


def power(x, n):
    """The forward value of x ** n for a constant n, and its local derivative toward x.

    x: a plain float (the input node's .data); n: a plain number (2, -1, -0.5), not a node.
    Returns (out, (d_out_d_x,)): a one-element tuple, as there is one input node.
    Nudge x by a small h and ask how far x ** n moves, per unit of h. (`exercises hint 2`, one
    level at a time, if you get stuck.)
    """
    # solution
    return x ** n, (n * x ** (n - 1),)
    # end solution
