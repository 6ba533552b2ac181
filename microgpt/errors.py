"""
The one exception type for problems with what a user handed in.

A bad flag, a missing data file, a corrupt checkpoint: each is raised as a `UserError` whose
message says what is wrong and how to fix it, in one line. train.py, sample.py and the lab catch
it at the top, print `error: <message>` and exit with status 2, so nobody sees a traceback for a
mistake that is not a bug. Anything else that escapes is a bug and keeps its traceback.
"""


class UserError(Exception):
    """A problem with the input (flags, files, checkpoints), described in one line."""
