"""
The lab's command line: `python -m microgpt.lab <command> ...`, one subcommand per sandbox.

    python -m microgpt.lab --help
    python -m microgpt.lab attention --help
    python -m microgpt.lab serve          # the same sandboxes as web pages

Every command's flags, ranges and defaults come from registry.SANDBOXES, as the web API's
fields do. `run_sandbox` checks the flags, loads the model, computes, prints and draws --png.
A learner's mistake ends as one line `error: ...` with exit status 2 (programs.cli.run).
"""

import importlib

from ..programs import cli
from ..edge.checkpoint import TUTORIAL_N_HEAD
from ..edge.checks import Range
from ..edge.limits import MAX_N_HEAD
from . import pictures, registry, render
from .loading import DEFAULT_CKPT, DEFAULT_HOST, DEFAULT_PORT


WIDE = 10 ** 6  # --wide's width: wider than any line the lab prints, so nothing folds


def flag_of(p):
    """How the command line spells a parameter: --top-k, --no-scale, or TEXT for a positional."""
    if p.positional:
        return p.metavar or p.name.upper()
    return p.flag or '--' + p.name.replace('_', '-')


def add_param(group, p):
    """One registry Param as an argparse argument, its range named in its help."""
    help_text = p.help_text() + (f"; {p.range_text()}" if p.kind in (int, float) else '')
    kw = {'help': help_text}
    if p.kind is bool:
        kw['action'] = 'store_false' if p.default else 'store_true'
        group.add_argument(flag_of(p), dest=p.name, **kw)
        return
    if p.kind in (int, float):
        kw['type'] = p.range.parse
    if p.kind == 'values':
        kw['nargs'] = '*'
    elif p.many:
        kw['nargs'] = '+'
    elif p.positional and not p.required:
        kw['nargs'] = '?'
    if p.metavar:
        kw['metavar'] = p.metavar
    if p.positional:
        group.add_argument(p.name, default=list(p.default) if p.many else p.default, **kw)
    else:
        group.add_argument(flag_of(p), dest=p.name, default=list(p.default) if p.many else p.default, **kw)


def add_model_flags(command):
    """--ckpt and --n-head: the model a sandbox, or the server, looks at."""
    g = command.add_argument_group('model')
    g.add_argument('--ckpt', default=DEFAULT_CKPT, metavar='PATH',
                   help=f"checkpoint written by train.py (default {DEFAULT_CKPT})")
    # the 3D tutorial: see docs/lessons.md
    g.add_argument('--n-head', type=Range(int, 1, MAX_N_HEAD).parse,
                   help="heads, for the 3D tutorial's weights export only (it does not record them; "
                        f"default {TUTORIAL_N_HEAD}; an integer from 1 to {MAX_N_HEAD:,})")


def add_sandbox(commands, s):
    c = commands.add_parser(s.name, help=s.help, description=s.description or s.help)
    for p in s.params:
        if p.cli and p.positional:
            add_param(c, p)
    if s.model == 'log':
        c.add_argument('logfile', metavar='LOGFILE', nargs='+',
                       help="a training log, e.g. out/model.log.jsonl; several are drawn side by side")
    if s.reads_a_checkpoint:
        add_model_flags(c)
    groups = {}
    for p in s.params:
        if p.cli and not p.positional:
            if p.group not in groups:
                groups[p.group] = c.add_argument_group(p.group)
            add_param(groups[p.group], p)
    c.add_argument_group('printout').add_argument(
        '--wide', action='store_true',
        help="print every dimension and column on one line each, however wide (by default the printout "
             "fits the terminal, 100 columns when piped: wide tables fold into blocks of columns, long "
             "vectors show their first numbers and say how many are left)")
    if s.png:
        picture = c.add_argument_group('picture')
        picture.add_argument(
            s.picture_flag, dest='picture', metavar='FILE',
            help=f"also draw {s.png} into this file, which may only replace a picture" +
                 (" (needs matplotlib: the plot extra)" if s.picture_flag == '--png' else ''))


def add_serve(commands):
    c = commands.add_parser('serve', help="the lab as web pages in a browser, with live training",
                            description="Serves the lab's pages and their JSON API on this machine "
                                        "until Ctrl-C. Open the printed address in a browser.")
    add_model_flags(c)
    g = c.add_argument_group('server')
    g.add_argument('--host', default=DEFAULT_HOST,
                   help=f"loopback address to listen on (default {DEFAULT_HOST}; ::1 or localhost also: "
                        "the lab serves this machine only)")
    g.add_argument('--port', type=int, default=DEFAULT_PORT,
                   help=f"TCP port, 0..65535 (default {DEFAULT_PORT}; 0 = any free one)")
    g = c.add_argument_group('training runs (the Training page)')
    g.add_argument('--runs-dir', default='out/lab-runs', metavar='DIR',
                   help="folder for the page's runs, one numbered subfolder each (default out/lab-runs)")
    g.add_argument('--data', metavar='PATH',
                   help="names to train on, one per line (default: the bundled census first names)")
    g.add_argument('--text', metavar='PATH',
                   help="running text to train on in the page's text mode, e.g. tinyshakespeare.txt "
                        "(default: the text the --ckpt model was trained on, if it is a model of "
                        "running text and the file is still there)")
    c.add_argument_group('exercises (the Exercises page)').add_argument(
        '--exercises', metavar='DIR',
        help="your folder of exercises (`lab exercises start DIR`): the page shows their last results and "
             "checks them on request, in the checker's subprocess (default: none; the page lists the path "
             "and runs no code of yours)")


def parse_args(argv=None):
    p = cli.ArgumentParser(prog='python -m microgpt.lab',
                           description="The lab's sandboxes as commands, on a trained checkpoint.")
    commands = p.add_subparsers(dest='command', required=True, metavar='COMMAND')
    for s in registry.SANDBOXES:
        add_sandbox(commands, s)
    add_serve(commands)
    add_exercises(commands)
    return p.parse_args(argv)


def add_exercises(commands):
    """`lab exercises ...`: the learner writes the engine and the GPT (microgpt/lab/exercises/)."""
    from .exercises.cli import add_commands
    add_commands(commands.add_parser('exercises', help="write the engine and the GPT yourself, checked offline",
                                     description="microgpt's exercises: start, check, status, train, quiz, "
                                                 "solution, reset (docs/reading-guide.md, Learn by doing)."))


def cli_params(s, args):
    """The sandbox's parameters from parsed flags (a web-only one takes its default), checked."""
    params = {}
    for p in s.params:
        value = getattr(args, p.name) if p.cli else p.default
        if p.kind == 'values':
            value = registry.read_values(value or [], p, flag_of(p))
        params[p.name] = p.check(value, flag_of(p))
    return params


def run_sandbox(s, args):
    """One sandbox command: its flags checked, its model loaded, computed, printed, drawn."""
    params = cli_params(s, args)
    picture = getattr(args, 'picture', None)
    if picture and s.picture_flag == '--png':
        from .plot import require_matplotlib
        require_matplotlib()  # before the work, so a missing extra is the first thing said
    if picture is not None:
        pictures.check_target(picture, s.picture_flag)  # it may only replace a picture
    module = importlib.import_module(s.module_name)
    head = []
    if s.reads_a_checkpoint:
        from .loading import describe, load
        loaded = load(args.ckpt, s.model, n_head=args.n_head)
        head, source = [describe(args.ckpt, loaded.model)], args.ckpt
        data = registry.compute_on_model(s, loaded, params, spell=flag_of)
    elif s.model == 'log':
        params.pop('also', None)  # the web page's: the command line names its logs itself
        data = module.compute(args.logfile, **params)
        source = f"training log {args.logfile[0]}" if len(args.logfile) == 1 else "training logs"
    else:
        data, source = module.compute(**params), s.name
    render.set_width(WIDE if args.wide else None)
    try:
        text = render.fit('\n'.join(head + [module.render(data)]))
    finally:
        render.set_width(None)
    # the picture before the printout: a file that cannot be written fails before any output
    written = module.picture(picture, data, source) if picture else None
    print(text)
    if picture:
        print(written or f"\nwrote {picture}")
    return 0


def main(argv=None):
    args = parse_args(argv)
    if args.command == 'exercises':
        from .exercises.cli import run
        return run(args)
    # import only the command that runs: `autograd` and `loss` never load the numpy port
    if args.command == 'serve' or registry.get(args.command).numpy:
        cli.import_optional('microgpt.inference', f"`lab {args.command}`")  # numpy, and the port beside it
        from microgpt.backprop.threads import for_generation
        for_generation()  # the lab's products are a window's at most
    if args.command == 'serve':
        from . import serve
        return serve.run(args)
    return run_sandbox(registry.get(args.command), args)


def command():
    """`microgpt-lab` (installed) and `python -m microgpt.lab`."""
    cli.run(main)


if __name__ == '__main__':
    command()
