"""
torchgpt: microgpt's GPT in PyTorch, the third rung: autograd on tensors, GPUs, many machines.

    from microgpt import torchgpt
    model = torchgpt.GPT(config)              # an nn.Module; state_dict keys are microgpt's names
    trainer = torchgpt.Trainer(config, weights, tokenizer, device='cpu', dtype='float64')
    loss = trainer.step(batch, lr)            # what `train.py --engine torch` drives
    loss, grads = torchgpt.loss_and_grads(config, weights, batch)   # lab step's third engine

Read it after src/backprop/, in this order: model.py (the module, gpt()'s steps on a batch),
trainer.py (Adam, dtypes, devices, the flat Adam state every engine shares), distributed.py
(torchrun: the batch split across ranks, the gradients summed). What changes from
src/backprop/: there is no backward to write. Each tensor operation of the forward is
recorded, and loss.backward() applies every local derivative in reverse, as microgpt/engine.py
does for single numbers; layers.py's derivations become the library's job, and
tests/test_torch_model.py checks that the library and the hand-derived gradients agree.
It lives in src/torchgpt/ and is installed as `torchgpt`; it needs `pip install -e '.[torch]'`,
and nothing else in the project needs PyTorch.
"""

from .model import GPT
from .trainer import Trainer, check_device, loss_and_grads, make_trainer

__all__ = ['GPT', 'Trainer', 'check_device', 'loss_and_grads', 'make_trainer']
