"""
The web lab's server and JSON API, against a live server on an ephemeral port: each route's
numbers are the lab function's, training runs stream, stop and save, and every broken request or
command line gets one line while the server goes on; it listens on loopback only.
"""

import json
import signal
import socket
import threading
import time

import pytest

from helpers import assert_one_line, live_server, post, request, run_lab, server_process, wait_for_run
from microgpt import sampling
from microgpt.edge.checkpoint import read_checkpoint
from microgpt.lab import attention, autograd, loss, overview, registry, step
from microgpt.lab.api import public
from microgpt.lab.loading import load
from microgpt.lab.serve import MAX_BODY, is_loopback, local_hosts, make_server

TEXT = 'emma'
SMALL = {'n_embd': 8, 'n_head': 2, 'block_size': 12}  # a run of a second or two


def still_serving(server):
    status, body, _ = request(server, 'GET', '/api/config')
    return status == 200 and body['checkpoints'][0]['id'] == 'start'


# ---------------------------------------------------------------------------- the numbers
def test_config_names_the_start_checkpoint_and_the_step_pages_engine(server, model, monkeypatch):
    start = request(server, 'GET', '/api/config')[1]['checkpoints'][0]
    assert start['id'] == 'start' and start['config']['n_embd'] == model.config.n_embd
    n_params = sum(w.size for w in model.weights.values())  # above STEP_NUMPY_FIRST_ABOVE: numpy first
    for above, first in ((n_params, False), (n_params - 1, True)):
        monkeypatch.setattr(registry, 'STEP_NUMPY_FIRST_ABOVE', above)
        assert request(server, 'GET', '/api/config')[1]['checkpoints'][0]['step_numpy_first'] is first


def test_the_routes_equal_the_lab(server, model):
    """JSON carries a float64 exactly (shortest repr round-trips): equal means equal."""
    got = post(server, '/api/overview', {'text': TEXT, 'top': 4, 'temperature': 0.8, 'seed': 7})
    assert got['positions'] == json.loads(json.dumps(overview.predictions(model, TEXT, 4)))
    assert got['continuation'] == overview.continuation(model, TEXT, 0.8, 7)
    got = post(server, '/api/attention', {'text': TEXT, 'head': 1, 'query': 2, 'scale': False, 'temperature': 0.3})
    assert got == public(attention.compute(model, TEXT, 0, 1, 2, False, 0.3))
    got = post(server, '/api/autograd', {'expression': '(a + b) * c', 'values': {'a': 2, 'b': -3, 'c': 10}})
    root, _, _ = autograd.explore('(a + b) * c', ['a=2', 'b=-3', 'c=10'])
    assert [(n['data'], n['grad']) for n in got['nodes']] == [(d, g) for _, _, d, g, _ in autograd.graph_rows(root)]
    got = post(server, '/api/sampling', {'prompt': 'e', 'temperatures': [1.3, 0], 'num': 6, 'seed': 3, 'top_k': 3})
    drawn = {(d['temperature'], d['top_k']): d['names'] for d in got['draws']}
    assert drawn[(1.3, 3)] == sampling.sample_names(model, num=6, temperature=1.3, seed=3, prompt='e', top_k=3)


def test_the_step_route_equals_the_lab_step_at_the_checkpoints_learning_rate(server, tiny_ckpt):
    got = post(server, '/api/step', {'text': TEXT})
    loaded = load(tiny_ckpt, 'scalar')
    want = public(step.compute(loaded.model, TEXT, ckpt=loaded.ckpt))
    assert got['lr'] == read_checkpoint(tiny_ckpt).train_state.run.lr and got['lr_source'] == "the checkpoint's"
    assert got == want and got['loss_after'] < got['loss_before']
    assert post(server, '/api/step', {'text': TEXT})['loss_before'] == got['loss_before']  # the file's weights again
    fast = post(server, '/api/step', {'text': TEXT, 'engine': 'numpy'})
    assert fast['engine'] == 'numpy' and fast['loss_after'] == pytest.approx(got['loss_after'], rel=1e-12)


# ---------------------------------------------------------------------------- training runs
def test_a_training_run_streams_its_log_and_its_checkpoint_opens(server):
    started = post(server, '/api/train/start', {'steps': 30, 'weight_decay': 0.5, **SMALL})
    assert (started['params']['eval_every'], started['params']['save_every']) == (200, 100)  # train.py's
    status, body, _ = request(server, 'POST', '/api/train/start', {'steps': 30})
    assert status == 409 and 'one run at a time' in body['error']
    final, records, smooth = wait_for_run(server)
    assert final['state'] == 'finished' and final['exit_code'] == 0
    path = server.lab.checkpoints.path(final['ckpt'])
    run = read_checkpoint(path, training=True).train_state.run
    assert path.endswith('model.json') and (run.dtype, run.weight_decay) == ('float64', 0.5)
    # what streamed is what train.py logged, as `lab loss` reads it, however the polls cut it
    train, val = loss.read_log(path[:-len('.json')] + '.log.jsonl')
    assert [(r['step'], r['loss'], r['lr']) for r in records if 'loss' in r] == train and len(train) == 30
    assert [(r['step'], r['val_loss'], r['train_loss']) for r in records if 'val_loss' in r] == val
    assert [s for s, _, _ in val] == [30]  # only at the end, as train.py evaluates
    assert smooth == [[s, m] for (s, _, _), m in
                      zip(train, loss.running_mean([l for _, l, _ in train], loss.smoothing_window(30)))]
    assert final['samples'] and all(len(s['names']) == 5 for s in final['samples'])
    # listed with its own config and label, and the other pages open it
    listed = {c['id']: c for c in request(server, 'GET', '/api/config')[1]['checkpoints']}
    assert listed[final['ckpt']]['config']['n_embd'] == 8 and listed[final['ckpt']]['label'].endswith(': 30 steps, 1x8')
    got = post(server, '/api/overview', {'ckpt': final['ckpt'], 'text': TEXT})
    assert got['positions'] == json.loads(json.dumps(overview.predictions(load(path).model, TEXT)))


def test_stop_saves_the_last_whole_step_as_ctrl_c_does(server):
    post(server, '/api/train/start', {'steps': 20000, 'engine': 'numpy', 'batch_size': 4, **SMALL})
    records, offset = [], 0
    while len([r for r in records if 'loss' in r]) < 2:  # stop once it has taken steps
        status = post(server, '/api/train/status', {'offset': offset})
        records, offset = records + status['records'], status['offset']
        assert status['state'] == 'running'
        time.sleep(0.05)
    assert status['estimate'] is None or status['estimate']['text'].startswith('about ')
    post(server, '/api/train/stop', {})
    final, more, _ = wait_for_run(server, offset=offset)
    assert final['state'] == 'stopped' and final['exit_code'] == 130 and final['estimate'] is None
    saved = read_checkpoint(server.lab.checkpoints.path(final['ckpt']))
    assert saved.train_state.step == max(r['step'] for r in records + more) < 20000
    assert (saved.train_state.run.engine, saved.train_state.run.batch_size) == ('numpy', 4)
    assert request(server, 'POST', '/api/train/stop', {})[0] == 409  # nothing left to stop


def test_stop_right_after_start_is_stopped_not_failed(server):
    """Stop pressed while train.py is still starting (before it catches Ctrl-C) ends the run
    with a traceback in train.txt; the page must say stopped, as the learner asked."""
    post(server, '/api/train/start', {'steps': 20000, **SMALL})
    post(server, '/api/train/stop', {})
    final, _, _ = wait_for_run(server)
    assert final['state'] == 'stopped' and final['error'] is None


@pytest.mark.parametrize('body, words', [
    ({'steps': 0}, "'steps' is 0"), ({'steps': 10 ** 9}, "'steps'"), ({'n_layer': 9}, "'n_layer'"),
    ({'n_embd': 10, 'n_head': 4}, 'does not divide'), ({'block_size': 'big'}, 'an integer'),
    ({'steps': 2.5}, 'an integer'), ({'engine': 'torch'}, 'is unknown'), ({'lr': -1}, "'lr'"),
    ({'steps': True}, 'an integer'), ({'dropout': 0.95}, "'dropout'"), ({'weight_decay': 11}, "'weight_decay'"),
    ({'eval_every': -1}, "'eval_every'"), ({'momentum': 0.9}, "unknown field 'momentum'"),
    ({'dtype': 'float32'}, "dtype 'float32' is not one the scalar engine computes in: choose float64"),
    ({'dtype': 'bfloat16', 'engine': 'numpy'}, "choose float64 or float32")])
def test_bad_training_parameters_are_one_line(server, body, words):
    status, answer, _ = request(server, 'POST', '/api/train/start', body)
    assert status == 400 and words in answer['error'] and '\n' not in answer['error']


def test_a_runs_folder_that_cannot_be_made_is_one_line(server, tmp_path, monkeypatch):
    not_a_folder = tmp_path / 'runs'
    not_a_folder.write_text('a file where --runs-dir should be')
    monkeypatch.setattr(server.lab.runs, 'runs_dir', str(not_a_folder))
    before = post(server, '/api/train/status', {})
    status, body, _ = request(server, 'POST', '/api/train/start', {'steps': 1})
    assert status == 500 and '--runs-dir' in body['error'] and '\n' not in body['error']
    after = post(server, '/api/train/status', {})  # no run was half started
    assert (after.get('run'), after['state']) == (before.get('run'), before['state'])


def test_a_restarted_server_lists_the_runs_of_the_last_one(tiny_ckpt, names_file, tmp_path):
    with live_server(tiny_ckpt, tmp_path, names_file) as first:
        post(first, '/api/train/start', {'steps': 5, **SMALL})
        assert wait_for_run(first)[0]['state'] == 'finished'
        post(first, '/api/train/start', {'steps': 20000, **SMALL})
        while not post(first, '/api/train/status', {'offset': 0})['records']:
            time.sleep(0.05)
    # the first server stopped its run as Ctrl-C would; the next one lists both, and opens them
    with live_server(tiny_ckpt, tmp_path, names_file) as second:
        labels = {c['id']: c['label'] for c in request(second, 'GET', '/api/config')[1]['checkpoints']}
        step = read_checkpoint(str(tmp_path / '2' / 'model.json')).train_state.step
        assert labels['run1'] == 'run 1: 5 steps, 1x8' and labels['run2'] == f'run 2: step {step} of 20000 (stopped), 1x8'
        assert post(second, '/api/overview', {'ckpt': 'run2', 'text': TEXT})['positions']
        assert post(second, '/api/train/start', {'steps': 1, **SMALL})['run'] == 3
        assert wait_for_run(second)[0]['state'] == 'finished'


def test_a_run_checkpoint_deleted_on_disk_leaves_the_list_and_the_pages_open(server, tmp_path):
    server.lab.checkpoints.add('run999', str(tmp_path / 'model.json'), 'run 999')  # as a finished run would
    try:
        ids = [c['id'] for c in request(server, 'GET', '/api/config')[1]['checkpoints']]
        assert ids[0] == 'start' and 'run999' not in ids
        status, body, _ = request(server, 'POST', '/api/overview', {'ckpt': 'run999', 'text': TEXT})
        assert status == 404 and 'no longer exists' in body['error']
    finally:
        del server.lab.checkpoints.paths['run999']


# ---------------------------------------------------------------------------- broken requests
@pytest.mark.parametrize('method, path, raw, headers, want', [
    ('GET', '/../../etc/passwd', None, None, 404),
    ('POST', '/api/overview', b'x' * (MAX_BODY + 1), None, 413),
    ('POST', '/api/overview', b'{"text": "emma"', None, 400),                 # malformed JSON
    ('POST', '/api/overview', b'{"text": "emma"}', {'Content-Type': 'text/plain'}, 415),
    ('GET', '/api/overview', None, None, 405),
    ('POST', '/api/nothing', b'{}', None, 404),
    ('GET', '/api/config', None, {'Host': 'evil.example:80'}, 400),          # DNS rebinding
    ('POST', '/api/train/start', b'{}', {'Origin': 'http://evil.example'}, 403),
])
def test_a_broken_request_gets_a_one_line_json_4xx_and_the_server_goes_on(server, method, path, raw, headers, want):
    status, body, _ = request(server, method, path, raw=raw, headers=headers)
    assert status == want and isinstance(body['error'], str) and '\n' not in body['error']
    assert still_serving(server)


@pytest.mark.parametrize('body, words', [
    ({'text': TEXT, 'ckpt': '/etc/passwd'}, 'no checkpoint with id'),      # a path is not an id
    ({'text': 'emma!'}, "'!'"),                                            # the lab's own message
    ({'text': TEXT, 'head': 7}, 'out of range'),
    ({'text': TEXT, 'temperature': 0}, "'temperature'"),
    ({'text': 'e' * 2000}, 'characters long'),
    ({}, "needs the field 'text'"),
])
def test_a_mistake_in_a_request_gets_the_labs_one_line(server, body, words):
    status, answer, _ = request(server, 'POST', '/api/attention', body)
    assert status in (400, 404) and words in answer['error'] and '\n' not in answer['error']


def test_a_client_that_leaves_is_no_error_but_a_bug_is(server, capsys):
    """A page closed while its answer is on the wire is nobody's fault: nothing is printed."""
    for error, printed in ((ConnectionResetError(104, 'reset'), False), (ValueError('a bug'), True)):
        try:
            raise error
        except Exception:
            server.handle_error(None, ('127.0.0.1', 1))
        assert (str(error) in capsys.readouterr().err) == printed


# ---------------------------------------------------------------------------- loopback only
@pytest.mark.parametrize('host, loopback', [('127.0.0.1', True), ('::1', True), ('localhost', True),
                                            ('::ffff:127.0.0.1', True), ('::ffff:10.0.0.1', False),
                                            ('0.0.0.0', False), ('192.168.1.5', False), ('example.com', False)])
def test_only_a_loopback_address_is_loopback(host, loopback):
    assert is_loopback(host) == loopback


def test_the_host_names_a_browser_sends_for_loopback():
    assert '127.0.0.1' in local_hosts('127.0.0.1', 80) and 'localhost:80' in local_hosts('127.0.0.1', 80)
    assert local_hosts('::1', 8000) == {'127.0.0.1:8000', 'localhost:8000', '[::1]:8000'}


def test_the_ipv6_loopback_serves_with_its_host_in_brackets(tiny_ckpt, tmp_path):
    try:
        socket.socket(socket.AF_INET6).close()
    except OSError:
        pytest.skip("no IPv6 here")
    server = make_server(tiny_ckpt, host='::1', port=0, runs_dir=str(tmp_path))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert server.url == f'http://[::1]:{server.server_address[1]}/'
        assert still_serving(server)  # http.client sends Host: [::1]:port
    finally:
        server.shutdown()
        server.server_close()


# ---------------------------------------------------------------------------- the command line
@pytest.mark.parametrize('argv, words', [
    (['--port', '70000'], 'out of range'), (['--port', 'http'], "invalid int value: 'http'"),
    (['--ckpt', 'no/such/model.json'], 'no checkpoint at'), (['--ckpt', 'DAMAGED'], 'model.json'),
    (['--host', '0.0.0.0'], 'is not a loopback address'), (['--host', '192.0.2.1'], 'is not a loopback address'),
    (['--port', 'TAKEN'], 'cannot listen on port')])
def test_bad_command_lines_are_one_line_exit_2(tiny_ckpt, tmp_path, capsys, argv, words):
    damaged = tmp_path / 'model.json'
    damaged.write_text(open(tiny_ckpt).read()[:-200])
    with socket.socket() as taken:
        taken.bind(('127.0.0.1', 0))
        taken.listen()
        swap = {'TAKEN': str(taken.getsockname()[1]), 'DAMAGED': str(damaged)}
        status, out, err = run_lab(['serve', '--ckpt', tiny_ckpt, '--port', '0', *[swap.get(a, a) for a in argv]], capsys)
    assert_one_line(status, err, words)
    assert not out


@pytest.mark.parametrize('signame', ['SIGINT', 'SIGHUP'])
def test_ctrl_c_stops_the_server_and_saves_the_run_going(tiny_ckpt, names_file, tmp_path, signame):
    """On SIGINT (Ctrl-C) or SIGHUP (a closed terminal) the server passes one SIGINT to the
    training run, which saves its last whole step."""
    with server_process(tiny_ckpt, tmp_path, names_file) as (proc, address):
        assert '(Ctrl-C to stop)' in address.first_line
        post(address, '/api/train/start', {'steps': 20000, 'n_embd': 8, 'n_head': 2})
        log = tmp_path / '1' / 'model.log.jsonl'
        deadline = time.time() + 30
        while not (log.exists() and log.read_text().count('\n') >= 3):
            assert time.time() < deadline
            time.sleep(0.05)
        proc.send_signal(getattr(signal, signame))
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert 'stopping: training run 1, still going, stops as with Ctrl-C' in out
    assert 'run 1 stopped (exit status 130)' in out
    steps = [json.loads(line)['step'] for line in log.read_text().splitlines()]
    assert read_checkpoint(str(tmp_path / '1' / 'model.json')).train_state.step == steps[-1] < 20000


def test_a_second_ctrl_c_while_the_run_saves_is_passed_on_too(tmp_path):
    # the run has its own session: the server must hand it the second Ctrl-C itself
    from microgpt.lab.runs import RunManager, RunProcess

    class SlowToStop:  # a train.py still saving when the second Ctrl-C comes
        signals = []
        poll = staticmethod(lambda: None)
        send_signal = signals.append

        def wait(self, timeout=None):
            raise KeyboardInterrupt

    runs = RunManager(str(tmp_path), checkpoints=None)
    runs.run = RunProcess(1, str(tmp_path), {'steps': 10}, SlowToStop())
    with pytest.raises(KeyboardInterrupt):
        runs.shutdown()
    assert SlowToStop.signals == [signal.SIGINT, signal.SIGINT]
