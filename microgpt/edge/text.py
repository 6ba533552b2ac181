"""
Running text: a whole file read as one stream of characters, for prose, plays, code
(`train.py --data-mode text`, as nanoGPT's shakespeare_char reads it).

A step draws batch_size windows of block_size + 1 characters at random places of the training
part, placed by (seed, step) alone so that a resumed run draws what an uninterrupted one would;
the model reads the first block_size and predicts, at every position, the next character. The
split is by position (the last characters validate: a random split would leak), and the
validation loss is exact: every validation character is predicted once. BOS stays in the
vocabulary but running text never contains it.
"""

import random
import unicodedata

from .data import read_text
from .errors import UserError
from ..training import doc_losses

DEFAULT_VAL_FRACTION = 0.1  # nanoGPT's split: the first 90% trains, the last 10% validates


# ---------------------------------------------------------------------------- reading
def load_text(path):
    """The whole file as one string, read as names are (data.read_text). A tab is text; NUL and
    other control characters are refused with their line: NUL means a binary file, the others no
    one could see."""
    text = read_text(path, "give --data a UTF-8 text file")
    bad = next((c for c in set(text) if unicodedata.category(c) == 'Cc' and c not in '\n\t'), None)
    if bad == '\0':  # text never holds NUL; images, archives and executables do
        raise UserError(f"{path} looks like a binary file (it holds NUL bytes), not text: give --data a UTF-8 text file")
    if bad is not None:
        raise UserError(f"{path} line {text[:text.index(bad)].count(chr(10)) + 1} holds the control character "
                        f"U+{ord(bad):04X}: remove it (running text is plain text)")
    return text


# ---------------------------------------------------------------------------- the split
def val_chars(n_chars, val_size):
    """How many characters validate: val_size as a fraction (0 < f < 1), a count, or None (10%)."""
    if val_size is None:
        val_size = DEFAULT_VAL_FRACTION
    if isinstance(val_size, float):
        return int(n_chars * val_size)
    return val_size


def split_text(text, val_size, block_size):
    """(train_text, val_text): the first characters and the last val_chars(len, val_size).

    The training part must hold a window (block_size + 1 characters); a validation part, if
    any, must hold one too, or its loss would be a handful of characters' worth of noise.
    """
    window = block_size + 1
    if len(text) < 2 * window:
        raise UserError(f"the text has {len(text):,} characters, fewer than two windows of "
                        f"block_size + 1 = {window}: use a longer file or a smaller --block-size")
    n_val = val_chars(len(text), val_size)
    if n_val and n_val < window:
        raise UserError(f"--val-size leaves {n_val:,} validation characters, fewer than one window "
                        f"of block_size + 1 = {window}: give a larger --val-size (or 0 for none)")
    if len(text) - n_val < window:
        raise UserError(f"--val-size leaves {len(text) - n_val:,} training characters, fewer than one "
                        f"window of block_size + 1 = {window}: give a smaller --val-size")
    cut = len(text) - n_val
    return text[:cut], text[cut:]


def check_windows(n_train, n_val, block_size):
    """The parts' token counts, once encoded, must hold a window each as their characters do:
    byte pairs make fewer tokens than characters (about half as many for English)."""
    window = block_size + 1
    for part, n in (('training', n_train), ('validation', n_val)):
        if n and n < window or part == 'training' and n < window:
            raise UserError(f"the {part} part is {n:,} tokens with --tokenizer bpe, fewer than one window of "
                            f"block_size + 1 = {window}: use a longer file, a smaller --block-size, "
                            f"{'or a smaller --val-size' if part == 'training' else 'or a larger --val-size'}")


# ---------------------------------------------------------------------------- the windows
def window_starts(n_train, block_size, batch_size, seed, step):
    """Where step `step`'s windows start: batch_size offsets in 0 .. n_train - block_size - 1.

    A generator seeded with (seed, step) alone, so step s draws the same windows whether the
    run got there in one go or was resumed at step s - 1.
    """
    rng = random.Random(f"text windows {seed} {step}")  # a str seed is hashed: no collisions between steps
    return [rng.randrange(n_train - block_size) for _ in range(batch_size)]


def train_windows(train_ids, block_size, batch_size, seed, step):
    """One step's batch: batch_size windows of block_size + 1 token ids of the training part.

    Window w reads w[0 .. block_size - 1] and at position t predicts w[t + 1], the character
    that follows: the same token lists a names batch is made of, only all of one length.
    """
    starts = window_starts(len(train_ids), block_size, batch_size, seed, step)
    return [train_ids[s:s + block_size + 1] for s in starts]


def validation_windows(ids, n_val, block_size):
    """Windows over the last n_val + 1 ids of `ids` that predict each of the last n_val once.

    The stream starts one character before the validation part (the training part's last one,
    as context only), so every validation character is a target. Consecutive windows of
    block_size + 1 ids overlap by one: window k reads stream[k * block_size ...] and predicts
    the block_size characters after its start; the last window may be shorter.
    """
    stream = ids[len(ids) - n_val - 1:]
    return [stream[s:s + block_size + 1] for s in range(0, n_val, block_size)]


def spread_windows(ids, n_targets, block_size):
    """Windows of block_size + 1 ids spread evenly over `ids` that together predict about
    n_targets of them (one window more at most): train.py's training-loss estimate, measured
    like the validation loss, on as many characters of the training part."""
    n_windows = max(1, -(-n_targets // block_size))
    room = len(ids) - block_size - 1  # the last start that still has a whole window
    return [ids[s:s + block_size + 1] for s in sorted({room * k // max(1, n_windows - 1) for k in range(n_windows)})]


def evaluate(model, windows):
    """The validation loss with the scalar engine: the reference for
    inference.evaluate_windows, and what train.py uses where numpy is not installed."""
    losses = [loss.data for w in windows for loss in doc_losses(model, w)]
    return sum(losses) / len(losses)
