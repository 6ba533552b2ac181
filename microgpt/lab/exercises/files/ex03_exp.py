"""
Exercise 3: the local derivative of exp (the real one: microgpt/engine.py, Value.exp).

exp is the op inside every softmax: it turns any score into a positive number.

Reading: docs/reading-guide.md, section 1, file 1. See it live:
`python -m microgpt.lab autograd "exp(a)" a=1`.
Then run `python -m microgpt.lab exercises check 3`.
"""

import math


def exp(x):
    """The forward value of e ** x, and its local derivative toward x.

    x: a plain float. Returns (out, (d_out_d_x,)).
    e ** x is a special function under differentiation: what you already computed may be all
    you need (`exercises hint 3` if you do not remember why).
    """
    # solution
    out = math.exp(x)
    return out, (out,)
    # end solution
