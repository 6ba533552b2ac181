"""
The process the learner's code runs in: `python -m microgpt.lab.exercises.runner REQUEST`.

checker.py starts it (never the learner) with one JSON argument, and reads what it reports as
JSON lines on a pipe of its own (the learner's prints never reach that pipe: harness.Bounded
keeps them). A request is either
    {"mode": "check", "report_fd": N, "seconds": S, "jobs": [[WORKSPACE, [numbers], stop], ...]}
which checks the exercises of each workspace in order (stop: at the first not passed), or
    {"mode": "train", "report_fd": N, "seconds": S, "workspace": W, "steps": ..., ...}
which is `exercises train` (trainer.py). Several workspaces in one process (the tests' wrong
solutions, one workspace each) save a start of Python and numpy each.

Events, one JSON object a line: {"event": "begin", "n"}, {"event": "result", "n", "status",
"line", "details", "hint", "note", "cases"}, train's own (trainer.py), and {"event": "done"}.
A learner's function that hangs is stopped by harness.time_limit; one that escapes it (or ends
Python itself) is stopped, or noticed, by checker.py, which then reports it in one line.
"""

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
    t = harness.Check(e, workspace, seconds)
    try:
        fn = harness.load(e, workspace, seconds)
        checks_for(number)(t, fn)
        result = {'status': 'pass', 'line': f"passed: {t.summary()}", 'cases': t.cases}
    except harness.Report as r:
        result = {'status': r.status, 'line': r.line, 'details': r.details, 'hint': r.hint, 'cases': t.cases}
    except Exception as exc:  # a bug of the checker's own: said in one line, the next one checked
        where = traceback.extract_tb(exc.__traceback__)[-1]
        result = {'status': 'error', 'cases': t.cases,
                  'line': f"the checker itself failed ({type(exc).__name__}: {str(exc)[:120]}, "
                          f"{os.path.basename(where.filename)} line {where.lineno}): a bug in microgpt, "
                          "not in your code"}
    if result['status'] == 'fail':
        behind = [d for d in e.uses if check_one(d, workspace, seconds, cache)['status'] != 'pass']
        if behind:
            result['note'] = ("it calls your " + ', '.join(f"{catalog.get(d).function} (exercise {d})" for d in behind) +
                              f", which do{'es' * (len(behind) == 1)} not pass yet: fix "
                              f"{'that' if len(behind) == 1 else 'those'} first")
    cache[number] = result
    return result


def checks_for(number):
    """The check function of an exercise, from its rung's module: checks_engine, checks_model or
    checks_numpy (imported when first asked for: the numpy rung's needs numpy)."""
    import importlib
    from . import catalog
    rung = importlib.import_module(f'.checks_{catalog.get(number).rung}', __package__)
    return rung.CHECKS[number]


def use_workspace(workspace):
    """Import the learner's files from `workspace` (and from no workspace checked before)."""
    from .harness import clear_modules
    clear_modules()
    sys.path[:] = [p for p in sys.path if p != use_workspace.current]
    sys.path.insert(0, workspace)
    use_workspace.current = workspace


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
                if stop and result['status'] != 'pass':
                    break
    report(event='done')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
