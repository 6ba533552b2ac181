"""
The one JSON parser for everything a user hands in: checkpoints, training logs.

    from microgpt.edge.jsonio import parse_json
    obj = parse_json(text, where='out/model.json')           # or where='out/model.log.jsonl line 3'

Python's json.loads has three ways to fail that are not JSONDecodeError: a document nested
deeper than the interpreter's recursion limit (1,000 opening brackets by default) ends in
RecursionError; an integer of more than 4,300 digits in ValueError; and NaN, Infinity and
-Infinity, which are not JSON, are silently accepted. parse_json refuses all three, and an
invalid document, each as a one-line UserError that starts with `where`. The nesting is
checked before parsing, against limits.MAX_JSON_DEPTH, by scanning only the brackets and
strings. Pure standard library; checkpoint.py, train.py and the lab's `loss` read through it.
"""

import json
import re

from .errors import UserError
from .limits import MAX_JSON_DEPTH

# A JSON string (its brackets do not count) or one bracket: the only tokens nesting depends on.
_STRING_OR_BRACKET = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


def parse_json(text, where, hint="the file is damaged or not one of microgpt's"):
    """The value `text` holds, or a one-line UserError beginning with `where` (a file name,
    perhaps with a line number) that says what is wrong, and ending with `hint`."""
    depth = nesting_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise UserError(f"{where} nests brackets {depth:,} deep; no microgpt file nests "
                        f"more than {MAX_JSON_DEPTH}: {hint}")
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as e:
        at = f"line {e.lineno}, column {e.colno}" if '\n' in text.rstrip('\n') else f"column {e.colno}"
        raise UserError(f"{where} is not valid JSON ({at}): {hint}") from None
    except RecursionError:  # not reachable after the depth check; kept as a backstop
        raise UserError(f"{where} nests brackets too deeply: {hint}") from None
    except ValueError as e:  # our NaN/Infinity refusal, or an integer of over 4,300 digits
        raise UserError(f"{where}: {str(e).split(';')[0]}") from None


def nesting_depth(text):
    """The deepest nesting of [ and { in text, brackets inside strings not counted."""
    depth = deepest = 0
    for m in _STRING_OR_BRACKET.finditer(text):
        c = m.group()
        if c in '[{':
            depth += 1
            deepest = max(deepest, depth)
        elif c in ']}':
            depth -= 1
    return deepest


def _reject_constant(name):
    raise ValueError(f"the non-finite number {name} appears in the file, and is not JSON")
