"""
The web lab restarted after being killed: its runs are found again.

A server killed with SIGKILL cannot stop its training run: train.py goes on in its own session.
A server started afterwards on the same runs folder must show that run going (and stop it when
asked), list the checkpoints of the runs that ended, and never signal a process that merely
has a recorded run's pid (runrecord.py keeps each run's process identity beside its pid).
"""

import os
import signal
import subprocess
import sys
import time

import pytest

from labserver import post, request, server_process, wait_for_run
from microgpt.edge.checkpoint import read_checkpoint
from microgpt.lab import runrecord
from microgpt.lab.api import Checkpoints
from microgpt.lab.runs import RunManager

DEADLINE = 60  # seconds any one wait below may take on a loaded machine


def wait_until(condition, what):
    end = time.time() + DEADLINE
    while not condition():
        assert time.time() < end, f"{what} did not happen in {DEADLINE} s"
        time.sleep(0.05)


def log_lines(path):
    return path.read_text().count('\n') if path.exists() else 0


def kill_recorded_runs(runs_dir):
    """Whatever a failed test left going: each recorded run still its own process, SIGKILLed."""
    for name in os.listdir(runs_dir):
        record = runrecord.read(os.path.join(runs_dir, name))
        if record and runrecord.is_alive(record['pid'], record['process']):
            os.kill(record['pid'], signal.SIGKILL)


@pytest.mark.skipif(not os.path.isdir('/proc/self'), reason="the test reads /proc to see the orphan")
def test_a_server_killed_with_sigkill_leaves_its_runs_to_the_next_one(tiny_ckpt, names_file, tmp_path):
    small = {'n_embd': 8, 'n_head': 2, 'block_size': 12}
    try:
        with server_process(tiny_ckpt, tmp_path, names_file) as (first, server):
            post(server, '/api/train/start', {'steps': 20, **small})
            done, _, _ = wait_for_run(server)
            assert done['state'] == 'finished'
            post(server, '/api/train/start', {'steps': 20000, **small})
            log = tmp_path / '2' / 'model.log.jsonl'
            wait_until(lambda: log_lines(log) >= 3, "run 2's first steps")
            first.kill()  # SIGKILL: no handler runs, run 2 is orphaned
            first.wait(10)
        record = runrecord.read(str(tmp_path / '2'))
        assert record['state'] == 'running' and runrecord.is_alive(record['pid'], record['process'])
        assert os.getpgid(record['pid']) == record['pid']  # its own session: the kill did not reach it

        with server_process(tiny_ckpt, tmp_path, names_file) as (second, server):
            config = request(server, 'GET', '/api/config')[1]
            labels = {c['id']: c['label'] for c in config['checkpoints']}
            assert labels['run1'] == 'run 1: 20 steps, 1x8'  # the run that ended is listed again, with its size
            assert 'run2' not in labels  # going, and not saved yet
            status = post(server, '/api/train/status', {'offset': 0})
            assert (status['run'], status['state']) == (2, 'running')
            assert [r['step'] for r in status['records'] if 'loss' in r][:3] == [1, 2, 3]
            assert request(server, 'POST', '/api/train/start', {'steps': 10, **small})[0] == 409
        # the second server stopped with Ctrl-C: it stops the run it took over, as its own
        assert second.returncode == 0
        assert not runrecord.is_alive(record['pid'], record['process'])
        after = runrecord.read(str(tmp_path / '2'))
        assert after['state'] == 'stopped' and after['step'] == \
            read_checkpoint(str(tmp_path / '2' / 'model.json')).train_state.step
    finally:
        kill_recorded_runs(tmp_path)


def test_it_is_shown_going_then_stopped_when_asked(tiny_ckpt, names_file, tmp_path):
    """The whole story on one restarted server: the orphan going, Stop, its checkpoint listed
    with the step it reached, and the record saying so for the server after."""
    small = {'n_embd': 8, 'n_head': 2, 'block_size': 12}
    try:
        with server_process(tiny_ckpt, tmp_path, names_file) as (first, server):
            post(server, '/api/train/start', {'steps': 20000, **small})
            log = tmp_path / '1' / 'model.log.jsonl'
            wait_until(lambda: log_lines(log) >= 3, "run 1's first steps")
            first.kill()
            first.wait(10)
        pid = runrecord.read(str(tmp_path / '1'))['pid']
        with server_process(tiny_ckpt, tmp_path, names_file) as (second, server):
            status, body, _ = request(server, 'POST', '/api/train/start', {'steps': 10, **small})
            assert status == 409 and 'run 1 is still going' in body['error']
            assert post(server, '/api/train/stop', {})['state'] == 'stopping'
            final, records, _ = wait_for_run(server)
            assert final['state'] == 'stopped' and final['ckpt'] == 'run1'
            steps = [r['step'] for r in records if 'loss' in r]
            saved = read_checkpoint(str(tmp_path / '1' / 'model.json')).train_state.step
            assert saved == steps[-1] < 20000  # Ctrl-C's save: the last whole step
            labels = {c['id']: c['label'] for c in request(server, 'GET', '/api/config')[1]['checkpoints']}
            assert labels['run1'] == f'run 1: step {saved} of 20000 (stopped), 1x8'
            assert not os.path.exists(f'/proc/{pid}') or runrecord.identity(pid) is None
        record = runrecord.read(str(tmp_path / '1'))
        assert record['state'] == 'stopped' and record['step'] == saved
        with server_process(tiny_ckpt, tmp_path, names_file) as (third, server):  # and the next one
            assert post(server, '/api/train/status', {'offset': 0})['state'] == 'stopped'
            assert any(c['id'] == 'run1' for c in request(server, 'GET', '/api/config')[1]['checkpoints'])
    finally:
        kill_recorded_runs(tmp_path)


def fake_record(folder, pid, process, state='running', steps=100):
    os.makedirs(folder, exist_ok=True)
    runrecord.write(str(folder), {'number': int(os.path.basename(folder)), 'params': {'steps': steps},
                                  'pid': pid, 'process': process, 'server_pid': 1, 'server_process': 'gone',
                                  'state': state, 'exit_code': None, 'step': None, 'started': 0.0})


def test_a_reused_pid_is_never_signalled(tiny_ckpt, tmp_path):
    """A record says run 1 is process P; P is now another program (here a `sleep` of ours):
    its identity differs, so it is not taken for the run, and a Stop never reaches it."""
    other = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])
    try:
        assert runrecord.identity(other.pid) is not None
        fake_record(tmp_path / '1', other.pid, 'another-boot:12345')
        runs = RunManager(str(tmp_path), Checkpoints(tiny_ckpt))
        assert runs.run.state == 'failed' and not runs.run.adopted  # ended unwatched, nothing saved
        with pytest.raises(Exception, match='no run is going'):
            runs.stop()
        runrecord.Process(other.pid, 'another-boot:12345').send_signal(signal.SIGINT)
        time.sleep(0.2)
        assert other.poll() is None  # untouched
        assert runrecord.read(str(tmp_path / '1'))['state'] == 'failed'
    finally:
        other.kill()
        other.wait()


def test_a_run_that_ended_unwatched_is_shown_as_its_checkpoint_says(tiny_ckpt, tmp_path):
    """Recorded as running, its process gone: finished if its checkpoint holds every step,
    stopped (at the step it holds) if fewer; a folder without a record still lists its checkpoint."""
    import shutil
    step = read_checkpoint(tiny_ckpt).train_state.step  # 60
    for number, steps in ((1, step), (2, 1000)):
        fake_record(tmp_path / str(number), 2 ** 22 + 7, None, steps=steps)  # no such process
        shutil.copy(tiny_ckpt, tmp_path / str(number) / 'model.json')
    os.makedirs(tmp_path / '3')  # an older server's folder: no run.json
    shutil.copy(tiny_ckpt, tmp_path / '3' / 'model.json')
    (tmp_path / '4').mkdir()
    (tmp_path / '4' / 'run.json').write_text('{"number": 4, "params": ')  # damaged: ignored
    checkpoints = Checkpoints(tiny_ckpt)
    runs = RunManager(str(tmp_path), checkpoints)
    labels = {c['id']: c['label'] for c in checkpoints.listing()}
    assert labels == {'start': f'model.json (given at start): {step} steps, 1x8', 'run1': f'run 1: {step} steps, 1x8',
                      'run2': f'run 2: step {step} of 1000 (stopped), 1x8', 'run3': f'run 3: {step} steps, 1x8'}
    states = {n: runrecord.read(str(tmp_path / str(n)))['state'] for n in (1, 2)}
    assert states == {1: 'finished', 2: 'stopped'}
    assert runs.run.number == 2 and runs.status(0)['state'] == 'stopped'
