"""
Loading a checkpoint into the numpy port.

Both forms that microgpt.load_checkpoint reads (the project's own JSON checkpoint and the 3D
tutorial's flat weights export) are read and validated by microgpt.edge.checkpoint.read_checkpoint,
so a bad file gets exactly the same one-line UserError from either engine. This file only
turns the validated lists of floats into float64 arrays (in NumpyGPT's constructor).
"""

from microgpt.edge.checkpoint import read_checkpoint
from microgpt.tokenizer import CharTokenizer

from .model import NumpyGPT


def load_checkpoint(path, n_head=None):
    """A NumpyGPT, with its tokenizer, from a checkpoint file of either form.

    n_head: only for the tutorial's export, which does not record it (default 4), as in
    `python sample.py --n-head`.
    """
    ckpt = read_checkpoint(path, n_head=n_head)
    model = NumpyGPT(ckpt['config'], ckpt['state_dict'], tokenizer=CharTokenizer(ckpt['vocab']))
    model.data_mode = ckpt['data_mode']  # 'lines' (names) or 'text': what sample.py generates
    return model
