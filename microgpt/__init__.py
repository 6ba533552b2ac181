"""
microgpt: a GPT built from scratch on a scalar autograd engine, in pure standard-library Python.

    from microgpt import Value, GPT, GPTConfig, load_checkpoint
    model = load_checkpoint('out/model.json')
    keys, values = model.empty_cache()
    logits = model.gpt(model.tokenizer.bos, 0, keys, values)   # vocab_size Values

Read in the order docs/reading-guide.md gives: engine.py (Value, backward), tokenizer.py,
data.py, ops.py and model.py (the building blocks and the annotated gpt()), training.py,
optim.py, sampling.py, fused.py (why training is fast), checkpoint.py; then train.py and
sample.py at the top of the repository.
"""

from .checkpoint import load_checkpoint
from .engine import Value
from .model import GPT, GPTConfig

__all__ = ['Value', 'GPT', 'GPTConfig', 'load_checkpoint']
