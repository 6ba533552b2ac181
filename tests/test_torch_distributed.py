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
SIGINT_STEPS = 400     # long enough that a Ctrl-C sent at step 5 lands mid-run (~150 steps/s: 2.5 s)


def test_two_ranks_log_one_process_losses_and_write_once(tmp_path, names_file, capsys):
    """With dropout on: each rank takes its names' share of the step's masks, as of the batch."""
    one, two = tmp_path / 'one' / 'model.json', tmp_path / 'two' / 'model.json'
    args = ['--steps', '30', '--batch-size', '8', '--eval-every', '10', '--dropout', '0.2']
    p = torchrun(train_args(names_file, two, *args))
    output = p.communicate(timeout=LAUNCH_TIMEOUT)[0]
    assert p.returncode == 0, output
    assert_no_process_left(p)
    assert run(train.main, train_args(names_file, one, *args, '--engine', 'torch'), capsys)[0] == 0
    a, b = log_of(one), log_of(two)
    assert [sorted(e) for e in a] == [sorted(e) for e in b]  # 30 losses and 3 val losses, once each
    assert max(abs(x.get('loss', x.get('val_loss')) - y.get('loss', y.get('val_loss')))
               for x, y in zip(a, b)) < DP_TOL
    assert sorted(os.listdir(two.parent)) == ['model.best.json', 'model.json', 'model.log.jsonl']  # one of each
    assert output.count('saved ') == 1 and output.count('step 10: val loss') == 1  # rank 0 alone prints
    assert 'ranks=2' in output


def test_ctrl_c_to_torchrun_stops_both_ranks_and_saves_once_resumably(tmp_path, names_file, capsys):
    out, whole = tmp_path / 'two' / 'model.json', tmp_path / 'whole' / 'model.json'
    args = ['--steps', str(SIGINT_STEPS), '--batch-size', '4', '--save-every', '0']
    p = torchrun(train_args(names_file, out, *args))
    log = str(out)[:-len('.json')] + '.log.jsonl'
    deadline = time.time() + LAUNCH_TIMEOUT
    while not (os.path.exists(log) and open(log).read().count('\n') >= 5):
        assert p.poll() is None and time.time() < deadline, "the run ended or never started"
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGINT)  # what Ctrl-C in torchrun's terminal sends: the launcher and its ranks
    output = p.communicate(timeout=LAUNCH_TIMEOUT)[0]
    assert_no_process_left(p)
    assert output.count('interrupted after step') == 1, output  # rank 0 alone says it
    step = read_checkpoint(str(out)).train_state.step
    assert 5 <= step < SIGINT_STEPS
    # one checkpoint and one log (and rank 0's best validation, if one came before the stop)
    assert sorted(set(os.listdir(out.parent)) - {'model.best.json'}) == ['model.json', 'model.log.jsonl']
    assert [e['step'] for e in losses(log_of(out))] == list(range(1, step + 1))
    # resumed by one process, it continues exactly: the losses of a run never interrupted
    code, stdout, _ = run(train.main, ['--out', str(out), '--resume', '--num-samples', '0'], capsys)
    assert code == 0 and 'engine=torch' in stdout
    assert run(train.main, train_args(names_file, whole, *args, '--engine', 'torch'), capsys)[0] == 0
    got, want = losses(log_of(out)), losses(log_of(whole))
    assert [e['step'] for e in got] == list(range(1, SIGINT_STEPS + 1))
    assert max(abs(a['loss'] - b['loss']) for a, b in zip(got, want)) < DP_TOL
