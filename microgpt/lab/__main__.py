"""
The lab's command line: `python -m microgpt.lab <command> ...`, one subcommand per sandbox.

    python -m microgpt.lab --help
    python -m microgpt.lab attention --help
    python -m microgpt.lab serve          # the same sandboxes as web pages

Each command's work lives in its own file (attention.py, autograd.py, overview.py,
scaling.py, loss.py, step.py, sampler.py for `sample`, embeddings.py, serve.py); this file only
declares the flags, grouped by purpose, and dispatches.
Mistakes in what a learner typed (an unknown character, --head out of range, a bad
expression, a missing checkpoint) end as one line `error: ...` with exit status 2, through
microgpt.cli.run.
"""

import importlib

from .. import cli
from ..limits import (MAX_BLOCK_SIZE, MAX_N_HEAD, MAX_N_LAYER, MAX_ROW_NUMBERS, MAX_SEED,
                      MAX_TEMPERATURE, MAX_VOCAB_SIZE)
from .loading import DEFAULT_CKPT

# Every numeric flag has a range, checked as it is parsed (cli.int_in, cli.float_in), and named
# in its help: an absurd value is one line `error: ...`, never gigabytes of memory.
SEED = cli.int_in(0, MAX_SEED)
TEMPERATURE = cli.float_in(0, MAX_TEMPERATURE)                     # sampling: 0 = greedy
SCORE_TEMPERATURE = cli.float_in(0, MAX_TEMPERATURE, above=True)   # attention: divides the scores
LR = cli.float_in(0, 1e3, above=True)                              # the step's learning rate
TOP_MAX = 1000                                # --top: more bars than any terminal shows
SAMPLES_MAX, DRAWS_MAX, ROW_D_MAX = 1_000_000, 100_000, 4096  # scaling: each about a minute at most
WIDTH_RANGE, HEIGHT_RANGE = (20, 1000), (5, 500)  # loss chart, in characters and lines


# A command whose file has another name: lab/sample.py would read like the top-level sample.py.
MODULES = {'sample': 'sampler'}
# The commands that run on the standard library alone (the scalar engine, a log file).
WITHOUT_NUMPY = ('autograd', 'loss')


def add_model_flags(p):
    g = p.add_argument_group('model')
    g.add_argument('--ckpt', default=DEFAULT_CKPT, metavar='PATH',
                   help=f"checkpoint written by train.py (default {DEFAULT_CKPT})")
    # the 3D tutorial: see docs/lessons.md
    g.add_argument('--n-head', type=cli.int_in(1, MAX_N_HEAD),
                   help="heads, for the 3D tutorial's weights export only (it does not record them; "
                        f"default 4; 1..{MAX_N_HEAD})")


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
    g.add_argument('--top', type=cli.int_in(1, TOP_MAX), default=5, metavar='K',
                   help=f"how many most likely characters to show per position, 1..{TOP_MAX} (default 5)")
    g = c.add_argument_group('sampling the continuation (as in sample.py; the bars are always at temperature 1)')
    g.add_argument('--temperature', type=TEMPERATURE, default=0.5,
                   help=f"for the continuation only, 0..{MAX_TEMPERATURE:g} (0 = greedy); below 1 "
                        "safer, above 1 more inventive (default 0.5)")
    g.add_argument('--seed', type=SEED, default=42,
                   help=f"random seed for the continuation, 0..{MAX_SEED} (default 42)")
    add_png_flag(c.add_argument_group('picture'), "the probability bars")

    # attention: one head, one query
    c = commands.add_parser('attention', help="every step of one head's attention for one query of TEXT",
                            description="q.k per dimension, scores, scaling, the causal mask, softmax, "
                                        "the weighted sum of values, every head side by side, and the "
                                        "row statistics with and without the sqrt(head_dim) scaling.")
    c.add_argument('text', metavar='TEXT', help="a name, in characters the model was trained on (e.g. anna)")
    add_model_flags(c)
    g = c.add_argument_group('what to look at')
    g.add_argument('--layer', type=cli.int_in(0, MAX_N_LAYER - 1), default=0, metavar='L',
                   help="transformer block, 0..n_layer-1 (default 0)")
    g.add_argument('--head', type=cli.int_in(0, MAX_N_HEAD - 1), default=0, metavar='H',
                   help="attention head, 0..n_head-1 (default 0)")
    g.add_argument('--query', type=cli.int_in(0, MAX_BLOCK_SIZE - 1), metavar='I',
                   help="query position, 0 (BOS)..len(TEXT) (default: the last)")
    g = c.add_argument_group('what if (the model itself scales and uses temperature 1)')
    g.add_argument('--no-scale', action='store_true',
                   help="do not divide the scores by sqrt(head_dim): watch the softmax sharpen")
    g.add_argument('--temperature', type=SCORE_TEMPERATURE, default=1.0,
                   help=f"divide the scores by this before the softmax, 0..{MAX_TEMPERATURE:g}, not 0 itself "
                        "(default 1)")
    add_png_flag(c.add_argument_group('picture'), "a heatmap of every head of the layer")

    # autograd: a live expression graph
    c = commands.add_parser('autograd', help="build an expression's graph of Values and backpropagate",
                            description="Parses EXPR (numbers, variables, + - * / **, unary minus, exp(), "
                                        "log(), relu(), parentheses; nothing is eval'ed), builds the "
                                        "graph, runs backward() and lists every node with its grad.")
    c.add_argument('expression', metavar='EXPR', help='e.g. "(a + b) * c"; quote it for the shell, and put one that starts with '
                        '"-" after --, as in: autograd -- "-a" a=1')
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
    g.add_argument('--samples', type=cli.int_in(2, SAMPLES_MAX), default=50_000, metavar='N',
                   help=f"dot products drawn per d for the variance, 2..{SAMPLES_MAX:,} (default 50000; "
                        "the standard error shrinks like 1/sqrt(N))")
    g.add_argument('--draws', type=cli.int_in(1, DRAWS_MAX), default=2000, metavar='N',
                   help=f"random rows for the medians of the row statistics, 1..{DRAWS_MAX:,} (default 2000)")
    g.add_argument('--row-d', type=cli.int_in(1, ROW_D_MAX), default=64, metavar='D',
                   help=f"head size of the random row in section 4, 1..{ROW_D_MAX}, with --draws x "
                        f"--row-d at most {MAX_ROW_NUMBERS:,} (default 64, the lesson's; try 256 to "
                        "watch the unscaled row saturate)")
    g.add_argument('--seed', type=SEED, default=42, help=f"random seed, 0..{MAX_SEED} (default 42)")

    # loss: the curves of a run
    c = commands.add_parser('loss', help="training and validation loss curves from a training log",
                            description="Reads the JSON-lines log train.py writes beside the checkpoint.")
    c.add_argument('logfile', metavar='LOGFILE', help="e.g. out/model.log.jsonl")
    g = c.add_argument_group('display')
    g.add_argument('--width', type=cli.int_in(*WIDTH_RANGE), default=60,
                   help="chart width in characters, %d..%d (default 60)" % WIDTH_RANGE)
    g.add_argument('--height', type=cli.int_in(*HEIGHT_RANGE), default=12,
                   help="chart height in lines, %d..%d (default 12)" % HEIGHT_RANGE)
    add_png_flag(c.add_argument_group('picture'), "the curves")

    # step: one training step, every number shown (lesson 04)
    c = commands.add_parser('step', help="one training step on TEXT: forward, backward, Adam, the loss after",
                            description="The loss per position, dL/dlogits, the gradient's norm at each "
                                        "stage and per matrix, Adam on one weight, and each position's "
                                        "p(true next) before and after the update. The checkpoint file "
                                        "is not changed.")
    c.add_argument('text', metavar='TEXT', help="a name, in characters the model was trained on (e.g. anna)")
    add_model_flags(c)
    g = c.add_argument_group('the step')
    g.add_argument('--lr', type=LR, metavar='LR',
                   help="learning rate, 0..1000, not 0 itself (default: the one the checkpoint was trained "
                        "with, else 0.01)")
    g.add_argument('--param', metavar='NAME[ROW][COL]',
                   help="the weight whose Adam update to show, e.g. 'layer0.attn_wq[3][5]' "
                        "(quote it; default: the weight with the largest gradient)")
    add_png_flag(c.add_argument_group('picture'), "the gradient norm per matrix and p(true next) before/after")

    # sample: temperature and top-k
    c = commands.add_parser('sample', help="the next-character distribution at several temperatures, top-k, samples",
                            description="After [BOS] + PROMPT: the next-character probabilities at each "
                                        "temperature (0 = greedy) with their entropy, what top-k keeps, and "
                                        "a few names drawn at each setting, marked as in the training data "
                                        "or new.")
    c.add_argument('prompt', nargs='?', default='', metavar='PROMPT',
                   help="how the names start (default: empty, the first character is drawn too)")
    add_model_flags(c)
    g = c.add_argument_group('sampling')
    g.add_argument('--temperatures', type=TEMPERATURE, nargs='+', default=[0.0, 0.5, 1.0, 2.0],
                   metavar='T', help=f"temperatures to compare, each 0..{MAX_TEMPERATURE:g}, 0 = greedy "
                                     "(default 0 0.5 1 2)")
    g.add_argument('--top-k', type=cli.int_in(1, MAX_VOCAB_SIZE), default=5, metavar='K',
                   help="the top-k cut to show, 1 or more (default 5)")
    g.add_argument('--num', type=cli.int_in(1, 1000), default=5, metavar='N',
                   help="names per setting, 1..1000 (default 5)")
    g.add_argument('--seed', type=SEED, default=42, help=f"random seed, 0..{MAX_SEED} (default 42)")
    g.add_argument('--data', metavar='PATH',
                   help="the training names, to mark samples as seen or new (default: the data the "
                        "checkpoint was trained on, when it can still be read)")

    # embeddings: what wte and wpe learned
    c = commands.add_parser('embeddings', help="wte on its two principal components, nearest neighbours, wpe similarity",
                            description="The token embeddings (rows of wte) projected on their two principal "
                                        "components, vowels marked; each character's nearest neighbours by "
                                        "cosine similarity; the cosine similarity of the position embeddings.")
    add_model_flags(c)
    g = c.add_argument_group('display')
    g.add_argument('--neighbours', type=cli.int_in(1, MAX_VOCAB_SIZE), default=3, metavar='K',
                   help="nearest neighbours listed per character, 1 or more (default 3)")
    add_png_flag(c.add_argument_group('picture'), "the scatter plot and the wpe similarity matrix")
    # serve: the lab as local web pages
    c = commands.add_parser('serve', help="the lab as web pages in a browser, with live training",
                            description="Serves the lab's pages and their JSON API on this machine "
                                        "until Ctrl-C. Open the printed address in a browser.")
    add_model_flags(c)
    g = c.add_argument_group('server')
    g.add_argument('--host', default='127.0.0.1',
                   help="address to listen on (default 127.0.0.1: this machine only; any other "
                        "lets everyone who can reach the port use the lab)")
    g.add_argument('--port', type=int, default=8000, help="TCP port, 0..65535 (default 8000; 0 = any free one)")
    g = c.add_argument_group('training runs (the Training page)')
    g.add_argument('--runs-dir', default='out/lab-runs', metavar='DIR',
                   help="folder for the page's runs, one numbered subfolder each (default out/lab-runs)")
    g.add_argument('--data', metavar='PATH',
                   help="names to train on, one per line (default: the bundled census first names)")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    # import only the command that runs: `autograd` and `loss` never load the numpy port
    if args.command not in WITHOUT_NUMPY:
        cli.require_numpy(f"`lab {args.command}`")
    command = importlib.import_module(f'.{MODULES.get(args.command, args.command)}', __package__)
    return command.run(args)


def command():
    """`microgpt-lab` (installed) and `python -m microgpt.lab`."""
    cli.run(main)


if __name__ == '__main__':
    command()
