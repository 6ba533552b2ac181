"""
The checkpoint: one record of a trained model, read by one reader and written by one writer,
whichever the file's format.

    ckpt = read_checkpoint('out/model.json')        # a Checkpoint, every field checked
    model = ckpt.model()                             # a GPT of Values holding its weights
    write_checkpoint('out/model.safetensors', ckpt)  # the same record, in the other format

A Checkpoint holds the config (the sizes, and each rung of docs/modern.md that is on: a file
without rungs is microgpt's model), the vocabulary (the characters, or the byte-pair merges), the
weights, the data mode, and for --resume Adam's state and the training state. On disk it is
model.json ({"format": "microgpt", "version": 1, "data_mode", "config", "vocab", "state_dict":
{name: [[float]]}, "train_state"}, and for a byte-pair model "merges": [[a, b], ...] beside an
empty "vocab"), model.safetensors (the same, the matrices as tensors: safetensors.py), or the 3D
tutorial's flat export (read only).
"""

import json
import math
import os
import re
from array import array
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Optional

from ..model import GPT, SIZE_FIELDS, GPTConfig, parameter_shapes
from ..bpe import N_BYTES
from ..bpe_fast import FastBPETokenizer
from ..tokenizer import CharTokenizer
from . import safetensors
from .checks import RUNGS, Range, is_finite_number, make_config, short
from .errors import UserError
from .files import open_user_file, parse_json, read_head, read_user_file, write_atomic, write_json_atomic
from .limits import parameter_count

FORMAT, VERSION = 'microgpt', 1
DATA_MODES = ('lines', 'text')  # what the model was trained on: names, one a line | running text
TUTORIAL_N_HEAD = 4  # the 3D tutorial's export does not record its heads; its model has 4
ADAM_TENSORS = ('adam.m', 'adam.v')  # Adam's moments in a .safetensors file, flat in GPT.params order


@dataclass(frozen=True, kw_only=True)
class SavedRun:
    """The settings a run trains with, as its checkpoint keeps them for --resume (programs/settings.py
    declares and checks each). A field a run saved before it existed reads as that run trained,
    or None: not recorded."""
    data: Optional[str]              # the data file, an absolute path (None: the bundled names)
    data_mode: str = DATA_MODES[0]
    val_size: object                 # a count, or a fraction
    shuffle: bool
    tokenizer: str = 'char'
    steps: int
    lr: float
    weight_decay: float = 0.0
    dropout: float = 0.0
    batch_size: Optional[int] = None
    seed: int
    engine: Optional[str] = None
    dtype: Optional[str] = None
    reproduce_original: Optional[bool] = None
    save_every: Optional[int] = None
    eval_every: Optional[int] = None

    def recorded(self):  # the settings the run recorded (or that its age tells)
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.default is MISSING or getattr(self, f.name) is not None}


@dataclass(frozen=True)
class TrainState:
    """Where a run stands, saved beside its weights so that --resume continues it exactly."""
    step: int                        # the steps done, counted from 1
    run: SavedRun                    # the run's settings (Settings.saved())
    data_sha256: str                 # the data's fingerprint: a resumed run must read the very same data
    val_loss: Optional[float] = None  # the last validation loss measured (None before the first)
    best_step: Optional[int] = None   # the step of the lowest validation loss so far, kept beside (run.py)
    best_val_loss: Optional[float] = None  # that loss


@dataclass(frozen=True)
class Checkpoint:
    """A trained model and what it was trained with: one value, whatever file it came from."""
    config: GPTConfig
    vocab: tuple                     # the characters, in id order; BOS is id len(vocab) (a byte-pair model: ())
    weights: dict                    # {name: rows}, every matrix [n_out][n_in] of floats
    data_mode: str = 'lines'         # 'lines': names, one a line; 'text': running text
    optimizer: Optional[dict] = None   # Adam's {'t', 'm', 'v'}, flat in GPT.params order
    train_state: Optional[TrainState] = None  # where the run stands: --resume's
    format: str = 'json'             # how it was read: 'json', 'safetensors' or 'tutorial'
    merges: Optional[tuple] = None   # a byte-pair model's merges, ((a, b), ...) in the order learned (bpe.py)

    @classmethod
    def of(cls, model, data_mode='lines', optimizer=None, train_state=None, weights=None):
        """The record of a GPT, or of a training engine."""
        merges = getattr(model.tokenizer, 'merges', None)  # only the byte-pair tokenizer has merges
        vocab = () if merges is not None else tuple(model.tokenizer.chars)
        return cls(model.config, vocab, model.weights() if weights is None else weights, data_mode, optimizer,
                   train_state, merges=None if merges is None else tuple(merges))

    @property
    def tokenizer_kind(self):
        return 'char' if self.merges is None else 'bpe'

    @property
    def tokenizer(self):
        return CharTokenizer(list(self.vocab)) if self.merges is None else FastBPETokenizer(self.merges)

    def model(self, fused=False):  # a GPT of Values (microgpt/model.py); fused: with fused.py's blocks
        return GPT.from_weights(self.config, self.weights, self.tokenizer, fused=fused)


def load_checkpoint(path, n_head=None):
    return read_checkpoint(path, n_head=n_head).model()


# ---------------------------------------------------------------------------- writing
def write_checkpoint(path, ckpt):
    """Write the record to `path` atomically, in the format its real target's name says (a link
    named .safetensors to a .json file writes JSON, which is what the file is called)."""
    # a training state without Adam's (a run's best checkpoint) says where it stands, and cannot be resumed
    train_state = None if ckpt.train_state is None else {**asdict(ckpt.train_state), 'adam': ckpt.optimizer}
    fields = {'format': FORMAT, 'version': VERSION, 'data_mode': ckpt.data_mode,
              'config': ckpt.config.to_dict(), 'vocab': list(ckpt.vocab)}  # the sizes, and the rungs that are on
    if ckpt.merges is not None:
        fields['merges'] = [list(pair) for pair in ckpt.merges]
    if checkpoint_format(os.path.realpath(path)) == '.json':
        write_json_atomic(path, {**fields, 'state_dict': ckpt.weights, 'train_state': train_state})
        return
    tensors = {name: ((len(m), len(m[0])), m) for name, m in ckpt.weights.items()}
    if ckpt.optimizer is not None and train_state is not None:
        tensors.update({name: ((len(ckpt.optimizer[name[-1]]),), ckpt.optimizer[name[-1]]) for name in ADAM_TENSORS})
        train_state['adam'] = {'t': ckpt.optimizer['t']}  # m and v are tensors; the count stays here
    metadata = {key: value if key in ('format', 'data_mode') else _json(value) for key, value in fields.items()}
    metadata['train_state'] = _json(train_state)  # the metadata is {str: str}: JSON text but the two names
    write_atomic(path, lambda f: safetensors.write(f, tensors, metadata))


def _json(value):  # a safetensors metadata value: JSON text
    return json.dumps(value, allow_nan=False, default=lambda row: row.tolist())


def is_our_checkpoint(path):
    """True if path is a regular file that holds a checkpoint microgpt writes (known by a JSON
    file's first bytes, a .safetensors file's metadata): what a writer asks before replacing it."""
    if os.path.realpath(path).endswith(safetensors.EXTENSION) and os.path.isfile(path):
        try:
            with open(path, 'rb') as f:
                return safetensors.read_header(f, path, os.fstat(f.fileno()).st_size)[0].get('format') == FORMAT
        except (OSError, UserError):  # unreadable, or not a safetensors file
            return False
    head = read_head(path, 256)
    return head is not None and re.match(rb'\s*\{\s*"format"\s*:\s*"' + FORMAT.encode() + rb'"', head) is not None


def checkpoint_format(path, what=None):
    """The extension of a checkpoint path, '.json' or '.safetensors', or a one-line UserError."""
    ext = os.path.splitext(path)[1]
    if ext not in ('.json', safetensors.EXTENSION):
        raise UserError(f"{what or path} does not end in .json or {safetensors.EXTENSION}: a checkpoint's name says "
                        f"its format: use {os.path.splitext(path)[0] or 'model'}.json")
    return ext


# ---------------------------------------------------------------------------- reading
def read_checkpoint(path, n_head=None, training=False):
    """The Checkpoint in the file at `path`, every field checked, or a one-line UserError.
    training: also read Adam's state, and refuse a damaged training state (without it, one is
    left out: the weights still sample and --init). n_head: the tutorial export's heads."""
    hint = f"train one first with `python train.py --out {path}`"
    if os.path.realpath(path).endswith(safetensors.EXTENSION):  # a link reads as what it points to
        return _read_safetensors(path, hint, training)
    obj = parse_json(read_user_file(path, 'checkpoint', hint), path)
    if not isinstance(obj, dict):
        raise UserError(f"{path} is not a checkpoint: expected a JSON object at the top level")
    if '_vocab' in obj or ('wte' in obj and 'format' not in obj):
        return _read_tutorial(path, obj, n_head)
    if 'format' not in obj:
        raise UserError(f"{path} is not a microgpt checkpoint: it has neither a 'format' field "
                        "nor the tutorial export's '_vocab' and 'wte'")
    config, vocab, data_mode, merges = _header(path, obj, n_head)
    if not isinstance(obj['state_dict'], dict):
        raise UserError(f"{path}: 'state_dict' must be an object of name -> matrix")
    shapes = _expected(path, config, obj['state_dict'])
    weights = {name: _matrix(path, name, obj['state_dict'][name], shape) for name, shape in shapes.items()}
    train_state, adam = _train_state(path, obj.get('train_state'), training)
    optimizer = _optimizer(path, adam, config) if training and train_state is not None else None
    return Checkpoint(config, tuple(vocab), weights, data_mode, optimizer, train_state, 'json', merges)


def _read_safetensors(path, hint, training):
    """The same record from a .safetensors file: each tensor's entry is checked before its numbers are read."""
    with open_user_file(path, 'checkpoint', hint) as f:
        metadata, entries, data_start = safetensors.read_header(f, path, os.fstat(f.fileno()).st_size)
        if 'format' not in metadata or 'config' not in metadata:
            raise UserError(f"{path} holds tensors but no microgpt metadata (format, config, vocab): it is "
                            "not a microgpt checkpoint; microgpt reads the .safetensors files it writes")
        obj = {key: metadata[key] if key in ('format', 'data_mode') else
               parse_json(metadata[key], f"{path}: the metadata's {key}")
               for key in ('format', 'version', 'config', 'vocab', 'merges', 'train_state', 'data_mode')
               if key in metadata}
        config, vocab, data_mode, merges = _header(path, {**obj, 'state_dict': entries}, None)
        adam = [name for name in ADAM_TENSORS if name in entries]
        shapes = _expected(path, config, {k: e for k, e in entries.items() if k not in adam})

        def read(name, shape):  # the tensor's numbers, once its entry is checked against the shape
            entry = safetensors.entry(path, name, entries[name])
            if entry.shape != shape:
                raise UserError(f"{path}: {name} should be {'x'.join(map(str, shape))} for this config, "
                                f"got shape {list(entry.shape)}")
            return safetensors.read_tensor(f, path, name, entry, data_start)
        weights = {}
        for name, (n_out, n_in) in shapes.items():
            flat = read(name, (n_out, n_in))
            weights[name] = _matrix(path, name, [flat[i * n_in:(i + 1) * n_in] for i in range(n_out)], (n_out, n_in))
        train_state, adam_state = _train_state(path, obj.get('train_state'), training)
        optimizer = None
        if training and train_state is not None:
            if len(adam) == 2 and isinstance(adam_state, dict):
                n = parameter_count(config)
                adam_state = {**adam_state, **{name[-1]: read(name, (n,)) for name in ADAM_TENSORS}}
            optimizer = _optimizer(path, adam_state, config)
    return Checkpoint(config, tuple(vocab), weights, data_mode, optimizer, train_state, 'safetensors', merges)


def _header(path, obj, n_head):
    """(config, vocab, data_mode, merges) of a microgpt checkpoint's fields, each checked."""
    if obj.get('format') != FORMAT:
        raise UserError(f"{path} has format {short(obj.get('format'))}, expected {FORMAT!r}")
    version = obj.get('version')
    if version != VERSION:
        raise UserError(f"{path} is checkpoint version {short(version)}, but this microgpt reads version "
                        f"{VERSION}: retrain it, or use the microgpt release that wrote it")
    for key in ('config', 'vocab', 'state_dict'):
        if key not in obj:
            raise UserError(f"{path} lacks the '{key}' field: the checkpoint is incomplete")
    cfg = obj['config']  # the sizes, and a rung only where it is on: a missing rung is microgpt's
    unknown = [str(name) for name in cfg if name not in SIZE_FIELDS + RUNGS] if isinstance(cfg, dict) else []
    if not isinstance(cfg, dict) or not set(SIZE_FIELDS) <= set(cfg) or unknown:
        why = f": {short(unknown[0])} is not a rung this microgpt knows (a newer one's?)" if unknown else ""
        raise UserError(f"{path}: its config should hold {', '.join(SIZE_FIELDS)} and perhaps the rungs "
                        f"{', '.join(RUNGS)}, it holds {short(sorted(map(str, cfg)) if isinstance(cfg, dict) else cfg, 80)}{why}")
    if n_head is not None and n_head != cfg['n_head']:
        raise UserError(f"--n-head {n_head} contradicts the checkpoint's n_head {short(cfg['n_head'])}: "
                        "drop --n-head (it is only for the tutorial's flat export)")
    config = _config(path, cfg)
    data_mode = obj.get('data_mode', 'lines')  # a checkpoint from before running text: names
    if data_mode not in DATA_MODES:
        raise UserError(f"{path}: data_mode {short(data_mode)} is neither 'lines' nor 'text': the "
                        "checkpoint is damaged or from a newer microgpt")
    if 'merges' in obj:
        if obj['vocab'] != []:
            raise UserError(f"{path} has both byte-pair merges and a vocabulary of characters: the "
                            "checkpoint is damaged (a byte-pair model's 'vocab' is [])")
        return config, [], data_mode, check_merges(path, obj['merges'], config.vocab_size)
    return config, _vocab(path, obj['vocab'], config.vocab_size), data_mode, None


def _read_tutorial(path, obj, n_head):
    """The 3D tutorial's export: state_dict names at top level, plus _vocab/_bos_id/_vocab_size."""
    missing = [k for k in ('_vocab', '_bos_id', '_vocab_size', 'wte', 'wpe') if k not in obj]
    if missing:
        raise UserError(f"{path} looks like the tutorial's weights export but lacks {', '.join(missing)}")
    state_dict = {k: v for k, v in obj.items() if not k.startswith('_')}
    wte, wpe = state_dict['wte'], state_dict['wpe']
    if not all(isinstance(m, list) and m and all(isinstance(r, list) and r for r in m) for m in (wte, wpe)):
        raise UserError(f"{path}: 'wte' and 'wpe' must be non-empty lists of rows")
    n_layer = 0
    while f'layer{n_layer}.attn_wq' in state_dict:
        n_layer += 1
    config = _config(path, dict(vocab_size=len(wte), n_layer=n_layer, n_embd=len(wte[0]),
                                n_head=TUTORIAL_N_HEAD if n_head is None else n_head, block_size=len(wpe)))
    vocab = _vocab(path, obj['_vocab'], config.vocab_size)
    if obj['_bos_id'] != len(vocab) or obj['_vocab_size'] != config.vocab_size:
        raise UserError(f"{path}: _bos_id {short(obj['_bos_id'])} and _vocab_size {short(obj['_vocab_size'])} "
                        f"disagree with a {len(vocab)}-character vocabulary (expected "
                        f"{len(vocab)} and {config.vocab_size})")
    shapes = _expected(path, config, state_dict)
    weights = {name: _matrix(path, name, state_dict[name], shape) for name, shape in shapes.items()}
    return Checkpoint(config, tuple(vocab), weights, format='tutorial')


def _config(path, fields):
    try:
        return make_config(**fields)
    except UserError as e:
        raise UserError(f"{path}: bad config: {e}") from None


def _vocab(path, vocab, vocab_size):
    if not isinstance(vocab, list) or not all(isinstance(c, str) and len(c) == 1 for c in vocab):
        raise UserError(f"{path}: the vocabulary must be a list of single characters")
    if len(set(vocab)) != len(vocab):
        raise UserError(f"{path}: the vocabulary lists a character twice")
    if len(vocab) + 1 != vocab_size:
        raise UserError(f"{path}: {len(vocab)} characters plus BOS make {len(vocab) + 1} tokens, "
                        f"but vocab_size is {vocab_size}")
    return vocab


def check_merges(path, merges, vocab_size):
    """A byte-pair model's merges as a tuple of pairs, once each is a pair of ids that exist
    before it (merge k makes id 256 + k) and they make vocab_size tokens with BOS."""
    if not isinstance(merges, list):
        raise UserError(f"{path}: the merges must be a list of [a, b] pairs of token ids")
    if N_BYTES + len(merges) + 1 != vocab_size:
        raise UserError(f"{path}: {len(merges):,} merges make {N_BYTES + len(merges) + 1:,} tokens (256 bytes, "
                        f"the merges, BOS), but vocab_size is {vocab_size:,}: the checkpoint is damaged")
    for k, pair in enumerate(merges):
        if not (isinstance(pair, list) and len(pair) == 2 and all(Range(int, 0, N_BYTES + k - 1).holds(i) for i in pair)):
            raise UserError(f"{path}: merge {k} is {short(pair)}, not a pair of the {N_BYTES + k} ids before it: "
                            "the checkpoint is damaged")
    return tuple(map(tuple, merges))


def _expected(path, config, found):
    """parameter_shapes(config), once `found` names exactly those matrices."""
    shapes = parameter_shapes(config)
    missing = [name for name in shapes if name not in found]
    if missing:
        raise UserError(f"{path}: weights missing for {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}")
    extra = [str(name)[:40] for name in found if name not in shapes]
    if extra:
        raise UserError(f"{path}: unexpected weights {', '.join(extra[:3])} for a {config.n_layer}-layer model")
    return shapes


def _matrix(path, name, m, shape):
    """m, once it is n_out rows of n_in finite numbers (lists from JSON, float64 arrays from safetensors)."""
    n_out, n_in = shape
    if not isinstance(m, list) or len(m) != n_out or \
            not all(isinstance(row, (list, array)) and len(row) == n_in for row in m):
        raise UserError(f"{path}: {name} should be {n_out}x{n_in} for this config")
    for row in m:
        finite = math.isfinite if isinstance(row, array) else is_finite_number
        bad = next((x for x in row if not finite(x)), None)
        if bad is not None:
            raise UserError(f"{path}: {name} holds {short(bad)}, not a finite number")
    return m


def _train_state(path, state, training):
    """(the TrainState of the file's dict, Adam's part of it), its own fields checked; a damaged
    one is refused with training, else left out."""
    if state is None:
        return None, None
    try:
        if not isinstance(state, dict):
            damaged(path, "it is not an object")
        if not Range(int, 0).holds(state.get('step')):
            damaged(path, "its step is not a count")
        run = state.get('run')
        if not isinstance(run, dict):
            damaged(path, "its run settings are missing")
        missing = [f.name for f in fields(SavedRun) if f.default is MISSING and f.name not in run]
        if missing:
            damaged(path, f"its {missing[0]} is missing")
        if not (isinstance(state.get('data_sha256'), str) and len(state['data_sha256']) == 64):
            damaged(path, "its data fingerprint is missing")
        if not (state.get('val_loss') is None or isinstance(state['val_loss'], float)):
            damaged(path, "its validation loss is not a number")
        best = state.get('best_step'), state.get('best_val_loss')  # absent in a run saved before they were kept
        if not (best == (None, None) or (Range(int, 1, state['step']).holds(best[0]) and is_finite_number(best[1]))):
            damaged(path, "its best step is not a step it took with a finite loss")
    except UserError:
        if training:
            raise
        return None, None
    run = SavedRun(**{f.name: run[f.name] for f in fields(SavedRun) if f.name in run})
    return TrainState(state['step'], run, state['data_sha256'], state.get('val_loss'), *best), state.get('adam')


def _optimizer(path, adam, config):
    """Adam's state {'t', 'm', 'v'}: a step count and two moments of one finite number per
    parameter, the second (a mean of squares) never negative."""
    if adam is None:  # written so: a model and where its run stood, as a run's best checkpoint is
        raise UserError(f"{path} has a training state without Adam's moments (a run's best checkpoint): "
                        f"it cannot be resumed; start a new run with --init {path}")
    n_params = parameter_count(config)
    if not (isinstance(adam, dict) and Range(int, 0).holds(adam.get('t'))
            and all(isinstance(adam.get(k), (list, array)) and len(adam[k]) == n_params
                    and all(is_finite_number(x) for x in adam[k]) for k in ('m', 'v'))
            and min(adam['v'], default=0.0) >= 0):
        damaged(path, "its Adam moments are missing, the wrong size, or not finite")
    return {'t': adam['t'], 'm': adam['m'], 'v': adam['v']}


def damaged(path, problem):  # a refusal to resume (here and in settings.py)
    raise UserError(f"{path} has a damaged training state ({problem}): it cannot be resumed; "
                    f"start a new run with --init {path}")
