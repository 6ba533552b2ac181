"""
A check's result as the learner reads it, the same words in the terminal and on the web lab's
Exercises page: one line per exercise, and for the first one not passed the case's inputs,
the expected and the learner's values, their largest difference, the hint, and where the lab
shows the idea.
"""

from . import catalog

# 'unchecked': this Python cannot run the exercise's check (cli.checked); never saved
MARKS = {'pass': '✓', 'fail': '✗', 'todo': '·', 'error': '!', 'unchecked': '–'}


def one_line(e, result):
    """'✓  4 log  passed: 13 cases ...'."""
    return f"{MARKS[result['status']]} {e.label}: {result['line']}"


def full(e, result, workspace_path=None):
    """The whole report of a result: its line, then what a learner needs to fix it."""
    lines = [one_line(e, result)]
    details = result.get('details') or []
    width = max((len(label) for label, _ in details), default=0)
    for label, text in details:
        pad = ' ' * (width + 6)
        lines.append(f"    {label:<{width}}  " + str(text).replace('\n', '\n' + pad))
    if result.get('hint'):
        lines.append(f"  hint: {result['hint']}")
    if result.get('note'):
        lines.append(f"  note: {result['note']}")
    if result['status'] == 'todo' and workspace_path:
        lines.append(f"  open {workspace_path}/{e.filename} and write {e.function}()")
    if result['status'] in ('fail', 'todo'):
        lines.append(f"  see the idea: {e.command} (web lab: /{e.page}); reading: {e.reading}")
    return '\n'.join(lines)


def status_table(results):
    """The path with each exercise's mark, grouped by rung; results: {number: result or None}."""
    lines, rung = [], None
    for e in catalog.EXERCISES:
        if e.rung != rung:
            rung = e.rung
            lines.append(f"  {catalog.RUNGS[rung]}")
        r = results.get(e.number)
        mark = MARKS[r['status']] if r else ' '
        what = (f"not written yet ({e.title})" if r and r['status'] == 'todo' else
                r['line'] if r and r['status'] != 'pass' else e.title)
        lines.append(f"    {mark} {e.number:>2} {e.function:<18} {what}")
    return '\n'.join(lines)
