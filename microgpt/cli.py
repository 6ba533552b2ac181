"""
What train.py, sample.py and the lab share as command-line programs.

`run(main)` is the guard every entry point runs under: a UserError (bad flag, missing file,
corrupt checkpoint) is printed as one line, `error: ...`, with exit status 2 and no traceback;
Ctrl-C exits with 130. `ArgumentParser` makes argparse's own errors one line too, and the
`*_type` functions check numeric flags at parse time with messages that say what is allowed.
"""

import argparse
import math
import sys

from .errors import UserError


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line naming the problem, and where to get help."""

    def error(self, message):
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def run(main, argv=None):
    """Call main(argv) and turn expected failures into one-line messages and exit codes."""
    try:
        status = main(argv)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        status = getattr(e, 'status', 2)  # 2 for bad input; a diverged run says 1
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        status = 130
    except BrokenPipeError:  # e.g. `python sample.py | head -3`: the reader left, not an error
        sys.stderr.close()
        status = 0
    sys.exit(status or 0)


def positive_int(text):
    value = _parse(text, int, 'an integer')
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def nonnegative_int(text):
    value = _parse(text, int, 'an integer')
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative: use 0 or more")
    return value


def int_in(lo, hi):
    """An argparse type for an integer from lo to hi inclusive (the help text states the range)."""
    def parse(text):
        value = _parse(text, int, 'an integer')
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{text} is out of range: use {lo} to {hi}")
        return value
    return parse


def positive_float(text):
    value = _parse(text, float, 'a number')
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text} must be a finite number greater than 0")
    return value


def nonnegative_float(text):
    value = _parse(text, float, 'a number')
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text} must be a finite number, 0 or more")
    return value


def _parse(text, kind, what):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
