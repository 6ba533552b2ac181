"""
Exercise 1: the local derivatives of a product (the real one: microgpt/engine.py, Value.__mul__).

Every op of the engine states two things: its forward value, and the local derivative of its
output toward each input, a plain number that the node keeps. backward() (exercise 7) later
multiplies these numbers along every path from the loss. Exercises 1 to 5 write them for the
ops the GPT uses; `exercises train` builds a Value of your own from them and trains with it.

Reading: docs/reading-guide.md, section 1, file 1 (engine.py). See it live:
`python -m microgpt.lab autograd "(a + b) * c" a=2 b=-3 c=10`, or the web lab's Autograd page.
Replace the `raise NotImplementedError(...)` line with your code, then run
    python -m microgpt.lab exercises check 1
Stuck? `python -m microgpt.lab exercises hint 1` gives a hint, and the next one each time asked.
"""


def mul(a, b):
    """The forward value of a * b, and its local derivative toward each input.

    a, b: plain floats, the .data of the two input nodes.
    Returns (out, (d_out_d_a, d_out_d_b)).

    The sum is done for you, as engine.py writes it: add(a, b) is (a + b, (1.0, 1.0)): nudge
    either input by a small h and the sum moves by h. Now nudge a by h in a * b: by how much
    does the product move?
    """
    # solution
    return a * b, (b, a)
    # end solution
