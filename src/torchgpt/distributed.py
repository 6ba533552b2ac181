"""
Data parallelism with torch.distributed: each rank computes a share of the batch, the gradients
are added up, and every rank then takes the same Adam step.

    torchrun --nproc_per_node 2 train.py --engine torch --batch-size 8 ...

torchrun starts one process per rank and tells each, in its environment, its RANK, the
WORLD_SIZE and where to meet (MASTER_ADDR, MASTER_PORT); `World()` joins them with
init_process_group, the gloo backend on CPUs, NCCL on GPUs. Read trainer.py first: a step
there calls `shard` to take this rank's names and `all_reduce_sum` once on one flat buffer
holding every gradient and the loss.

Why a sum and not an average: the loss is the mean over every predicted token of the whole
batch, sum_tokens / n_tokens. Each rank divides its own tokens' sum by the WHOLE batch's
n_tokens (every rank knows the batch, so nobody has to ask), and then the shares simply add up
to the one-process loss and gradient, however the names' lengths fall. Averaging the ranks'
own means would weight a rank of short names like one of long names.

Stopping (microgpt/programs/run.py): a signal reaches the ranks at different moments; `agree` takes the
largest signal number any rank has seen after each step, so every rank stops after the same one.
"""

import atexit
import datetime
import os

import torch
import torch.distributed as dist

# How long a rank waits for the others at a collective before it gives up. torchrun stops the
# remaining ranks when one fails, so this is only the backstop for a rank that hangs.
TIMEOUT_S = 120


class World:
    """This process's place among torchrun's: its rank, the world size, the step's collectives."""

    def __init__(self, device):
        self.device = device
        backend = 'nccl' if device.type == 'cuda' else 'gloo'
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=TIMEOUT_S))  # from the env
        self.rank, self.size = dist.get_rank(), dist.get_world_size()
        atexit.register(dist.destroy_process_group)  # leave the group cleanly however train.py ends

    def shard(self, batch):
        """This rank's consecutive slice of the batch; the slices of all ranks make the batch."""
        start, end = (len(batch) * r // self.size for r in (self.rank, self.rank + 1))
        return batch[start:end]

    def all_reduce_sum(self, flat):
        """flat becomes, in place, the sum of every rank's flat (the same result on each)."""
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)

    def agree(self, signum):
        """The signal any rank has caught (the largest number), or None if none has."""
        t = torch.tensor([signum or 0], device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return int(t.item()) or None


def local_rank():
    """Which of this machine's GPUs this rank drives: torchrun's LOCAL_RANK (0 without torchrun)."""
    return int(os.environ.get('LOCAL_RANK', '0'))
