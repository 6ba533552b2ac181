"""
The exercises' command line: `python -m microgpt.lab exercises COMMAND` (installed:
`microgpt-lab exercises COMMAND`); `--help` lists the commands. This process checks what was typed and
prints; the learner's code runs only in the checker's subprocess (checker.py). Bad input is one
line `error: ...` naming the fix, exit status 2, nothing of the learner's changed. `check` exits 0
when everything it checked passes, else 1.
"""

import importlib.util
import os
import sys
import textwrap
import time

from ...edge.checks import Range
from ...edge.errors import UserError
from ...programs import cli
from ...programs.settings import flag_default
from ...sampling import TEMPERATURE
from . import catalog, hints, quiz, report
from .workspace import COMMAND, DEFAULT_DIR, Workspace, dir_flag, shown, start

TRAIN_STEPS = 300     # the payoff's default: enough for names that read like names, a minute or so
MAX_TRAIN_STEPS = 10_000
N = len(catalog.EXERCISES)


def add_commands(parser):
    """The subcommands, on `parser` (the lab's `exercises` subparser)."""
    commands = parser.add_subparsers(dest='exercise_command', required=True, metavar='COMMAND')
    number = Range(int, 1, N).parse  # an exercise's number: the path is numbered 1..N

    def with_dir(c):
        c.add_argument('--dir', default=DEFAULT_DIR, metavar='DIR',
                       help=f"the folder of your exercises (default ./{DEFAULT_DIR})")
        return c

    def with_number(c):
        c.add_argument('number', type=number, metavar='N', help=f"the exercise, 1..{N}")
        return c
    c = commands.add_parser('start', help="write the exercise stubs into DIR (nothing is ever overwritten)",
                            description="Writes one file per exercise into DIR, each a function with its "
                                        "docstring and a body that raises NotImplementedError. A second start "
                                        "adds only what is missing.")
    c.add_argument('dir', nargs='?', default=DEFAULT_DIR, metavar='DIR',
                   help=f"the folder to write them into (default ./{DEFAULT_DIR}; created if missing)")
    c = with_dir(commands.add_parser('check', help="check one exercise, or all of them in order",
                                     description="Runs your function on fixed cases, then random ones, against "
                                                 "microgpt's own and an independent oracle; the first case that "
                                                 "fails is shown with a hint."))
    c.add_argument('number', nargs='?', type=number, metavar='N', help=f"the exercise, 1..{N} (default: all, "
                   "in order, stopping at the first not passed)")
    with_dir(commands.add_parser('status', help="the path of exercises, with what passes (checks them all)"))
    c = with_dir(commands.add_parser('train', help="train microgpt with your own engine and model",
                                     description="Trains train.py's default model on the bundled names with "
                                                 "your Value, blocks, gpt(), loss and Adam, beside microgpt's own "
                                                 "from the same seed; says where the two part, if they do; then "
                                                 "samples names from your model."))
    c.add_argument('--steps', type=Range(int, 1, MAX_TRAIN_STEPS).parse, default=TRAIN_STEPS,
                   help=f"training steps, one name each (default {TRAIN_STEPS}; 1..{MAX_TRAIN_STEPS:,})")
    c.add_argument('--seed', type=Range(int, 0, 2 ** 31 - 1).parse, default=flag_default('seed'),
                   help="the seed of the weights, the names' order and the sampling "
                        f"(default {flag_default('seed')}, train.py's)")
    c.add_argument('--lr', type=Range(float, 0, 1, above=True).parse, default=flag_default('lr'),
                   help=f"peak learning rate, decaying linearly to 0 (default {flag_default('lr'):g}, train.py's)")
    c.add_argument('--num-samples', type=Range(int, 0, 100).parse, default=flag_default('num_samples'),
                   help=f"names to sample from your model at the end (default {flag_default('num_samples')}, "
                        "train.py's; 0..100)")
    c.add_argument('--temperature', type=Range(float, 0, 10).parse, default=TEMPERATURE,
                   help=f"sampling temperature (default {TEMPERATURE:g}, sample.py's; 0 = greedy)")
    c.add_argument('--every', type=Range(int, 1, MAX_TRAIN_STEPS).parse, default=None, metavar='K',
                   help="print the losses every K steps (default: about 12 lines in all)")
    c = commands.add_parser('quiz', help="questions on the attention examples, checked",
                            description="Asks each question on the reading guide's worked examples of "
                                        "attention, says right or wrong with the reasoning and the lab "
                                        "command that shows it. With ID and ANSWER, grades that one answer.")
    c.add_argument('id', nargs='?', metavar='ID', help="one question (see --list); default: all, in turn")
    c.add_argument('answer', nargs='?', metavar='ANSWER', help="your answer to ID (default: asked)")
    c.add_argument('--list', action='store_true', help="list the questions and stop")
    c = commands.add_parser('hint', help="the next hint of an exercise, one level at a time",
                            description="Each `hint N` gives the next level of exercise N's hints: the idea "
                                        "first, then more, the last one the recipe in words (`solution N` shows "
                                        "the code). The level reached is kept in the workspace's record.")
    with_number(with_dir(c))
    c.add_argument('--level', type=Range(int, 1, max(len(h) for h in hints.HINTS.values())).parse, metavar='K',
                   help="show level K (1 = the first), and remember it")
    with_number(commands.add_parser('solution', help="show a reference solution (only what you ask for)"))
    c = with_number(with_dir(commands.add_parser('reset', help="put an exercise's stub back, after asking")))
    c.add_argument('--yes', action='store_true', help="do not ask (your version of the file is lost)")


def run(args, ask=None):
    """Run the parsed command; returns the exit status. ask: how a question is asked (input)."""
    def say(text=''):
        print(text, flush=True)
    commands = {'start': cmd_start, 'check': cmd_check, 'status': cmd_status, 'train': cmd_train, 'quiz': cmd_quiz,
                'hint': cmd_hint, 'solution': cmd_solution, 'reset': cmd_reset}
    return commands[args.exercise_command](args, say, ask or input)


# ---------------------------------------------------------------------------- start
def cmd_start(args, say, ask):
    written, kept = start(args.dir)
    where = shown(os.path.abspath(args.dir))
    first, last = catalog.EXERCISES[0], catalog.EXERCISES[-1]
    if written and not kept:
        say(f"wrote {len(written)} exercises into {where}/ ({first.filename} .. {last.filename})")
    elif written:
        say(f"added {len(written)} missing: {', '.join(written)}; kept the {len(kept)} already there "
            "(a file in the folder is never overwritten)")
    else:
        say(f"{where}/ has all {N} exercises: nothing written (a file in the folder is never overwritten)")
    say(f"next: open {where}/{first.filename}, write {first.function}(), then run\n"
        f"    {COMMAND} check 1{dir_flag(args.dir)}")
    return 0


# ---------------------------------------------------------------------------- what this Python can check
def without(missing, command):
    """'this Python (...) lacks numpy: run it with ...': the words and the fix, for `command`."""
    fix = (f"run `.venv/bin/python -m microgpt.lab exercises {command}` (the project's environment; "
           "`make run` makes it) or `pip install -e .` first" if cli.SOURCE_CHECKOUT else
           f"`pip install numpy`, then `{COMMAND} {command}`")
    return f"this Python ({sys.executable}) lacks {missing}: {fix}"


def checked(ws, numbers, stop=False, say=None):
    """Check `numbers` in the checker's subprocess (printing each report if `say`), keep the
    results in the workspace: (results, a note if they were not kept, the exercises this Python
    cannot check, what it lacks). A Python without numpy (the system's python3 in a checkout)
    checks the others; those are 'todo' if still a stub, else 'unchecked', with the last saved
    result when the file has not changed since."""
    from .checker import check
    missing = '' if importlib.util.find_spec('numpy') else 'numpy'
    skipped = [n for n in numbers if missing and catalog.get(n).needs_numpy]

    def printed(workspace, number, result):
        e = catalog.get(number)
        say(report.one_line(e, result) if result['status'] == 'pass' else report.full(e, result, shown(ws.path)))
    results = check([(ws.path, [n for n in numbers if n not in skipped], stop)], on_event=say and printed)
    results = {n: r for (_, n), r in results.items()}
    note = ws.record(results)  # only what was checked: a result saved from another Python stays
    saved = ws.results()
    for n in skipped:
        last = saved.get(str(n))
        before = (f" (at {last['checked']}, unchanged since: {'passed' if last['status'] == 'pass' else 'not passed'})"
                  if last and not ws.edited_since_check(n) else '')
        results[n] = ({'status': 'todo', 'line': 'not written yet'} if ws.is_stub(n) else
                      {'status': 'unchecked', 'line': f"not checked: it needs {missing}{before}"})
    return results, note, skipped, missing


# ---------------------------------------------------------------------------- check and status
def cmd_check(args, say, ask):
    ws = Workspace.open(args.dir)
    if args.number and catalog.get(args.number).needs_numpy and not importlib.util.find_spec('numpy'):
        raise UserError(f"{catalog.get(args.number).label} cannot be checked here, its check uses numpy: "
                        + without('numpy', f"check {args.number}{dir_flag(ws.path)}"))
    results, note, skipped, missing = checked(ws, [args.number] if args.number else catalog.NUMBERS, True, say)
    if note:
        say(note)
    bad = [n for n, r in results.items() if n not in skipped and r['status'] != 'pass']
    if skipped and not bad:
        say(f"{report.MARKS['unchecked']} exercises {', '.join(map(str, skipped))} not checked, their checks use numpy: "
            + without(missing, f"check{dir_flag(ws.path)}"))
        return 1
    if not bad:
        if args.number:
            nxt = next((n for n in catalog.NUMBERS if n > args.number), None)
            say(f"next: exercise {nxt}, {catalog.get(nxt).filename}" if nxt is not None else
                f"that was the last: now `{COMMAND} train{dir_flag(ws.path)}`")
        else:
            say(f"all {N} exercises pass: now see your engine train microgpt, `{COMMAND} train{dir_flag(ws.path)}`")
        return 0
    if not args.number:
        after = next((n for n in catalog.NUMBERS if n > bad[0]), None)
        ahead = f" (`check {after}` jumps ahead)" if after is not None else ''
        say(f"stopped at exercise {bad[0]}: fix it and run `{COMMAND} check{dir_flag(ws.path)}` again{ahead}")
    return 1


def cmd_status(args, say, ask):
    ws = Workspace.open(args.dir)
    results, note, _, missing = checked(ws, catalog.NUMBERS)
    passed = sum(r['status'] == 'pass' for r in results.values())
    not_here = sum(r['status'] == 'unchecked' for r in results.values())
    say(f"microgpt's exercises in {shown(ws.path)}/: {passed} of {N} pass" +
        (f", {not_here} not checked here (they need {missing})" if not_here else ''))
    say(report.status_table(results))
    if note:
        say(note)
    if not_here:
        say(f"  to check them: {without(missing, f'status{dir_flag(ws.path)}')}")
    unwritten = [n for n in catalog.TRAIN_USES if results.get(n, {}).get('status') == 'todo']
    say(f"train (microgpt trained with your engine) uses 1 to {max(catalog.TRAIN_USES)}: " +
        (f"{len(unwritten)} of them not written yet ({', '.join(map(str, unwritten))})" if unwritten else
         f"ready, `{COMMAND} train{dir_flag(ws.path)}`"))
    todo = next((n for n in catalog.NUMBERS if results.get(n, {}).get('status') not in ('pass', 'unchecked')), None)
    say(f"next: {COMMAND} check {todo}{dir_flag(ws.path)}" if todo else
        f"all pass: `{COMMAND} train{dir_flag(ws.path)}`, and `{COMMAND} quiz`" if not not_here else
        f"all that this Python can check pass: `{COMMAND} train{dir_flag(ws.path)}`")
    if not todo and not not_here:
        say("then, beyond the path:\n" + '\n'.join(f"  - {step}" for step in catalog.WHAT_NEXT))
    return 0


# ---------------------------------------------------------------------------- train
def cmd_train(args, say, ask):
    ws = Workspace.open(args.dir)
    from .checker import train
    say(f"checking your exercises 1 to {max(catalog.TRAIN_USES)} first (train uses them) ...")
    results, _, skipped, missing = checked(ws, catalog.TRAIN_USES)
    todo = [n for n in catalog.TRAIN_USES if results[n]['status'] == 'todo']
    if todo:
        e = catalog.get(todo[0])
        raise UserError(f"train needs your exercises 1 to {max(catalog.TRAIN_USES)}, and {e.label} is not written "
                        f"yet: write it in {shown(ws.path)}/{e.filename}, then `{COMMAND} check {e.number}"
                        f"{dir_flag(ws.path)}`")
    failing = [n for n in catalog.TRAIN_USES if results[n]['status'] not in ('pass', 'unchecked')]
    if skipped:
        say(f"  not checked here: {', '.join(catalog.get(n).label for n in skipped)} (their checks need {missing}; "
            "the training below compares them with microgpt's own, step by step)")
    if failing:
        say(f"  not passing: {', '.join(catalog.get(n).label for n in failing)}; training anyway: where your run "
            "parts from microgpt's shows what that changes")
    elif not skipped:
        say("  all pass")
    every = args.every or max(1, args.steps // 12)
    run = {'losses': [], 'project': [], 'parted': None, 'names': None, 'failed': None}

    def show(event):
        kind = event['event']
        if kind == 'train-start':
            c = event['config']
            say(f"training train.py's default model (n_layer {c['n_layer']}, n_embd {c['n_embd']}, n_head "
                f"{c['n_head']}, block_size {c['block_size']}; {event['parameters']:,} weights) on the bundled "
                f"names ({event['names']:,}), {event['steps']} steps, seed {event['seed']}, your engine beside "
                "microgpt's own:")
            say(f"  {'step':>5}  {'name':<12} {'your loss':>18} {'microgpt':>18} {'difference':>11}")
        elif kind == 'step':
            step, loss, project = event['step'], event['loss'], event['project']
            run['losses'].append(loss)
            run['project'].append(project)
            if step == 1 or step % every == 0 or step == args.steps:
                say(f"  {step:>5}  {event['name']:<12} {loss:>18.12f} {project:>18.12f} {abs(loss - project):>11.2g}")
            if step == 1:
                run['start'] = time.monotonic()
            elif step == 2 and args.steps > 2:  # step 1's time includes the start: the pace is step 2's
                pace = time.monotonic() - run['start']
                say(f"  (about {pace:.2f} s a step on this machine: {pace * (args.steps - 2):.0f} s more)")
        elif kind == 'parted':
            run['parted'] = event
            say(f"  where they part: step {event['step']}, {event['quantity']}: yours {event['yours']:.10g}, "
                f"microgpt's {event['project']:.10g} (difference {event['difference']:.3g})\n"
                f"  that is {event['where']}")
        elif kind == 'names':
            run['names'] = event
        elif kind == 'failed':  # the learner's code, or the process that ran it
            run['failed'] = event['line']
    train(ws.path, steps=args.steps, seed=args.seed, lr=args.lr, num_samples=args.num_samples,
          temperature=args.temperature, on_event=show)
    if run['losses']:
        worst = max(abs(a - b) for a, b in zip(run['losses'], run['project']))
        last = run['losses'][-50:]
        say(f"after {len(run['losses'])} steps: your mean loss over the last {len(last)} steps "
            f"{sum(last) / len(last):.4f}, microgpt's {sum(run['project'][-50:]) / len(last):.4f}; the largest "
            f"difference of a step's loss over the run: {worst:.3g}")
    if run['failed']:
        say(f"  stopped: {run['failed']}")
        return 1
    if run['parted'] is None:
        say("  the two runs agree to rounding at every step: your engine IS microgpt's")
    names = run['names']
    if names:
        say(f"names from your model (temperature {args.temperature:g}, seed {args.seed}):")
        say('  ' + ', '.join(n or '(empty)' for n in names['yours']))
        same = names['yours'] == names['project']
        say("microgpt's own, same seed: " + ("the same names" if same else ', '.join(n or '(empty)' for n in names['project'])))
    return 0


# ---------------------------------------------------------------------------- quiz, solution, reset
def cmd_quiz(args, say, ask):
    if args.list:
        say('\n'.join(quiz.ask_text(q) for q in quiz.QUESTIONS))
        return 0
    if args.id is not None:
        q = quiz.get(args.id)
        if q is None:
            raise UserError(f"no question {args.id!r}: `{COMMAND} quiz --list` lists them "
                            f"({quiz.QUESTIONS[0].id} .. {quiz.QUESTIONS[-1].id})")
        say(quiz.ask_text(q))  # the question and its choices, before any grading
        if args.answer is not None:
            problem = quiz.unreadable(q, args.answer)
            if problem:
                raise UserError(f"{args.answer[:40]!r} is not graded: {problem}, e.g. "
                                f"`{COMMAND} quiz {q.id} {example(q)}`")
            text = args.answer
        else:
            text = read_readable(q, say, ask)
        if text is None or not text.strip():
            return 1
        right, understood = quiz.grade(q, text)
        say(quiz.verdict_text(q, right, understood))
        return 0 if right else 1
    score = asked = 0
    for i, q in enumerate(quiz.QUESTIONS, start=1):
        say(quiz.ask_text(q, i))
        text = read_readable(q, say, ask)
        if text is None:
            break
        asked += 1
        if not text.strip():
            say(f"  skipped: the answer is {quiz.right_answer(q)}\n  see it: {q.see}")
            continue
        right, understood = quiz.grade(q, text)
        score += right
        say(quiz.verdict_text(q, right, understood))
    say(f"{score} of {asked} right")
    return 0


def example(q):
    """An answer of the question's form, not its answer: what the one-line refusal shows."""
    if q.kind == 'choice':
        return 'a'
    return '0.5' if q.kind == 'number' else '"' + ', '.join(['0.1'] * len(q.answer)) + '"'


def read_readable(q, say, ask):
    """An answer of the question's form, asked again until it is one ('': skipped; None: the
    input ended)."""
    while True:
        try:
            text = ask('  your answer: ')
        except EOFError:
            return None
        problem = text.strip() and quiz.unreadable(q, text)
        if not problem:
            return text
        say(f"  not graded: {problem}; or press Enter to skip")


def cmd_hint(args, say, ask):
    """The next level (or --level K) of an exercise's hints. Without a workspace a hint is still
    given (level 1, or K), and nothing is remembered."""
    e = catalog.get(args.number)
    levels = hints.HINTS[e.number]
    ws = Workspace.open(args.dir) if args.level is None or os.path.isdir(args.dir) else None
    if args.level is not None and args.level > len(levels):
        raise UserError(f"{e.label} has {len(levels)} hints: ask `--level 1` to `--level {len(levels)}`")
    level = args.level or ws.hint_level(e.number) + 1
    if level > len(levels):
        say(f"no more hints for {e.label}: you have seen all {len(levels)}; `{COMMAND} hint {e.number} "
            f"--level 1{dir_flag(args.dir)}` shows them again, `{COMMAND} solution {e.number}` the code")
        return 0
    note = ws.record_hint(e.number, level) if ws else ''  # first: a reader who stops reading has seen it
    say(f"{e.label}, hint {level} of {len(levels)}:")
    say(textwrap.fill(levels[level - 1], width=96, initial_indent='  ', subsequent_indent='  '))
    if note:
        say(note)
    nxt = f"{COMMAND} hint {e.number}{dir_flag(args.dir)}" + ('' if ws else f" --level {level + 1}")
    say(f"next: `{nxt}` for hint {level + 1}" if level < len(levels)
        else f"that was the last hint; `{COMMAND} solution {e.number}` shows the code")
    return 0


def cmd_solution(args, say, ask):
    e = catalog.get(args.number)
    body = catalog.solution_body(e.number).replace('\n', '\n    ')
    say(f"{e.label}, a reference solution (microgpt's own is {e.real}):\n")
    say(f"def {e.function}({e.signature}):\n    {body}\n")
    say(f"That is the whole function, docstring left out: to use it, replace your def {e.function}() in "
        f"{e.filename} with it. `{COMMAND} reset {e.number}` puts the stub back.")
    return 0


def cmd_reset(args, say, ask):
    ws = Workspace.open(args.dir)
    e = catalog.get(args.number)
    path = shown(ws.file(e.number))
    if ws.is_stub(e.number):
        say(f"{path} is the stub already: nothing to reset")
        return 0
    if not args.yes:
        try:
            answer = ask(f"replace {path}, your version of {e.function}(), with the stub? Your code in it is "
                         "lost. [y/N] ")
        except EOFError:
            answer = ''
        if answer.strip().lower() not in ('y', 'yes'):
            say(f"{path} left as it was")
            return 1
    ws.reset(e.number)
    say(f"{path} is the stub again")
    return 0
