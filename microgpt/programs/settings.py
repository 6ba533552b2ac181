"""
A training run's settings: every flag of train.py declared once, on a frozen record, and
`resolve_settings`, which turns the command line (and, on --resume, the run being continued) into it.

Each field of `Settings` is a flag: its default, group, help, the values it may take (checked on
the command line and in a saved run alike), and its rule on --resume (ON_RESUME).
"""

import argparse
import dataclasses
import os
from dataclasses import dataclass, field
from typing import Optional

from ..edge import limits
from ..edge.checkpoint import DATA_MODES, SavedRun, damaged
from ..edge.checks import MLPS, RUNGS, Range, short
from ..edge.errors import UserError
from . import cli, original

ENGINES = ('scalar', 'numpy', 'torch')
BPE_VOCAB_SIZE = 512  # --tokenizer bpe's default: 255 merges, about 2 characters a token on English text
BPE_VOCAB_MOST = 16_384  # each merge scans every pair's count: 4,096 tokens of tiny Shakespeare take
                         # 392 s to learn, 256 take 3.4 s (bench/bpe_speed.py); GPT-2 has 50,257
CORE_ENGINES = ENGINES[:2]  # those that need no PyTorch: sample.py's, and the lab's
DTYPES = ('float64', 'float32', 'bfloat16')
ENGINE_DTYPES = {'scalar': ('float64',), 'numpy': ('float64', 'float32'), 'torch': DTYPES}
DEVICES = ('cpu', 'cuda', 'mps')
TOKENIZERS = ('char', 'bpe')  # microgpt/tokenizer.py's characters | microgpt/bpe.py's byte-pair merges
TEXT_SAMPLE_LENGTH = 200  # characters of running text train.py prints when training ends
SAME, MORE, UNLESS_GIVEN, MODEL = 'kept', 'may grow', "the run's unless given", "the checkpoint's"


class Kind:
    """The values a setting that is not a number takes, with a checks.Range's parse, holds and what."""

    def __init__(self, parse, holds, what, choices=None):
        self.parse, self.holds, self.what, self.choices = parse, holds, what, choices


def one_of(choices):
    return Kind(None, lambda v: v in choices, ' or '.join(choices), choices)


POSITIVE = Range(float, 0, above=True)
SWITCH = Kind(None, lambda v: isinstance(v, bool), "true or false")
PATH = Kind(None, lambda v: v is None or isinstance(v, str) and v != '' and '\0' not in v, "a file name or null")
FRACTION, COUNT = Range(float, 0, 1, above=True, below=True), Range(int, 0)


def count_or_fraction(text):
    """--val-size's argparse type: a fraction strictly between 0 and 1 (0.1), or a count (5000)."""
    try:
        return (FRACTION if any(c in text for c in '.eE') else COUNT).parse(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text} is not a fraction between 0 and 1 (exclusive) nor a "
                                         "count of 0 or more: give e.g. 0.1 or 5000") from None


VAL_SIZE = Kind(count_or_fraction, lambda v: v is None or COUNT.holds(v) or FRACTION.holds(v),
                "a count, a fraction or null")


def flag(default, group, help, rule=None, kind=None, **argparse_options):
    """A field of Settings that is also a flag of train.py."""
    return field(default=default, metadata=dict(group=group, help=help, rule=rule, kind=kind,
                                                options=argparse_options))


@dataclass(frozen=True)
class Settings:
    """One training run's settings, settled: what train.py's stages and the trainers read."""
    # ---- data
    data: Optional[str] = flag(None, 'data', "UTF-8 text file, one name (document) per line, or with --data-mode "
                               "text any text; normalized to NFC (default: the census first names bundled "
                               "with the `names` package)", SAME, PATH, metavar='PATH')
    data_mode: str = flag('lines', 'data', "lines: one document per line, each trained as BOS + line + BOS; use "
                          "it for names, words, short items. text: the whole file as one stream of characters "
                          "(newlines included), trained on random windows of --block-size + 1; use it for prose, "
                          "plays, code, anything whose lines run into each other", SAME, one_of(DATA_MODES))
    val_size: object = flag(None, 'data', "held out for validation: a count (names, or characters with --data-mode "
                            "text) or a fraction such as 0.1 (default: 10%%, at most 1000 names; 0 = none). "
                            "Running text is split by position: the last characters validate", SAME, VAL_SIZE,
                            metavar='N')
    shuffle: bool = flag(True, 'data', "lines mode: keep the file's order (default: shuffled once with --seed)",
                         SAME, SWITCH, switch='--no-shuffle')
    tokenizer: str = flag('char', 'data', "char: every character of the data one token (microgpt's); bpe: the 256 "
                          "bytes and the byte-pair merges learned from the training part (microgpt/bpe.py), "
                          "--vocab-size tokens in all; --init takes the checkpoint's", SAME, one_of(TOKENIZERS))
    # ---- model (--init and --resume take the checkpoint's)
    n_layer: int = flag(1, 'model', "transformer blocks (1-4 is sensible here)", MODEL,
                        Range(int, 1, limits.MAX_N_LAYER))
    n_embd: int = flag(16, 'model', "embedding width (must divide by --n-head)", MODEL,
                       Range(int, 1, limits.MAX_N_EMBD))
    n_head: int = flag(4, 'model', "attention heads per block", MODEL, Range(int, 1, limits.MAX_N_HEAD))
    block_size: int = flag(16, 'model', "longest sequence in tokens (names longer than this are cut, and train.py "
                           "says how many; 64 or more for running text)", MODEL, Range(int, 1, limits.MAX_BLOCK_SIZE))
    vocab_size: Optional[int] = flag(BPE_VOCAB_SIZE, 'model', "--tokenizer bpe: tokens in the vocabulary, the "
                                     "256 bytes, the merges and BOS, so 257 (bytes only) to "
                                     f"{BPE_VOCAB_MOST:,} (with --tokenizer char it is the data's "
                                     "characters + 1)", MODEL, Range(int, 257, BPE_VOCAB_MOST), metavar='N')
    # the rungs from microgpt to a modern GPT (docs/modern.md), each off by default: microgpt's model
    rope: bool = flag(False, 'model', "RoPE: turn each head's query and key, pair of numbers by pair, by angles that "
                      "grow with the position, instead of adding a learned position embedding (no wpe); needs an "
                      "even head_dim. Off by default: microgpt's", kind=SWITCH, negatable=True)
    mlp: str = flag('relu', 'model', "the MLP's nonlinearity: relu (microgpt's), gelu (GPT-2's smooth relu) or swiglu "
                    "(Llama's gated MLP: silu(x mlp_gate) times x mlp_fc1, 8/3 x n_embd wide, so that its three "
                    "matrices hold about what relu's two do)", kind=one_of(MLPS))
    norm_gains: bool = flag(False, 'model', "a learned gain on every rmsnorm, and a final rmsnorm with its gain before "
                            "lm_head. Off by default: microgpt's plain rmsnorm", kind=SWITCH, negatable=True)
    qk_norm: bool = flag(False, 'model', "QK-norm: rmsnorm each head's query and key before their product, which keeps "
                         "the attention scores from growing. Off by default: microgpt's", kind=SWITCH, negatable=True)
    n_kv_head: Optional[int] = flag(None, 'model', "grouped-query attention: heads of keys and values, each shared by "
                                    "--n-head / N query heads; N divides --n-head; 1 is multi-query attention "
                                    "(default --n-head: one for each query head, microgpt's)",
                                    kind=Range(int, 1, limits.MAX_N_HEAD), metavar='N')
    tie_embeddings: bool = flag(False, 'model', "tied embeddings: score the next token with wte itself, one matrix for "
                                "the tokens in and out (no lm_head). Off by default: microgpt's",
                                kind=SWITCH, negatable=True)
    init: Optional[str] = flag(None, 'model', "start from this checkpoint's weights, config and vocabulary, with a "
                               "fresh optimizer", metavar='CKPT')
    # ---- optimization
    steps: int = flag(1000, 'optimization', "training steps; with --resume, the total to reach: the learning "
                      "rate's decay is then spread over the new total, so it rises at the resumed step (printed)",
                      MORE, Range(int, 1))
    lr: float = flag(0.01, 'optimization', "peak Adam learning rate, decayed linearly to 0 over --steps",
                     SAME, POSITIVE)
    weight_decay: float = flag(0.0, 'optimization', "shrink every weight by lr x this at each step, apart from "
                               "Adam's moments (AdamW's decoupled decay; 0 is microgpt's plain Adam): it keeps "
                               "a model that memorizes its training data in check", SAME,
                               Range(float, 0, limits.MAX_WEIGHT_DECAY), metavar='WD')
    dropout: float = flag(0.0, 'optimization', "in training, zero each number at nanoGPT's dropout places (the "
                          "stream's start, the attention weights, each block's two branches) with this "
                          "probability and scale the rest by 1/(1-P); evaluation and sampling never drop. "
                          "0 is microgpt's model; the scalar engine draws the masks with numpy", SAME,
                          Range(float, 0, 1, below=True), metavar='P')
    batch_size: int = flag(1, 'optimization', "names (or running-text windows) per step (1 is microgpt's); the "
                           "loss is the mean over every predicted token of the batch", SAME,
                           Range(int, 1), metavar='B')
    seed: int = flag(42, 'optimization', f"seed for the initial weights and the data order, 0..{limits.MAX_SEED}",
                     SAME, Range(int, 0, limits.MAX_SEED))
    # ---- engine (the same losses either way; only the speed differs)
    engine: str = flag('scalar', 'engine', "scalar: the Value autograd of microgpt/ (the teaching path); numpy: "
                       "src/backprop, every gradient derived by hand, much faster; torch: src/torchgpt, PyTorch's "
                       "autograd (needs PyTorch), also data-parallel under torchrun", UNLESS_GIVEN, one_of(ENGINES))
    device: str = flag('cpu', 'engine', "--engine torch only: where it computes (under torchrun, cuda means each "
                       "rank's own GPU)", kind=one_of(DEVICES))
    dtype: str = flag('float64', 'engine', "the weights' precision: float64 (the engines agree to rounding; the "
                      "scalar engine's only one); --engine numpy also float32 (about twice as fast on wide models, "
                      "the same checkpoint format); --engine torch also float32 and bfloat16 (float32 weights, "
                      "bfloat16 products), faster on GPUs", UNLESS_GIVEN, one_of(DTYPES))
    reproduce_original: bool = flag(False, 'engine', "the original single-file microgpt.py's run, number for "
                                    "number: its data order, weights, 1000 steps and 20 samples at temperature "
                                    "0.5, all from one generator seeded 42 (no held-out split; refuses flags "
                                    "that would change it)", SAME, SWITCH)
    threads: Optional[int] = flag(None, 'engine', "numpy engine: BLAS threads (default: OPENBLAS_NUM_THREADS if "
                                  "set, else the fastest of 1 thread, every core, or the batch split over the cores, timed on "
                                  "the run's first steps)",
                                  kind=Range(int, 1), metavar='N')
    unfused: bool = flag(False, 'engine', "scalar engine only: build the graph from microgpt/ops.py's composed "
                         "blocks as microgpt does, instead of fused.py's (same losses, about 6x slower: "
                         "bench/train_speed.py measures it)", kind=SWITCH)
    # ---- output
    out: str = flag('out/model.json', 'output', "checkpoint file, a .json name, or .safetensors for the compact "
                    "binary format; the log goes beside it as .log.jsonl", metavar='PATH')
    resume: bool = flag(False, 'output', "continue the run saved at --out: weights, Adam moments, step and data "
                        "order (any engine may continue it)", kind=SWITCH)
    force: bool = flag(False, 'output', "start a fresh run even if --out holds a trained model, replacing it",
                       kind=SWITCH)
    save_every: int = flag(100, 'output', "also save the checkpoint every N steps (0 = only at the end)",
                           UNLESS_GIVEN, Range(int, 0), metavar='N')
    eval_every: int = flag(200, 'output', "validation loss every N steps (0 = only at the end)",
                           UNLESS_GIVEN, Range(int, 0), metavar='N')
    num_samples: int = flag(10, 'output', "names to sample when training ends (20 with --reproduce-original; "
                            f"running text: any but 0 prints {TEXT_SAMPLE_LENGTH} characters)",
                            kind=Range(int, 0, limits.MAX_NAMES), metavar='N')
    # ---- not flags: where torchrun placed this process ((0, None) without torchrun)
    rank: int = 0
    world_size: Optional[int] = None

    def saved(self):
        """The run as its checkpoint records it (TrainState.run), the data as an absolute path
        (so that --resume works from any folder)."""
        return SavedRun(**{name: getattr(self, name) for name in SAVED if name != 'data'},
                        data=self.data and os.path.abspath(self.data))

    def describe(self, start_step, threads=None):
        """The resolved configuration line train.py prints."""
        return (f"training: steps={self.steps} lr={self.lr}"
                + (f" weight_decay={self.weight_decay:g}" if self.weight_decay else "")
                + (f" dropout={self.dropout:g}" if self.dropout else "")
                + f" seed={self.seed} shuffle={self.shuffle} "
                f"start_step={start_step} out={self.out} save_every={self.save_every} eval_every={self.eval_every} "
                f"engine={self.engine}{'-unfused' * self.unfused} batch_size={self.batch_size} dtype={self.dtype}"
                + (f" threads={threads}" if threads else "")
                + (f" device={self.device} ranks={self.world_size or 1}" if self.engine == 'torch' else "")
                + f" data_mode={self.data_mode}" + (f" init={self.init}" if self.init else "")
                + (f" tokenizer=bpe vocab_size={self.vocab_size}" if self.tokenizer == 'bpe' else ""))


GROUPS = {'model': "model (--init and --resume take the checkpoint's)",
          'engine': "engine (the same losses either way; only the speed differs)"}
FLAGS = {f.name: f.metadata for f in dataclasses.fields(Settings) if f.metadata}
ON_RESUME = {name: meta['rule'] for name, meta in FLAGS.items() if meta['rule']}
SAVED = [name for name, rule in ON_RESUME.items() if rule != MODEL]


def flag_default(name):  # the lab's Training page and `lab step` start from train.py's own
    return Settings.__dataclass_fields__[name].default


def resume_rule():  # ON_RESUME in words, for --help
    flags = lambda rule: ', '.join(flag_name(n) for n, r in ON_RESUME.items() if r == rule)  # noqa: E731
    return (f"{flags(SAME)} stay the run's (they decide its losses); --steps may grow; "
            f"{flags(UNLESS_GIVEN)} are the run's unless given; the model's size and rungs are the checkpoint's")


def _shown(value):  # as a flag would take it (a name unquoted)
    return value if isinstance(value, str) and len(value) <= 40 else short(value)


def flag_name(name):  # --n-embd for n_embd; a switch by its own name
    return FLAGS[name]['options'].get('switch') or '--' + name.replace('_', '-')


# ---------------------------------------------------------------------------- the command line
def parse_args(argv=None, prog=None):
    """(flags, given): every flag with its value, and the names of those the command line gave."""
    p = cli.ArgumentParser(prog=prog, formatter_class=cli.ShowDefaults,
                           description="Train a tiny GPT on names (one name per step, unless --batch-size), "
                                       "or on running text (--data-mode text).",
                           epilog=f"--resume: {resume_rule()}.")
    groups = {}
    for name, meta in FLAGS.items():
        if meta['group'] not in groups:
            groups[meta['group']] = p.add_argument_group(GROUPS.get(meta['group'], meta['group']))
        group = groups[meta['group']]
        options, kind = dict(meta['options']), meta['kind']
        switch, negatable = options.pop('switch', None), options.pop('negatable', False)
        default = flag_default(name)
        if kind is SWITCH:
            action = argparse.BooleanOptionalAction if negatable else 'store_false' if switch else 'store_true'
            group.add_argument(switch or flag_name(name), dest=name, action=action, default=default, help=meta['help'])
            continue
        if kind is not None and kind.choices:
            options['choices'] = kind.choices
        elif kind is not None and kind.parse:
            options['type'] = kind.parse
        group.add_argument(flag_name(name), dest=name, default=default, help=meta['help'], **options)
    return p.parse_args_and_given(argv)


# ---------------------------------------------------------------------------- settling
def resolve_settings(flags, given, ckpt=None, rank_world=None):
    """The Settings of this run: the flags, completed and checked in the order a reader would.
    ckpt: --resume's or --init's Checkpoint; rank_world: (rank, world_size) as the Output read it."""
    values = {name: getattr(flags, name) for name in FLAGS}
    rank, world_size = torchrun_rank_world(os.environ) if rank_world is None else rank_world
    if values['resume'] and values['init']:
        raise UserError("--resume and --init cannot be combined: --resume continues --out, "
                        "--init starts a new run from another checkpoint")
    if values['resume'] and values['force']:
        raise UserError("--resume and --force cannot be combined: --resume continues the run at --out, "
                        "--force starts a new one over it; drop one")

    # 1. The run being resumed: its settings, each checked as the command line checks it.
    if values['resume']:
        if ckpt.train_state is None:
            raise UserError(f"{values['out']} has no training state to resume: start a new run "
                            f"with --init {values['out']} instead")
        saved = _saved_run(values['out'], ckpt.train_state)
        for name, rule in ON_RESUME.items():
            if rule == MODEL or name not in saved:
                continue  # the model's size is the config's; a setting the run did not record stays
            if name not in given:
                values[name] = saved[name]
            elif rule == SAME and name != 'data' and values[name] != saved[name]:
                given_as = flag_name(name) if FLAGS[name]['kind'] is SWITCH else f"{flag_name(name)} {_shown(values[name])}"
                theirs = (("which " + ("shuffled" if saved[name] else "kept the file's order")) if name == 'shuffle'
                          else _shown(saved[name]))
                raise UserError(f"{given_as} differs from the run being resumed ({theirs}): "
                                "drop the flag to resume exactly")
        done = ckpt.train_state.step
        if done >= values['steps']:
            raise UserError(f"{values['out']} is already trained for {done} steps: pass --steps "
                            f"greater than {done} to train further")
        if 'data' not in given and values['data'] is not None and not os.path.exists(values['data']):
            raise UserError(f"the run's data file {values['data']} is gone: if it moved, pass "
                            "--data with its new path (its content is checked against the run's)")
    elif values['init'] and 'data_mode' not in given:  # a model of running text goes on reading running text
        values['data_mode'] = ckpt.data_mode
    if values['init']:  # the weights' rows are the checkpoint's tokens
        if 'tokenizer' in given and values['tokenizer'] != ckpt.tokenizer_kind:
            raise UserError(f"--tokenizer {values['tokenizer']} contradicts {values['init']}, a model of the "
                            f"{ckpt.tokenizer_kind} tokenizer (its weights are rows of its tokens): drop --tokenizer")
        values['tokenizer'] = ckpt.tokenizer_kind

    # 2. The model's size and rungs: the checkpoint's, with --resume and --init.
    for name in [n for n, rule in ON_RESUME.items() if rule == MODEL] + list(RUNGS) if ckpt is not None else ():
        theirs = getattr(ckpt.config, name)
        if name in given and values[name] != theirs:
            given_as = (f"--{'no-' * (values[name] is False)}{name.replace('_', '-')}" if isinstance(theirs, bool)
                        else f"{flag_name(name)} {values[name]}")
            raise UserError(f"{given_as} contradicts the checkpoint's {name} {str(theirs).lower()}: the model, "
                            f"its size and rungs, is the checkpoint's: drop {given_as.split()[0]}")
        values[name] = theirs

    # 2b. The tokenizer: --vocab-size is the byte-pair tokenizer's; a character model's is its data's.
    if values['tokenizer'] == 'char':
        if 'vocab_size' in given and ckpt is None:
            raise UserError("--vocab-size is for --tokenizer bpe (the character tokenizer has one token per "
                            "character of the data): add --tokenizer bpe, or drop --vocab-size")
        values['vocab_size'] = None if ckpt is None else values['vocab_size']
    elif values['reproduce_original']:
        raise UserError("--reproduce-original trains microgpt's character tokenizer: drop --tokenizer bpe")

    # 3. The original microgpt.py's run: refuse what would change it, then it sets the rest.
    if values['reproduce_original']:
        if not values['resume']:
            rung = next((flag_name(name) for name in RUNGS if name in given), None)
            if rung:
                raise UserError(f"{rung} is for a rung, and the original's model is microgpt's: drop {rung}, "
                                "or drop --reproduce-original")
            original.check_flags(init=values['init'], shuffle=values['shuffle'] if 'shuffle' in given else None,
                                 **{n: values[n] if n in given else None for n in ORIGINAL_FLAGS})
            values.update({n: original.ORIGINAL[n] for n in ORIGINAL_FLAGS if n not in given})
        if 'num_samples' not in given:
            values['num_samples'] = original.ORIGINAL['num_samples']

    # 4. The engine: what each one computes in and which flags it understands.
    _check_engine(values, given, world_size)
    if world_size is not None and not {'MASTER_ADDR', 'MASTER_PORT'} <= set(os.environ):  # where rank 0 listens
        raise UserError("RANK and WORLD_SIZE are set but MASTER_ADDR or MASTER_PORT is not: start "
                        "train.py with torchrun (which sets all four), or unset RANK and WORLD_SIZE")

    # 5. Running text.
    if values['data_mode'] == 'text':
        if values['reproduce_original']:
            raise UserError("--reproduce-original trains on names, one a line: drop --data-mode text")
        if 'shuffle' in given:
            raise UserError("--no-shuffle is for --data-mode lines: running text keeps its order "
                            "(its windows are drawn at random places)")
        if values['data'] is None:
            raise UserError("--data-mode text needs a file: give --data PATH (the bundled names are "
                            "one a line: drop --data-mode text for them)")
    return Settings(**values, rank=rank, world_size=world_size)


# What --reproduce-original fixes to the original script's values (programs/original.py).
ORIGINAL_FLAGS = ('seed', 'lr', 'weight_decay', 'dropout', 'steps', 'batch_size', 'val_size', 'n_layer', 'n_embd',
                  'n_head', 'block_size')


def _saved_run(out, train_state):
    """{name: value} of what a saved run recorded of its settings, each checked against its
    flag's declaration."""
    run = train_state.run
    recorded = run.recorded()
    for name, value in recorded.items():
        kind = FLAGS[name]['kind']
        if not kind.holds(value):
            damaged(out, f"its {name} is {short(value)}, not {kind.what}")
    if train_state.step > run.steps:
        damaged(out, f"its step {train_state.step} is past its {run.steps} steps")
    return recorded


def _check_engine(values, given, world_size):
    """Flags that only one engine understands, and the precision each computes in."""
    engine, allowed = values['engine'], ENGINE_DTYPES[values['engine']]
    if values['dtype'] not in allowed:
        if 'dtype' in given:
            others = [e for e, d in ENGINE_DTYPES.items() if values['dtype'] in d]
            raise UserError(f"--dtype {values['dtype']} is for the {' and '.join(others)} engine"
                            f"{'s' * (len(others) > 1)} (the {engine} engine computes in {' or '.join(allowed)}): "
                            f"add --engine {others[0]}, or drop --dtype")
        values['dtype'] = allowed[-1]  # a resumed run's float32 (or bfloat16) continues in what this engine has
    if 'threads' in given and engine != 'numpy':
        raise UserError("--threads sets the numpy engine's BLAS threads: add --engine numpy, or drop it")
    if values['unfused'] and engine != 'scalar':
        raise UserError("--unfused is for the scalar engine: drop it, or use --engine scalar")
    if engine != 'torch':
        if world_size is not None:
            raise UserError("torchrun started this process (RANK and WORLD_SIZE are set), but only "
                            "--engine torch trains across processes: add --engine torch, or run "
                            "python train.py without torchrun")
        if values['device'] != 'cpu':
            raise UserError(f"--device {values['device']} is for --engine torch: add --engine torch, "
                            "or drop --device")
    elif world_size is not None and world_size > values['batch_size']:
        raise UserError(f"torchrun started {world_size} ranks for a batch of {values['batch_size']} names: "
                        f"each rank needs at least one, so use --batch-size {world_size} or more, "
                        "or fewer ranks (--nproc_per_node)")


def torchrun_rank_world(environ):
    """(rank, world_size) from torchrun's environment, or (0, None) without torchrun."""
    if 'RANK' not in environ or 'WORLD_SIZE' not in environ:
        return 0, None
    rank, size = environ.get('RANK', ''), environ.get('WORLD_SIZE', '')
    if not (rank.isdigit() and size.isdigit() and int(rank) < int(size)):
        raise UserError(f"RANK={short(rank)} and WORLD_SIZE={short(size)} are not a rank and a number "
                        "of ranks: start train.py with torchrun, or unset them")
    return int(rank), int(size)
