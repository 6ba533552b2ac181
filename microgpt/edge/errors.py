"""
What can go wrong with what a user hands in, and how it is said: a `UserError` whose message
says what is wrong and how to fix it, in one line. The programs catch it at the top
(programs/cli.run), print `error: <message>` and exit with status 2; anything else that escapes
is a bug and keeps its traceback. This file imports nothing.
"""


class UserError(Exception):
    """A problem with the input (flags, files, checkpoints), described in one line."""


# What every reader of a model says when its numbers overflow (a model whose training diverged):
# the scalar engine raises OverflowError in exp() or gives inf/nan, the numpy port raises
# FloatingPointError; the edges (sample.py, the lab, the loss) turn either into this one line.
DIVERGED = ("the model's logits are not finite numbers: its weights are too large (its "
            "training diverged); retrain it with a lower --lr")
OVERFLOWS = (OverflowError, FloatingPointError)
