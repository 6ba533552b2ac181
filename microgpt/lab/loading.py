"""
The trained model the lab looks at, and the text a learner hands it.

`load(path, kind)` reads a checkpoint's record (edge/checkpoint.py) and builds from it the numpy
port (kind 'numpy'), whose forward pass can return every intermediate array, or microgpt's own
GPT of Values (kind 'scalar'), which `step` trains. `read_text` turns TEXT into what the model
reads and what it should predict at each position, as train.py trained it, with one-line errors
for what the model cannot read. The lab's arithmetic on a model runs under `no_overflow`.
"""

import contextlib
import os
from typing import NamedTuple

from ..edge.checks import encode, is_finite_number, short
from ..model import SIZE_FIELDS
from ..edge.errors import UserError
from ..edge.files import read_head

DEFAULT_CKPT = 'out/model.json'  # where train.py writes by default
DEFAULT_HOST = '127.0.0.1'       # where lab serve listens: loopback, this machine only
DEFAULT_PORT = 8000              # lab serve's TCP port


def trained_run(ckpt):
    """The checkpoint's SavedRun (.lr, .data, ...), or None where it does not say."""
    return ckpt.train_state.run if ckpt is not None and ckpt.train_state else None


def trained_data(ckpt):
    """The data file the checkpoint says it was trained on, or None (the bundled names, or it
    does not say)."""
    run = trained_run(ckpt)
    return run.data if run is not None else None


def trained_lr(ckpt):
    """The learning rate the checkpoint was trained with, or None where it does not say a
    positive number: where the Step page and `lab step` start."""
    run = trained_run(ckpt)
    lr = run.lr if run is not None else None
    return lr if is_finite_number(lr) and lr > 0 else None


def require_checkpoint(path):
    """A missing checkpoint is one line that says how to train one (or where to point --ckpt)."""
    if not os.path.exists(path):
        hint = "python train.py" if path == DEFAULT_CKPT else f"python train.py --out {path}"
        raise UserError(f"no checkpoint at {path}: train one first with `{hint}` "
                        "(or point --ckpt at an existing one)")


class Loaded(NamedTuple):
    ckpt: object   # the Checkpoint record: data mode, and how it was trained (train_state)
    model: object  # a NumpyGPT (kind 'numpy') or a GPT of Values (kind 'scalar') with its weights


def load(path, kind='numpy', n_head=None):
    """The checkpoint at `path` as Loaded(record, model)."""
    require_checkpoint(path)
    from ..edge.checkpoint import read_checkpoint
    ckpt = read_checkpoint(path, n_head=n_head)
    if kind == 'scalar':
        return Loaded(ckpt, ckpt.model(fused=True))  # fused.py's blocks: the lab's scalar steps are train.py's
    from microgpt import inference  # the numpy port; imported here so that `autograd` and `loss` do not need it
    return Loaded(ckpt, inference.NumpyGPT(ckpt.config, ckpt.weights, tokenizer=ckpt.tokenizer))


@contextlib.contextmanager
def no_overflow():
    """Run the lab's own arithmetic on a model's numbers so that an overflow is one line: a
    forward pass that just fits in a float (the port stops at its own overflows) can still
    overflow a standard deviation or a low-temperature softmax, where numpy would only warn."""
    import numpy as np  # here, not at the top: __main__ imports this file for every command

    try:
        with np.errstate(over='raise', invalid='raise'):
            yield
    except FloatingPointError as e:
        if isinstance(e, UserError):  # the port's own, already one line
            raise
        raise UserError("the lab's arithmetic on this model's numbers overflows a float: its "
                        "weights are too large (its training diverged); retrain it with a "
                        "lower --lr") from None


def describe(path, model):
    """One line naming the checkpoint and its configuration: printed first by every command."""
    c = model.config
    return (f"checkpoint {path}: n_layer={c.n_layer} n_embd={c.n_embd} n_head={c.n_head} "
            f"head_dim={c.head_dim} block_size={c.block_size} vocab_size={c.vocab_size}" + rungs_text(c))


def rungs_text(config):
    """The rungs the model has, as train.py prints them (' rope=True mlp=swiglu'), or '' for
    microgpt's model: the commands' first line and the pages' header say it after the sizes."""
    return ''.join(f" {name}={value}" for name, value in config.to_dict().items() if name not in SIZE_FIELDS)


def data_mode(ckpt):
    """'lines' (names) or 'text' (running text); names for a sandbox called without its record."""
    return 'lines' if ckpt is None else ckpt.data_mode


class Reading(NamedTuple):
    ids: list      # what the model reads, position by position
    targets: list  # the true next token at each position; None where the text ends first


def read_text(model, text, mode='lines'):
    """TEXT as train.py trained this model on it: what the model reads and what comes next.

    A name ('lines'): [BOS] + its characters, and at each position the next one, BOS after the
    last (the name ends); at most block_size - 1 characters. Running text ('text'): a window of
    the stream, at most block_size + 1 characters, no BOS anywhere: the model reads the first
    block_size and at each position the target is the next character; a window shorter than
    that leaves its last position without a target (what comes next is not in the text).
    """
    ids = encode(model.tokenizer, text)  # an unknown character is a UserError naming it
    block_size = model.config.block_size
    if mode == 'text':
        if not ids:
            raise UserError("TEXT is empty: give at least one character of running text")
        if len(ids) > block_size + 1:
            raise UserError(f"TEXT has {len(ids)} characters, but a window of this model holds at most "
                            f"block_size + 1 = {block_size + 1}: it reads {block_size} and predicts the "
                            "character after each")
        return Reading(ids[:block_size], ids[1:] + [None] * (len(ids) <= block_size))
    limit = block_size - 1  # one position goes to BOS
    if len(ids) > limit:
        raise UserError(f"TEXT {short(text)} has {len(ids)} characters, but this model's block of "
                        f"{block_size} positions (one of them BOS) leaves room for at most {limit}")
    return Reading([model.tokenizer.bos] + ids, ids + [model.tokenizer.bos])


def example_text(ckpt, default='anna'):
    """What the pages put in their text box to start: `default` (a name) for a names model; for
    a model of running text, the whole lines of its training data that fit one window (block_size
    + 1 characters); where that cannot be read, the default if the model knows its characters,
    else its first characters."""
    tok, window = ckpt.tokenizer, ckpt.config.block_size + 1
    if ckpt.data_mode != 'text':
        return default
    data = trained_data(ckpt)
    head = read_head(data, 4 * window) if isinstance(data, str) else None  # UTF-8: 4 bytes a character at most
    text = head.decode('utf-8', errors='ignore').replace('\r\n', '\n')[:window] if head else ''
    if '\n' in text[:-1] and len(text) == window:
        text = text[:text.rindex('\n', 0, window) + 1]  # whole lines, as many as fit
    if text and tok.unknown(text) is None:
        return text
    return default if tok.unknown(default) is None else ''.join(tok.chars[:8])
