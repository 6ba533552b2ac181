"""
Exercise 9: a linear layer, w @ x (the real one: microgpt/ops.py, linear).

Every matrix of the GPT is stored as a list of rows, [n_out][n_in], as microgpt's state_dict
stores it: row o holds the weights that make output o.

What a Value offers (microgpt/engine.py): .data (its number) and .grad; the arithmetic
a + b, a - b, a * b, a / b, -a (with a number on either side, 2 * a or a + 1.0 too); a ** n for
a constant n; and .exp(), .log(), .relu(). Each builds a new Value that remembers its inputs.

Reading: docs/reading-guide.md, section 1, files 5 and 6. Then run
`python -m microgpt.lab exercises check 9`.
"""

from ex08_dot import dot


def linear(x, w):
    """The matrix-vector product w @ x: n_out Values.

    x: n_in Values. w: n_out rows of n_in Values each ([n_out][n_in]).
    Output o is the dot product of row o of w with x (your exercise 8).
    """
    # solution
    return [dot(w_row, x) for w_row in w]
    # end solution
