"""
Two cores (or more) for one step: the batch split into parts that run at once, one per thread.

Read trainer.py first. At the running-text recipe's shapes two BLAS threads on one product spend
much of their time waiting for each other, and the elementwise work between products runs on one
core whatever BLAS does. So `Split` cuts the batch into `workers` parts, each part's forward and
backward in its own Python thread with ONE BLAS thread: numpy lets go of the interpreter lock in
nearly all of a step, so the parts run side by side (1.3 to 1.6 times one part alone on the
2-core machine: bench/text_speed.py). threads.py measures whether it pays for the run's model.

The parts add up to the whole batch exactly in the math, and to rounding in floats: each part's
token losses, and so its gradient, are divided by the whole batch's count n (model_forward's
n_tokens); only the order of additions differs (float64 losses agree with one thread's to about
1e-16; tests/test_backprop_parallel.py holds them to 1e-12 over 30 steps). The sum of the parts'
gradients, its finiteness check and Adam's update run on all cores too, slice by slice.
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from microgpt.training import num_predictions

from .model import flat_views, loss_and_grads


class Split:
    """Runs a Trainer's steps as `workers` parts at once, each in its own thread."""

    def __init__(self, trainer, workers):
        self.trainer = trainer
        self.workers = workers
        # an overflow shows up as inf/nan, which the trainer checks: its threads say nothing, as
        # Trainer.step's np.errstate makes its own thread say nothing (that setting is per thread)
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix='backprop',
                                       initializer=lambda: np.seterr(all='ignore'))
        # each part's flat gradient, in the trainer's parameter order; part 0's is the total
        self.grads = [trainer.grad] + [np.zeros_like(trainer.grad) for _ in range(workers - 1)]  # (n_params,) each
        self.views = [trainer.grads] + [flat_views(g, trainer.shapes) for g in self.grads[1:]]  # {name: view} each
        n = len(trainer.flat)
        self.slices = [slice(i * n // workers, (i + 1) * n // workers) for i in range(workers)]

    def each_slice(self, f):
        """f(part) for each core's slice of the flat weights, all at once; returns their results."""
        return list(self.pool.map(f, self.slices))

    def loss_and_grad(self, batch, masks=None):
        """(loss, finite): the batch's mean token loss, with its gradient summed into
        trainer.grad, and whether every number of that gradient is finite."""
        t = self.trainer
        size = len(batch)
        cuts = [slice(i * size // self.workers, (i + 1) * size // self.workers) for i in range(self.workers)]
        cuts = [cut for cut in cuts if cut.stop > cut.start]  # a batch smaller than the workers: fewer parts
        parts = [batch[cut] for cut in cuts]
        n_tokens = sum(num_predictions(tokens, t.config.block_size) for tokens in batch)  # the whole batch's

        def part_gradient(i):  # written into self.grads[i]
            part_masks = masks and masks[cuts[i]]  # with --dropout, the part's names' own masks
            return loss_and_grads(t.params, t.config, parts[i], n_tokens, out=self.views[i], dropout=part_masks)[0]

        loss = sum(self.pool.map(part_gradient, range(len(parts))))

        def total(part):  # this slice of the parts' gradients, added up into part 0's
            for g in self.grads[1:len(parts)]:
                np.add(self.grads[0][part], g[part], out=self.grads[0][part])
            return bool(np.isfinite(self.grads[0][part]).all())

        return loss, all(self.each_slice(total))
