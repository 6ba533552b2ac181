"""
train.py as one rank of tests/test_torch_ranks.py's runs, changed only where a test must reach
into the child process, each by an environment variable:

    TEST_BACKSTOP_S=3          torchgpt.distributed.TIMEOUT_S, the hang backstop (default 120)
    TEST_JOIN_S=3              torchgpt.distributed.JOIN_TIMEOUT_S, the wait for ranks started by hand
    TEST_SLOW_VALIDATION_S=5   the run's first validation takes this much longer (a large model's)
    TEST_STEP_S=0.02           each training step takes this much longer, so that a signal lands mid-run
    TEST_RANK_ARGS='1 --seed 7'   flags added on that rank alone (a rank started differently)

    torchrun ... tests/rank_child.py --engine torch ...     # or RANK=... python tests/rank_child.py
"""

import os
import shlex
import sys
import time

from microgpt import torchgpt
import microgpt.torchgpt.distributed  # noqa: F401  (loads torchgpt.distributed)
from microgpt.programs import train

if 'TEST_BACKSTOP_S' in os.environ:
    torchgpt.distributed.TIMEOUT_S = float(os.environ['TEST_BACKSTOP_S'])
if 'TEST_JOIN_S' in os.environ:
    torchgpt.distributed.JOIN_TIMEOUT_S = float(os.environ['TEST_JOIN_S'])

if 'TEST_SLOW_VALIDATION_S' in os.environ:
    losses, slowed = train.Names.losses, []

    def slow_losses(self, trainer):
        if not slowed:
            slowed.append(True)
            time.sleep(float(os.environ['TEST_SLOW_VALIDATION_S']))
        return losses(self, trainer)
    train.Names.losses = slow_losses

if 'TEST_STEP_S' in os.environ:
    step, pause = torchgpt.Trainer.step, float(os.environ['TEST_STEP_S'])

    def slow_step(self, *args):
        time.sleep(pause)
        return step(self, *args)
    torchgpt.Trainer.step = slow_step

if 'TEST_RANK_ARGS' in os.environ:
    rank, *extra = shlex.split(os.environ['TEST_RANK_ARGS'])
    if os.environ.get('RANK') == rank:
        sys.argv += extra

sys.argv[0] = 'train.py'
train.command()
