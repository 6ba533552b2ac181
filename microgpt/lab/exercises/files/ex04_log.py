"""
Exercise 4: the local derivative of the natural log (the real one: microgpt/engine.py, Value.log).

log is the op at the top of every training step: the loss is -ln p(the true next character).
Its local derivative is the first number the gradient meets on its way back.

Reading: docs/reading-guide.md, section 1, file 1. See it live:
`python -m microgpt.lab autograd "log(a)" a=4`.
Then run `python -m microgpt.lab exercises check 4`.
"""

import math


def log(x):
    """The forward value of ln x (x > 0), and its local derivative toward x.

    x: a plain float above 0. Returns (out, (d_out_d_x,)).
    The log climbs fast near 0 and slowly for large x: its slope shrinks as x grows. Which
    simple function of x does that? (`exercises hint 4` if you get stuck.)
    """
    # solution
    return math.log(x), (1.0 / x,)
    # end solution
