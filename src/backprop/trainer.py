"""
Trainer: one numpy training step (forward, hand-derived backward, Adam) per batch of names.

    from microgpt import backprop
    trainer = backprop.Trainer(config, GPT(config, seed=42).weights(), tokenizer)
    loss = trainer.step([doc_tokens(tokenizer, 'emma'), doc_tokens(tokenizer, 'liam')], lr=0.01)

It is the twin of the scalar engine's train_step + microgpt.optim.Adam, over float64 arrays
(model.py computes the loss and gradients, optim.py updates): with one name per batch the two
give the same losses step after step (tests/test_backprop_trainer.py). Its optimizer_state() is
the scalar Adam's state(): a checkpoint is the same whichever engine wrote it.

Every weight matrix is a view into one flat array in GPT.params order (parameter_shapes order,
each matrix row by row), so the Adam update is a handful of array operations over all of them.

dtype: float64 (the default) is the path proven equal to the scalar engine. float32 halves the
memory every matrix product reads and doubles the numbers one vector instruction holds, so the
wide running-text models train about twice as fast; its losses agree with float64's to about
1e-5 relative over tens of steps (tests/test_backprop_float32.py). A checkpoint is the same
either way: weights() and optimizer_state() hand back Python floats, and a float32 run resumes
on float64 or on the scalar engine (every float32 number is exactly a float64 one).
"""

import math

import numpy as np

from microgpt.edge.limits import parameter_count
from microgpt.model import parameter_shapes

from .memory import keep_freed_memory
from .model import flat_views, loss_and_grads
from .parallel import Split
from .optim import AdamArrays


class Trainer:
    """Trains microgpt's GPT on numpy arrays. config: GPTConfig; weights: {name: [[float]]};
    dtype: 'float64' (default, exact) or 'float32' (fast). The loop drives it as it drives
    programs/train.py's ScalarTrainer: the same methods, one process (world None)."""
    world = None

    def __init__(self, config, weights, tokenizer, dtype='float64', workers=1, weight_decay=0.0):
        self.config = config
        self.tokenizer = tokenizer
        self.dtype = np.dtype(dtype)
        self.shapes = parameter_shapes(config)  # {name: [n_out, n_in]}, in GPT.params order
        n_params = parameter_count(config)
        self.flat = np.zeros(n_params, dtype=self.dtype)  # (n_params,): every weight, GPT.params order
        self.params = flat_views(self.flat, self.shapes)  # {name: (n_out, n_in) view into self.flat}
        self.grad = np.zeros(n_params, dtype=self.dtype)  # (n_params,): the step's gradient, same order
        self.grads = flat_views(self.grad, self.shapes)   # {name: (n_out, n_in) view into self.grad}
        self.load_weights(weights)
        self.optimizer = AdamArrays(n_params, dtype=self.dtype, weight_decay=weight_decay)
        keep_freed_memory()  # every step's arrays reuse the last step's memory (memory.py says why)
        self.split = None    # a parallel.Split when the batch runs as parts on several cores
        self.use_workers(workers)

    def use_workers(self, workers):
        """Run each step's batch as `workers` parts at once, a thread each (parallel.py), or
        in one piece (1). The BLAS threads are threads.py's to set: one per worker pays."""
        if self.split is not None and self.split.workers == workers:
            return  # already so: keep the threads and the parts' gradient arrays
        if self.split is not None:
            self.split.pool.shutdown()
        self.split = Split(self, workers) if workers > 1 else None
        self.workers = workers

    def notice(self):  # nothing to say between steps (threads.Trial, wrapping it, says what it chose)
        return None

    def step(self, batch, lr, masks=None):
        """One forward, backward and Adam update on `batch` (B token lists); the mean loss.

        The loss is averaged over every predicted token of the batch (B = 1: doc_loss). If the
        loss or any gradient is not finite (training diverged), nothing is updated, not the
        weights, not Adam's moments or step count, and math.nan is returned. masks: the batch's
        dropout.Masks with --dropout (None: nothing dropped).
        """
        masks = masks and masks.astype(self.dtype)
        with np.errstate(all='ignore'):  # an overflow shows up as inf/nan, checked below
            loss, finite = self.gradient(batch, masks)
            if not (math.isfinite(loss) and finite):
                return math.nan
            self.optimizer.step(self.flat, self.grad, lr, self.split)
        return loss

    def gradient(self, batch, masks=None):
        """(loss, finite): the batch's loss, its gradient written into self.grad (GPT.params
        order), and whether every number of it is finite."""
        if self.split is not None:
            return self.split.loss_and_grad(batch, masks)
        loss, _ = loss_and_grads(self.params, self.config, batch, out=self.grads, dropout=masks)  # into self.grad
        return loss, bool(np.isfinite(self.grad).all())

    def loss_and_grads(self, batch):
        """(loss, {name: gradient array}) at the current weights, without updating anything."""
        if self.split is None:
            return loss_and_grads(self.params, self.config, batch)
        loss, _ = self.split.loss_and_grad(batch)
        return loss, flat_views(self.grad.copy(), self.shapes)  # a copy: the next step overwrites self.grad

    def weights(self):  # {name: [[float]]}, what a checkpoint stores
        return {name: self.params[name].tolist() for name in self.shapes}

    def load_weights(self, weights):
        """Copy {name: [[float]] or array} into the parameters, in place (the views into
        self.flat stay valid). The shapes are the config's: the checkpoint's reader (or the model
        they come from) has checked every name and shape."""
        for name in self.shapes:
            self.params[name][...] = np.asarray(weights[name], dtype=self.dtype)  # (n_out, n_in)

    def optimizer_state(self):  # {'t': int, 'm': [float], 'v': [float]}, as microgpt.optim.Adam's
        return self.optimizer.state()

    def load_optimizer_state(self, state):  # saved by any engine, resumed bit for bit
        self.optimizer.load_state(state)

