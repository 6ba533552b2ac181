"""
backprop: microgpt's GPT trained on numpy arrays, every layer's gradient derived by hand.

    from microgpt import backprop
    trainer = backprop.Trainer(config, weights, tokenizer)   # weights: GPT(config).weights()
    loss = trainer.step(batch, lr)   # batch: B token lists [BOS] + ids + [BOS]; mean token loss

Read it after the scalar engine (microgpt/engine.py, model.py, optim.py) and the numpy port
(src/inference/), in this order: layers.py (each layer's forward and backward, the backward's
derivation in its docstring), model.py (the whole GPT on a padded batch: loss and one gradient
per weight, under microgpt's names), optim.py (Adam on one flat array, the scalar Adam's order),
trainer.py (Trainer, what train.py's `--engine numpy` drives); then the machinery of speed:
memory.py (freed memory kept for the next step), parallel.py (the batch split across cores),
threads.py (which way to use the cores, measured). It lives in src/backprop/ and is
installed under the name `backprop`, as `inference` is; it reuses the port's forward pieces, and
the port stays inference only. tests/test_backprop_*.py prove it equal to the scalar engine
(and to finite differences; tests/test_torch_model.py to PyTorch), and tests/test_modern_engines.py
with each modern rung (RoPE, GELU, SwiGLU, norm gains, QK-norm, grouped-query attention, tied
embeddings); bench/engines_speed.py times it.
"""

from .model import loss_and_grads, make_batch
from .trainer import Trainer

__all__ = ['Trainer', 'loss_and_grads', 'make_batch']
