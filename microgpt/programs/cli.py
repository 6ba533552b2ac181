"""
What train.py, sample.py and the lab share as command-line programs.

`run(main)` is the guard every entry point runs under: a UserError (bad flag, missing file,
corrupt checkpoint) is printed as one line, `error: ...`, with exit status 2 and no traceback;
Ctrl-C exits with 130; a file-size limit (`ulimit -f`) makes a write fail with EFBIG, which the
writer reports, instead of killing the program. `ArgumentParser` makes argparse's own errors
one line too, and `parse_args_and_given` also says which flags the command line set (train.py
fills the others from the run it resumes). The type functions (`positive_int`, ..., and the
ranges `int_in(lo, hi)`, `float_in(lo, hi)`) check numeric flags at parse time with messages
that say what is allowed.
"""

import argparse
import importlib
import math
import signal
import sys

from ..edge.errors import UserError


class ShowDefaults(argparse.HelpFormatter):
    """--help ends each flag's help with its default, where it has a value to show (not a
    switch, not None: such a flag's help says what its absence means)."""

    def _get_help_string(self, action):
        text = action.help or ''
        shown = not (action.default is None or isinstance(action.default, bool) or action.default == argparse.SUPPRESS)
        if shown and '%(default)' not in text:
            text += ' (default %(default)s)'
        return text


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line naming the problem, and where to get help."""

    def error(self, message):
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")

    def parse_args_and_given(self, argv=None):
        """(args, given): the parsed flags, every one set (to its default if absent), and the
        names (dests) of those the command line gave. Parsed twice: the second time with every
        default suppressed, so that only what was given lands in the namespace."""
        args = self.parse_args(argv)
        defaults = [(action, action.default) for action in self._actions]
        try:
            for action, _ in defaults:
                action.default = argparse.SUPPRESS
            given = set(vars(self.parse_args(argv)))
        finally:
            for action, default in defaults:
                action.default = default
        return args, given


def run(main, argv=None):
    """Call main(argv) and turn expected failures into one-line messages and exit codes."""
    if hasattr(signal, 'SIGXFSZ'):  # over `ulimit -f` the kernel would kill us: make the write fail
        try:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        except ValueError:  # not the main thread: signal handlers cannot be changed there
            pass
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


def require_numpy(what):
    """Say in one line that `what` needs numpy, and how to get it, where it is not installed.
    The scalar engine and the core never need it."""
    try:
        import numpy  # noqa: F401
    except ImportError:
        raise UserError(f"{what} needs numpy, which is not installed here: run `pip install numpy` "
                        "(or install the project: `pip install -e .`)") from None


def import_numpy_module(name, what):
    """Import `name` (inference, backprop: they compute with numpy), once numpy is there."""
    require_numpy(what)
    return importlib.import_module(name)


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


def int_in(lo, hi):
    """An argparse type: an integer from lo to hi inclusive, e.g. type=int_in(1, 1000).
    The digits are counted before converting, so a 400-digit number costs nothing."""
    def parse(text):
        if len(text.strip().lstrip('+-')) > 30:
            raise argparse.ArgumentTypeError(f"{text[:20]}... is not an integer from {lo:,} to {hi:,}")
        value = _parse(text, int, 'an integer')
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{text} is out of range: give an integer from "
                                             f"{lo:,} to {hi:,}")
        return value
    parse.__name__ = f'integer from {lo} to {hi}'  # what argparse names in its own messages
    return parse


def float_in(lo, hi, above=False):
    """An argparse type: a finite number from lo to hi inclusive, e.g. type=float_in(0, 1e3);
    above=True excludes lo itself (a temperature that divides must be greater than 0)."""
    wanted = f"greater than {lo:g} and at most {hi:g}" if above else f"from {lo:g} to {hi:g}"

    def parse(text):
        value = _parse(text, float, 'a number')
        if not (math.isfinite(value) and (lo < value if above else lo <= value) and value <= hi):
            raise argparse.ArgumentTypeError(f"{text} is out of range: give a number {wanted}")
        return value
    parse.__name__ = f'number {wanted}'
    return parse


def count_or_fraction(hi):
    """An argparse type: a fraction strictly between 0 and 1 (written with a point: 0.1), kept
    as a float, or a count from 0 to hi, kept as an int. --val-size 0.1 and --val-size 5000."""
    def parse(text):
        if any(c in text for c in '.eE'):
            value = _parse(text, float, 'a number')
            if not (math.isfinite(value) and 0 < value < 1):
                raise argparse.ArgumentTypeError(f"{text} is not a fraction between 0 and 1 (exclusive) "
                                                 f"nor a count: give e.g. 0.1 or 5000")
            return value
        return int_in(0, hi)(text)
    parse.__name__ = f'fraction (0 < f < 1) or count from 0 to {hi}'
    return parse


def _parse(text, kind, what):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
