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

Besides the gradients, the ranks meet (`meet`, for ranks started by hand), agree on the run
(`check_same`), wait for rank 0's own validation and saving (`rank0_works_alone`), and stop
after the same step (`agree`, which microgpt/programs/run.py calls after each one).
"""

import atexit
import contextlib
import datetime
import hashlib
import os
import socket
import sys
import time

import torch
import torch.distributed as dist

from microgpt.edge.checks import short
from microgpt.edge.errors import UserError

# How long a rank waits for the others at a step's collective before it gives up. torchrun stops
# the remaining ranks when one fails, so this is only the backstop for a rank that hangs. Rank 0's
# validation and saving are never timed by it (wait_for_rank0).
TIMEOUT_S = 120
# Ranks started by hand: how long each waits for the others to start (time to type the command on
# a second machine). Ctrl-C stops the wait at once.
JOIN_TIMEOUT_S = 300
POLL_S = 0.1          # how often a waiting rank looks again (and so how soon Ctrl-C is seen)
SAY_AFTER_S = 2.0     # a wait longer than this is said on stderr, with what it waits for
NO_LIMIT = datetime.timedelta(days=3650)  # the barrier where the others wait for rank 0's own work
EXIT_GRACE_S = 0.1    # at exit, the GIL left free this long for gloo's threads (World._leave)


class World:
    """This process's place among torchrun's: its rank, the world size, the step's collectives."""

    def __init__(self, device):
        self.device = device
        self.rank, self.size = int(os.environ['RANK']), int(os.environ['WORLD_SIZE'])  # settings.py checked them
        backend = 'nccl' if device.type == 'cuda' else 'gloo'
        timeout = datetime.timedelta(seconds=TIMEOUT_S)
        if 'TORCHELASTIC_RUN_ID' in os.environ:  # torchrun: its agents gathered every rank already
            dist.init_process_group(backend, timeout=timeout)  # where to meet: from the environment
        else:  # started by hand: meet first, in a wait that Ctrl-C stops and that names who is missing
            store = meet(self.rank, self.size, os.environ['MASTER_ADDR'], os.environ['MASTER_PORT'])
            dist.init_process_group(backend, store=store, rank=self.rank, world_size=self.size, timeout=timeout)
        atexit.register(self._leave)  # leave the group cleanly however train.py ends
        # a second group, of plain CPU barriers, for waiting on rank 0's own work without a limit
        self._patient = dist.new_group(backend='gloo', timeout=NO_LIMIT)
        self._rank0_alone = False

    def shard(self, batch):
        """This rank's consecutive slice of the batch; the slices of all ranks make the batch."""
        start, end = (len(batch) * r // self.size for r in (self.rank, self.rank + 1))
        return batch[start:end]

    def all_reduce_sum(self, flat):
        """flat becomes, in place, the sum of every rank's flat (the same result on each)."""
        with self._together('added up a step\'s gradients'):
            self._catch_up()
            dist.all_reduce(flat, op=dist.ReduceOp.SUM)

    def agree(self, signum):
        """The signal any rank has caught (the largest number), or None if none has."""
        with self._together('agreed on whether to stop'):
            self._catch_up()
            t = torch.tensor([signum or 0], device=self.device)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            return int(t.item()) or None

    @contextlib.contextmanager
    def _together(self, what):
        """A collective whose peer went away (killed, its machine lost: gloo reads a closed
        connection) ends this rank with one line; rank 0's checkpoint holds its last save."""
        try:
            yield
        except (RuntimeError, dist.DistError) as e:
            reason = 'a peer closed its connection' if 'peer' in str(e).lower() else short(str(e).splitlines()[0], 100)
            raise UserError(f"rank {self.rank}: another rank left while the ranks {what} ({reason}): the "
                            "checkpoint holds the last step saved; start every rank again with --resume") from None

    def _leave(self):
        """At exit: a moment without the GIL for the groups' worker threads, then leave. A
        worker lets go of a collective's tensors just after it returns, and needs the GIL for
        that; one still waiting for it when Python finalizes aborts the process ("terminate
        called without an active exception"), which a rank leaving at once after its last step
        sometimes did. The threads outlive destroy_process_group once torch.optim is imported."""
        time.sleep(EXIT_GRACE_S)
        dist.destroy_process_group()

    # ------------------------------------------------------------------ rank 0's own work
    def rank0_works_alone(self):
        """Said by every rank after a step where rank 0 then validates or saves (run.py knows
        when): the next collective first waits for rank 0 at the barrier without a limit, so
        that a validation or a save of any length never trips the backstop, TIMEOUT_S."""
        self._rank0_alone = True

    def wait_for_rank0(self):
        """Every rank waits here, for as long as it takes, until rank 0 arrives too."""
        with self._together('waited for rank 0'):
            dist.barrier(group=self._patient)
        self._rank0_alone = False

    def _catch_up(self):
        if self._rank0_alone:
            self.wait_for_rank0()

    # ------------------------------------------------------------------ the same run on every rank
    def check_same(self, values):
        """Stop every rank unless each holds rank 0's `values` ({what: value}, in the order to
        compare): one line naming the first that differs, the rank and both values. Each
        machine's first rank (LOCAL_RANK 0) says it; the others leave with the same status,
        so that a terminal shows it once."""
        every = [None] * self.size
        dist.all_gather_object(every, values)
        for what, ours in every[0].items():
            for rank, theirs in enumerate(every):
                if theirs.get(what) != ours:
                    self.wait_for_rank0()  # all leave together: torchrun stops those left when one leaves
                    if local_rank() != 0:
                        raise SystemExit(2)
                    theirs, ours = _shown_pair(theirs.get(what), ours)
                    raise UserError(f"rank {rank} has {what} {theirs}, rank 0 has {ours}: "
                                    f"{FIXES.get(what, FIXES['settings'])}")


# What to do when the ranks disagree, by what differs (check_same's names; any other is a setting).
FIXES = {'settings': "start every rank with the same flags",
         'data (sha256)': "give every rank the same --data (on several machines, a copy of the same file on each)",
         'vocabulary': "give every rank the same --data (on several machines, a copy of the same file on each)",
         'starting weights (sha256)': "start every rank from the same --init or --resume checkpoint (or none)",
         "Adam's state (sha256)": "start every rank from the same --resume checkpoint"}


def _shown_pair(a, b):
    """Two values that differ, as a message quotes them: bounded, and two long strings (two
    vocabularies) from shortly before where they part, so that the difference shows."""
    if isinstance(a, str) and isinstance(b, str):
        same = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        if same > 10:
            a, b = '...' + a[same - 5:], '...' + b[same - 5:]
    return short(a), short(b)


def digest(tensors):
    """A short sha256 of tensors' values, the same on every rank that holds the same numbers."""
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().to('cpu', torch.float64).contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def local_rank():
    """Which of this machine's GPUs this rank drives: torchrun's LOCAL_RANK (0 without torchrun)."""
    return int(os.environ.get('LOCAL_RANK', '0'))


# ---------------------------------------------------------------------------- ranks started by hand
def meet(rank, size, addr, port):
    """The store every rank started by hand meets at: a small key-value server that rank 0 runs
    at MASTER_ADDR:MASTER_PORT. Each rank writes that it arrived and waits until all have, at
    most JOIN_TIMEOUT_S, looking every POLL_S seconds, so that Ctrl-C stops it at once. Rank 0
    decides when the wait is over, and says why in the store, so that every rank can say it."""
    if not (port.isdigit() and 0 < int(port) < 65536):
        raise UserError(f"MASTER_PORT={short(port)} is not a port number: give one from 1 to 65535")
    where, since = f"{addr}:{port} (MASTER_ADDR:MASTER_PORT)", time.monotonic()
    store = _open_store(rank, addr, int(port), where, since)
    store.set(f'microgpt.arrived.{rank}', '1')
    try:
        _wait_for_all(store, rank, size, where, since)
    except KeyboardInterrupt:  # tell the others, so that none waits on for a rank that left
        if rank == 0:
            store.set('microgpt.gave_up', "rank 0 was interrupted")
        else:
            store.delete_key(f'microgpt.arrived.{rank}')
        raise
    store.set_timeout(datetime.timedelta(seconds=TIMEOUT_S))  # init_process_group's own waits
    return store


def _open_store(rank, addr, port, where, since):
    """Rank 0 starts the store; the others connect once something answers there. They knock
    with a plain socket first: a TCPStore client left to retry logs a C++ trace each time."""
    if rank == 0:
        try:
            return dist.TCPStore(addr, port, is_master=True, wait_for_workers=False,
                                 timeout=datetime.timedelta(seconds=TIMEOUT_S))
        except dist.DistError as e:
            raise UserError(f"rank 0 cannot open {where}: {short(str(e), 120)}: choose a free MASTER_PORT, "
                            "and a MASTER_ADDR of this machine") from None
    said = False
    while True:
        try:
            socket.create_connection((addr, port), timeout=1).close()
            break
        except socket.gaierror as e:
            raise UserError(f"MASTER_ADDR {short(addr)} is not an address: {e.strerror}: give rank 0's "
                            "machine's address or name") from None
        except OSError:  # nothing listens there yet
            if time.monotonic() > since + JOIN_TIMEOUT_S:
                raise UserError(f"rank 0 never arrived: nothing answered at {where} for {JOIN_TIMEOUT_S:g} s: start "
                                "rank 0 with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE") from None
            said = said or _say(rank, "rank 0", where, since)
            time.sleep(POLL_S)
    return dist.TCPStore(addr, port, is_master=False, timeout=datetime.timedelta(seconds=TIMEOUT_S))


def _wait_for_all(store, rank, size, where, since):
    """Until every rank has arrived, or rank 0 gives up (after JOIN_TIMEOUT_S, or Ctrl-C)."""
    said = False
    while True:
        try:
            if store.check(['microgpt.gave_up']):
                raise UserError(store.get('microgpt.gave_up').decode())
            missing = [r for r in range(size) if not store.check([f'microgpt.arrived.{r}'])]
        except dist.DistError:  # rank 0, and its store, went away without a word (killed)
            raise UserError(f"rank 0 left {where} before every rank arrived: start all of them again") from None
        if not missing:
            return
        if rank == 0 and time.monotonic() > since + JOIN_TIMEOUT_S:
            why = (f"{_ranks(missing)} never arrived at {where} within {JOIN_TIMEOUT_S:g} s: start "
                   f"{'it' if len(missing) == 1 else 'them'} with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE")
            store.set('microgpt.gave_up', why)
            time.sleep(10 * POLL_S)  # time for the ranks that came to read it before the store goes
            raise UserError(why)
        said = said or _say(rank, _ranks(missing), where, since)
        time.sleep(POLL_S)


def _say(rank, whom, where, since):
    """After SAY_AFTER_S of waiting, one line on stderr: who waits for whom, and for how long."""
    if time.monotonic() < since + SAY_AFTER_S:
        return False
    print(f"rank {rank}: waiting for {whom} at {where}, at most {JOIN_TIMEOUT_S:g} s (Ctrl-C stops)",
          file=sys.stderr, flush=True)
    return True


def _ranks(ranks):
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {', '.join(map(str, ranks))}"
