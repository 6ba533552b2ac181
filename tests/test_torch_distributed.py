"""
torchrun data parallelism: two ranks log what one process logs, write once, and stop together.

Needs PyTorch (`pip install -e '.[torch]'`; skipped without it). Every run is a real
`torchrun --nproc_per_node 2` on this machine: the gloo backend, 127.0.0.1 only (gloo's socket
on the loopback interface), a port that was free a moment before, each launch bounded by
LAUNCH_TIMEOUT. The one-process references run in this process (PyTorch is already loaded).
"""

import os
import signal
import time

import pytest

from helpers import (LAUNCH_TIMEOUT, assert_no_process_left, log_of, losses, run, torchrun, train_args)
from microgpt.programs import train
from microgpt.edge.checkpoint import read_checkpoint

pytestmark = pytest.mark.torch

torch = pytest.importorskip("torch", reason="needs PyTorch: pip install -e '.[torch]'")
torch.set_num_threads(1)  # tiny matrices: more threads only contend on a shared machine

DP_TOL = 1e-9          # float64: two ranks' partial sums added, against one process's sum
SIGINT_STEPS = 400     # long enough that a Ctrl-C sent after step 10 lands mid-run (~150 steps/s)


def test_two_ranks_log_one_process_losses_write_once_and_stop_at_ctrl_c_resumably(tmp_path, names_file, capsys):
    """One launch, with dropout on (each rank takes its names' share of the step's masks): a
    Ctrl-C to torchrun stops both ranks, rank 0 alone speaks and saves, and one process resumes
    it into exactly the losses and validation losses of one process's uninterrupted run."""
    out, whole = tmp_path / 'two' / 'model.json', tmp_path / 'whole' / 'model.json'
    args = ['--steps', str(SIGINT_STEPS), '--batch-size', '8', '--eval-every', '10', '--dropout', '0.2',
            '--save-every', '0']
    p = torchrun(train_args(names_file, out, *args))
    log = str(out)[:-len('.json')] + '.log.jsonl'
    deadline = time.time() + LAUNCH_TIMEOUT
    while not (os.path.exists(log) and 'val_loss' in open(log).read()):  # step 10's evaluation
        assert p.poll() is None and time.time() < deadline, "the run ended or never started"
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGINT)  # what Ctrl-C in torchrun's terminal sends: the launcher and its ranks
    output = p.communicate(timeout=LAUNCH_TIMEOUT)[0]
    assert_no_process_left(p)
    assert 'ranks=2' in output and output.count('interrupted after step') == 1, output  # rank 0 alone
    assert output.count('step 10: val loss') == 1
    step = read_checkpoint(str(out)).train_state.step
    assert 10 <= step < SIGINT_STEPS
    # one checkpoint, one best file and one log: written once, by rank 0
    assert sorted(os.listdir(out.parent)) == ['model.best.json', 'model.json', 'model.log.jsonl']
    assert [e['step'] for e in losses(log_of(out))] == list(range(1, step + 1))
    code, stdout, _ = run(train.main, ['--out', str(out), '--resume', '--num-samples', '0'], capsys)
    assert code == 0 and 'engine=torch' in stdout
    assert run(train.main, train_args(names_file, whole, *args, '--engine', 'torch'), capsys)[0] == 0
    got, want = log_of(out), log_of(whole)
    assert [e['step'] for e in losses(got)] == list(range(1, SIGINT_STEPS + 1))
    pairs = [(a['loss'], b['loss']) for a, b in zip(losses(got), losses(want))]
    pairs += [(a['val_loss'], b['val_loss']) for a, b in zip(*[[e for e in g if 'val_loss' in e] for g in (got, want)])]
    assert len(pairs) == SIGINT_STEPS + SIGINT_STEPS // 10
    assert max(abs(a - b) for a, b in pairs) < DP_TOL
