"""
The checker's half that runs beside the learner's code, in the subprocess checker.py starts: it
imports the learner's files, calls their functions one case at a time (time limit, bounded prints),
compares each answer with the project's own and an independent oracle, and turns whatever happens
into a Report. A check (checks_*.py) reads like a test:
    t.case('x = 0.5', 'x = 0.5')
    out, grads = t.call(learner, 0.5)
    t.compare('d out/d x', grads[0], 2.0, hint=..., oracle=('finite differences', fd))
"""

import contextlib
import importlib
import io
import math
import os
import reprlib
import signal
import sys
import traceback

CASE_SECONDS = 2.0     # one call of a learner's function, at most: a right answer takes milliseconds
MEMORY_BYTES = 2 * 2 ** 30  # the address space of the learner's process (numpy and a check need ~0.5 GiB)
OUTPUT_LIMIT = 100_000  # characters one call may print; more is a flood, and the call is stopped
OUTPUT_SHOWN = 600     # characters of what a failed case printed, shown with its report
CLOSE = 1e-9           # agreement with the project's own: |got - want| <= CLOSE * max(1, |want|)
FD_STEP = 1e-5         # the step h of central finite differences, (f(x + h) - f(x - h)) / 2h
FD_CLOSE = 1e-5        # their agreement: the error is about h^2 f''' plus rounding / h


class TimeLimit(BaseException):
    """Raised inside the learner's code when its time is up (a BaseException, so that an
    `except Exception:` in their loop does not swallow it)."""


class OutputFlood(BaseException):
    """Raised inside the learner's print() past OUTPUT_LIMIT characters."""


class Report(Exception):
    """The end of an exercise's check: status 'fail' or 'todo', one line, and the details of
    the first failed case (label and text pairs, in the order they print)."""

    def __init__(self, status, line, details=(), hint=''):
        super().__init__(line)
        self.status, self.line, self.details, self.hint = status, line, list(details), hint


# ---------------------------------------------------------------------------- running the learner's code
class Bounded(io.TextIOBase):
    """A stdout for the learner's code: keeps the first OUTPUT_SHOWN characters, counts the rest,
    and stops the call (OutputFlood) past OUTPUT_LIMIT."""

    def __init__(self):
        self.kept, self.size = [], 0  # the characters kept to show; all the characters written

    def writable(self):
        return True

    def write(self, text):
        if self.size < OUTPUT_SHOWN:  # everything written so far is kept, so size counts it
            self.kept.append(text[:OUTPUT_SHOWN - self.size])
        self.size += len(text)
        if self.size > OUTPUT_LIMIT:
            raise OutputFlood()
        return len(text)

    def text(self):
        shown = ''.join(self.kept)
        return shown + (f"... ({self.size:,} characters in all)" if self.size > len(shown) else '')


@contextlib.contextmanager
def guarded(sink, seconds):
    """Run the learner's code inside the `with`: its prints go to `sink` (a Bounded), and
    TimeLimit is raised in it after `seconds` of wall time (SIGALRM). What it raised is put in
    words by mistake()."""
    def on_alarm(signum, frame):
        raise TimeLimit()
    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = sink
    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        sys.stdout, sys.stderr = saved


def mistake(e, what, seconds, workspace):
    """(line, hint) for what the learner's code raised while `what` ran ('your mul()')."""
    if isinstance(e, TimeLimit):
        return (f"{what} did not finish within {seconds:g} s (an endless loop?)",
                "Look for a loop whose condition never changes, or one that walks a graph without "
                "remembering the nodes it has seen.")
    if isinstance(e, OutputFlood):
        return (f"{what} printed more than {OUTPUT_LIMIT:,} characters, and was stopped",
                "A print inside a loop: the check runs many cases, so remove it or print only while "
                "you debug one case.")
    if isinstance(e, MemoryError):
        return (f"{what} took more than {MEMORY_BYTES >> 20} MiB of memory, the most a check allows",
                "Look for a list that grows in a loop that never ends, or a copy made at every step.")
    if isinstance(e, RecursionError):
        return (f"{what} raised RecursionError{where_in(e, workspace)}",
                "Python stops a function that calls itself about 1000 deep: keep your own stack in a "
                "list and loop, instead of recursing.")
    return f"{what} raised {exception_line(e)}{where_in(e, workspace)}", ''


# ---------------------------------------------------------------------------- describing things
_short = reprlib.Repr()
_short.maxstring, _short.maxother, _short.maxlist, _short.maxtuple = 40, 40, 6, 6
BUILTIN = (int, float, str, bytes, list, tuple, dict, set, bool, type(None), complex)


def kind_of(obj):
    """'a str ('hello')', 'a list of 3 items', 'a Value (data=0.5)': what came back, in words."""
    name = type(obj).__name__
    article = 'an' if name[:1].lower() in 'aeiou' else 'a'
    if obj is None:
        return 'None'
    if type(obj) in (list, tuple):
        return f"{article} {name} of {len(obj)} item{'s' * (len(obj) != 1)}"
    if type(obj) in BUILTIN:
        return f"{article} {name} ({_short.repr(obj)})"
    if name == 'ndarray':
        return f"an array of shape {tuple(obj.shape)} ({obj.dtype})"
    data = getattr(obj, 'data', None)
    return f"{article} {name}" + (f" (data={data:.6g})" if type(data) in (int, float) else '')


def fmt(value, most=8):
    """A number, a (nested) list of numbers or an array, compact: what a report prints."""
    if type(value).__name__ == 'ndarray':
        import numpy as np
        with np.printoptions(precision=6, threshold=40, edgeitems=3, linewidth=100, suppress=True):
            return np.array2string(value, separator=', ').replace('\n', '\n' + ' ' * 12)
    if isinstance(value, (list, tuple)):
        items = [fmt(v, most) for v in value[:most]]
        more = f", ... ({len(value)} in all)" if len(value) > most else ''
        return '[' + ', '.join(items) + more + ']'
    return f"{value:.10g}" if type(value) is float or (type(value) is int and is_number(value)) else kind_of(value)


def where_in(exc, workspace):
    """' (ex04_log.py line 12: return math.log(x), (1 / x,))': the learner's line an exception
    came from, the last frame in a workspace file; '' if none."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if os.path.dirname(os.path.abspath(f.filename)) == workspace]
    if isinstance(exc, SyntaxError) and exc.filename and os.path.dirname(os.path.abspath(exc.filename)) == workspace:
        return f" ({os.path.basename(exc.filename)} line {exc.lineno})"
    if not frames:
        return ''
    f = frames[-1]
    code = f" `{f.line.strip()[:70]}`" if f.line else ''
    return f" ({os.path.basename(f.filename)} line {f.lineno}{code})"


def exception_line(exc):
    text = str(exc).split('\n')[0][:160]
    return type(exc).__name__ + (f": {text}" if text else '')


# ---------------------------------------------------------------------------- loading and checking
def use_workspace(workspace):
    """Import the learner's files from `workspace`, and from no workspace checked before: it
    goes last on sys.path, and their modules imported from another one are forgotten."""
    for name in [n for n in sys.modules if n[:2] == 'ex' and n[2:4].isdigit()]:
        del sys.modules[name]
    sys.path[:] = [p for p in sys.path if p != use_workspace.current] + [workspace]
    use_workspace.current = workspace


use_workspace.current = None


def check_one(number, workspace, seconds, cache):
    """The result of one exercise's check, as a dict (its dependencies checked quietly, once,
    when it fails, so the report can say which of them does not pass either)."""
    from . import catalog
    if number in cache:
        return cache[number]
    e = catalog.get(number)
    t = Check(e, workspace, seconds)
    try:  # the check, from its rung's module (imported when first asked for: the numpy rung's needs numpy)
        check = importlib.import_module(f'.checks_{e.rung}', __package__).CHECKS[number]
        check(t, load(e, workspace, seconds))
        result = {'status': 'pass', 'line': f"passed: {t.fixed + t.random} cases ({t.fixed} fixed, then {t.random} "
                                            "random)"}
    except Report as r:
        result = {'status': r.status, 'line': r.line, 'details': r.details, 'hint': r.hint}
    except Exception as exc:  # a bug of the checker's own: said in one line, the next one checked
        where = traceback.extract_tb(exc.__traceback__)[-1]
        result = {'status': 'error',
                  'line': f"the checker itself failed ({exception_line(exc)}, {os.path.basename(where.filename)} "
                          f"line {where.lineno}): a bug in microgpt, unless your code changes microgpt's or the "
                          "checker's own objects"}
    if result['status'] == 'fail':
        behind = [d for d in e.uses if check_one(d, workspace, seconds, cache)['status'] != 'pass']
        if behind:
            result['note'] = ("it calls your " + ', '.join(f"{catalog.get(d).function} (exercise {d})" for d in behind) +
                              f", which do{'es' * (len(behind) == 1)} not pass yet: fix "
                              f"{'that' if len(behind) == 1 else 'those'} first")
    cache[number] = result
    return result


def load(exercise, workspace, seconds=CASE_SECONDS):
    """The learner's function of `exercise`, imported from `workspace` (and whatever of their
    files it imports), or a Report saying why it cannot be: a syntax error, an exception or an
    endless loop at import, a function renamed away."""
    try:
        with guarded(Bounded(), seconds * 5):
            module = importlib.import_module(exercise.stem)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: B902: the learner's file may raise anything, SystemExit too
        line = (f"did not finish loading in {seconds * 5:g} s: is there an endless loop outside the function?"
                if isinstance(e, TimeLimit) else
                f"printed more than {OUTPUT_LIMIT:,} characters while loading: remove the print outside the "
                "function" if isinstance(e, OutputFlood) else
                f"does not load: {exception_line(e)}{where_in(e, workspace)}")
        raise Report('fail', f"{exercise.filename} {line}") from None
    fn = getattr(module, exercise.function, None)
    if not callable(fn):
        raise Report('fail', f"{exercise.filename} has no function {exercise.function}(): keep the stub's "
                             f"line `def {exercise.function}({exercise.signature}):`")
    return fn


# ---------------------------------------------------------------------------- the check's tools
class Check:
    """One exercise's check in progress: the current case, and the tools to call the learner's
    function and compare what it returns. The first failure raises a Report."""

    def __init__(self, exercise, workspace, seconds=CASE_SECONDS):
        self.exercise, self.workspace, self.seconds = exercise, workspace, seconds
        self.label, self.inputs = '', ''
        self.fixed = self.random = 0
        self.printed = ''

    # ---- cases
    def case(self, label, inputs, fixed=True):
        """Start a case: its label ('fixed 2' or 'random 3'), and its inputs as the report prints them."""
        self.label, self.inputs, self.printed = label, inputs, ''
        if fixed:
            self.fixed += 1
        else:
            self.random += 1

    # ---- calling the learner
    def call(self, fn, *args, name=None, hint=''):
        """fn(*args) under the time limit, its prints kept aside; any failure is a Report (with
        `hint` if it raised: what this case's exception usually means)."""
        name = name or self.exercise.function
        sink = Bounded()
        try:
            with guarded(sink, self.seconds):
                return fn(*args)
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: B902: SystemExit from the learner is a failure too
            self.printed = sink.text()
            where = where_in(e, self.workspace)
            if isinstance(e, NotImplementedError) and (self.exercise.filename in where or not where):
                raise Report('todo', f"not written yet: {self.exercise.filename} still raises "
                                     "NotImplementedError") from None
            if isinstance(e, NotImplementedError):
                self.fail_line(f"your {name}() calls an exercise not written yet{where}",
                               hint="Write that exercise first: this one builds on it.")
            line, usual = mistake(e, f"your {name}()", self.seconds, self.workspace)
            self.fail_line(line, hint=usual or hint)
        finally:
            self.printed = sink.text()

    # ---- failing
    def where(self):
        return f"case {self.label!r}" if self.label else "loading"

    def fail_line(self, line, hint=''):
        """A failure said in one line (an exception, a wrong type), with the case's inputs."""
        details = [('inputs', self.inputs)] if self.inputs else []
        if self.printed:
            details.append(('printed', self.printed))
        raise Report('fail', f"{self.where()}: {line}", details, hint)

    def fail(self, what, expected, got, difference=None, hint='', oracle=None, source=None):
        """A wrong answer: the case's inputs, expected, got, largest difference, hint."""
        source = source or self.exercise.real
        details = [('inputs', self.inputs), ('compared', what),
                   ('expected', f"{fmt(expected)}  (microgpt's own: {source})")]
        if oracle is not None:
            details.append(('oracle', f"{fmt(oracle[1])}  ({oracle[0]})"))
        details.append(('yours', fmt(got)))
        if difference is not None:
            details.append(('largest difference', f"{difference:.3g}"))
        if self.printed:
            details.append(('printed', self.printed))
        raise Report('fail', f"{self.where()}: {what} differs", details, hint)

    # ---- checking what came back
    def expect(self, ok, got, wanted, hint=''):
        """Fail in one line unless `ok`: the learner returned `got` where `wanted` was due."""
        if not ok:
            self.fail_line(f"your {self.exercise.function}() returned {kind_of(got)}, expected {wanted}",
                           hint=hint or "See the docstring for what to return.")

    def numbers(self, got, n, wanted):
        """A list or tuple of n plain numbers, as floats."""
        self.expect(type(got) in (list, tuple) and len(got) == n and all(map(is_number, got)), got, wanted)
        return [float(x) for x in got]

    def compare(self, what, got, want, hint='', mistakes=(), oracle=None, tol=CLOSE, source=None):
        """got against the project's `want` (and an oracle's (name, value[, tol])): numbers,
        lists of them or arrays of the same shape. Fails with the hint of the first of
        `mistakes` (label, value, hint) that got matches, else with `hint`."""
        against = [(what, want, tol)]
        if oracle is not None:
            against.append((f"{what} (against {oracle[0]})", oracle[1], oracle[2] if len(oracle) > 2 else FD_CLOSE))
        for label, value, close in against:
            difference = largest_difference(got, value)
            if difference is None or difference > close * max(1.0, magnitude(value)):
                hint = next((h for _, v, h in mistakes if agrees(got, v, tol)), hint)
                self.fail(label, want, got, difference, hint, oracle, source)


def is_number(x):
    """A float, an int a float can hold, or numpy's own float."""
    if type(x) is int:
        return abs(x) <= sys.float_info.max
    if type(x) is float:
        return True
    np = sys.modules.get('numpy')
    return np is not None and type(x) in (np.float64, np.float32, np.float16)


def flat(value):
    """(shape, [floats]) of a number, a nested list of numbers or an array; None if neither."""
    if type(value).__name__ == 'ndarray':
        return tuple(value.shape), [float(x) for x in value.ravel()]
    if is_number(value):
        return (), [float(value)]
    if isinstance(value, (list, tuple)):
        parts = [flat(v) for v in value]
        if any(p is None for p in parts) or len({p[0] for p in parts}) > 1:
            return None
        return (len(value),) + (parts[0][0] if parts else ()), [x for p in parts for x in p[1]]
    return None


def largest_difference(got, want):
    """max |got - want| over the entries; None if the shapes differ; inf where one is nan."""
    g, w = flat(got), flat(want)
    if g is None or w is None or g[0] != w[0]:
        return None
    most = 0.0
    for a, b in zip(g[1], w[1]):
        if a == b:  # equal infinities too
            continue
        d = abs(a - b)
        most = max(most, d if d == d else math.inf)
    return most


def magnitude(value):
    w = flat(value)
    return max((abs(x) for x in w[1] if math.isfinite(x)), default=0.0) if w else 0.0


def agrees(got, want, tol=CLOSE):
    d = largest_difference(got, want)
    return d is not None and d <= tol * max(1.0, magnitude(want))


def fd_step(x):
    """The step for x: FD_STEP relative to x's size (a step of 1e-5 is 1% of x = 0.001)."""
    return FD_STEP * max(abs(x), 1e-2)


def central_difference(f, x, h=None):
    """(f(x + h) - f(x - h)) / 2h, the oracle for every derivative."""
    h = fd_step(x) if h is None else h
    return (f(x + h) - f(x - h)) / (2 * h)
