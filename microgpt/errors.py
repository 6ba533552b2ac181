"""
The one exception type for problems with what a user handed in.

A bad flag, a missing data file, a corrupt checkpoint: each is raised as a `UserError` whose
message says what is wrong and how to fix it, in one line. train.py, sample.py and the lab catch
it at the top, print `error: <message>` and exit with status 2, so nobody sees a traceback for a
mistake that is not a bug. Anything else that escapes is a bug and keeps its traceback.
"""


class UserError(Exception):
    """A problem with the input (flags, files, checkpoints), described in one line."""


def read_user_file(path, what, hint, binary=False):
    """The contents of a file the user named (text, or bytes if binary), or a one-line
    UserError saying which file (`what`, e.g. 'checkpoint') and what is wrong with it.

    hint: what to do when the file does not exist, e.g. "train one first with ...".
    """
    try:
        if binary:
            with open(path, 'rb') as f:
                return f.read()
        with open(path, encoding='utf-8') as f:
            return f.read()
    except FileNotFoundError:
        raise UserError(f"{what} {path} does not exist: {hint}") from None
    except IsADirectoryError:
        raise UserError(f"{what} {path} is a directory: give the file itself") from None
    except UnicodeDecodeError:
        raise UserError(f"{what} {path} is not UTF-8 text: is it really a {what}?") from None
    except OSError as e:
        raise UserError(f"cannot read {what} {path}: {e.strerror}") from None
