"""
The lab's one registry: every sandbox, its parameters (name, type, range, default), and where it
shows up. The command line (__main__.py), the JSON API (api.py), the web navigation, the server's
table of pages (serve.py) and the browser tests are all read from SANDBOXES below.

Adding a page is three things: a module microgpt/lab/NAME.py with compute(model, **params) ->
dict (keys that begin with '_' are the terminal's), render(data) -> str and, for --png,
picture(path, data, title); web/NAME.html and web/NAME.js; and one Sandbox entry here. This
file imports nothing heavy: `lab autograd` and `lab loss` never load numpy.
"""

import contextlib
import importlib
import math
from dataclasses import dataclass

from ..edge.checks import Range, short
from ..edge.errors import UserError
from ..edge.limits import (MAX_BLOCK_SIZE, MAX_N_HEAD, MAX_N_LAYER, MAX_SEED, MAX_TEMPERATURE, MAX_VOCAB_SIZE,
                           parameter_count)
from ..programs.settings import flag_default
from ..sampling import TEMPERATURE
from .limits import (MAX_EXPRESSION, MAX_HAND_DIM, MAX_HAND_TOKENS, MAX_LAB_LENGTH, MAX_LAB_NAMES, MAX_LR,
                     MAX_ROW_NUMBERS, MAX_TEXT, MAX_TOP, MAX_VALUE, MAX_VECTOR, MAX_WINDOW)


@dataclass(frozen=True)
class Param:
    """One parameter of a sandbox, declared once for the command line and the API.

    kind: int, float, bool, str, or 'values' ({name: number}: NAME=VALUE words, or a JSON object).
    low..high: the range, checked alike on both sides; above=True leaves low out (a temperature
    that divides); at_most: a config field (vocab_size) that caps it once the model is known.
    default None, not required: "not given" (compute decides). many: a list of kind. flag: the
    command-line spelling when not --name ('--no-scale'). cli / web: where it is offered (a file
    path is for the command line only: a request never names a file).
    """
    name: str
    kind: object
    default: object = None
    low: float = None
    high: float = None
    help: str = ''
    group: str = 'settings'
    above: bool = False
    at_most: str = None
    required: bool = False
    positional: bool = False
    many: bool = False
    flag: str = None
    metavar: str = None
    cli: bool = True
    web: bool = True

    def shown_default(self):
        """The declared default as a flag takes it ('0 0.5 1 2' for a list), or None when there is
        none to show (None, an empty list, a bool switch, or a help that explains its own)."""
        if self.default in (None, ()) or self.kind is bool or '(default' in self.help:
            return None
        values = self.default if self.many else [self.default]
        return ' '.join(f"{v:g}" if isinstance(v, float) else str(v) for v in values)

    def help_text(self):
        """The help, then the declared default, so that no help text retypes it."""
        shown = self.shown_default()
        return self.help + (f" (default {shown})" if shown is not None else '')

    @property
    def range(self):
        """The numbers it takes (a checks.Range), or None for a parameter that is not a number."""
        return Range(self.kind, self.low, self.high, self.above) if self.kind in (int, float) else None

    def range_text(self):
        return self.range.text() if self.range else ''

    def check(self, value, where):
        """value within the range, else a UserError naming the parameter `where` spells."""
        if self.range is not None and value is not None:
            for v in (value if self.many else [value]):
                self.range.check(v, where)
        return value


@dataclass(frozen=True)
class Sandbox:
    """One sandbox: `lab NAME`, POST /api/NAME, and (page=True) the page /NAME."""
    name: str
    title: str                   # its label in the web navigation
    help: str                    # one line for `lab --help`
    description: str = ''        # for `lab NAME --help`
    params: tuple = ()
    model: str = 'numpy'         # what compute() is given: 'numpy', 'scalar', 'log' or None
    module: str = None           # the module, if not microgpt/lab/NAME.py (absolute or '.name')
    page: bool = True            # a web page and an API route (False: the terminal only)
    png: str = None              # what --png draws (the module's picture()); None: no --png
    picture_flag: str = '--png'
    numpy: bool = True           # False: it runs on the standard library alone (the scalar engine, a log)
    # what the page knows of each checkpoint before it asks: a function of the model's config
    # giving {key: value}, added to the checkpoint's entry of /api/config (api.Checkpoints.listing)
    about_model: object = None

    @property
    def module_name(self):
        m = self.module or '.' + self.name
        return 'microgpt.lab' + m if m.startswith('.') else m

    @property
    def reads_a_checkpoint(self):
        """Whether compute() is given the checkpoint's model (the numpy port's or the GPT of
        Values), so that the command takes --ckpt and the server reads it for the page."""
        return self.model in ('numpy', 'scalar')

    def param(self, name):
        return next(p for p in self.params if p.name == name)


# ---------------------------------------------------------------------------- shared parameters
def _text(help_text="a name, in characters the model was trained on (e.g. anna); on a model of running "
                    "text, a window of it: at most block_size + 1 characters, no BOS"):
    return Param('text', str, required=True, positional=True, metavar='TEXT', help=help_text, high=MAX_WINDOW)


SEED = Param('seed', int, 42, 0, MAX_SEED, help="random seed", group='sampling')
SAMPLE_NUM = {'lines': 5, 'text': 1}  # the Sampling sandbox's names, or continuations, per setting
SAMPLE_LENGTH = 200  # characters of a continuation of running text: a few lines of a play
# which attention to look at: the attention sandboxes share these three
WHERE = (Param('layer', int, 0, 0, MAX_N_LAYER - 1, metavar='L',
               group='what to look at', help="transformer block, 0..n_layer-1"),
         Param('head', int, 0, 0, MAX_N_HEAD - 1, metavar='H',
               group='what to look at', help="attention head, 0..n_head-1"),
         Param('query', int, None, 0, MAX_BLOCK_SIZE - 1, metavar='I', group='what to look at',
               help="query position, 0..(positions - 1): 0 is BOS for a name, the first character "
                    "of running text (default: the last)"))


# ---------------------------------------------------------------------------- the Step page's sizes
# The Step page asks the numpy engine's step first (drawn at once, the scalar engine's after it)
# on a model of more weights than this, where the scalar engine's step takes most of a second
STEP_NUMPY_FIRST_ABOVE = 15_000
# The scalar engine's step is a graph of Values over every weight at every position. Past this
# many weight-positions (a few seconds, half a GB) it is refused (step.py) and the page asks the
# numpy engine alone, which gives the same numbers
SCALAR_STEP_WORK = 6_000_000


def scalar_step_positions(config):
    """The most positions the scalar engine's step takes on a model of this config."""
    return max(1, SCALAR_STEP_WORK // parameter_count(config))


def step_about_model(config):
    """The Step page's questions about a checkpoint: ask the numpy engine's step first? how long
    a text may the scalar engine's step take?"""
    return {'step_numpy_first': parameter_count(config) > STEP_NUMPY_FIRST_ABOVE,
            'step_scalar_positions': scalar_step_positions(config)}


# ---------------------------------------------------------------------------- the sandboxes
SANDBOXES = [
    Sandbox('overview', 'Overview',
            help="next-character probabilities, loss and a sample for TEXT",
            description="For every position of [BOS] + TEXT (a name) or of TEXT (a window of running "
                        "text): the model's most likely next characters, the true one, its probability "
                        "and loss; then one sampled continuation.",
            png="the probability bars",
            params=(_text(),
                    Param('top', int, 5, 1, MAX_TOP, metavar='K', group='display',
                          help="how many most likely characters to show per position"),
                    Param('temperature', float, TEMPERATURE, 0, MAX_TEMPERATURE, group='sampling the continuation '
                          '(as in sample.py; the bars are always at temperature 1)',
                          help="for the continuation only (0 = greedy); below 1 safer, above 1 more "
                               "inventive"),
                    Param('seed', int, SEED.default, 0, MAX_SEED,
                          group='sampling the continuation (as in sample.py; '
                          'the bars are always at temperature 1)',
                          help="random seed for the continuation"))),
    Sandbox('attention', 'Attention',
            help="every step of one head's attention for one query of TEXT",
            description="q.k per dimension, scores, scaling, the causal mask, softmax, the weighted sum "
                        "of values, every head side by side, and the row statistics with and without "
                        "the sqrt(head_dim) scaling; on a RoPE model, the score of the query and one "
                        "key at every distance i - j.",
            png="a heatmap of every head of the layer",
            params=(_text(), *WHERE,
                    Param('key', int, None, 0, MAX_BLOCK_SIZE - 1, metavar='J', group='what to look at',
                          help="RoPE models: the key whose score with the query is shown at every distance "
                               "i - j, 0..query (default: the one the head weights most)"),
                    Param('scale', bool, True, flag='--no-scale',
                          group='what if (the model itself scales and uses temperature 1)',
                          help="do not divide the scores by sqrt(head_dim): watch the softmax sharpen"),
                    Param('temperature', float, 1.0, 0, MAX_TEMPERATURE, above=True,
                          group='what if (the model itself scales and uses temperature 1)',
                          help="divide the scores by this before the softmax"))),
    Sandbox('byhand', 'By hand', model=None,
            help="attention on q, k, v typed by hand: a three-token worked example, step by step",
            description="For the query token: q.k per dimension, the division by sqrt(d), e^score and their "
                        "sum, the weights, each w_j * v_j and the output; then the heads side by side and "
                        "W_O; the table of shapes and the memory of the score matrix. Each vector is a "
                        "quoted list of numbers; the defaults are the worked example's three tokens.",
            params=(Param('q', str, (), many=True, high=MAX_VECTOR, metavar='VEC',
                          group='the tokens (one vector per token, e.g. "0.9, 0.8, 0.2, 0.1")',
                          help="each token's query (default: the worked example's)"),
                    Param('k', str, (), many=True, high=MAX_VECTOR, metavar='VEC',
                          group='the tokens (one vector per token, e.g. "0.9, 0.8, 0.2, 0.1")',
                          help="each token's key (default: the worked example's)"),
                    Param('v', str, (), many=True, high=MAX_VECTOR, metavar='VEC',
                          group='the tokens (one vector per token, e.g. "0.9, 0.8, 0.2, 0.1")',
                          help="each token's value (default: the worked example's)"),
                    Param('tokens', str, (), many=True, metavar='NAME',
                          group='the tokens (one vector per token, e.g. "0.9, 0.8, 0.2, 0.1")',
                          help="their names, for the printout (default: kočka spí venku)"),
                    Param('query', int, 3, 1, MAX_HAND_TOKENS, metavar='I', group='the computation',
                          help="the query token, counted from 1"),
                    Param('n_head', int, 1, 1, MAX_HAND_DIM, metavar='H', group='the computation',
                          help="heads, each on its slice of d / H dimensions"),
                    Param('w_o', str, (), many=True, high=MAX_VECTOR, metavar='ROW', group='the computation',
                          help="W_O's rows, d of them, stored [n_out][n_in] (default: the identity)"),
                    Param('scale', bool, True, flag='--no-scale', group='the computation',
                          help="do not divide by sqrt(d): watch the softmax sharpen"),
                    Param('batch', int, 1, 1, 4096, metavar='B', group='the shapes table',
                          help="sequences in a batch"),
                    Param('length', int, 1024, 1, 10 ** 6, metavar='T', group='the shapes table',
                          help="tokens per sequence"),
                    Param('d_model', int, 4096, 1, 10 ** 6, metavar='D', group='the shapes table',
                          help="model width"),
                    Param('n_heads', int, 32, 1, 4096, metavar='H', group='the shapes table',
                          help="heads"),
                    Param('bytes', int, 2, 1, 8, metavar='N', group='the shapes table',
                          help="bytes per number: 2 for fp16 (default), 4 for fp32"))),
    Sandbox('phases', 'In phases',
            help="attention in phases on TEXT: tokens, Q/K/V, scores, mask, softmax, weighted sum, all heads",
            description="One head and one query, a phase at a time: each phase's numbers beside the "
                        "lines of microgpt/model.py's gpt() that compute it, read from the file.",
            params=(_text(), *WHERE)),
    Sandbox('autograd', 'Autograd', model=None, numpy=False,
            help="build an expression's graph of Values and backpropagate",
            description="Parses EXPR (numbers, variables, + - * / **, unary minus, exp(), log(), relu(), "
                        "parentheses; nothing is eval'ed), builds the graph, runs backward() and lists "
                        "every node with its grad.",
            png="the graph as Graphviz DOT; rendered to PNG beside it if `dot` is installed",
            picture_flag='--dot',
            params=(Param('expression', str, required=True, positional=True, metavar='EXPR',
                          high=MAX_EXPRESSION,
                          help='e.g. "(a + b) * c"; quote it for the shell, and put one that starts '
                               'with "-" after --, as in: autograd -- "-a" a=1'),
                    Param('values', 'values', {}, -MAX_VALUE, MAX_VALUE, positional=True,
                          metavar='NAME=VALUE',
                          help="a value for every variable of EXPR, e.g. a=2 b=-3 c=10"),
                    Param('lenient', bool, False, cli=False,
                          help="a variable without a value starts at 1, a value whose variable is "
                               "gone is dropped (the page, as its learner types)"))),
    Sandbox('scaling', 'Scaling', model=None,
            help="why the scores are divided by sqrt(d), and what attention costs, measured afresh",
            description="Var(q.k) = d, softmax saturation, three tokens by hand, one row with and "
                        "without scaling, the cost ratio n/(2D), the size of the score matrix; --part "
                        "shows one of the Scaling page's widgets instead.",
            png="Var(q.k), one row without and with scaling, saturation against d and the cost ratio",
            params=(Param('samples', int, 50_000, 2, 1_000_000, metavar='N', group='sampling',
                          help="dot products drawn per d for the variance; the standard error shrinks "
                               "like 1/sqrt(N)"),
                    Param('draws', int, 2000, 1, 100_000, metavar='N', group='sampling',
                          help="random rows for the medians of the row statistics"),
                    Param('row_d', int, 64, 1, 4096, metavar='D', group='sampling',
                          help=f"head size of the random row in section 4, with --draws x --row-d at "
                               f"most {MAX_ROW_NUMBERS:,} (try 256 to watch "
                               "the unscaled row saturate)"),
                    SEED,
                    Param('part', str, 'all', metavar='PART', group='one widget of the Scaling page',
                          help="all (the printout, default), or one widget: row (one attention row at "
                               "--row-d), variance, cost, index"),
                    Param('scale', bool, True, flag='--no-scale', group='one widget of the Scaling page',
                          help="row: do not divide the scores by sqrt(d)"),
                    Param('temperature', float, 1.0, 0, MAX_TEMPERATURE, above=True,
                          group='one widget of the Scaling page',
                          help="row: divide the scores by this before the softmax"),
                    Param('keys', int, 8, 2, 16, group='one widget of the Scaling page',
                          help="row: keys in the random row"),
                    Param('scores', float, (), -1e6, 1e6, many=True, metavar='S',
                          group='one widget of the Scaling page',
                          help="row: these unscaled scores q.k instead of a random row (the page sends "
                               "a model's)"),
                    Param('n', int, 1024, 1, 10 ** 7, group='one widget of the Scaling page',
                          help="cost: sequence length n"),
                    Param('D', int, 768, 1, 10 ** 6, group='one widget of the Scaling page',
                          help="cost: model width D = n_head x head_dim; the default is GPT-2 small's"),
                    Param('tab', str, 'scores', group='one widget of the Scaling page',
                          help="index: scores (bhqd,bhkd->bhqk, default), output or projection"),
                    Param('sizes', 'values', {}, 1, 10 ** 6, positional=True, metavar='INDEX=SIZE',
                          help="index: sizes of the indices b h q k d t c e, e.g. h=12 (default: GPT-2 "
                               "small's b=1 h=12 q=k=d=64)"))),
    Sandbox('loss', 'Loss', model='log', numpy=False,
            help="training and validation loss curves from training logs, several side by side",
            description="Reads the JSON-lines logs train.py writes beside the checkpoint (one or more: "
                        "several runs are drawn on one picture, each with its own marks).",
            png="the curves",
            params=(Param('also', str, (), many=True, cli=False, metavar='ID', high=MAX_TEXT,
                          help="the web page's other checkpoints (by id) whose logs are drawn beside "
                               "the chosen one's"),
                    Param('width', int, 60, 20, 1000, group='display',
                          help="chart width in characters"),
                    Param('height', int, 12, 5, 500, group='display',
                          help="chart height in lines"),
                    Param('unit', str, 'nats', group='display', high=8,
                          help="nats: the loss per token, as training minimizes it; bits: bits per character "
                               "(loss x tokens / characters / ln 2), which compares a character model and a "
                               "byte-pair model of one text"))),
    Sandbox('sampling', 'Sampling',
            help="the next-character distribution at several temperatures, top-k, samples",
            description="After [BOS] + PROMPT: the next-character probabilities at each temperature "
                        "(0 = greedy) with their entropy, what top-k keeps, and a few names drawn at "
                        "each setting, marked as in the training data or new. On a model of running "
                        "text: after PROMPT, no BOS, and continuations of --length characters.",
            params=(Param('prompt', str, '', positional=True, metavar='PROMPT', high=MAX_WINDOW,
                          help="how the names start (default: empty, the first character is drawn too); "
                               "running text: what the continuations follow, any length (the model sees "
                               "its last block_size characters; empty: after a newline)"),
                    Param('temperatures', float, (0.0, 0.5, 1.0, 2.0), 0, MAX_TEMPERATURE, many=True,
                          metavar='T', group='sampling',
                          help="temperatures to compare, 0 = greedy"),
                    Param('top_k', int, 5, 1, MAX_VOCAB_SIZE, at_most='vocab_size', metavar='K',
                          group='sampling', help="the top-k cut to show, 1..vocab_size"),
                    Param('num', int, None, 0, MAX_LAB_NAMES, metavar='N', group='sampling',
                          help="names (running text: continuations) per setting, 0 for the distribution "
                               f"alone (default {SAMPLE_NUM['lines']} names, {SAMPLE_NUM['text']} continuation)"),
                    Param('length', int, None, 1, MAX_LAB_LENGTH, metavar='N', group='sampling',
                          help="running-text models: characters per continuation, as sample.py --length "
                               f"(default {SAMPLE_LENGTH})"),
                    Param('names_at', float, (), 0, MAX_TEMPERATURE, many=True, metavar='T', group='sampling',
                          help="draw the names (or continuations) at these temperatures only (default: "
                               "at each one compared)"),
                    SEED,
                    Param('data', str, None, metavar='PATH', group='sampling', web=False,
                          help="the training names, to mark samples as seen or new (default: the data "
                               "the checkpoint was trained on, when it can still be read)"))),
    Sandbox('step', 'Lesson 04 step', model='scalar', about_model=step_about_model,
            help="one training step on TEXT: forward, backward, Adam, the loss after",
            description="The loss per position, dL/dlogits, the gradient's norm at each stage and per "
                        "matrix, Adam on one weight, and each position's p(true next) before and after "
                        "the update. The checkpoint file is not changed.",
            png="the gradient norm per matrix and p(true next) before/after",
            params=(_text(),
                    Param('lr', float, None, 0, MAX_LR, above=True, metavar='LR', group='the step',
                          help="learning rate (default: the one the checkpoint was trained with, "
                               f"else train.py's {flag_default('lr'):g})"),
                    Param('param', str, None, metavar='NAME[ROW][COL]', group='the step', high=MAX_TEXT,
                          help="the weight whose Adam update to show, e.g. 'layer0.attn_wq[3][5]' "
                               "(quote it; default: the weight with the largest gradient)"),
                    Param('engine', str, None, metavar='ENGINE', group='the step', high=MAX_TEXT,
                          help="who takes the forward and backward: scalar (microgpt's own, as "
                               "train.py) or numpy (the numpy training path: the same numbers, a "
                               "second faster on a 4x64 model) (default: scalar, or numpy where the "
                               "scalar engine's graph of TEXT would be too large, as on a model of "
                               "running text's whole block)"))),
    Sandbox('embeddings', 'Embeddings',
            help="wte on its two principal components, nearest neighbours, wpe similarity",
            description="The token embeddings (rows of wte) projected on their two principal "
                        "components, vowels marked; each character's nearest neighbours by cosine "
                        "similarity; the cosine similarity of the position embeddings (a RoPE model "
                        "has none).",
            png="the scatter plot and the wpe similarity matrix",
            params=(Param('neighbours', int, 3, 1, MAX_VOCAB_SIZE, metavar='K', group='display',
                          help="nearest neighbours listed per character"),)),
    Sandbox('tokens', 'Tokens',
            help="TEXT cut into the model's tokens: ids, bytes, the merges that made them",
            description="Each token of TEXT with its id, bytes and text (characters, or a byte-pair "
                        "model's merged bytes); the first merges of the checkpoint's table, in the "
                        "order learned; the ids as the model is fed them.",
            params=(Param('text', str, required=True, positional=True, metavar='TEXT', high=MAX_TEXT,
                          help="any text (a character model: only the characters it was trained on)"),
                    Param('merges', int, 20, 0, MAX_VOCAB_SIZE, metavar='N', group='display',
                          help="how many merges of the table to list"))),
]

# Pages that are not sandboxes, and their API routes: {URL path: the api.Lab method it calls}
# (the Training page's runs, runs.py; the Exercises page's list and checks, exercises/web.py).
OTHER_PAGES = [('training', 'Training'), ('exercises', 'Exercises')]
OTHER_ROUTES = {'/api/train/start': 'train_start', '/api/train/stop': 'train_stop', '/api/train/status': 'train_status',
                '/api/exercises': 'exercises', '/api/exercises/check': 'exercises_check'}


def get(name):
    """The sandbox called `name` (the command and the route), or None."""
    return next((s for s in SANDBOXES if s.name == name), None)


def pages():
    """[(page name, navigation label)] in the navigation's order: each sandbox with a page,
    then the other pages."""
    return [(s.name, s.title) for s in SANDBOXES if s.page] + list(OTHER_PAGES)


# ---------------------------------------------------------------------------- checks the model decides
def compute_on_model(sandbox, loaded, params, spell):
    """The sandbox's compute() on a loading.Loaded checkpoint, for the command line and the API
    alike: first each value whose Param says at_most='field' is checked against the model's
    config.field (top_k at most vocab_size; a layer or head the model lacks is the sandbox's
    own check); the numpy port's arithmetic runs under no_overflow (the scalar step says so
    itself). spell: how the caller names a parameter."""
    from .loading import no_overflow
    ckpt, model = loaded
    for p in sandbox.params:
        limit = getattr(model.config, p.at_most) if p.at_most else None
        if limit is not None and params.get(p.name) is not None and params[p.name] > limit:
            raise UserError(f"{spell(p)} is {params[p.name]}, but this model's {p.at_most} is {limit}: "
                            f"give {p.low}..{limit}")
    with no_overflow() if sandbox.model == 'numpy' else contextlib.nullcontext():
        return importlib.import_module(sandbox.module_name).compute(model, ckpt=ckpt, **params)


def read_values(given, param, where):
    """A 'values' parameter as {name: float}, from the command line's NAME=VALUE words
    (['a=2', 'b=-3']) or a page's JSON object ({'a': 2, 'b': -3}): each value a number within
    the Param's range, which a nan or an infinity never is. where: how the caller names it."""
    if isinstance(given, dict):
        pairs = list(given.items())
    elif isinstance(given, list):
        pairs = [word.partition('=')[::2] for word in given]
        for word, (name, _) in zip(given, pairs):
            if '=' not in word or not name.strip().isidentifier():
                raise UserError(f"{short(word)} is not an assignment: give each variable as name=value, e.g. a=2")
    else:
        raise UserError(f"{where} must be an object of {{name: number}}")
    values = {}
    for name, value in pairs:
        name = name.strip()
        if name in values:
            raise UserError(f"{short(name)} is given twice")
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if isinstance(value, bool) or not param.low <= number <= param.high:
            raise UserError(f"{short(f'{name}={value}')}: the value must be a number in "
                            f"{param.low:g}..{param.high:g}")
        values[name] = number
    return values
