"""
The web lab's JSON API against a live server on an ephemeral port.

Every route's numbers must equal what the lab function gives when called directly (the one
source of numbers the pages draw from); training runs started over HTTP must stream the same
log train.py writes and leave a checkpoint that loads; and hostile or broken requests (path
traversal, an oversized body, malformed JSON, unknown routes, code in an expression, a second
concurrent run, a foreign Host or Origin) must get a JSON 4xx while the server keeps serving.
Bad command lines (port taken or out of range, checkpoint missing or damaged) end as one line
with exit status 2 before anything is served.
"""

import json
import os
import socket
import threading

import numpy as np
import pytest

from labserver import live_server, post, request, server_process, wait_for_run
from microgpt.programs import cli
from microgpt import sampling
from microgpt.lab import attention, autograd, loss, overview, registry
from microgpt.lab.__main__ import main
from microgpt.lab.loading import load
from microgpt.lab.serve import MAX_BODY, Handler, is_loopback, local_hosts, make_server

TEXT = 'emma'
EXACT = 0.0  # JSON carries a float64 exactly (shortest repr round-trips), so equal means equal


@pytest.fixture(scope='module')
def model(tiny_ckpt):
    return load(tiny_ckpt).model


def as_array(x):
    """A JSON list back to float64, null (a masked cell) as NaN."""
    return np.array(x, dtype=np.float64) if not isinstance(x, list) else \
        np.array(json.loads(json.dumps(x).replace('null', 'NaN')), dtype=np.float64)


def still_serving(server):
    status, body, _ = request(server, 'GET', '/api/config')
    return status == 200 and body['checkpoints'][0]['id'] == 'start'


# ---------------------------------------------------------------------------- the numbers
def test_config_names_the_start_checkpoint(server, model):
    config = request(server, 'GET', '/api/config')[1]
    start = config['checkpoints'][0]
    assert start['id'] == 'start'
    for name in ('n_layer', 'n_embd', 'n_head', 'head_dim', 'block_size', 'vocab_size'):
        assert start['config'][name] == getattr(model.config, name)
    assert config['features']['training']['engines'][0] == 'scalar'
    # the tiny model's scalar step is quick: the Step page asks it alone
    assert start['step_numpy_first'] is False


def test_a_large_models_step_page_asks_the_numpy_engine_first(server, model, monkeypatch):
    """Large: more weights than registry.STEP_NUMPY_FIRST_ABOVE (the step's entry says so),
    counted from the model itself."""
    n_params = sum(w.size for w in model.weights.values())
    for above, first in ((n_params, False), (n_params - 1, True)):
        monkeypatch.setattr(registry, 'STEP_NUMPY_FIRST_ABOVE', above)
        assert request(server, 'GET', '/api/config')[1]['checkpoints'][0]['step_numpy_first'] is first


def test_overview_route_equals_the_lab(server, model):
    got = post(server, '/api/overview', {'text': TEXT, 'top': 4, 'temperature': 0.8, 'seed': 7})
    want = overview.predictions(model, TEXT, 4)
    assert json.loads(json.dumps(want)) == got['positions']
    assert got['mean_loss'] == pytest.approx(np.mean([r['loss'] for r in want]), abs=1e-15)
    assert got['continuation'] == overview.continuation(model, TEXT, 0.8, 7)


@pytest.mark.parametrize('head, query, scale, temperature', [(1, 2, True, 1.0), (0, None, False, 0.3)])
def test_attention_route_equals_the_lab(server, model, head, query, scale, temperature):
    got = post(server, '/api/attention', {'text': TEXT, 'head': head, 'query': query,
                                          'scale': scale, 'temperature': temperature})
    want = attention.compute(model, TEXT, 0, head, query, scale, temperature)
    assert got['query'] == want['query'] and got['labels'] == want['labels']
    for key in ('q', 'keys', 'values', 'products', 'raw', 'scores', 'weights', 'out', 'all_heads'):
        np.testing.assert_allclose(as_array(got[key]), want[key], rtol=0, atol=EXACT, err_msg=key)
    np.testing.assert_allclose(as_array(got['scaled']),
                               want['raw'] * (model.config.head_dim ** -0.5 if scale else 1), atol=EXACT)
    assert got['stats'] == want['stats']
    T = len(want['labels'])  # the future cells are null, exactly the upper triangle
    assert sum(v is None for h in got['all_heads'] for row in h for v in row) == \
        model.config.n_head * T * (T - 1) // 2


def test_autograd_route_gives_the_lesson_gradients(server):
    got = post(server, '/api/autograd', {'expression': '(a + b) * c', 'values': {'a': 2, 'b': -3, 'c': 10}})
    assert {n: v['grad'] for n, v in got['variables'].items()} == {'a': 10.0, 'b': 10.0, 'c': -1.0}
    root, _, names = autograd.explore('(a + b) * c', ['a=2', 'b=-3', 'c=10'])
    rows = autograd.graph_rows(root)
    assert [(n['data'], n['grad'], n['inputs']) for n in got['nodes']] == \
        [(data, grad, children) for _, _, data, grad, children in rows]
    assert got['value'] == root.data == -10.0


def test_autograd_route_starts_new_variables_at_one_and_drops_old(server):
    got = post(server, '/api/autograd', {'expression': 'x * x', 'values': {'a': 5}, 'lenient': True})
    assert got['variables'] == {'x': {'value': 1.0, 'grad': 2.0}}
    # as the command line does, unless the page asks for leniency
    status, answer, _ = request(server, 'POST', '/api/autograd', {'expression': 'x * x', 'values': {'a': 5}})
    assert status == 400 and answer['error'] == 'no value for x: add x=VALUE'


def test_the_sampling_route_equals_the_sampler(server, model):
    got = post(server, '/api/sampling', {'prompt': 'e', 'temperatures': [1.3, 0], 'num': 6, 'seed': 3, 'top_k': 3})
    assert got['temperatures'] == [0.0, 1.3]
    drawn = {(d['temperature'], d['top_k']): d['names'] for d in got['draws']}
    assert list(drawn) == [(0.0, None), (1.3, None), (1.3, 3)]  # greedy is its own top-1 cut
    assert drawn[(1.3, 3)] == sampling.sample_names(model, num=6, temperature=1.3, seed=3,
                                                    prompt='e', top_k=3)
    ids = [model.tokenizer.bos] + model.tokenizer.encode('e')
    assert got['probs'][1] == sampling.probabilities(model.next_logits_fn()(ids), 1.3)
    assert sum(got['probs'][1]) == pytest.approx(1.0, abs=1e-12)
    assert len(got['top_k_kept']) == 3
    # names_at: the same distribution, and the names at that temperature only (the page's own)
    only = post(server, '/api/sampling', {'prompt': 'e', 'temperatures': [1.3, 0], 'num': 6, 'seed': 3, 'top_k': 3,
                                          'names_at': [1.3]})
    assert only['probs'] == got['probs']
    assert {(d['temperature'], d['top_k']): d['names'] for d in only['draws']} == \
        {k: v for k, v in drawn.items() if k[0] == 1.3}


def test_step_route_equals_the_lab_step(server, tiny_ckpt):
    """Lesson 04's page: the numbers `lab step` computes, as the route returns them."""
    from microgpt.lab import step, workers
    from microgpt.lab.loading import load
    got = post(server, '/api/step', {'text': TEXT, 'lr': 0.02})
    want = workers.public(step.compute(load(tiny_ckpt, 'scalar').model, TEXT, lr=0.02))
    # PyTorch's float64 gradients, in the server's worker process and in this one, may part in
    # the last bit (its threads sum in another order): its differences from the scalar engine's
    # are compared to within rounding, everything else exactly
    got_torch, want_torch = got.pop('torch'), want.pop('torch')
    assert got == want
    if want_torch is not None:
        assert got_torch['matrices'].keys() == want_torch['matrices'].keys()
        assert got_torch['max_diff'] < 1e-12 and want_torch['max_diff'] < 1e-12
    assert got['loss_after'] < got['loss_before'] and got['adam']['lr'] == 0.02
    assert 'grads' not in got and '_grads' not in got  # the full matrices stay on the server
    # the numpy engine's step, which the Step page draws first: the same numbers, no graph, and
    # it does not wait its turn behind a scalar step (the one that takes a second)
    fast = post(server, '/api/step', {'text': TEXT, 'lr': 0.02, 'engine': 'numpy'})
    assert fast['engine'] == 'numpy' and fast['graph_nodes'] is None and fast['numpy'] is None
    assert fast['loss_after'] == pytest.approx(got['loss_after'], rel=1e-12)
    sandbox = registry.get('step')
    assert sandbox.waits_its_turn({'engine': 'scalar'}) and not sandbox.waits_its_turn({'engine': 'numpy'})
    status, answer, _ = request(server, 'POST', '/api/step', {'text': TEXT, 'engine': 'torch'})
    assert status == 400 and answer['error'] == "--engine 'torch': choose one of scalar, numpy"


def test_step_route_starts_at_the_checkpoints_own_learning_rate(server, tiny_ckpt):
    from microgpt.edge.checkpoint import read_checkpoint
    trained = read_checkpoint(tiny_ckpt).train_state.run.lr
    got = post(server, '/api/step', {'text': TEXT})
    assert got['lr'] == trained and got['lr_source'] == "the checkpoint's"
    start = request(server, 'GET', '/api/config')[1]['checkpoints'][0]
    assert start['trained_lr'] == trained


# ---------------------------------------------------------------------------- training runs
def test_a_training_run_streams_its_log_and_its_checkpoint_opens(server):
    started = post(server, '/api/train/start', {'steps': 30, 'n_embd': 8, 'n_head': 2, 'block_size': 12})
    # a second run while the first one goes is refused
    status, body, _ = request(server, 'POST', '/api/train/start', {'steps': 30})
    assert status == 409 and 'one run at a time' in body['error']
    final, records, smooth = wait_for_run(server)
    assert final['state'] == 'finished' and final['exit_code'] == 0
    steps = [r['step'] for r in records if 'loss' in r]
    assert steps == list(range(1, 31))
    # what streamed is what train.py logged, as `lab loss` reads it
    ckpt_id = final['ckpt']
    path = server.lab.checkpoints.path(ckpt_id)
    train, val = loss.read_log(path[:-len('.json')] + '.log.jsonl')
    assert [(r['step'], r['loss'], r['lr']) for r in records if 'loss' in r] == train
    assert [(r['step'], r['val_loss'], r['train_loss']) for r in records if 'val_loss' in r] == val and val
    # the smoothed curve is lab loss's running mean, however the log was cut into polls
    assert smooth == [[s, m] for (s, _, _), m in
                      zip(train, loss.running_mean([l for _, l, _ in train], loss.smoothing_window(30)))]
    assert final['samples'] and all(len(s['names']) == 5 for s in final['samples'])
    # the run's checkpoint is listed, with its own config, and the pages can use it
    listed = {c['id']: c for c in request(server, 'GET', '/api/config')[1]['checkpoints']}
    assert listed[ckpt_id]['config']['n_embd'] == 8 and started['run'] >= 1
    got = post(server, '/api/overview', {'ckpt': ckpt_id, 'text': TEXT})
    assert got['positions'] == json.loads(json.dumps(overview.predictions(load(path).model, TEXT)))


def test_stop_saves_the_last_whole_step_as_ctrl_c_does(server):
    post(server, '/api/train/start', {'steps': 20000, 'n_embd': 8, 'n_head': 2, 'block_size': 12})
    records, offset = [], 0
    while not any('loss' in r for r in records):  # stop once it has taken a step
        status = post(server, '/api/train/status', {'offset': offset})
        records, offset = records + status['records'], status['offset']
    post(server, '/api/train/stop', {})
    final, more, _ = wait_for_run(server, offset=offset)
    records += more
    assert final['state'] == 'stopped' and final['exit_code'] == 130
    from microgpt.edge.checkpoint import read_checkpoint
    saved = read_checkpoint(server.lab.checkpoints.path(final['ckpt']))
    assert saved.train_state.step == max(r['step'] for r in records) < 20000
    status, body, _ = request(server, 'POST', '/api/train/stop', {})
    assert status == 409  # nothing left to stop


def test_stop_right_after_start_is_stopped_not_failed(server):
    """Stop pressed while train.py is still starting (before it catches Ctrl-C) ends the run
    with a traceback in train.txt; the page must say stopped, as the learner asked."""
    post(server, '/api/train/start', {'steps': 20000, 'n_embd': 8, 'n_head': 2})
    post(server, '/api/train/stop', {})
    final, _, _ = wait_for_run(server)
    assert final['state'] == 'stopped' and final['error'] is None


@pytest.mark.parametrize('body, words', [
    ({'steps': 0}, "'steps' is 0"), ({'steps': 10 ** 9}, "'steps'"), ({'n_layer': 9}, "'n_layer'"),
    ({'n_embd': 10, 'n_head': 4}, 'does not divide'), ({'block_size': 'big'}, 'an integer'),
    ({'steps': 2.5}, 'an integer'), ({'engine': 'torch'}, 'is unknown'), ({'lr': -1}, "'lr'"),
    ({'steps': True}, 'an integer')])
def test_training_parameters_are_range_checked(server, body, words):
    status, answer, _ = request(server, 'POST', '/api/train/start', body)
    assert status == 400 and words in answer['error']


# ---------------------------------------------------------------------------- hostile requests
@pytest.mark.parametrize('path', ['/../../etc/passwd', '/static/../serve.py', '/static/%2e%2e/serve.py',
                                  '//etc/passwd', '/static/lab.js/../../api.py', '/web/lab.js',
                                  '/api/../serve.py', '/api/config/../../x', '/static/'])
def test_paths_outside_the_route_table_get_404(server, path):
    status, body, _ = request(server, 'GET', path)
    assert status == 404 and body['error'].startswith('no such page')
    assert still_serving(server)



def test_a_numpy_engine_run_with_batches_trains_and_opens(server):
    """The Training page's engine and batch size reach train.py: a batched numpy run."""
    post(server, '/api/train/start', {'steps': 12, 'n_embd': 8, 'n_head': 2, 'block_size': 12,
                                      'engine': 'numpy', 'batch_size': 4})
    final, records, _ = wait_for_run(server)
    assert final['state'] == 'finished' and final['exit_code'] == 0
    assert [r['step'] for r in records if 'loss' in r] == list(range(1, 13))
    from microgpt.edge.checkpoint import read_checkpoint
    run = read_checkpoint(server.lab.checkpoints.path(final['ckpt'])).train_state.run
    assert (run.engine, run.batch_size) == ('numpy', 4)

def test_the_pages_and_their_files_answer(server):
    for path in ('/', '/attention', '/static/lab.js', '/favicon.ico'):
        status, _, raw = request(server, 'GET', path)
        assert status == 200 and len(raw) > 100


@pytest.mark.parametrize('method, path, raw, headers, want', [
    ('POST', '/api/overview', b'x' * (MAX_BODY + 1), None, 413),
    ('POST', '/api/overview', b'{"text": "emma"', None, 400),                 # malformed JSON
    ('POST', '/api/overview', b'[1, 2]', None, 400),                          # not an object
    ('POST', '/api/overview', b'\xff\xfe', None, 400),                        # not UTF-8
    ('POST', '/api/overview', b'[' * 8000 + b']' * 8000, None, 400),         # too deep for json
    ('POST', '/api/autograd', b'{"expression": "a", "values": {"a": 1' + b'0' * 400 + b'}}', None, 400),
    ('POST', '/api/overview', b'{"text": "emma"}', {'Content-Type': 'text/plain'}, 415),
    ('GET', '/api/overview', None, None, 405),
    ('POST', '/api/config', b'{}', None, 405),
    ('POST', '/api/nothing', b'{}', None, 404),
    ('DELETE', '/api/config', None, None, 405),
    ('GET', '/api/config', None, {'Host': 'evil.example:80'}, 400),          # DNS rebinding
    ('POST', '/api/train/start', b'{}', {'Origin': 'http://evil.example'}, 403),
])
def test_broken_requests_get_a_json_4xx_and_the_server_goes_on(server, method, path, raw, headers, want):
    status, body, _ = request(server, method, path, raw=raw, headers=headers)
    assert status == want and isinstance(body['error'], str) and '\n' not in body['error']
    assert still_serving(server)


@pytest.mark.parametrize('body, words', [
    ({'text': TEXT, 'ckpt': '/etc/passwd'}, 'no checkpoint with id'),      # a path is not an id
    ({'text': TEXT, 'ckpt': '../start'}, 'no checkpoint with id'),
    ({'text': 'emma!'}, "'!'"),                                            # the lab's own message
    ({'text': TEXT, 'head': 7}, 'out of range'),
    ({'text': TEXT, 'query': 99}, 'out of range'),
    ({'text': TEXT, 'temperature': 0}, "'temperature'"),
    ({'text': 'e' * 2000}, 'characters long'),
    ({}, "needs the field 'text'"),
])
def test_bad_attention_requests_get_the_lab_message(server, body, words):
    status, answer, _ = request(server, 'POST', '/api/attention', body)
    assert status in (400, 404) and words in answer['error']
    assert still_serving(server)


@pytest.mark.parametrize('expression', ["__import__('os').system('touch PWNED')",
                                        "open('/etc/passwd').read()", "a.__class__", "[a for a in b]",
                                        "(lambda: 1)()", "a" + " + a" * 300, "-" * 900 + "a"])
def test_code_in_an_expression_is_refused_never_run(server, expression, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    status, body, _ = request(server, 'POST', '/api/autograd', {'expression': expression, 'values': {}})
    assert status == 400 and body['error']
    assert not os.path.exists(tmp_path / 'PWNED')
    assert still_serving(server)


def test_a_runs_folder_that_cannot_be_made_is_one_line(tiny_ckpt, names_file, tmp_path):
    not_a_folder = tmp_path / 'runs'
    not_a_folder.write_text('a file where --runs-dir should be')
    with live_server(tiny_ckpt, not_a_folder, names_file) as server:
        status, body, _ = request(server, 'POST', '/api/train/start', {'steps': 1})
        assert status == 500 and '--runs-dir' in body['error'] and '\n' not in body['error']
        assert post(server, '/api/train/status', {})['state'] == 'idle'  # no run was half started


def test_a_run_checkpoint_deleted_on_disk_leaves_the_list_and_the_pages_open(server, tmp_path):
    gone = tmp_path / 'model.json'
    server.lab.checkpoints.add('run999', str(gone), 'run 999')  # as a finished run would
    try:
        status, config, _ = request(server, 'GET', '/api/config')
        ids = [c['id'] for c in config['checkpoints']]
        assert status == 200 and ids[0] == 'start' and 'run999' not in ids
        status, body, _ = request(server, 'POST', '/api/overview', {'ckpt': 'run999', 'text': TEXT})
        assert status == 404 and 'no longer exists' in body['error']
    finally:
        del server.lab.checkpoints.paths['run999']


def test_a_second_step_while_one_is_computed_waits_then_gets_503(server, monkeypatch):
    """The scalar engine's step is slow and large on a big model: one is built at a time; a
    request waits its turn (api.WAIT seconds), then is told to try again."""
    from microgpt.lab import api
    monkeypatch.setattr(api, 'WAIT', 0.2)
    with server.lab.turn('step'):  # as if another request's step were being computed
        status, body, _ = request(server, 'POST', '/api/step', {'text': TEXT})
    assert status == 503 and 'another step' in body['error']
    assert request(server, 'POST', '/api/step', {'text': TEXT})[0] == 200


def test_a_step_requested_while_one_is_computed_is_answered_after_it(server):
    """A learner who asks for a second name before the first is drawn gets both."""
    import threading
    answers = []
    with server.lab.turn('step'):
        waiting = threading.Thread(target=lambda: answers.append(request(server, 'POST', '/api/step',
                                                                         {'text': TEXT})[0]))
        waiting.start()
        waiting.join(0.3)
        assert waiting.is_alive() and answers == []  # queued behind the step in progress
    waiting.join(30)
    assert answers == [200]


def test_a_step_still_waiting_when_a_newer_comes_is_overtaken(server):
    """A learner typing a name on the Step page of a large model sends one scalar step per
    letter, and the server once computed them all, one after another, before the last. A request
    that waited while a newer one came is answered 204 (no content) at its turn, not computed;
    the newer is."""
    import threading
    answers = {}

    def ask(text):
        answers[text] = request(server, 'POST', '/api/step', {'text': text})

    with server.lab.turn('step'):  # a step in progress
        older = threading.Thread(target=ask, args=('emm',))
        older.start()
        older.join(0.3)
        newer = threading.Thread(target=ask, args=(TEXT,))
        newer.start()
        newer.join(0.3)
        assert older.is_alive() and newer.is_alive()
    older.join(30)
    newer.join(30)
    assert answers['emm'][:2] == (204, None)
    assert answers[TEXT][0] == 200 and answers[TEXT][1]['text'] == TEXT


def test_a_client_that_goes_silent_is_answered_408_and_dropped(server, monkeypatch):
    monkeypatch.setattr(Handler, 'timeout', 0.5)
    host, port = server.server_address[:2]
    with socket.create_connection((host, port), timeout=10) as sock:  # half a body, then nothing
        sock.sendall(f'POST /api/overview HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n'
                     f'Content-Length: 100\r\n\r\n{{"te'.encode())
        answer = sock.makefile('rb').read()  # all the server sends, until it closes
    assert answer.startswith(b'HTTP/1.1 408') and b'stopped arriving' in answer
    with socket.create_connection((host, port), timeout=10) as sock:  # connects, sends nothing
        assert sock.recv(100) == b''  # closed by the server (a timeout here raises instead)
    assert still_serving(server)


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


def test_on_all_addresses_an_ip_host_is_served_and_a_domain_name_refused(tiny_ckpt, tmp_path):
    """--host 0.0.0.0 (to open the lab from another device): a page elsewhere that rebinds its
    own domain to this machine still cannot talk to it."""
    server = make_server(tiny_ckpt, host='0.0.0.0', port=0, runs_dir=str(tmp_path))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        for host, want in [('192.168.1.5', 200), ('[fe80::1]', 200), ('localhost', 200),
                           ('evil.example', 400), ('192.168.1.5.evil.example', 400)]:
            assert request(server, 'GET', '/api/config', headers={'Host': f'{host}:{port}'})[0] == want, host
        assert request(server, 'GET', '/api/config', headers={'Host': f'192.168.1.5:{port + 1}'})[0] == 400
    finally:
        server.shutdown()
        server.server_close()


def test_a_browser_leaves_port_80_out_of_the_host_it_sends():
    assert '127.0.0.1' in local_hosts('127.0.0.1', 80) and 'localhost:80' in local_hosts('127.0.0.1', 80)
    assert 'localhost' not in local_hosts('127.0.0.1', 8000)
    assert local_hosts('::1', 8000) == {'127.0.0.1:8000', 'localhost:8000', '[::1]:8000'}


def test_a_client_that_leaves_before_its_answer_is_no_error(server, capfd):
    import struct
    host, port = server.server_address[:2]
    body = json.dumps({'text': 'e' * 11, 'top': 17}).encode()
    for _ in range(3):  # a few times: the answer must be written after the reset arrives
        with socket.create_connection((host, port), timeout=10) as sock:
            sock.sendall(f'POST /api/overview HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n'
                         f'Content-Length: {len(body)}\r\n\r\n'.encode() + body)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))  # close = reset
    assert still_serving(server)
    assert 'Traceback' not in capfd.readouterr().err


def test_a_reset_anywhere_in_a_conversation_prints_nothing_but_a_bug_does(server, capsys):
    """socketserver hands whatever escapes a handler to handle_error: wherever the reset lands
    (the answer, or reading the next request), it is a client leaving, not a bug."""
    try:
        raise ConnectionResetError(104, 'Connection reset by peer')
    except ConnectionResetError:
        server.handle_error(None, ('127.0.0.1', 1))
    assert capsys.readouterr().err == ''
    try:
        raise ValueError('a bug')
    except ValueError:
        server.handle_error(None, ('127.0.0.1', 1))
    assert 'ValueError: a bug' in capsys.readouterr().err


def test_loopback_is_recognised():
    assert is_loopback('127.0.0.1') and is_loopback('::1') and is_loopback('localhost')
    assert not is_loopback('0.0.0.0') and not is_loopback('192.168.1.5')


# ---------------------------------------------------------------------------- the command line
def serve(argv, capsys):
    with pytest.raises(SystemExit) as info:
        cli.run(main, ['serve', *argv])
    out, err = capsys.readouterr()
    return info.value.code, out, err


def test_a_taken_port_is_one_line_exit_2(tiny_ckpt, capsys):
    with socket.socket() as taken:
        taken.bind(('127.0.0.1', 0))
        taken.listen()
        code, out, err = serve(['--ckpt', tiny_ckpt, '--port', str(taken.getsockname()[1])], capsys)
    assert code == 2 and err.startswith('error: cannot listen') and err.count('\n') == 1 and not out


@pytest.mark.parametrize('argv, words', [
    (['--port', '70000'], 'out of range'), (['--port', '-1'], 'out of range'),
    (['--port', 'http'], "invalid int value: 'http'"), (['--ckpt', 'no/such/model.json'], 'no checkpoint at'),
    (['--host', '192.0.2.1', '--port', '0'], 'give --host an address'),  # TEST-NET: not this machine's
])
def test_bad_command_lines_are_one_line_exit_2(tiny_ckpt, capsys, argv, words):
    argv = (['--ckpt', tiny_ckpt] if '--ckpt' not in argv else []) + argv
    code, out, err = serve(argv, capsys)
    assert code == 2 and words in err and err.count('\n') == 1 and not out


def test_a_damaged_checkpoint_is_one_line_exit_2(tiny_ckpt, tmp_path, capsys):
    damaged = tmp_path / 'model.json'
    damaged.write_text(open(tiny_ckpt).read()[:-200])
    code, out, err = serve(['--ckpt', str(damaged), '--port', '0'], capsys)
    assert code == 2 and err.startswith('error: ') and err.count('\n') == 1 and not out


@pytest.mark.parametrize('signame', ['SIGINT', 'SIGHUP'])
def test_ctrl_c_stops_the_server_and_saves_the_run_going(tiny_ckpt, names_file, tmp_path, signame):
    """The real command in its own process: it prints its address, serves, and on SIGINT (what
    Ctrl-C sends) passes one SIGINT to the training run, which saves its last whole step.
    Closing the terminal (SIGHUP) does the same, rather than leave the run going on its own."""
    import signal
    import time
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
    from microgpt.edge.checkpoint import read_checkpoint
    steps = [json.loads(line)['step'] for line in log.read_text().splitlines()]
    assert read_checkpoint(str(tmp_path / '1' / 'model.json')).train_state.step == steps[-1] < 20000


def test_a_second_ctrl_c_while_the_run_saves_is_passed_on_too(tmp_path):
    """The run has its own session, so the server must hand it the second Ctrl-C itself: an
    impatient learner must not leave train.py going on with nobody to stop it."""
    import signal
    from microgpt.lab.runs import RunManager, RunProcess

    class SlowToStop:  # a train.py still saving when the second Ctrl-C comes
        def __init__(self):
            self.signals = []

        def poll(self):
            return None

        def send_signal(self, signum):
            self.signals.append(signum)

        def wait(self, timeout=None):
            raise KeyboardInterrupt

    runs = RunManager(str(tmp_path), checkpoints=None)
    proc = SlowToStop()
    runs.run = RunProcess(1, str(tmp_path), {'steps': 10}, proc, output=None)
    with pytest.raises(KeyboardInterrupt):
        runs.shutdown()
    assert proc.signals == [signal.SIGINT, signal.SIGINT]


@pytest.mark.parametrize('host, loopback', [('::ffff:127.0.0.1', True), ('::ffff:127.5.0.1', True),
                                            ('::ffff:10.0.0.1', False), ('::1', True), ('0.0.0.0', False),
                                            ('localhost', True), ('example.com', False)])
def test_an_ipv4_mapped_loopback_address_is_loopback(host, loopback):
    """--host ::ffff:127.0.0.1 is loopback: it once warned that the lab was open to everyone."""
    from microgpt.lab.serve import is_loopback
    assert is_loopback(host) == loopback
