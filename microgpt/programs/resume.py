"""
The resume rule: what `train.py --resume` (and --init, and --reproduce-original) does with each
setting, in one table, and the check of a saved run's state before anything trusts it.

A fresh run takes each flag as given, or its default, which `train.py --help` shows. A resumed
run keeps what decides its losses (ON_RESUME's SAME), may train further (MORE), takes how it is
computed and saved from the run unless told otherwise (HABIT), and the model's size is always
the checkpoint's (MODEL). run.Run calls `resolve` before the first step; train.py prints
`resume_rule()` in its --help. Part of the reading guide's appendix, "What makes a run safe".
"""

import math
import os

from . import original
from ..edge.checkpoint import DATA_MODES, read_checkpoint
from ..edge.errors import UserError
from ..edge.limits import MAX_SEED
from ..model import parameter_shapes

ENGINES = ('scalar', 'numpy', 'torch')  # train.py --engine
DTYPES = ('float64', 'float32', 'bfloat16')  # train.py --dtype
MAX_STEPS = 10 ** 9        # a billion steps: more than any run of this project will take
MAX_BATCH_SIZE = 100_000   # names per step

# ---------------------------------------------------------------------------- the resume rule
# What --resume does with each setting. A fresh run takes the flag, or its default in --help.
SAME = 'kept'              # decides the losses: the run's value; a different one is refused
MORE = 'may grow'          # --steps: the run's total unless a larger one is given
HABIT = 'the run\'s unless given'  # how the run is computed, evaluated and saved, not its losses
MODEL = 'the checkpoint\'s'  # the model's size (also with --init); a different value is refused
ON_RESUME = {
    'data': SAME,          # the same content (its hash is checked), perhaps at a new path
    'val_size': SAME, 'shuffle': SAME, 'seed': SAME, 'lr': SAME, 'batch_size': SAME,
    'reproduce_original': SAME,
    'data_mode': SAME,     # names, one a line, or running text (absent from older checkpoints: lines)
    'steps': MORE,         # the learning rate's decay is spread over the new total (printed)
    'engine': HABIT, 'dtype': HABIT, 'eval_every': HABIT, 'save_every': HABIT,
    'n_layer': MODEL, 'n_embd': MODEL, 'n_head': MODEL, 'block_size': MODEL,
}
SAVED = [name for name, rule in ON_RESUME.items() if rule != MODEL]  # train_state['run']'s fields


def resume_rule():
    """ON_RESUME in words, for train.py --help."""
    flag = lambda name: '--no-shuffle' if name == 'shuffle' else '--' + name.replace('_', '-')  # noqa: E731
    flags = lambda rule: ', '.join(flag(n) for n, r in ON_RESUME.items() if r == rule)  # noqa: E731
    return (f"{flags(SAME)} stay the run's (they decide its losses); --steps may grow; "
            f"{flags(HABIT)} are the run's unless given; the model's size is the checkpoint's")


# ---------------------------------------------------------------------------- flags
def resolve(args, given):
    """Settle every flag the command line did not give (`given`: the names it gave): from the
    run being resumed (ON_RESUME), from the original's recipe (--reproduce-original), else the
    default shown in --help. Returns the checkpoint read for --resume or --init (validated),
    or None for a fresh run."""
    saved, ckpt = {}, None
    if args.resume:
        if args.init:
            raise UserError("--resume and --init cannot be combined: --resume continues --out, "
                            "--init starts a new run from another checkpoint")
        ckpt = read_checkpoint(args.out)
        if not ckpt['train_state']:
            raise UserError(f"{args.out} has no training state to resume: start a new run "
                            f"with --init {args.out} instead")
        check_train_state(args.out, ckpt['train_state'], ckpt['config'])
        saved = {'data_mode': 'lines', **ckpt['train_state']['run']}  # a run saved before text mode read names
    elif args.reproduce_original:  # refuse what would change the original's run, then it sets the rest
        original.check_flags(init=args.init, shuffle=args.shuffle if 'shuffle' in given else None,
                             **{name: getattr(args, name) if name in given else None for name in ORIGINAL_FLAGS})
        for name in ORIGINAL_FLAGS:
            if name not in given:
                setattr(args, name, original.ORIGINAL[name])
    elif args.init:  # n_head: only for the tutorial's export, which does not record it
        ckpt = read_checkpoint(args.init, n_head=args.n_head if 'n_head' in given else None)
        if 'data_mode' not in given:  # a model of running text goes on reading running text
            args.data_mode = ckpt['data_mode']
    for name, rule in ON_RESUME.items():
        value, flag = getattr(args, name), '--' + name.replace('_', '-')
        if rule == MODEL:
            if ckpt is not None:
                theirs = getattr(ckpt['config'], name)
                if name in given and value != theirs:
                    raise UserError(f"{flag} {value} contradicts the checkpoint's {name} {theirs}: drop the flag")
                setattr(args, name, theirs)
        elif name in saved and name not in given:
            setattr(args, name, saved[name])
        elif rule == SAME and name in saved and name != 'data' and value != saved[name]:
            raise UserError(f"{flag} {value} differs from the run being resumed ({saved[name]}): "
                            "drop the flag to resume exactly")
    if args.resume and 'data' not in given and saved['data'] is not None and not os.path.exists(saved['data']):
        raise UserError(f"the run's data file {saved['data']} is gone: if it moved, pass "
                        "--data with its new path (its content is checked against the run's)")
    if args.reproduce_original and 'num_samples' not in given:
        args.num_samples = original.ORIGINAL['num_samples']
    return ckpt


# What --reproduce-original fixes to the original script's values (microgpt/programs/original.py).
ORIGINAL_FLAGS = ('seed', 'lr', 'steps', 'batch_size', 'val_size', 'n_layer', 'n_embd', 'n_head', 'block_size')


def _count(lo, hi=2 ** 63):
    return lambda x: isinstance(x, int) and not isinstance(x, bool) and lo <= x < hi


def _is_bool(x):
    return isinstance(x, bool)


def _positive_float(x):
    return isinstance(x, float) and math.isfinite(x) and x > 0


# train_state['run'][name]: (required, check, what it must be). Fields added in later versions
# are optional: a checkpoint saved before them resumes with their defaults.
RUN_FIELDS = {
    'data': (True, lambda v: v is None or isinstance(v, str) and v != '' and '\0' not in v, 'a file name or null'),
    'val_size': (True, lambda v: v is None or _count(0)(v) or isinstance(v, float) and 0 < v < 1,
                 'a count, a fraction or null'),
    'shuffle': (True, _is_bool, 'true or false'),
    'seed': (True, _count(0, MAX_SEED + 1), f'an integer from 0 to {MAX_SEED}'),
    'lr': (True, _positive_float, 'a positive number'),
    'steps': (True, _count(1, MAX_STEPS + 1), f'an integer from 1 to {MAX_STEPS}'),
    'batch_size': (False, _count(1, MAX_BATCH_SIZE + 1), f'an integer from 1 to {MAX_BATCH_SIZE}'),
    'reproduce_original': (False, _is_bool, 'true or false'),
    'data_mode': (False, lambda v: v in DATA_MODES, ' or '.join(DATA_MODES)),
    'engine': (False, lambda v: v in ENGINES, ' or '.join(ENGINES)),
    'dtype': (False, lambda v: v in DTYPES, ' or '.join(DTYPES)),
    'eval_every': (False, _count(0), 'a count'),
    'save_every': (False, _count(0), 'a count'),
}


def check_train_state(path, state, config):
    """--resume trusts the saved step, settings and Adam moments: check each one's type and range."""
    n_params = sum(n_out * n_in for n_out, n_in in parameter_shapes(config).values())
    run, adam = state.get('run'), state.get('adam')
    problem = None
    if not _count(0)(state.get('step')):
        problem = "its step is not a count"
    elif not isinstance(run, dict):
        problem = "its run settings are missing"
    else:
        for name, (required, ok, what) in RUN_FIELDS.items():
            if (name in run or required) and not (name in run and ok(run[name])):
                problem = f"its {name} is {_short(run.get(name, 'missing'))}, not {what}"
                break
    if problem:
        pass
    elif not (isinstance(state.get('data_sha256'), str) and len(state['data_sha256']) == 64):
        problem = "its data fingerprint is missing"
    elif not (isinstance(adam, dict) and _count(0)(adam.get('t'))
              and all(isinstance(adam.get(k), list) and len(adam[k]) == n_params
                      and all(isinstance(x, float) and math.isfinite(x) for x in adam[k])
                      for k in ('m', 'v'))
              and min(adam['v'], default=0.0) >= 0):  # a mean of squares: negative would make sqrt complex
        problem = "its Adam moments are missing, the wrong size, or not finite"
    elif state['step'] > run['steps'] or not (state.get('val_loss') is None
                                               or isinstance(state['val_loss'], float)):
        problem = "its step or validation loss is inconsistent"
    if problem:
        raise UserError(f"{path} has a damaged training state ({problem}): it cannot be resumed; "
                        f"start a new run with --init {path}")


def _short(x):
    text = repr(x)
    return text if len(text) <= 40 else text[:37] + '...'
