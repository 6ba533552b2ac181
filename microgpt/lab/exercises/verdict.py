"""
The verdict on a check that the learner's process says was passed, reached in the checker's own
process from the values that process recorded (transcript.py): the check runs again with
Replay, whose call() hands back the learner's recorded values and runs nothing, so microgpt's
own answers, the oracles and every comparison are computed where no learner code ran.

    result = replay(number, event['calls'], runner.checks_for)   # checker.py
"""

from . import catalog, harness
from .transcript import Decoder, values_in


class Mismatch(Exception):
    """The transcript does not fit the check (a forged or damaged report)."""


class Replay(harness.Check):
    """A Check whose call() gives back the recorded values: the check runs as it did beside the
    learner's code, and every comparison is made here."""

    def __init__(self, exercise, calls):
        super().__init__(exercise, workspace='', seconds=0)
        self.calls, self.at = calls, 0

    def call(self, fn, *args, name=None, hint='', graph=True):
        if self.at >= len(self.calls):
            raise Mismatch(f"{self.at} calls recorded, the check makes more")
        entry = self.calls[self.at]
        self.at += 1
        known = values_in(args)
        try:
            return Decoder(known, entry).apply(args)
        except (TypeError, ValueError, KeyError, IndexError, AttributeError, RecursionError, OverflowError) as e:
            raise Mismatch(f"call {self.at}: {type(e).__name__}") from None


def replay(number, calls, checks_for):
    """The verdict on a check the learner's process says was passed, from its transcript:
    a result dict, 'pass' only if every comparison holds here and at least one case ran."""
    e = catalog.get(number)
    interfered = {'status': 'fail', 'cases': 0,
                  'line': f"not passed: the report of your {e.function}() does not match its check "
                          "(code in your files wrote to the checker's report, or changed the checker)"}
    if type(calls) is not list:
        return interfered
    t = Replay(e, calls)
    try:
        checks_for(number)(t, None)
    except harness.Report as r:
        return {'status': r.status if r.status in ('fail', 'todo') else 'fail', 'line': r.line,
                'details': r.details, 'hint': r.hint, 'cases': t.cases}
    except Mismatch:
        return interfered
    except Exception as exc:  # a value of theirs that microgpt's code cannot use (the values are all theirs)
        return {'status': 'fail', 'cases': t.cases,
                'line': f"{t.where()}: the values your {e.function}() returned cannot be compared "
                        f"({harness.exception_line(exc)}): they are yours, check what it returns"}
    if t.at != len(calls) or t.cases == 0 or t.at == 0:  # a pass needs a case, and a value of theirs compared
        return interfered
    return {'status': 'pass', 'line': f"passed: {t.summary()}", 'cases': t.cases}

