"""
Checkpoints: one self-sufficient JSON file holding a model, its vocabulary and (for --resume)
the training state.

    {"format": "microgpt", "version": 1,
     "config": {"vocab_size", "n_layer", "n_embd", "n_head", "block_size"},
     "vocab": [characters in id order],          # BOS is the id after the last character
     "state_dict": {name: [[float, ...], ...]},  # every matrix [n_out][n_in]
     "train_state": {...} or null}               # step, Adam moments, data settings

`save_checkpoint` writes atomically (a temporary file in the same folder, then a rename), so a
crash or Ctrl-C mid-write leaves the old file whole. `read_checkpoint` validates everything
and turns each problem into a one-line UserError; it also reads the flat weights export of
the microgpt 3D tutorial (docs/lessons.md). microgpt.load_checkpoint builds a GPT of Values from it;
src/inference builds numpy arrays from the very same validated dictionary.
"""

import json
import math
import os
import re
import secrets

from .errors import UserError, read_user_file
from .model import GPT, GPTConfig, parameter_shapes
from .tokenizer import CharTokenizer

FORMAT = 'microgpt'
VERSION = 1
TUTORIAL_KEYS = ('_vocab', '_bos_id', '_vocab_size')  # the 3D tutorial's metadata keys


# ---------------------------------------------------------------------------- writing
def checkpoint_dict(model, train_state=None):
    """The JSON-ready dictionary for `model` (and the training state, if resuming needs it)."""
    return {
        'format': FORMAT,
        'version': VERSION,
        'config': model.config.to_dict(),
        'vocab': list(model.tokenizer.chars),
        'state_dict': model.weights(),
        'train_state': train_state,
    }


def save_checkpoint(path, model, train_state=None):
    """Write the checkpoint to `path` atomically: the old file stays whole until the rename.

    model: anything with .config, .tokenizer and .weights() (a GPT, or a training engine).
    """
    write_json_atomic(path, checkpoint_dict(model, train_state))


def write_json_atomic(path, obj):
    """Write obj as JSON to a temporary file beside `path`, flush it to disk, then rename it
    over `path`: a crash at any moment leaves either the old file or the new one, whole.

    A symlink at `path` is written through (its target is replaced, the link stays). The file
    gets the permissions any new file gets (0666 less the umask), as the log beside it does.
    An OSError (disk full, folder read-only, file too large) leaves the old file untouched.
    """
    target = os.path.realpath(path)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    tmp = temporary_name(target)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies
        with os.fdopen(fd, 'w', encoding='utf-8') as f:
            # floats are written with repr, which reads back bit for bit: resume is exact
            json.dump(obj, f, allow_nan=False)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def temporary_name(path):
    """A fresh name for a save's temporary file: hidden, beside `path`, `.model.json.<hex>.tmp`."""
    folder, base = os.path.split(path)
    return os.path.join(folder, f'.{base}.{secrets.token_hex(4)}.tmp')


def remove_stale_temporaries(path):
    """Delete temporary files a save to `path` left when it was killed mid-write (SIGKILL, power
    loss). Only names of exactly temporary_name's pattern; call it only while holding the run's
    lock, when no save of ours can be in progress."""
    folder, base = os.path.split(os.path.realpath(path))
    pattern = re.compile(re.escape(f'.{base}.') + r'[0-9a-f]{8}\.tmp')
    for name in os.listdir(folder or '.'):
        if pattern.fullmatch(name):
            try:
                os.remove(os.path.join(folder, name))
            except OSError:
                pass  # gone already, or not ours to remove: leave it


# ---------------------------------------------------------------------------- reading
def read_checkpoint(path, n_head=None):
    """Read and validate a checkpoint file of either form.

    Returns {'config': GPTConfig, 'vocab': [chars], 'state_dict': {name: [[float]]},
    'train_state': dict or None, 'source': 'microgpt' or 'tutorial'}.
    n_head: only for the tutorial form, whose file does not record it (default 4).
    """
    obj = _read_json(path)
    if not isinstance(obj, dict):
        raise UserError(f"{path} is not a checkpoint: expected a JSON object at the top level")
    if 'format' in obj:
        ckpt = _from_microgpt(path, obj, n_head)
    elif '_vocab' in obj or 'wte' in obj:
        ckpt = _from_tutorial(path, obj, n_head)
    else:
        raise UserError(f"{path} is not a microgpt checkpoint: it has neither a 'format' field "
                        "nor the tutorial export's '_vocab' and 'wte'")
    _check_weights(path, ckpt['config'], ckpt['state_dict'])
    return ckpt


def load_checkpoint(path, n_head=None):
    """A GPT of Values, with its tokenizer, from a checkpoint file (see read_checkpoint)."""
    ckpt = read_checkpoint(path, n_head=n_head)
    model = GPT(ckpt['config'], tokenizer=CharTokenizer(ckpt['vocab']))
    model.load_weights(ckpt['state_dict'])
    model.train_state = ckpt['train_state']
    return model


def _read_json(path):
    text = read_user_file(path, 'checkpoint', f"train one first with `python train.py --out {path}`")
    try:
        # NaN and Infinity are not JSON; Python would accept them, so refuse them here
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as e:
        raise UserError(f"{path} is not valid JSON (line {e.lineno}, column {e.colno}): "
                        "the file is damaged or not a checkpoint") from None
    except ValueError as e:
        raise UserError(f"{path}: {e}") from None


def _reject_constant(name):
    raise ValueError(f"the non-finite number {name} appears in the file: the weights are corrupt")


def _from_microgpt(path, obj, n_head):
    if obj.get('format') != FORMAT:
        raise UserError(f"{path} has format {obj.get('format')!r}, expected {FORMAT!r}")
    version = obj.get('version')
    if version != VERSION:
        raise UserError(f"{path} is checkpoint version {version!r}, but this microgpt reads version "
                        f"{VERSION}: retrain it, or use the microgpt release that wrote it")
    for key in ('config', 'vocab', 'state_dict'):
        if key not in obj:
            raise UserError(f"{path} lacks the '{key}' field: the checkpoint is incomplete")
    cfg = obj['config']
    if not isinstance(cfg, dict):
        raise UserError(f"{path}: 'config' must be an object")
    expected = ('vocab_size', 'n_layer', 'n_embd', 'n_head', 'block_size')
    missing = [k for k in expected if k not in cfg]
    if missing:
        raise UserError(f"{path}: config lacks {', '.join(missing)}")
    unknown = sorted(set(cfg) - set(expected))
    if unknown:
        raise UserError(f"{path}: config has unknown fields {', '.join(unknown)}")
    if n_head is not None and n_head != cfg['n_head']:
        raise UserError(f"--n-head {n_head} contradicts the checkpoint's n_head {cfg['n_head']}: "
                        "drop --n-head (it is only for the tutorial's flat export)")
    config = _config(path, **cfg)
    vocab = _vocab(path, obj['vocab'], config.vocab_size)
    state_dict = obj['state_dict']
    if not isinstance(state_dict, dict):
        raise UserError(f"{path}: 'state_dict' must be an object of name -> matrix")
    train_state = obj.get('train_state')
    if train_state is not None and not isinstance(train_state, dict):
        raise UserError(f"{path}: 'train_state' must be an object or null")
    return {'config': config, 'vocab': vocab, 'state_dict': state_dict,
            'train_state': train_state, 'source': FORMAT}


def _from_tutorial(path, obj, n_head):
    """The 3D tutorial's export: state_dict names at top level, plus _vocab/_bos_id/_vocab_size."""
    missing = [k for k in TUTORIAL_KEYS + ('wte', 'wpe') if k not in obj]
    if missing:
        raise UserError(f"{path} looks like the tutorial's weights export but lacks "
                        f"{', '.join(missing)}")
    state_dict = {k: v for k, v in obj.items() if not k.startswith('_')}
    wte, wpe = state_dict['wte'], state_dict['wpe']
    if not (_is_matrix(wte) and _is_matrix(wpe)):
        raise UserError(f"{path}: 'wte' and 'wpe' must be non-empty lists of rows")
    n_layer = 0
    while f'layer{n_layer}.attn_wq' in state_dict:
        n_layer += 1
    # The export does not record the number of heads; 4 is what the tutorial uses.
    config = _config(path, vocab_size=len(wte), n_layer=n_layer, n_embd=len(wte[0]),
                     n_head=4 if n_head is None else n_head, block_size=len(wpe))
    vocab = _vocab(path, obj['_vocab'], config.vocab_size)
    if obj['_bos_id'] != len(vocab) or obj['_vocab_size'] != config.vocab_size:
        raise UserError(f"{path}: _bos_id {obj['_bos_id']!r} and _vocab_size {obj['_vocab_size']!r} "
                        f"disagree with a {len(vocab)}-character vocabulary (expected "
                        f"{len(vocab)} and {config.vocab_size})")
    return {'config': config, 'vocab': vocab, 'state_dict': state_dict,
            'train_state': None, 'source': 'tutorial'}


def _config(path, **fields):
    try:
        return GPTConfig(**fields)
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


def _is_matrix(m):
    return isinstance(m, list) and len(m) > 0 and all(isinstance(r, list) and r for r in m)


def _check_weights(path, config, state_dict):
    """Every expected matrix present, of the right shape, made of finite numbers; no extras."""
    shapes = parameter_shapes(config)
    missing = [name for name in shapes if name not in state_dict]
    if missing:
        raise UserError(f"{path}: weights missing for {', '.join(missing[:3])}"
                        f"{' ...' if len(missing) > 3 else ''}")
    extra = [name for name in state_dict if name not in shapes]
    if extra:
        raise UserError(f"{path}: unexpected weights {', '.join(extra[:3])} for a "
                        f"{config.n_layer}-layer model")
    for name, (n_out, n_in) in shapes.items():
        m = state_dict[name]
        if not isinstance(m, list) or len(m) != n_out or \
                not all(isinstance(row, list) and len(row) == n_in for row in m):
            raise UserError(f"{path}: {name} should be {n_out}x{n_in} for this config, "
                            f"got {_shape_of(m)}")
        for row in m:
            for x in row:
                if isinstance(x, bool) or not isinstance(x, (int, float)) or not _is_finite(x):
                    raise UserError(f"{path}: {name} holds {_short(x)}, not a finite number")


def _is_finite(x):
    try:
        return math.isfinite(x)
    except OverflowError:  # a JSON integer literal too big for a float, e.g. 1 followed by 400 zeros
        return False


def _short(x):
    """repr(x), cut short: a 400-digit number would not make a one-line message."""
    text = repr(x)
    return text if len(text) <= 40 else text[:37] + '...'


def _shape_of(m):
    if not isinstance(m, list):
        return type(m).__name__
    widths = sorted({len(r) if isinstance(r, list) else -1 for r in m})
    return f"{len(m)} rows of width {'/'.join(map(str, widths)) or 'none'}"
