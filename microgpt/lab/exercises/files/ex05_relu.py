"""
Exercise 5: the local derivative of ReLU (the real one: microgpt/engine.py, Value.relu).

ReLU is the MLP's non-linearity: max(0, x). It lets a positive number through and stops a
negative one, and its gradient does the same.

Reading: docs/reading-guide.md, section 1, file 1. See it live:
`python -m microgpt.lab autograd "relu(x * w + b)" x=1 w=-2 b=0.5`: every gradient behind it is 0.
Then run `python -m microgpt.lab exercises check 5`.
"""


def relu(x):
    """The forward value of max(0, x), and its local derivative toward x.

    x: a plain float. Returns (out, (d_out_d_x,)).
    Draw max(0, x): two straight pieces meeting at 0, and the slope is each piece's. At exactly
    0 there is no slope; microgpt picks 0 there (`train` compares with microgpt's numbers, so
    pick the same).
    """
    # solution
    return max(0.0, x), (float(x > 0),)
    # end solution
