"""
microgpt: a GPT built from scratch on a scalar autograd engine, in pure standard-library Python.

    from microgpt import Value, GPT, GPTConfig, load_checkpoint
    model = load_checkpoint('out/model.json')
    keys, values = model.empty_cache()
    logits = model.gpt(model.tokenizer.bos, 0, keys, values)   # vocab_size Values

The order to read the files in is docs/reading-guide.md's (it starts with engine.py). This
file is only the front door: it imports the few names a script needs.
"""

import os

from .engine import Value
from .model import GPT, GPTConfig

# The numpy port, the numpy trainer and the PyTorch module live in src/ beside this folder and
# are microgpt.inference, microgpt.backprop and microgpt.torchgpt: in a checkout, src/ is part
# of the package's path (an installed copy has them inside the package itself).
_SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'src')
if os.path.isdir(os.path.join(_SRC, 'inference')):
    __path__.append(_SRC)

__all__ = ['Value', 'GPT', 'GPTConfig', 'load_checkpoint']


def load_checkpoint(path, n_head=None):
    """A GPT of Values, with its tokenizer, from a checkpoint file. The edge layer reads and
    checks the file (edge/checkpoint.py); it is imported here, when first used, so that the
    lesson's files load none of it."""
    from .edge.checkpoint import load_checkpoint as load
    return load(path, n_head)
