"""
The web lab's Exercises page, its two routes (api.Lab hands them here):

    POST /api/exercises          the path, each exercise's page and its last result
    POST /api/exercises/check    {"number": N}: check it now, through the checker's subprocess

`lab serve --exercises DIR` names the learner's workspace. Without it the page lists the path only
and the check route refuses: the server runs no learner code unless asked, and then only through
checker.py, as the command line does.
"""

import threading

from ...edge.errors import UserError
from . import catalog, report
from .workspace import COMMAND, Workspace, shown


class ExercisesPage:
    def __init__(self, workspace=None):
        """workspace: the folder given to --exercises, checked now (a UserError stops the server
        from starting, in one line), or None."""
        self.path = Workspace.open(workspace).path if workspace else None
        self.lock = threading.Lock()

    def listing(self, pages):
        """Every exercise with its page ({name: title}) and, with a workspace, its last result."""
        ws = Workspace.open(self.path) if self.path else None  # read afresh: the command line checks too
        rows = []
        for e in catalog.EXERCISES:
            last = ws.results().get(str(e.number)) if ws else None
            rows.append({'number': e.number, 'function': e.function, 'title': e.title, 'file': e.filename,
                         'rung': e.rung, 'reading': e.reading, 'real': e.real, 'command': e.command,
                         'page': e.page, 'page_title': pages.get(e.page, e.page),
                         'result': last, 'edited': bool(ws and ws.edited_since_check(e.number))})
        done = bool(ws) and all((r['result'] or {}).get('status') == 'pass' for r in rows)
        return {'workspace': shown(self.path) if self.path else None, 'rungs': catalog.RUNGS,
                'next': list(catalog.WHAT_NEXT) if done else None,
                'start': [f"{COMMAND} start", f"{COMMAND} check 1"],
                'serve': f"python -m microgpt.lab serve --exercises exercises", 'exercises': rows}

    def check(self, number, pages):
        """Check exercise `number` in the checker's subprocess; its report, and the listing."""
        if not self.path:
            raise UserError("this lab was started without --exercises DIR, so it runs no code of yours: "
                            "start it with `python -m microgpt.lab serve --exercises exercises`")
        from .checker import check
        with self.lock:  # one check at a time: a second waits for the first (the page's button waits too)
            ws = Workspace.open(self.path)
            result = check([(ws.path, [number], True)])[(ws.path, number)]
            ws.record({number: result})
        return {'number': number, 'status': result['status'],
                'report': report.full(catalog.get(number), result, shown(ws.path)), **self.listing(pages)}
