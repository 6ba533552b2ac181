"""
Checkpoints: one self-sufficient JSON file holding a model, its vocabulary and (for --resume)
the training state.

    {"format": "microgpt", "version": 1,
     "data_mode": "lines" or "text",            # names, one a line | running text (absent: lines)
     "config": {"vocab_size", "n_layer", "n_embd", "n_head", "block_size"},
     "vocab": [characters in id order],          # BOS is the id after the last character
     "state_dict": {name: [[float, ...], ...]},  # every matrix [n_out][n_in]
     "train_state": {...} or null}               # step, Adam moments, data settings

`save_checkpoint` writes atomically (a temporary file in the same folder, then a rename), so a
crash or Ctrl-C mid-write leaves the old file whole; a symlinked path is written through to
its target, the file keeps the old one's permissions (a new one gets the umask's), and a
failed write (disk full, read-only folder, file-size limit: cli.run turns SIGXFSZ into an
error for every program) is a one-line CheckpointWriteError. `check_fits` refuses, before a
run starts, a model whose checkpoint would be too large to read back. A save killed outright (SIGKILL) leaves its temporary file behind:
`remove_stale_temporaries` clears those, and `is_our_checkpoint` tells a checkpoint from any
other file by its first bytes.

`read_checkpoint` validates everything and turns each problem into a one-line UserError; it
also reads the flat weights export of the microgpt 3D tutorial (docs/lessons.md). The file
is read through files.read_user_file (regular files only, size-capped) and jsonio.parse_json
(nesting capped), and the config's sizes are checked against limits.py's caps before anything is
built from them. microgpt.load_checkpoint builds a GPT of Values from it;
src/inference builds numpy arrays from the very same validated dictionary.
"""

import errno
import io
import json
import math
import os
import re
import stat
import tempfile

from . import safetensors
from .checks import make_config
from .errors import UserError
from .files import read_head, read_user_file
from .jsonio import parse_json
from .limits import MAX_FILE_BYTES
from ..model import GPT, GPTConfig, parameter_shapes
from ..tokenizer import CharTokenizer

FORMAT = 'microgpt'
VERSION = 1
TUTORIAL_KEYS = ('_vocab', '_bos_id', '_vocab_size')  # the 3D tutorial's metadata keys


# ---------------------------------------------------------------------------- writing
DATA_MODES = ('lines', 'text')  # what the model was trained on: names, one a line | running text


def checkpoint_dict(model, train_state=None, data_mode='lines'):
    """The JSON-ready dictionary for `model` (and the training state, if resuming needs it)."""
    return {
        'format': FORMAT,
        'version': VERSION,
        'data_mode': data_mode,
        'config': model.config.to_dict(),
        'vocab': list(model.tokenizer.chars),
        'state_dict': model.weights(),
        'train_state': train_state,
    }


def save_checkpoint(path, model, train_state=None, data_mode='lines'):
    """Write the checkpoint to `path` atomically: the old file stays whole until the rename.

    model: anything with .config, .tokenizer and .weights() (a GPT, or a training engine).
    data_mode: 'lines' (one name per line, the default) or 'text' (running text): what sample.py
    generates from it, names that end at BOS or a stream of a given length. A path ending in
    .safetensors is written in that format (microgpt/edge/safetensors.py), any other as JSON.
    """
    ckpt = checkpoint_dict(model, train_state, data_mode)
    if str(path).endswith(safetensors.EXTENSION):
        write_atomic(path, lambda f: safetensors.write(f, *safetensors.checkpoint_tensors(ckpt)))
    else:
        write_json_atomic(path, ckpt)


class CheckpointWriteError(UserError):
    """A save that failed part-way (disk full, read-only folder, file-size limit, name too
    long). The message says what failed and that the previous file, if any, is intact."""


def write_json_atomic(path, obj):
    """Write obj as JSON to path so that a reader only ever sees the old file or the new one
    (write_atomic). Floats are written with repr, which reads back bit for bit: resume is exact."""
    def write(f):
        text = io.TextIOWrapper(f, encoding='utf-8')
        json.dump(obj, text, allow_nan=False)
        text.flush()
        text.detach()  # f stays open: write_atomic syncs it
    write_atomic(path, write)


def write_atomic(path, write):
    """Call write(f) on a binary file, so that a reader of path only ever sees the old file or
    the new one, whole.

    The bytes go to a temporary file beside the target (`.<name>.<random>.tmp`), are flushed
    to disk, then renamed over the target in one step. If `path` is a symbolic link, its
    target is what gets replaced, and the link stays. The new file gets the old file's
    permissions, or for a new file the umask's, like any file a program creates. Any OSError
    on the way (ENOSPC, EROFS, EACCES, EFBIG, ENAMETOOLONG, ...) removes the temporary file and
    becomes a CheckpointWriteError; the previous file is untouched.
    """
    target = os.path.realpath(path)  # write through a symlink, do not replace it
    folder = os.path.dirname(target)
    existed = os.path.exists(target)
    tmp = None
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(target), suffix=TEMP_SUFFIX, dir=folder)
        with os.fdopen(fd, 'wb') as f:
            os.fchmod(f.fileno(), _mode_for(target))  # mkstemp makes 0600
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
        tmp = None
        _fsync_folder(folder)
    except OSError as e:
        kept = (f"the previous {path} is intact" if existed else f"no file was left at {path}")
        raise CheckpointWriteError(f"could not write {path}: {describe_os_error(e)}; {kept}") from None
    finally:
        if tmp is not None:
            try:
                os.remove(tmp)
            except OSError:  # already gone, or cannot be removed: the next run's cleanup will
                pass


# The temporary file of a save of out/model.json is out/.model.json.<8 random chars>.tmp
# (tempfile.mkstemp's random part: lowercase letters, digits and '_').
TEMP_SUFFIX = '.tmp'
_TEMP_RANDOM = re.compile(r'[a-z0-9_]{8}')


def _temp_prefix(target):
    return '.' + os.path.basename(target) + '.'


def probe_writable(path):
    """Create and remove a file beside `path` named as a save's temporary file is: an OSError
    now (folder not writable, name too long, disk refusing new files) is one before training."""
    target = os.path.realpath(path)
    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(target), suffix=TEMP_SUFFIX, dir=os.path.dirname(target))
    os.close(fd)
    os.remove(tmp)


def stale_temporaries(path):
    """The temporary files a killed save of `path` (or of its symlink's target) left behind:
    only names of our own pattern, only in that folder, only regular files."""
    target = os.path.realpath(path)
    folder, prefix = os.path.dirname(target), _temp_prefix(target)
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    found = []
    for name in sorted(names):
        middle = name[len(prefix):-len(TEMP_SUFFIX)]
        if name.startswith(prefix) and name.endswith(TEMP_SUFFIX) and _TEMP_RANDOM.fullmatch(middle):
            full = os.path.join(folder, name)
            if stat.S_ISREG(os.lstat(full).st_mode):  # never follow a link, never a folder
                found.append(full)
    return found


def remove_stale_temporaries(path):
    """Delete what stale_temporaries(path) finds and return those paths. A save killed by
    SIGKILL (or a power cut) has no chance to clean up; the next run on the same output
    does it. Call it only while holding the output's lock: a save in progress has a
    temporary file of the same pattern."""
    removed = []
    for tmp in stale_temporaries(path):
        try:
            os.remove(tmp)
            removed.append(tmp)
        except FileNotFoundError:
            pass
    return removed


def is_our_checkpoint(path):
    """True if path is a regular file that starts like a checkpoint microgpt writes,
    `{"format": "microgpt", ...`. Reads at most the first 256 bytes: cheap even for a huge
    file, and what train.py asks before it replaces an --out that already exists. A
    .safetensors file is ours if its metadata comes first and names the format."""
    if str(path).endswith(safetensors.EXTENSION):
        return safetensors.is_ours(path, FORMAT)
    head = read_head(path, 256)
    return head is not None and _OUR_HEAD.match(head) is not None


_OUR_HEAD = re.compile(rb'\s*\{\s*"format"\s*:\s*"' + FORMAT.encode() + rb'"')


def _mode_for(target):
    """The permission bits the new file gets: the old file's, or those the umask leaves."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        umask = os.umask(0)  # the only way to read the umask is to set it; put it back at once
        os.umask(umask)
        return 0o666 & ~umask


def describe_os_error(e):
    """What an OSError of a save means, in words a user can act on."""
    reasons = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exhausted",
               errno.EROFS: "the folder is on a read-only file system",
               errno.EACCES: "permission denied", errno.EPERM: "permission denied",
               errno.EFBIG: "the file would exceed the file-size limit (ulimit -f)",
               errno.ENAMETOOLONG: "the file name is too long"}
    return reasons.get(e.errno, e.strerror or str(e))


def _fsync_folder(folder):
    """Make the rename itself durable (best effort: not every system can open a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------- formats and sizes
# A checkpoint's format is named by its file's extension. Each format says how many bytes a
# checkpoint of n numbers and a vocabulary of v characters can take at most, and the most its
# reader accepts, so that a run whose checkpoint could not be read back is refused before it
# starts. JSON writes each float with repr(): at most 24 characters (-2.2250738585072014e-308)
# and a ', ' after it; a row adds its brackets and a ', '; a vocabulary character at most a
# 12-character escaped pair ("\\ud83d\\ude00") and its ', '. safetensors writes 8 bytes a number
# (microgpt/edge/safetensors.py's file_bytes bounds its header).
FORMATS = {  # extension: (the most bytes a checkpoint takes, the most its reader accepts, named)
    '.json': (lambda n_numbers, n_rows, vocab_size: 26 * n_numbers + 4 * n_rows + 16 * vocab_size + 4096,
              MAX_FILE_BYTES, 'limits.MAX_FILE_BYTES'),
    safetensors.EXTENSION: (safetensors.file_bytes, safetensors.MAX_BYTES, 'safetensors.MAX_BYTES'),
}


def checkpoint_format(path, what=None):
    """The extension of a checkpoint path (a key of FORMATS), or a one-line UserError."""
    ext = os.path.splitext(path)[1]
    if ext not in FORMATS:
        known = ' or '.join(FORMATS)
        raise UserError(f"{what or path} does not end in {known}: a checkpoint is named by its format "
                        f"(its log goes beside it as NAME.log.jsonl): use {os.path.splitext(path)[0] or 'model'}.json")
    return ext


def checkpoint_bytes(path, config, train_state=True):
    """The most bytes the checkpoint of a model of this config can take at `path`, in its format:
    the weights, and with the training state (what train.py saves) Adam's two moments too."""
    shapes = parameter_shapes(config)
    n_numbers = sum(n_out * n_in for n_out, n_in in shapes.values())
    n_rows = sum(n_out for n_out, _ in shapes.values())
    vocab_size = shapes['wte'][0]
    if train_state:
        n_numbers, n_rows = 3 * n_numbers, n_rows + 2
    return FORMATS[checkpoint_format(path)][0](n_numbers, n_rows, vocab_size)


def check_fits(path, config):
    """Refuse, in one line, a model whose checkpoint at `path` (with its training state) could be
    larger than its format's reader accepts. train.py calls it before building the model."""
    size = checkpoint_bytes(path, config)
    _, cap, named = FORMATS[checkpoint_format(path)]
    if size > cap:
        n_params = sum(n_out * n_in for n_out, n_in in parameter_shapes(config).values())
        binary = checkpoint_bytes(os.path.splitext(path)[0] + safetensors.EXTENSION, config)
        other = (f", or save it as .safetensors (at most {binary / 1e9:.1f} GB, which fits)"
                 if checkpoint_format(path) == '.json' and binary <= safetensors.MAX_BYTES else "")
        raise UserError(f"a model of {n_params:,} parameters makes a checkpoint of up to {size / 1e9:.1f} GB "
                        f"with its Adam moments, more than the {cap >> 20:,} MiB microgpt reads back as "
                        f"{checkpoint_format(path)} ({named}): make the model smaller{other}")


# ---------------------------------------------------------------------------- reading
def read_checkpoint(path, n_head=None):
    """Read and validate a checkpoint file of either form.

    Returns {'config': GPTConfig, 'vocab': [chars], 'state_dict': {name: [[float]]},
    'train_state': dict or None, 'source': 'microgpt' or 'tutorial'}.
    n_head: only for the tutorial form, whose file does not record it (default 4).
    A path ending in .safetensors is read in that format, into the dictionary its JSON would
    parse to, then checked as JSON is.
    """
    obj = safetensors.checkpoint_dict(path) if str(path).endswith(safetensors.EXTENSION) else _read_json(path)
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
    model.data_mode = ckpt['data_mode']  # 'lines' (names) or 'text': what sample.py generates
    return model


def _read_json(path):
    text = read_user_file(path, 'checkpoint', f"train one first with `python train.py --out {path}`")
    return parse_json(text, path)  # NaN, Infinity and absurd nesting are refused there


def _from_microgpt(path, obj, n_head):
    if obj.get('format') != FORMAT:
        raise UserError(f"{path} has format {obj.get('format')!r}, expected {FORMAT!r}")
    version = obj.get('version')
    if type(version) is not int or version != VERSION:  # true == 1 and 1.0 == 1 in Python
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
    data_mode = obj.get('data_mode', 'lines')  # a checkpoint from before running text: names
    if data_mode not in DATA_MODES:
        raise UserError(f"{path}: data_mode {data_mode!r} is neither 'lines' nor 'text': the "
                        "checkpoint is damaged or from a newer microgpt")
    return {'config': config, 'vocab': vocab, 'state_dict': state_dict,
            'train_state': train_state, 'source': FORMAT, 'data_mode': data_mode}


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
            'train_state': None, 'source': 'tutorial', 'data_mode': 'lines'}


def _config(path, **fields):
    """The GPTConfig of fields, checked (checks.make_config: positive integers, within limits.py's
    caps, n_embd divisible by n_head) before anything is built, as one line naming the file."""
    try:
        return make_config(**fields)
    except UserError as e:
        raise UserError(f"{path}: bad config: {e}") from None


def _vocab(path, vocab, vocab_size):
    if not isinstance(vocab, list) or not all(isinstance(c, str) and len(c) == 1 for c in vocab):
        raise UserError(f"{path}: the vocabulary must be a list of single characters")
    unprintable = [c for c in vocab if 0xD800 <= ord(c) <= 0xDFFF]
    if unprintable:  # a lone surrogate: valid in a JSON escape, but no text can hold it
        raise UserError(f"{path}: the vocabulary holds {unprintable[0]!r}, half of a UTF-16 pair, "
                        "which is not a character: the checkpoint is damaged")
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
    # config's sizes are within limits.py's caps, so this list is at most a few thousand names,
    # and each matrix's size is compared with what the file holds before a number is read
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
                # _is_finite: also False for a JSON integer too big for a float (1 and 400 zeros)
                if isinstance(x, bool) or not isinstance(x, (int, float)) or not _is_finite(x):
                    raise UserError(f"{path}: {name} holds {_short(x)}, not a finite number")


def _is_finite(x):
    try:
        return math.isfinite(x)
    except OverflowError:  # an int too big for any float
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
