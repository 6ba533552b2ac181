"""
The training data: a list of documents (here, names), and its train/validation split.

By default the documents are the first names of the US census lists that ship inside the
`names` package (female and male), lowercased and deduplicated: 5,163 names over 26 letters,
read from the installed package, nothing downloaded. `--data PATH` takes any UTF-8 text file
instead, one document per line, normalized to NFC (running text reads it with `read_text`).
train.py calls `load_docs` and then `split_docs`.
"""

import hashlib
import random
import unicodedata
from importlib import resources

from .errors import UserError
from .files import read_user_file

NAMES_FILES = ('dist.female.first', 'dist.male.first')  # the census first-name lists


def read_text(path, hint):
    """The UTF-8 text of the file at `path`, a byte-order mark dropped, CRLF and CR line ends made
    LF, normalized to NFC (an accented letter is one token however the editor stored it); a byte
    that is not UTF-8 is one line naming its line."""
    raw = read_user_file(path, 'data file', hint, binary=True)
    try:
        text = raw.decode('utf-8')
    except UnicodeDecodeError as e:
        line = raw[:e.start].replace(b'\r\n', b'\n').replace(b'\r', b'\n').count(b'\n') + 1
        raise UserError(f"{path} line {line} is not valid UTF-8: save the file as UTF-8") from None
    return unicodedata.normalize('NFC', text.removeprefix('\ufeff').replace('\r\n', '\n').replace('\r', '\n'))


def load_docs(path=None):
    """The documents of `path` (one per line, read_text's), or the bundled census first names if
    None. Each line is stripped of surrounding spaces, blank lines are skipped, and a control
    character (NUL, a tab, an escape code) is refused with its line: no one could see its token."""
    if path is None:
        return bundled_names()
    docs = []
    for lineno, line in enumerate(read_text(path, "give --data a text file with one name per line").split('\n'), 1):
        line = line.strip()
        bad = next((c for c in line if unicodedata.category(c) == 'Cc'), None)
        if bad is not None:
            raise UserError(f"{path} line {lineno} holds the control character U+{ord(bad):04X}, which "
                            "no name contains: remove it (one name per line, plain text)")
        if line:
            docs.append(line)
    if not docs:
        raise UserError(f"{path} has no documents: it needs at least one non-blank line")
    return docs


def bundled_names():
    """The census first names from the `names` package, lowercased, duplicates removed."""
    try:
        folder = resources.files('names')
    except ModuleNotFoundError:
        raise UserError("the `names` package is not installed: run `make run` (or "
                        "`pip install -e .`), or pass --data PATH") from None
    docs = []
    for filename in NAMES_FILES:
        # each line: NAME  frequency  cumulative-frequency  rank
        for line in (folder / filename).read_text(encoding='utf-8').splitlines():
            if line.strip():
                docs.append(line.split()[0].lower())
    return list(dict.fromkeys(docs))  # dedupe, keeping the first occurrence's order


def default_val_size(n_docs):
    """makemore's rule: hold out 10% of the names, but never more than 1000."""
    return min(1000, int(n_docs * 0.1))


def split_docs(docs, val_size=None, seed=42, shuffle=True):
    """(train_docs, val_docs): shuffled with `seed` unless shuffle is False, the last
    `val_size` documents held out for validation."""
    docs = list(docs)
    if val_size is None:
        val_size = default_val_size(len(docs))
    if not 0 <= val_size < len(docs):
        raise UserError(f"--val-size {val_size} leaves no training documents out of {len(docs)}: "
                        f"use a number from 0 to {len(docs) - 1}")
    if shuffle:
        random.Random(seed).shuffle(docs)
    cut = len(docs) - val_size
    return docs[:cut], docs[cut:]


def fingerprint(docs):
    """A hash of the documents (or of a running text, one document), so that --resume can
    refuse data that changed under it and ranks can check they read the same."""
    return hashlib.sha256('\n'.join(docs).encode('utf-8')).hexdigest()
