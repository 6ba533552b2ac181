"""
Loading a checkpoint into the numpy port.

Both forms that microgpt reads (the project's own checkpoint, JSON or safetensors, and the 3D
tutorial's flat weights export) are read and validated by microgpt.edge.checkpoint.read_checkpoint
into one record, so a bad file gets exactly the same one-line UserError from either engine. This
file only hands the record's weights to NumpyGPT, which makes them float64 arrays.
"""

from microgpt.edge.checkpoint import read_checkpoint

from .model import NumpyGPT


def load_checkpoint(path, n_head=None):
    """A NumpyGPT, with its tokenizer, from a checkpoint file of either form.

    n_head: only for the tutorial's export, which does not record it (default 4), as in
    `python sample.py --n-head`. What else the checkpoint holds (its data mode, its training
    state) is the record's: read_checkpoint(path).
    """
    ckpt = read_checkpoint(path, n_head=n_head)
    return NumpyGPT(ckpt.config, ckpt.weights, tokenizer=ckpt.tokenizer)
