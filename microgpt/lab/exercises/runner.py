"""
The process the learner's code runs in: started by checker.py, through sandbox.py, as
`python -I -c BOOT REQUEST` (checker.BOOT puts microgpt on sys.path and calls main: the
workspace is never the first place Python looks for a module of the checker's).

checker.py starts it (never the learner) with one JSON argument, and reads what it reports as
JSON lines on a pipe of its own (the learner's prints never reach that pipe: harness.Bounded
keeps them). A request is either
    {"mode": "check", "report_fd": N, "ack_fd": A, "seconds": S,
     "jobs": [[WORKSPACE, [numbers], stop], ...]}
which checks the exercises of each workspace in order (stop: at the first not passed; after each
result it waits for a byte on ack_fd, checker.py's go-ahead once it has measured the disk), or
    {"mode": "train", "report_fd": N, "seconds": S, "workspace": W, "steps": ..., ...}
which is `exercises train` (trainer.py). Several workspaces in one process (the tests' wrong
solutions, one workspace each) save a start of Python and numpy each.

Events, one JSON object a line: {"event": "begin", "n"}, {"event": "result", "n", "status",
"line", "details", "hint", "note", "cases"[, "calls"]}, train's own (trainer.py), and
{"event": "done"}. The learner's code runs in this process and could write any of them: the
checker believes none of it blindly (it checks each event's form and order, and for a pass
it replays the recorded calls, transcript.py, and decides itself).
A learner's function that hangs is stopped by harness.time_limit; one that escapes it (or ends
Python itself) is stopped, or noticed, by checker.py, which then reports it in one line.
"""

import importlib.util
import json
import os
import sys
import traceback


class Reporter:
    """Writes events to the pipe checker.py reads."""

    def __init__(self, fd):
        self.fd = fd

    def __call__(self, **event):
        data = (json.dumps(event, allow_nan=True) + '\n').encode('utf-8')
        while data:
            data = data[os.write(self.fd, data):]


def check_one(number, workspace, seconds, cache):
    """The result of one exercise's check, as a dict (its dependencies checked quietly, once,
    when it fails, so the report can say which of them does not pass either)."""
    from . import catalog, harness
    if number in cache:
        return cache[number]
    e = catalog.get(number)
    calls = []
    t = harness.Check(e, workspace, seconds, calls)
    try:
        fn = harness.load(e, workspace, seconds)
        checks_for(number)(t, fn)
        result = {'status': 'pass', 'line': f"passed: {t.summary()}", 'cases': t.cases, 'calls': calls}
    except harness.Report as r:
        result = {'status': r.status, 'line': r.line, 'details': r.details, 'hint': r.hint, 'cases': t.cases}
    except Exception as exc:  # a bug of the checker's own: said in one line, the next one checked
        where = traceback.extract_tb(exc.__traceback__)[-1]
        missing = (getattr(exc, 'name', None) or '').split('.')[0] if isinstance(exc, ImportError) else ''
        result = {'status': 'error', 'cases': t.cases,
                  'line': f"the checker itself failed ({type(exc).__name__}: {str(exc)[:120]}, "
                          f"{os.path.basename(where.filename)} line {where.lineno}): a bug in microgpt, "
                          "unless your code changes microgpt's or the checker's own objects"}
        if missing == 'numpy':  # a Python without numpy (cli.py asks first)
            result['line'] = (f"not checked: its check needs {missing}, which this Python lacks (not a fault "
                              "in your code): run it with .venv/bin/python, or `pip install -e .` first")
    if result['status'] == 'fail':
        behind = [d for d in e.uses if check_one(d, workspace, seconds, cache)['status'] != 'pass']
        if behind:
            result['note'] = ("it calls your " + ', '.join(f"{catalog.get(d).function} (exercise {d})" for d in behind) +
                              f", which do{'es' * (len(behind) == 1)} not pass yet: fix "
                              f"{'that' if len(behind) == 1 else 'those'} first")
    cache[number] = result
    return result


def checks_for(number):
    """The check function of an exercise, from its rung's module: checks_engine, checks_model,
    checks_numpy or checks_regularization (imported when first asked for: the numpy rung's needs
    numpy)."""
    import importlib
    from . import catalog
    rung = importlib.import_module(f'.checks_{catalog.get(number).rung}', __package__)
    return rung.CHECKS[number]


class Stems:
    """Finds the exercises' modules (ex01_mul, ...) as the files STEM.py of the workspace being
    checked, by path: an ex01_mul/ folder beside ex01_mul.py stands in for nothing."""

    def __init__(self):
        self.workspace = None

    def find_spec(self, name, path=None, target=None):
        # note: importlib.util is imported at the top. Imported here, in a Python that had not
        # loaded it yet (a fresh venv), the import asked this finder first, which imported it...
        if path is None and self.workspace and name in STEMS:
            return importlib.util.spec_from_file_location(name, os.path.join(self.workspace, name + '.py'))
        return None


STEMS = set()
stems = Stems()


def use_workspace(workspace):
    """Import the learner's files from `workspace` (and from no workspace checked before). The
    workspace comes last on sys.path, after the standard library, numpy and microgpt itself:
    a learner's random.py or microgpt/ folder shadows none of them."""
    from . import catalog
    from .harness import clear_modules
    clear_modules()
    STEMS.update(e.stem for e in catalog.EXERCISES)
    if stems not in sys.meta_path:
        sys.meta_path.insert(0, stems)
    sys.path[:] = [p for p in sys.path if p != use_workspace.current] + [workspace]
    stems.workspace = use_workspace.current = workspace


use_workspace.current = None


def main(argv):
    request = json.loads(argv[0])
    report = Reporter(request['report_fd'])
    sys.dont_write_bytecode = True  # no __pycache__ left in the learner's folder
    if request['mode'] == 'train':
        from . import trainer
        use_workspace(request['workspace'])
        trainer.run(request, report)
    else:
        for workspace, numbers, stop in request['jobs']:
            use_workspace(workspace)
            cache = {}
            for n in numbers:
                report(event='begin', n=n, workspace=workspace)
                result = check_one(n, workspace, request['seconds'], cache)
                report(event='result', n=n, workspace=workspace, **result)
                if not os.read(request['ack_fd'], 1):  # checker.py has looked at the disk; b'': it is gone
                    return 0
                if stop and result['status'] != 'pass':
                    break
    report(event='done')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
