"""
torchrun data parallelism: two ranks log what one process logs, write once, wait for rank 0's
own work and stop together; ranks that cannot train together say so in one line and stop,
and nothing of the user's is lost.

Needs PyTorch (skipped without it). Each case starts real processes, each bounded by
LAUNCH_TIMEOUT: torchrun with two ranks (helpers.torchrun), on gloo and 127.0.0.1, or ranks started by
hand with RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1 and MASTER_PORT, as a user without torchrun
would. They run tests/rank_child.py, train.py with what a test must change inside the child (a
small backstop, a slow validation, one rank's own flags). Processes that can run side by side
do: a torch start-up is a few seconds each.
"""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from helpers import (LAUNCH_TIMEOUT, REPO_DIR, TINY_NAMES, assert_no_process_left, free_port, log_of, losses, rank_env,
                     run, torchrun, train_args)
from microgpt.edge.checkpoint import read_checkpoint
from microgpt.edge.data import fingerprint, load_docs
from microgpt.programs import train

pytestmark = pytest.mark.torch

torch = pytest.importorskip("torch", reason="needs PyTorch: pip install -e '.[torch]'")
torch.set_num_threads(1)  # tiny matrices: more threads only contend on a shared machine

CHILD = os.path.join(REPO_DIR, 'tests', 'rank_child.py')
BACKSTOP_S = 5     # the children's TIMEOUT_S: above any lag between ranks here, even on a busy machine;
                   # the slow validation outlasts it by 1 s (the old code then died at its first)
JOIN_S = 3         # the children's JOIN_TIMEOUT_S, where a test waits for it to end
INTERRUPT_S = 10   # Ctrl-C to a waiting rank: gone within this (Python's own exit with torch loaded: ~1.5 s)
DP_TOL = 1e-9      # float64: two ranks' partial sums added, against one process's sum
SIGINT_STEPS = 100  # with the ranks' steps slowed to STEP_S, a Ctrl-C sent after step 15 lands mid-run
STEP_S = 0.05       # 85 steps are then 4 s or more, the one-process runs 100 steps each


@pytest.fixture(scope='module')
def saved(tmp_path_factory, names_file):
    """A run of 3 steps at batch 4 saved with its log, which a test copies and resumes."""
    out = tmp_path_factory.mktemp('saved') / 'model.json'
    assert train.main(train_args(names_file, out, '--steps', '3', '--batch-size', '4', '--engine', 'torch')) == 0
    return out


def copy_of(saved, folder):
    """The saved run copied into folder: (checkpoint path, {path: bytes} of it and its log)."""
    folder.mkdir()
    for name in ('model.json', 'model.log.jsonl'):
        shutil.copy(saved.parent / name, folder / name)
    return folder / 'model.json', {p: p.read_bytes() for p in folder.iterdir()}


def by_hand(rank, size, port, args, **env):
    """One rank started by hand, as RANK=... WORLD_SIZE=... python train.py ... in a shell."""
    env = rank_env({'RANK': str(rank), 'WORLD_SIZE': str(size), 'MASTER_ADDR': '127.0.0.1',
                    'MASTER_PORT': str(port), **env})
    return subprocess.Popen([sys.executable, CHILD, '--engine', 'torch', *args], cwd=REPO_DIR, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def ended(p):
    """(exit status, stderr's lines) of a process started by by_hand, none of it left behind."""
    err = p.communicate(timeout=LAUNCH_TIMEOUT)[1]
    assert_no_process_left(p)
    return p.returncode, err.splitlines()


def our_traceback(text):
    """A traceback through the project's code (a rank's, which torchrun prefixes with [rank1]:),
    a C++ one, or an abort: anything but torchrun's own report of a rank that failed or of a
    signal it got, whose traceback runs through the library alone."""
    ours = [os.path.join(REPO_DIR, part) for part in ('microgpt', 'src', 'train.py', CHILD)]
    return (any('File "' in line and any(path in line for path in ours) for line in text.splitlines())
            or any(s in text for s in ('frame #', 'terminate called', 'SIGABRT')))


# ---------------------------------------------------------------------------- meeting (by hand)
def test_ranks_started_by_hand_name_who_never_arrived_and_stop_at_ctrl_c(tmp_path, saved):
    """A rank whose peers never come: Ctrl-C stops it at once, and the wait ends after
    JOIN_TIMEOUT_S with one line naming the ranks that never arrived (or rank 0, where nothing
    answers), the run's files as they were. Four cases side by side."""
    resume = ['--resume', '--steps', '6']
    files = {case: copy_of(saved, tmp_path / case) for case in ('alone0', 'alone1', 'of3', 'ctrl_c')}
    port_alone, port_of3, port_ctrl_c = free_port(), free_port(), free_port()
    alone = by_hand(1, 2, port_alone, ['--out', str(files['alone1'][0]), *resume], TEST_JOIN_S=str(JOIN_S))
    of3 = [by_hand(rank, 3, port_of3, ['--out', str(files['of3'][0]), *resume], TEST_JOIN_S=str(JOIN_S))
           for rank in (0, 2)]  # rank 1 never comes
    waiting = by_hand(0, 2, port_ctrl_c, ['--out', str(files['ctrl_c'][0]), *resume])  # the default limit
    line = waiting.stderr.readline()  # said once it has waited a moment
    assert line.startswith(f"rank 0: waiting for rank 1 at 127.0.0.1:{port_ctrl_c} (MASTER_ADDR:MASTER_PORT)"), line
    t0 = time.monotonic()
    os.killpg(waiting.pid, signal.SIGINT)  # Ctrl-C in its terminal
    code, err = ended(waiting)
    assert (code, err) == (130, ['', 'interrupted']) and time.monotonic() - t0 < INTERRUPT_S

    code, err = ended(alone)
    assert code == 2 and err[-1] == (
        f"error: rank 0 never arrived: nothing answered at 127.0.0.1:{port_alone} (MASTER_ADDR:MASTER_PORT) "
        f"for {JOIN_S} s: start rank 0 with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE"), err
    for p in of3:  # rank 0 decides that the wait is over, and both say why
        code, err = ended(p)
        assert code == 2 and err[-1] == (
            f"error: rank 1 never arrived at 127.0.0.1:{port_of3} (MASTER_ADDR:MASTER_PORT) within {JOIN_S} s: "
            "start it with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE"), err
        assert all(': waiting for rank 1 at' in line for line in err[:-1])  # and nothing else
    for out, before in files.values():
        assert {p: p.read_bytes() for p in out.parent.iterdir()} == before  # byte for byte, nothing added


# ---------------------------------------------------------------------------- agreeing
def test_ranks_that_disagree_on_the_run_stop_at_start_with_one_line(tmp_path, names_file):
    """Every rank checks that it trains what rank 0 trains: a different --seed (under torchrun,
    once per terminal), a different file with the same characters, different characters.
    Each stops every rank before the first step with one line naming what differs and both
    values; nothing is written."""
    same_chars = tmp_path / 'reversed.txt'
    same_chars.write_text('\n'.join(reversed(TINY_NAMES)) + '\n', encoding='utf-8')
    other_chars = tmp_path / 'upper.txt'
    other_chars.write_text('\n'.join(TINY_NAMES).upper() + '\n', encoding='utf-8')
    outs = {case: tmp_path / case / 'model.json' for case in ('seed', 'data', 'chars')}
    args = ['--batch-size', '2', '--steps', '3']
    seeds = torchrun(train_args(names_file, outs['seed'], *args), program=CHILD, env={'TEST_RANK_ARGS': '1 --seed 7'})
    pairs = {}
    for case, theirs in (('data', same_chars), ('chars', other_chars)):
        port = free_port()
        pairs[case] = [by_hand(0, 2, port, train_args(names_file, outs[case], *args)),
                       by_hand(1, 2, port, train_args(names_file, outs[case], *args, '--data', str(theirs)))]

    output = seeds.communicate(timeout=LAUNCH_TIMEOUT)[0]
    assert_no_process_left(seeds)
    assert seeds.returncode != 0  # torchrun's own report of the ranks' status 2 follows our line
    assert [line for line in output.splitlines() if line.startswith('error')] == [
        "error: rank 1 has seed 7, rank 0 has 42: start every rank with the same flags"], output
    assert 'exitcode  : 2' in output and not our_traceback(output), output

    ours, theirs = (fingerprint(load_docs(str(f)))[:16] for f in (names_file, same_chars))
    want = {'data': f"error: rank 1 has data (sha256) '{theirs}', rank 0 has '{ours}': give every rank the same "
                    "--data (on several machines, a copy of the same file on each)",
            'chars': "error: rank 1 has vocabulary 'ABCDEFGHIJKLMNOPRSTUVWXYZ', rank 0 has "
                     "'abcdefghijklmnoprstuvwxyz': give every rank the same --data (on several machines, a copy "
                     "of the same file on each)"}
    for case, ranks in pairs.items():
        for p in ranks:  # each started in a shell of its own: each says it
            code, err = ended(p)  # (after saying it waits, where its peer was slow to start)
            assert code == 2 and err[-1] == want[case], err
            assert all(': waiting for rank' in line for line in err[:-1]), err
    for out in outs.values():
        assert not out.exists()  # no step was taken, nothing saved


# ---------------------------------------------------------------------------- one run on two ranks
def test_two_ranks_log_one_process_losses_wait_for_rank_0_and_stop_at_ctrl_c_resumably(tmp_path, names_file, capsys):
    """One torchrun launch, with dropout on (each rank takes its names' share of the step's
    masks) and a first validation (rank 0's own work) that outlasts the backstop BACKSTOP_S: the
    run goes on past it (it died there while that wait was timed by the backstop). A Ctrl-C to
    torchrun stops both ranks after the same step; rank 0 alone says so and saves, and no rank
    leaves before it has (one that left first had torchrun stop rank 0). One process then
    resumes it into exactly the losses and validation losses of one process's whole run."""
    out, whole = tmp_path / 'two' / 'model.json', tmp_path / 'whole' / 'model.json'
    args = ['--steps', str(SIGINT_STEPS), '--batch-size', '8', '--eval-every', '10', '--dropout', '0.2',
            '--save-every', '0']
    p = torchrun(train_args(names_file, out, *args), program=CHILD,
                 env={'TEST_BACKSTOP_S': str(BACKSTOP_S), 'TEST_SLOW_VALIDATION_S': str(BACKSTOP_S + 1),
                      'TEST_STEP_S': str(STEP_S)})
    log = out.parent / 'model.log.jsonl'
    deadline = time.time() + LAUNCH_TIMEOUT
    while not (log.exists() and log.read_text().count('"loss"') >= 15):  # past step 10's slow validation
        assert p.poll() is None and time.time() < deadline, "the run ended or never started"
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGINT)  # what Ctrl-C in torchrun's terminal sends: the launcher and its ranks
    output = p.communicate(timeout=LAUNCH_TIMEOUT)[0]
    assert_no_process_left(p)
    assert 'ranks=2' in output and output.count('interrupted after step') == 1, output  # rank 0 alone
    assert output.count('step 10: val loss') == 1 and not our_traceback(output), output
    step = read_checkpoint(str(out)).train_state.step
    assert 15 <= step < SIGINT_STEPS and f'interrupted after step {step}; saved {out}' in output
    # one checkpoint, one best file and one log: written once, by rank 0
    assert sorted(os.listdir(out.parent)) == ['model.best.json', 'model.json', 'model.log.jsonl']
    assert [e['step'] for e in losses(log_of(out))] == list(range(1, step + 1))
    assert [e['step'] for e in log_of(out) if 'val_loss' in e] == list(range(10, step + 1, 10))
    code, stdout, _ = run(train.main, ['--out', str(out), '--resume', '--num-samples', '0'], capsys)
    assert code == 0 and 'engine=torch' in stdout
    assert run(train.main, train_args(names_file, whole, *args, '--engine', 'torch'), capsys)[0] == 0
    got, want = log_of(out), log_of(whole)
    assert [e['step'] for e in losses(got)] == list(range(1, SIGINT_STEPS + 1))
    pairs = [(a['loss'], b['loss']) for a, b in zip(losses(got), losses(want))]
    pairs += [(a['val_loss'], b['val_loss']) for a, b in zip(*[[e for e in g if 'val_loss' in e] for g in (got, want)])]
    assert len(pairs) == SIGINT_STEPS + SIGINT_STEPS // 10
    assert max(abs(a - b) for a, b in pairs) < DP_TOL


def test_a_peer_killed_mid_run_ends_rank_0_with_one_line_and_its_checkpoint_whole(tmp_path, names_file):
    """Rank 1 is SIGKILLed while the two ranks train, started by hand (torchrun would stop rank 0
    itself): rank 0's next collective finds the connection closed and it ends with one line,
    no traceback (gloo's error came out whole), its last save readable."""
    out, log = tmp_path / 'model.json', tmp_path / 'model.log.jsonl'
    port, args = free_port(), train_args(names_file, out, '--steps', '3000', '--batch-size', '4',
                                         '--save-every', '5')
    ranks = [by_hand(rank, 2, port, args) for rank in (0, 1)]
    deadline = time.time() + LAUNCH_TIMEOUT
    while not (log.exists() and log.read_text().count('"loss"') >= 10):
        assert ranks[0].poll() is None and time.time() < deadline, "the run ended or never started"
        time.sleep(0.05)
    os.killpg(ranks[1].pid, signal.SIGKILL)
    ranks[1].wait(timeout=LAUNCH_TIMEOUT)
    code, err = ended(ranks[0])
    assert code == 2 and err[-1].startswith("error: rank 0: another rank left while the ranks"), err
    assert not our_traceback('\n'.join(err)) and 'Traceback' not in '\n'.join(err), err
    assert read_checkpoint(str(out)).train_state.step % 5 == 0
