"""
The web lab's computing processes (microgpt/lab/workers.py): the models each keeps, the
warm-up, a worker that dies, and workers that never outlive their server.

The pool's answers themselves are the API's, tested route by route in test_lab_serve.py and
test_lab_pages.py (every live server of the tests computes in worker processes).
"""

import os
import signal
import time

import pytest

from labserver import post, server_process
from microgpt.lab import workers
from microgpt.lab.workers import ApiError, Models, Pool

ON_LINUX = os.path.exists('/proc/self/stat')


def children(pid):
    """The ids of the processes whose parent is pid, read from /proc."""
    out = []
    for name in os.listdir('/proc'):
        if name.isdigit():
            try:
                with open(f'/proc/{name}/stat') as f:
                    fields = f.read().rsplit(')', 1)[1].split()
            except OSError:  # ended meanwhile
                continue
            if int(fields[1]) == pid:
                out.append(int(name))
    return out


def alive(pid):
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'  # a zombie has ended
    except OSError:
        return False


def wait_until_ended(pids, seconds=10):
    deadline = time.time() + seconds
    while any(alive(p) for p in pids) and time.time() < deadline:
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


def test_a_scalar_model_is_handed_out_with_the_files_weights_and_no_gradients(tiny_ckpt):
    models = Models()
    model = models.get('scalar', tiny_ckpt).model
    first = model.params[0].data
    model.params[0].data += 1.0  # what a step does to it
    model.params[0].grad = 5.0
    again = models.get('scalar', tiny_ckpt).model
    assert again is model  # built once
    assert again.params[0].data == first and all(p.grad == 0 for p in again.params)


def test_a_checkpoint_changed_on_disk_is_read_again_and_one_deleted_is_404(tiny_ckpt, tmp_path):
    import shutil
    path = tmp_path / 'model.json'
    shutil.copy(tiny_ckpt, path)
    models = Models()
    a = models.get('numpy', str(path))
    assert models.get('numpy', str(path)) is a
    os.utime(path, ns=(1, 1))  # another modification time: as if a run saved over it
    assert models.get('numpy', str(path)) is not a
    path.unlink()
    with pytest.raises(ApiError) as e:
        models.get('numpy', str(path))
    assert e.value.status == 404


def test_a_process_keeps_at_most_keep_models(tiny_ckpt, tmp_path):
    import shutil
    models = Models(keep=2)
    paths = [str(tmp_path / f'{k}.json') for k in range(3)]
    for p in paths:
        shutil.copy(tiny_ckpt, p)
        models.get('numpy', p)
    assert [key[1] for key in models.kept] == paths[1:]  # the oldest read is let go


def test_warm_up_reads_the_checkpoint_both_ways(tiny_ckpt, monkeypatch):
    """(Its PyTorch part, 3.6 s, is left to the real server's test below.)"""
    monkeypatch.setattr(workers, 'MODELS', Models())
    find_spec = workers.importlib.util.find_spec
    monkeypatch.setattr(workers.importlib.util, 'find_spec', lambda name: None if name == 'torch' else find_spec(name))
    workers.warm_up(tiny_ckpt, None)
    assert {key[0] for key in workers.MODELS.kept} == {'numpy', 'scalar'}


def test_a_worker_that_dies_is_answered_500_and_replaced():
    pool = Pool(1)
    try:
        body = {'expression': 'a*b', 'values': {'a': 2.0, 'b': 3.0}, 'lenient': False}
        assert pool.compute('autograd', None, None, body)['value'] == 6.0
        pid = pool.start().submit(os.getpid).result()
        os.kill(pid, signal.SIGKILL)  # as the system does to a process out of memory
        with pytest.raises(ApiError) as e:
            for _ in range(50):  # until the pool has noticed
                pool.compute('autograd', None, None, body)
                time.sleep(0.1)
        assert e.value.status == 500 and 'died' in str(e.value)
        assert pool.compute('autograd', None, None, body)['value'] == 6.0  # a fresh pool
        assert pool.start().submit(os.getpid).result() != pid
    finally:
        pool.shutdown()


@pytest.mark.skipif(not ON_LINUX, reason="reads the process tree from /proc")
def test_the_real_server_warms_its_workers_and_they_end_with_it(tiny_ckpt, names_file, tmp_path):
    with server_process(tiny_ckpt, tmp_path, names_file, extra=()) as (proc, address):
        assert post(address, '/api/step', {'text': 'emma'})['n'] == 5
        pids = children(proc.pid)
        assert len(pids) >= workers.WORKERS  # the workers (and multiprocessing's resource tracker)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert wait_until_ended(pids) == []


@pytest.mark.skipif(not ON_LINUX, reason="reads the process tree from /proc")
def test_workers_end_by_themselves_when_the_server_is_killed(tiny_ckpt, names_file, tmp_path):
    with server_process(tiny_ckpt, tmp_path, names_file) as (proc, address):
        post(address, '/api/overview', {'text': 'emma'})  # the workers start on the first request
        pids = children(proc.pid)
        assert pids
        proc.kill()  # SIGKILL: nobody stops the pool
        proc.communicate(timeout=30)
    assert wait_until_ended(pids) == []
