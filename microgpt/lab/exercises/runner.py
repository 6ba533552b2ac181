"""
The process the learner's code runs in, started by checker.py as `python -I -c BOOT REQUEST`:
BOOT puts microgpt's folder first on sys.path and calls main(). The workspace goes last, after
the standard library, numpy and microgpt, so a learner's random.py or microgpt/ folder shadows
none of the checker's modules.

REQUEST, one JSON argument, is either
    {"mode": "check", "report_fd": N, "seconds": S, "jobs": [[WORKSPACE, [numbers], stop], ...]}
which checks the exercises of each workspace in order (stop: at the first not passed), or
    {"mode": "train", "report_fd": N, "workspace": W, "steps": ..., ...}
which is `exercises train` (trainer.run). Several workspaces in one process (the tests' wrong
solutions, one workspace each) save a start of Python and numpy each.

It reports on a pipe of its own, one JSON object a line: {"begin": [workspace, n]} before each
check, then {"result": [workspace, n], "status", "line", "cases", ...}, and {"done": true} at
the end; or train's own events (trainer.py). The
learner's prints never reach that pipe (harness.Bounded keeps them). checker.py believes what
comes as it is: the learner's code runs here with the learner's rights, and could write
anything; the only one that would deceive is the learner (docs/reliability.md).
"""

import importlib
import json
import os
import resource
import sys
import traceback


def check_one(number, workspace, seconds, cache):
    """The result of one exercise's check, as a dict (its dependencies checked quietly, once,
    when it fails, so the report can say which of them does not pass either)."""
    from . import catalog, harness
    if number in cache:
        return cache[number]
    e = catalog.get(number)
    t = harness.Check(e, workspace, seconds)
    try:
        checks_for(number)(t, harness.load(e, workspace, seconds))
        result = {'status': 'pass', 'line': f"passed: {t.summary()}", 'cases': t.cases}
    except harness.Report as r:
        result = {'status': r.status, 'line': r.line, 'details': r.details, 'hint': r.hint, 'cases': t.cases}
    except ImportError as exc:  # a Python without numpy (cli.py asks first)
        if (exc.name or '').split('.')[0] != 'numpy':
            raise
        result = {'status': 'error', 'cases': t.cases,
                  'line': "not checked: its check needs numpy, which this Python lacks (not a fault in your "
                          "code): run it with .venv/bin/python, or `pip install -e .` first"}
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
    checks_numpy, checks_regularization or checks_tokens (imported when first asked for: the
    numpy rung's needs numpy)."""
    from . import catalog
    return importlib.import_module(f'.checks_{catalog.get(number).rung}', __package__).CHECKS[number]


def use_workspace(workspace):
    """Import the learner's files from `workspace`, and from no workspace checked before: it
    goes last on sys.path, and their modules imported from another one are forgotten."""
    from .harness import clear_modules
    clear_modules()
    sys.path[:] = [p for p in sys.path if p != use_workspace.current] + [workspace]
    use_workspace.current = workspace


use_workspace.current = None


def main(argv):
    request = json.loads(argv[0])
    from .harness import MEMORY_BYTES
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))  # a MemoryError, not a frozen machine
    sys.dont_write_bytecode = True  # no __pycache__ left in the learner's folder
    pipe = os.fdopen(request['report_fd'], 'w', encoding='utf-8')

    def report(**event):
        pipe.write(json.dumps(event) + '\n')
        pipe.flush()
    if request['mode'] == 'train':
        from . import trainer
        use_workspace(request['workspace'])
        trainer.run(request, report)
        return 0
    for workspace, numbers, stop in request['jobs']:
        use_workspace(workspace)
        cache = {}
        for n in numbers:
            report(begin=[workspace, n])
            try:
                result = check_one(n, workspace, request['seconds'], cache)
            except Exception as exc:  # a bug of the checker's own: said in one line, the next one checked
                where = traceback.extract_tb(exc.__traceback__)[-1]
                result = {'status': 'error', 'cases': 0,
                          'line': f"the checker itself failed ({type(exc).__name__}: {str(exc)[:120]}, "
                                  f"{os.path.basename(where.filename)} line {where.lineno}): a bug in microgpt, "
                                  "unless your code changes microgpt's or the checker's own objects"}
            report(result=[workspace, n], **result)
            if stop and result['status'] != 'pass':
                break
    report(done=True)  # checker.py ends the process (and a thread the learner's code left running)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
