"""
Trainer: one PyTorch training step (forward, loss.backward(), torch.optim.Adam) per batch of names.

    from microgpt import torchgpt
    trainer = torchgpt.Trainer(config, GPT(config, seed=42).weights(), tokenizer, device='cpu')
    loss = trainer.step([doc_tokens(tokenizer, 'emma'), doc_tokens(tokenizer, 'liam')], lr=0.01)

The third engine of train.py's loop (`--engine torch`), with the methods of backprop.Trainer.
The batch is backprop.make_batch's, the Adam is torch.optim.Adam with microgpt's betas and eps,
and its moments are exported flat in GPT.params order, so a checkpoint from any engine resumes
on any other.

dtype: float64 (the other engines' numbers, to rounding), float32, or bfloat16 (mixed
precision as it is usually done: float32 weights and Adam, matrix products in bfloat16 under
torch.autocast). device: cpu, cuda or mps. world: a torchgpt.distributed.World under torchrun.
"""

import math
from dataclasses import asdict

import numpy as np
import torch

from ..backprop import make_batch
from microgpt.edge.errors import UserError
from microgpt.model import parameter_shapes
from microgpt.training import num_predictions

from .model import GPT

DTYPES = {'float64': torch.float64, 'float32': torch.float32, 'bfloat16': torch.bfloat16}


def check_device(device, dtype):
    """torch.device(device), after checking this machine has it and it computes in dtype."""
    available = {'cpu': True, 'cuda': torch.cuda.is_available(), 'mps': torch.backends.mps.is_available()}
    if not available[device]:
        raise UserError(f"--device {device}: this machine has no {device} device that PyTorch can "
                        f"use (torch.{'cuda' if device == 'cuda' else 'backends.mps'}.is_available() "
                        "is False): use --device cpu")
    try:  # the honest test of "can this device do this dtype": do a product in it
        x = torch.ones(2, 2, dtype=DTYPES[dtype], device=device)
        (x @ x).sum().item()
    except (RuntimeError, TypeError):
        raise UserError(f"--dtype {dtype} is not supported on --device {device}: use --dtype float32") from None
    return torch.device(device)


class Trainer:
    """Trains microgpt's GPT with PyTorch. config: GPTConfig; weights: {name: [[float]]}."""

    def __init__(self, config, weights, tokenizer, device='cpu', dtype='float64', world=None, weight_decay=0.0):
        self.config, self.tokenizer, self.world = config, tokenizer, world
        self.weight_decay = weight_decay
        self.device = torch.device(device)
        self.dtype = dtype
        # bfloat16 keeps float32 weights and Adam; autocast runs the products in bfloat16
        self.model = GPT(config).to(self.device, torch.float32 if dtype == 'bfloat16' else DTYPES[dtype])
        self.params = list(self.model.parameters())  # GPT.params order: parameter_shapes'
        self.load_weights(weights)
        self._optimizer = None

    def notice(self):  # the loop asks each engine between steps; this one has nothing to say
        return None

    @property
    def optimizer(self):
        """torch.optim.Adam with microgpt's betas and eps (AdamW with a weight decay: PyTorch's
        Adam's own weight_decay is the L2 term microgpt/optim.py explains it does not use), made
        when first used: making one imports PyTorch's compiler (1.9 s, the first time in a
        process), which loss_and_grads, the lab's Step page's check, never needs."""
        if self._optimizer is None:
            if self.weight_decay:
                self._optimizer = torch.optim.AdamW(self.params, lr=0.0, betas=(0.85, 0.99), eps=1e-8,
                                                    weight_decay=self.weight_decay)
            else:
                self._optimizer = torch.optim.Adam(self.params, lr=0.0, betas=(0.85, 0.99), eps=1e-8)
        return self._optimizer

    def _autocast(self):
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.dtype == 'bfloat16')

    def _batch(self, batch):
        idx, targets, mask = make_batch(batch, self.config.block_size, self.config.vocab_size)
        return (torch.from_numpy(idx).to(self.device), torch.from_numpy(targets).to(self.device),
                torch.from_numpy(mask).to(self.device, self.params[0].dtype))  # (B, T), (B*T,), (B*T,)

    def step(self, batch, lr, masks=None):
        """One forward, backward and Adam update on `batch`; the mean loss over its tokens, or
        math.nan and nothing updated where it is not finite. Under torchrun each rank takes its
        share and the gradients are summed (distributed.py says why a sum)."""
        n_tokens = sum(num_predictions(tokens, self.config.block_size) for tokens in batch)  # whole batch
        shard = batch if self.world is None else self.world.shard(batch)
        if masks is not None:  # this rank's names' masks, as tensors beside the weights
            masks = masks if self.world is None else self.world.shard(masks)
            masks = {site: torch.from_numpy(a).to(self.device, self.params[0].dtype)
                     for site, a in masks.arrays.items()}
        self.optimizer.zero_grad()
        with self._autocast():
            loss = self.model.loss(*self._batch(shard), n_tokens=n_tokens, masks=masks)
        loss.backward()  # autograd: every gradient backprop/model.py derives by hand, in .grad
        # every gradient and the loss in one flat buffer: one all-reduce, one finiteness check
        flat = torch.cat([p.grad.reshape(-1) for p in self.params] + [loss.detach().reshape(1).to(self.params[0].dtype)])
        if self.world is not None:
            self.world.all_reduce_sum(flat)
            start = 0
            for p in self.params:  # the summed gradients back into .grad, where Adam reads them
                p.grad.copy_(flat[start:start + p.numel()].view_as(p))
                start += p.numel()
        if not torch.isfinite(flat).all():
            return math.nan
        for group in self.optimizer.param_groups:
            group['lr'] = lr
        self.optimizer.step()
        return flat[-1].item()

    def check_ranks_agree(self, run, data_sha256):
        """Under torchrun, stop every rank with one line unless it is about to train what rank 0
        trains: the run's settings (`run`: Settings.saved(), less the data's path, which may
        differ between machines), the model's size and rungs, the vocabulary, the data's sha256, and the
        weights and Adam state it starts from. Ranks that disagree would otherwise train on,
        each on its own numbers, and the checkpoint record only rank 0's."""
        if self.world is None:
            return
        from .distributed import digest
        adam = [t for s in self._optimizer.state.values() for t in s.values()] if self._optimizer else []  # resumed
        self.world.check_same({
            **{name: value for name, value in run.recorded().items() if name != 'data'},
            **{name: value for name, value in asdict(self.config).items() if name != 'vocab_size'},  # sizes, rungs
            'vocabulary': ''.join(self.tokenizer.chars), 'data (sha256)': data_sha256[:16],
            'starting weights (sha256)': digest(self.params), "Adam's state (sha256)": digest(adam)})

    def loss_and_grads(self, batch):
        """(loss, {name: gradient array}) at the current weights, without updating anything."""
        for p in self.params:
            p.grad = None
        with self._autocast():
            loss = self.model.loss(*self._batch(batch))
        loss.backward()
        grads = {name: p.grad.detach().double().cpu().numpy().copy()
                 for name, p in self.model.named_parameters()}  # (n_out, n_in) each
        for p in self.params:
            p.grad = None
        return loss.item(), grads

    def weights(self):  # {name: [[float]]}, what a checkpoint stores
        return {name: p.detach().double().cpu().tolist() for name, p in self.model.named_parameters()}

    def load_weights(self, weights):  # {name: [[float]] or array}, every name and shape checked by their reader
        tensors = {name: torch.from_numpy(np.asarray(weights[name], dtype=np.float64))  # (n_out, n_in)
                   for name in parameter_shapes(self.config)}
        self.model.load_state_dict(tensors)  # copies, converting to the model's dtype and device

    def optimizer_state(self):
        """{'t': int, 'm': [float], 'v': [float]}: torch's Adam moments, flat in GPT.params order."""
        states = [self.optimizer.state.get(p, {}) for p in self.params]
        t = int(states[0]['step'].item()) if states[0] else 0
        flat = {key: torch.cat([s[key].reshape(-1) if s else torch.zeros(p.numel(), device=self.device)
                                for p, s in zip(self.params, states)]).double().cpu().tolist()
                for key in ('exp_avg', 'exp_avg_sq')}
        return {'t': t, 'm': flat['exp_avg'], 'v': flat['exp_avg_sq']}

    def load_optimizer_state(self, state):
        """Resume from the Adam state any engine saved (the checkpoint's reader checked its
        sizes): torch's exp_avg is m, exp_avg_sq is v."""
        m, v = (torch.tensor(state[k], dtype=torch.float64) for k in ('m', 'v'))  # (n_params,) each
        start = 0
        for p in self.params:
            n = p.numel()
            self.optimizer.state[p] = {
                # the step count as torch keeps it, a tensor; float64, so it counts exactly past 2^24
                'step': torch.tensor(float(state['t']), dtype=torch.float64),
                'exp_avg': m[start:start + n].view_as(p).to(self.device, p.dtype).clone(),
                'exp_avg_sq': v[start:start + n].view_as(p).to(self.device, p.dtype).clone()}
            start += n


def make_trainer(config, weights, tokenizer, device='cpu', dtype='float64', world_size=None, batch_size=1,
                 weight_decay=0.0):
    """train.py's `--engine torch`: the device and dtype checked, the ranks joined under torchrun
    (world_size: torchrun's WORLD_SIZE, None without it), then a Trainer."""
    dev = check_device(device, dtype)
    world = None
    if world_size is not None and world_size > 1:  # each rank has a name of the batch (settings.py checks)
        from .distributed import World, local_rank
        if dev.type == 'cuda':  # one GPU per rank on each machine
            dev = torch.device('cuda', local_rank())
            torch.cuda.set_device(dev)
        world = World(dev)
    return Trainer(config, weights, tokenizer, dev, dtype, world, weight_decay)


def loss_and_grads(config, weights, batch):
    """(loss, {name: gradient array (n_out, n_in)}) by PyTorch's autograd in float64, at these
    weights, updating nothing: the third opinion `lab step` shows beside the scalar engine's
    graph and src/backprop's hand-derived backward."""
    return Trainer(config, weights, tokenizer=None).loss_and_grads(batch)
