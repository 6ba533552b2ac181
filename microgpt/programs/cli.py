"""
What train.py, sample.py and the lab share as command-line programs: `run(main)`, the guard
that prints a UserError as one line, `error: ...`, with exit status 2; `ArgumentParser`, whose
own errors are one line too; `import_optional`, a missing library as one line naming its fix.
"""

import argparse
import importlib
import importlib.metadata
import os
import re
import signal
import sys

from ..edge.errors import UserError


class ShowDefaults(argparse.HelpFormatter):
    """--help ends each flag's help with its default, where it has a value to show."""

    def _get_help_string(self, action):
        text = action.help or ''
        default = action.default
        shown = not (default in (None, '') or isinstance(default, bool) or default == argparse.SUPPRESS)
        if shown and '%(default)' not in text:
            text += ' (default %(default)s)'
        return text


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line naming the problem, and where to get help."""

    def error(self, message):
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")

    def parse_args_and_given(self, argv=None):
        """(args, given): the parsed flags, and the names of those the command line gave (a second
        parse with every default suppressed)."""
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
    try:  # Ctrl-C raises KeyboardInterrupt again (the entry scripts quiet it while they import)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:  # not the main thread (a test calling main): the caller's handler stays
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


# ---------------------------------------------------------------------------- optional parts
# A source checkout runs from its folder, with pyproject.toml beside microgpt/; an installed copy
# lives in site-packages, where `pip install -e` has no project to install.
SOURCE_CHECKOUT = os.path.exists(os.path.join(os.path.dirname(__file__), '..', '..', 'pyproject.toml'))


def install_hint(extra):
    """The command that brings an optional part ('torch', 'plot') for the copy in use."""
    if SOURCE_CHECKOUT:
        return f".venv/bin/pip install -e '.[{extra}]'"
    try:
        requires = importlib.metadata.requires('microgpt') or []
    except importlib.metadata.PackageNotFoundError:
        requires = []
    wanted = [r.split(';')[0].strip() for r in requires if f'extra == "{extra}"' in r.replace("'", '"')]
    return "pip install " + ' '.join(f"'{w}'" for w in wanted or [extra])


def import_optional(name, what, extra=None, alternative=""):
    """Import `name`, or say in one line what `what` needs and the command that brings it."""
    try:
        return importlib.import_module(name)
    except ImportError as e:  # a library it imports is not there
        named = e.name or re.search(r"No module named '([\w.]+)'", str(e))
        missing = (named if isinstance(named, str) else named.group(1) if named else name).split('.')[0]
    hint = install_hint(extra) if extra else f"pip install {missing}"
    raise UserError(f"{what} needs {'PyTorch' if missing == 'torch' else missing}, which is not installed "
                    f"here: {hint}" + (f" ({alternative})" if alternative else ""))


def program_name(script):
    """How the program was started, for its usage line: `python -m ...`, `microgpt-train` or train.py."""
    spec = getattr(sys.modules.get('__main__'), '__spec__', None)
    if spec is not None and spec.name.startswith('microgpt.'):
        return f"python -m {spec.name}"
    started = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ''
    return started if started.startswith('microgpt-') or started == script else script
