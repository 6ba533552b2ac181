"""
The lab's caps: what a lab command's flag, or a request to the web lab, may hand in.

Each is typed by a learner and drawn on one page, so the caps are small: a size that makes
sense, checked with one line, not a defence against a crafted request. The caps every program shares (model sizes, files, seeds,
temperatures) are microgpt/edge/limits.py's; which parameter of a sandbox takes which cap is
declared with the sandbox (registry.py).
"""

from ..edge.limits import MAX_WEIGHT_DECAY
from ..programs.settings import flag_default

MAX_ROW_NUMBERS = 1_000_000  # scaling: --draws x --row-d; section 4 holds 16 bytes x 8 keys
                             # for each, about 128 MB at the cap
MAX_TEXT = 64               # characters of a name, prompt or parameter name in a request
MAX_EXPRESSION = 1000       # characters of an autograd expression: one to read, not a program
MAX_EXPRESSION_DEPTH = 200  # nesting levels of one (a chain a+b+c+... counts one per operator)
MAX_VALUE = 1e300           # an autograd variable's value, at most this in size
MAX_TOP = 1000              # most likely characters per position: more bars than any screen shows
MAX_LAB_NAMES = 100         # names `lab sampling` and the Sampling page draw per setting (sample.py's
                            # own --num goes to MAX_NAMES: a file of names, not a table)
MAX_WINDOW = 1025           # characters of a window of running text (or a prompt) in a request: a
                            # block of up to 1024 positions and its next character (a name: MAX_TEXT)
MAX_LAB_LENGTH = 2000       # characters of one continuation `lab sampling` draws (sample.py's --length
                            # goes to MAX_LENGTH: a stream to read, not a page)
MAX_LAB_CHARACTERS = 10_000  # characters of running text one `lab sampling` draws in all: about 20 s
                             # of the Shakespeare recipe's model, one character a forward pass
MAX_LR = 1e3                # one step's learning rate (lab step); above about 1 the loss goes up,
                            # and the page says so
MAX_VECTOR = 200            # characters of one typed vector (by hand): eight numbers with room to spare
MAX_HAND_TOKENS = 6         # tokens by hand, as in the 3D tutorial's sandbox: every number readable
MAX_HAND_DIM = 8            # numbers per vector by hand
MAX_HAND_ABS = 5.0          # |each number| by hand: 8 x 5 x 5 = 200 is the largest score, e^200 a float
MAX_BODY = 16 * 1024        # bytes of one request: the largest, an expression, is 1000 characters
MAX_RUN_LOG_READ = 1 << 18  # bytes of a run's log sent per status call: the Training page asks again
# The Training page's fields, each a train.py flag: (low, high, default), an integer or a number
# as its default. Sizes a laptop trains in minutes, from train.py's own defaults but --steps. The
# page draws them in this order, with the flag's --help; a new flag of train.py is one more line.
RUN_LIMITS = {
    'steps': (1, 20_000, 300),
    'n_layer': (1, 4, flag_default('n_layer')),
    'n_embd': (2, 64, flag_default('n_embd')),       # must divide by n_head
    'n_head': (1, 8, flag_default('n_head')),
    'block_size': (2, 32, flag_default('block_size')),
    'batch_size': (1, 256, flag_default('batch_size')),  # more than one is the numpy engine's strength
    'lr': (1e-5, 1.0, flag_default('lr')),
    'weight_decay': (0.0, MAX_WEIGHT_DECAY, flag_default('weight_decay')),
    'dropout': (0.0, 0.9, flag_default('dropout')),  # train.py takes any below 1; the page stops at 0.9
    'eval_every': (0, 20_000, flag_default('eval_every')),  # train.py's schedule: the command line's cost
    'save_every': (0, 20_000, flag_default('save_every')),
}
# A run of running text may be as large as README's Shakespeare recipe (4 x 128, block 64, batch
# 12: a minute or two for 1000 steps on the numpy engine)
TEXT_RUN_LIMITS = {**RUN_LIMITS, 'n_embd': (2, 128, flag_default('n_embd')),
                   'block_size': (2, 256, flag_default('block_size'))}
