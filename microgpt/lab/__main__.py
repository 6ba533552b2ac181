"""
The lab's command line: `python -m microgpt.lab <command> ...`, one subcommand per sandbox.

    python -m microgpt.lab --help
    python -m microgpt.lab attention --help
    python -m microgpt.lab serve          # the same sandboxes as web pages

Each command's work lives in its own file (attention.py, autograd.py, overview.py,
scaling.py, loss.py, serve.py); this file only declares the flags, grouped by purpose, and dispatches.
Mistakes in what a learner typed (an unknown character, --head out of range, a bad
expression, a missing checkpoint) end as one line `error: ...` with exit status 2, through
microgpt.cli.run.
"""

import importlib

from .. import cli
from .loading import DEFAULT_CKPT


def add_model_flags(p):
    g = p.add_argument_group('model')
    g.add_argument('--ckpt', default=DEFAULT_CKPT, metavar='PATH',
                   help=f"checkpoint written by train.py (default {DEFAULT_CKPT})")
    g.add_argument('--n-head', type=cli.positive_int,
                   help="heads, for the 3D tutorial's weights export only (it does not record them; default 4)")


def add_png_flag(g, what):
    g.add_argument('--png', metavar='FILE',
                   help=f"also draw {what} into this PNG file (needs matplotlib: the plot extra)")


def parse_args(argv=None):
    p = cli.ArgumentParser(prog='python -m microgpt.lab',
                           description="The lessons' sandboxes as commands, on a trained checkpoint.")
    commands = p.add_subparsers(dest='command', required=True, metavar='COMMAND')

    # overview: forward, loss, sample
    c = commands.add_parser('overview', help="next-character probabilities, loss and a sample for TEXT",
                            description="For every position of [BOS] + TEXT: the model's most likely next "
                                        "characters, the true one, its probability and loss; then one "
                                        "sampled continuation.")
    c.add_argument('text', metavar='TEXT', help="a name, in characters the model was trained on (e.g. anna)")
    add_model_flags(c)
    g = c.add_argument_group('display')
    g.add_argument('--top', type=cli.positive_int, default=5, metavar='K',
                   help="how many most likely characters to show per position (default 5)")
    g = c.add_argument_group('sampling (as in sample.py)')
    g.add_argument('--temperature', type=cli.positive_float, default=0.5,
                   help="> 0; below 1 safer, above 1 more inventive (default 0.5)")
    g.add_argument('--seed', type=int, default=42, help="random seed for the continuation (default 42)")
    add_png_flag(c.add_argument_group('picture'), "the probability bars")

    # attention: one head, one query
    c = commands.add_parser('attention', help="every step of one head's attention for one query of TEXT",
                            description="q.k per dimension, scores, scaling, the causal mask, softmax, "
                                        "the weighted sum of values, every head side by side, and the "
                                        "row statistics with and without the sqrt(head_dim) scaling.")
    c.add_argument('text', metavar='TEXT', help="a name, in characters the model was trained on (e.g. anna)")
    add_model_flags(c)
    g = c.add_argument_group('what to look at')
    g.add_argument('--layer', type=cli.nonnegative_int, default=0, metavar='L',
                   help="transformer block, 0..n_layer-1 (default 0)")
    g.add_argument('--head', type=cli.nonnegative_int, default=0, metavar='H',
                   help="attention head, 0..n_head-1 (default 0)")
    g.add_argument('--query', type=cli.nonnegative_int, metavar='I',
                   help="query position, 0 (BOS)..len(TEXT) (default: the last)")
    g = c.add_argument_group('what if (the model itself scales and uses temperature 1)')
    g.add_argument('--no-scale', action='store_true',
                   help="do not divide the scores by sqrt(head_dim): watch the softmax sharpen")
    g.add_argument('--temperature', type=cli.positive_float, default=1.0,
                   help="divide the scores by this before the softmax, > 0 (default 1)")
    add_png_flag(c.add_argument_group('picture'), "a heatmap of every head of the layer")

    # autograd: a live expression graph
    c = commands.add_parser('autograd', help="build an expression's graph of Values and backpropagate",
                            description="Parses EXPR (numbers, variables, + - * / **, unary minus, exp(), "
                                        "log(), relu(), parentheses; nothing is eval'ed), builds the "
                                        "graph, runs backward() and lists every node with its grad.")
    c.add_argument('expression', metavar='EXPR', help='e.g. "(a + b) * c"; quote it for the shell')
    c.add_argument('assignments', nargs='*', metavar='NAME=VALUE',
                   help="a value for every variable of EXPR, e.g. a=2 b=-3 c=10")
    g = c.add_argument_group('picture')
    g.add_argument('--dot', metavar='FILE',
                   help="write the graph as Graphviz DOT; rendered to PNG beside it if `dot` is installed")

    # scaling: the lessons' numbers
    c = commands.add_parser('scaling', help="the lessons' numbers on sqrt(d) scaling and cost, measured afresh",
                            description="Var(q.k) = d, softmax saturation, the hand-worked example, one "
                                        "row with and without scaling, the cost ratio n/(2D), the size "
                                        "of the score matrix.")
    g = c.add_argument_group('sampling')
    g.add_argument('--samples', type=cli.positive_int, default=50_000, metavar='N',
                   help="dot products drawn per d for the variance (default 50000; the standard "
                        "error shrinks like 1/sqrt(N))")
    g.add_argument('--draws', type=cli.positive_int, default=2000, metavar='N',
                   help="random rows for the medians of the row statistics (default 2000)")
    g.add_argument('--row-d', type=cli.positive_int, default=64, metavar='D',
                   help="head size of the random row in section 4 (default 64, the lesson's; "
                        "try 256 to watch the unscaled row saturate)")
    g.add_argument('--seed', type=int, default=42, help="random seed (default 42)")

    # loss: the curves of a run
    c = commands.add_parser('loss', help="training and validation loss curves from a training log",
                            description="Reads the JSON-lines log train.py writes beside the checkpoint.")
    c.add_argument('logfile', metavar='LOGFILE', help="e.g. out/model.log.jsonl")
    g = c.add_argument_group('display')
    g.add_argument('--width', type=cli.positive_int, default=60, help="chart width in characters, 20 or more (default 60)")
    g.add_argument('--height', type=cli.positive_int, default=12, help="chart height in lines, 5 or more (default 12)")
    add_png_flag(c.add_argument_group('picture'), "the curves")

    # serve: the lab as local web pages
    c = commands.add_parser('serve', help="the lab as web pages in a browser, with live training",
                            description="Serves the lab's pages and their JSON API on this machine "
                                        "until Ctrl-C. Open the printed address in a browser.")
    add_model_flags(c)
    g = c.add_argument_group('server')
    g.add_argument('--host', default='127.0.0.1',
                   help="address to listen on (default 127.0.0.1: this machine only; any other "
                        "lets everyone who can reach the port use the lab)")
    g.add_argument('--port', type=int, default=8000, help="TCP port, 1..65535 (default 8000; 0 = any free one)")
    g = c.add_argument_group('training runs (the Training page)')
    g.add_argument('--runs-dir', default='out/lab-runs', metavar='DIR',
                   help="folder for the page's runs, one numbered subfolder each (default out/lab-runs)")
    g.add_argument('--data', metavar='PATH',
                   help="names to train on, one per line (default: the bundled census first names)")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    # import only the command that runs: `autograd` and `loss` never load the numpy port
    command = importlib.import_module(f'.{args.command}', __package__)
    return command.run(args)


if __name__ == '__main__':
    cli.run(main)
