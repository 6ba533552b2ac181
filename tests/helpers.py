"""
What tests share: paths, small data, runners for the programs, the lab's live server, gradient
checks and the attention trace. Fixtures live in conftest.py (pytest finds them there); every
plain helper lives here, so that no test file imports another.
"""

import glob
import http.client
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from types import SimpleNamespace

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(TESTS_DIR)
for path in (TESTS_DIR, REPO_DIR):  # the checkout's microgpt, whatever is installed
    if path not in sys.path:
        sys.path.insert(0, path)

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from microgpt.engine import Tape, Value  # noqa: E402
from microgpt.lab import registry  # noqa: E402
from microgpt.lab.__main__ import main as lab_main  # noqa: E402
from microgpt.lab.exercises import catalog, workspace  # noqa: E402
from microgpt.lab.serve import make_server  # noqa: E402
from microgpt.programs import cli, train  # noqa: E402
from microgpt.programs.train import ScalarTrainer  # noqa: E402
from microgpt.training import doc_loss, doc_tokens  # noqa: E402


# ---------------------------------------------------------------------------- gpt()'s attention weights, read through its blocks
class _RecordingOps:
    """The model's building blocks, with every softmax output's numbers kept in `weights`."""

    def __init__(self, blocks):
        self.blocks, self.weights = blocks, []

    def __getattr__(self, name):
        return getattr(self.blocks, name)

    def softmax(self, logits):
        p = self.blocks.softmax(logits)
        self.weights.append([w.data for w in p])
        return p


def gpt_with_trace(model, token_id, pos_id, keys, values):
    """(logits, {'layer{li}.head{h}': attention weights over positions 0..pos_id})."""
    recorder, saved = _RecordingOps(model.blocks), model.blocks
    model.blocks = recorder
    try:
        logits = model.gpt(token_id, pos_id, keys, values)
    finally:
        model.blocks = saved
    names = [f'layer{li}.head{h}' for li in range(model.config.n_layer) for h in range(model.config.n_head)]
    assert len(recorder.weights) == len(names), "gpt() called softmax other than once per head"
    return logits, dict(zip(names, recorder.weights))


# ---------------------------------------------------------------------------- Chromium, driven by Playwright: pages that collect their console errors
# headless as root, with none of Chromium's own connections (this machine reaches no network)
CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
                 '--disable-background-networking', '--disable-component-update', '--disable-sync']


def watched_page(context):
    """A new page of `context` whose console errors and uncaught exceptions are collected in
    page.errors, and the URL of every request it makes in page.requests."""
    p = context.new_page()
    p.errors, p.requests, p.in_flight = [], [], set()
    p.on('request', lambda r: (p.requests.append(r.url), p.in_flight.add(r)))
    p.on('requestfinished', lambda r: p.in_flight.discard(r))
    p.on('requestfailed', lambda r: p.in_flight.discard(r))
    p.on('console', lambda m: p.errors.append(m.text) if m.type == 'error' else None)
    p.on('pageerror', lambda e: p.errors.append(str(e)))
    return p


def quiet(page, timeout_s=30):
    """Until a watched_page has no request in flight: settled() without its idle spell."""
    settled(page, 0, timeout_s)


def settled(page, idle_s=0.2, timeout_s=30):
    """Until a watched_page has had no request in flight for idle_s: Playwright's network idle,
    which waits 500 ms without one, with a spell long enough for lab.js's debounced requests
    (100 or 150 ms after the event that asks) to have started."""
    deadline, idle_from = time.monotonic() + timeout_s, None
    while True:
        if page.in_flight:
            idle_from = None
        elif idle_from is None:
            idle_from = time.monotonic()
        elif time.monotonic() - idle_from >= idle_s:
            return
        assert time.monotonic() < deadline, f"requests still in flight: {[r.url for r in page.in_flight]}"
        page.wait_for_timeout(10)


def open_page(page, server, name):
    """Open the lab's page NAME and wait until it has drawn its first answer and asked for no more."""
    page.goto(server.url + name)
    page.wait_for_selector('body[data-drawn]', state='attached')
    settled(page)


def draws(page, selector='body'):
    """How many times the page (or a panel) has drawn: lab.js counts them in data-draws."""
    return int(page.locator(selector).first.get_attribute('data-draws') or 0)


def wait_redraw(page, before, selector='body'):
    """Until the page (or a panel) has drawn once more than `before`."""
    page.wait_for_function(f"() => Number(document.querySelector('{selector}').dataset.draws || 0) > {before}")


# ---------------------------------------------------------------------------- small data, and the bench scripts as modules
# README and docs/*.md: the pages whose commands, links, figures and prose the tests hold
DOC_TEXTS = ['README.md'] + sorted(os.path.relpath(p, REPO_DIR) for p in glob.glob(os.path.join(REPO_DIR, 'docs', '*.md')))


def read_repo_file(name):
    """The text of a file of the checkout, by its path from the checkout's root."""
    with open(os.path.join(REPO_DIR, name), encoding='utf-8') as f:
        return f.read()


def bench_script(name):
    """bench/NAME.py loaded as a module, its main() not run: for the tests that hold a text or a
    page to the figures a benchmark measures (its recipe's flags, the fields it sends)."""
    sys.path.insert(0, os.path.join(REPO_DIR, 'bench'))  # as `python bench/NAME.py` has it: bench/common.py
    spec = importlib.util.spec_from_file_location(f'bench_{name}', os.path.join(REPO_DIR, 'bench', f'{name}.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# A few dozen short names: enough to train on for a few steps, small enough to read.
TINY_NAMES = """emma olivia ava isabella sophia mia charlotte amelia harper evelyn abigail emily
elizabeth sofia avery ella scarlett grace chloe victoria riley aria lily aubrey zoey penelope
liam noah william james oliver benjamin elijah lucas mason logan alexander ethan jacob michael
daniel henry jackson sebastian aiden matthew samuel david joseph carter owen wyatt john jack""".split()


def train_text(out, data, block_size, *flags):
    """A checkpoint of running text trained by train.py in a second or two (numpy engine)."""
    assert train.main(['--engine', 'numpy', '--data', data, '--data-mode', 'text', '--block-size',
                       str(block_size), '--num-samples', '0', '--out', str(out), *flags]) == 0
    return str(out)


# ---------------------------------------------------------------------------- gradients against central finite differences, on the Value engine
H = 1e-6  # finite-difference step: small enough for O(h^2) truncation, big enough for rounding


def numeric_grad(f, xs, i, h=H):
    """The central difference estimate of df/dx_i at xs, where f maps a list of floats to a float."""
    up = list(xs)
    up[i] += h
    down = list(xs)
    down[i] -= h
    return (f(up) - f(down)) / (2 * h)


def backprop_grads(build, xs):
    """(output value, [d output / d x_i]) from backward(); `build` maps leaf Values to one Value."""
    leaves = [Value(x) for x in xs]
    out = build(leaves)
    out.backward()
    return out.data, [leaf.grad for leaf in leaves]


def check_grads(build, xs, h=H, indices=None):
    """The largest error between backward()'s gradients and central differences, over the inputs
    (or those in `indices`: each numeric gradient costs two forward passes). The error is absolute
    near 0 and relative past 1: a relative one would blow up for a gradient that should be 0, an
    absolute one be too strict for a gradient of 1e4. Callers compare it with their own tolerance."""
    _, grads = backprop_grads(build, xs)

    def f(values):
        return build([Value(v) for v in values]).data

    error = 0.0
    for i in range(len(xs)) if indices is None else indices:
        num = numeric_grad(f, xs, i, h)
        error = max(error, abs(grads[i] - num) / max(1.0, abs(grads[i]), abs(num)))
    return error


# ---------------------------------------------------------------------------- the web lab's server, live in this process or in its own
RUN_TIMEOUT = 60  # seconds a small training run may take on a loaded 2-core machine


@contextmanager
def live_server(ckpt, runs_dir, data, exercises=None, text=None):
    """A server on its own thread. exercises: the folder `serve --exercises DIR` names, or None;
    text: `serve --text FILE`'s."""
    server = make_server(ckpt, port=0, runs_dir=str(runs_dir), data=data, exercises=exercises, text=text)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.lab.runs.shutdown()
        server.shutdown()
        server.server_close()


def request(server, method, path, body=None, raw=None, headers=None):
    """(status, parsed JSON or None, raw bytes) of one request on a fresh connection."""
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=30)
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    hdrs = {'Content-Type': 'application/json'} if data is not None else {}
    hdrs.update(headers or {})
    conn.request(method, path, body=data, headers=hdrs)
    response = conn.getresponse()
    payload = response.read()
    conn.close()
    try:
        parsed = json.loads(payload)
    except ValueError:
        parsed = None
    return response.status, parsed, payload


def post(server, path, body):
    status, parsed, _ = request(server, 'POST', path, body)
    assert status == 200, (status, parsed)
    return parsed


def wait_for_run(server, offset=0):
    """Poll /api/train/status until the run has ended and its whole log is read:
    (the last status, every record after `offset`, every [step, running mean] sent)."""
    records, smooth, deadline = [], [], time.time() + RUN_TIMEOUT
    while True:
        status = post(server, '/api/train/status', {'offset': offset})
        records += status['records']
        smooth += status['smooth']
        offset = status['offset']
        if status['state'] in ('finished', 'stopped', 'failed') and not status['records']:
            return status, records, smooth
        assert time.time() < deadline, f"the run did not end in {RUN_TIMEOUT} s: {status['state']}"
        time.sleep(0.05)


@contextmanager
def server_process(ckpt, runs_dir, data):
    """`python -m microgpt.lab serve` in its own process on a free port: yields (the process, its
    address, as request() and post() take it, with the line that printed it). On leaving it is stopped as Ctrl-C stops it, unless the test has already
    stopped it; it never outlives the test."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, '-m', 'microgpt.lab', 'serve', '--ckpt', ckpt, '--port', '0',
                             '--runs-dir', str(runs_dir), '--data', data],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = proc.stdout.readline()
        assert first.startswith('microgpt lab on '), (first, proc.stderr.read() if proc.poll() else '')
        port = int(first.split('http://127.0.0.1:')[1].split('/')[0])
        yield proc, SimpleNamespace(server_address=('127.0.0.1', port), url=f'http://127.0.0.1:{port}/',
                                    first_line=first)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()


# ---------------------------------------------------------------------------- a page's layout: nothing cut, nothing overlapping
# Every label's text box in the page coordinates, grouped by what lays it out (a table row, an
# SVG): the text's own extent (a Range), not its cell's, so a header spilling over the next shows
LABELS = '''() => {
  const box = node => { const r = document.createRange(); r.selectNodeContents(node);
                        const b = r.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
  const rows = Array.from(document.querySelectorAll('main tr')).map(tr =>
    Array.from(tr.children).filter(c => c.tagName === 'TH' && c.textContent.trim()).map(box));
  const svgs = Array.from(document.querySelectorAll('main svg')).filter(s => s.getBoundingClientRect().width).map(s =>
    Array.from(s.querySelectorAll('text')).filter(t => t.textContent.trim() && t.getBoundingClientRect().width)
      .map(t => { const b = t.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom, t.textContent]; }));
  // HTML placed over a picture (position absolute or fixed) is laid out by no one against the
  // picture's own labels: each such label is checked against every SVG text and the others
  const floating = Array.from(document.querySelectorAll('main *')).filter(e =>
    ['absolute', 'fixed'].includes(getComputedStyle(e).position) && e.textContent.trim() && e.getBoundingClientRect().width)
    .map(e => { const b = box(e); return [...b, e.textContent.trim().slice(0, 40)]; });
  return {rows, svgs, floating};
}'''


# Each table that reaches past the box that clips it (overflow other than visible) without that box
# scrolling: a cut table. A table wider than its panel must scroll in it.
CUT_TABLES = '''() => Array.from(document.querySelectorAll('main table')).filter(t => t.getBoundingClientRect().width).flatMap(t => {
  const right = t.getBoundingClientRect().right;
  for (let a = t.parentElement; a && a.tagName !== 'MAIN'; a = a.parentElement) {
    const o = getComputedStyle(a).overflowX;
    if (o === 'visible') continue;
    const edge = a.getBoundingClientRect().right;
    const scrolls = (o === 'auto' || o === 'scroll') && a.scrollWidth > a.clientWidth;
    return right > edge + 1 && !scrolls ? [t.id || t.className || t.outerHTML.slice(0, 60)] : [];
  }
  return right > document.documentElement.clientWidth + 1 ? [t.id || t.className] : [];
})'''


def overlaps(boxes, gap=0.0):
    """Pairs of boxes [left, top, right, bottom, ...] closer than `gap` px across both axes."""
    return [(a, b) for k, a in enumerate(boxes) for b in boxes[k + 1:]
            if a[0] < b[2] + gap and b[0] < a[2] + gap and a[1] < b[3] and b[1] < a[3]]


def check_layout(p, name, width):
    """The page `name` open in `p`, a window `width` px wide, holds the three rules above."""
    assert p.evaluate('document.documentElement.scrollWidth') <= width, name
    assert p.evaluate(CUT_TABLES) == [], name
    labels = p.evaluate(LABELS)
    for row in labels['rows']:  # headers of a row 6 px apart at least: '(scalar)numpy − scalar' read as one
        assert overlaps(row, gap=6) == [], (name, row)
    for texts in labels['svgs']:  # overlapping by more than half a pixel: drawn over each other
        assert overlaps([b for b in texts if b[2] - b[0] > 0], gap=-0.5) == [], (name, overlaps(texts, -0.5)[:3])
    drawn = [b for texts in labels['svgs'] for b in texts]
    for k, label in enumerate(labels['floating']):
        hits = [b for b in drawn + labels['floating'][k + 1:] if overlaps([label, b], gap=-0.5)]
        assert hits == [], (name, label, hits[:3])


# ---------------------------------------------------------------------------- finite differences on arrays
FD_TOL = 1e-7     # central differences are accurate to ~1e-9 here; a wrong backward is off by >1e-3


def numeric_grad_array(f, x):
    """dL/dx by central differences, where f() computes L from x (an array changed in place)."""
    g = np.zeros_like(x)  # same shape as x
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + H
        up = f()
        x[i] = old - H
        down = f()
        x[i] = old
        g[i] = (up - down) / (2 * H)
    return g


def max_diff(a, b):
    return float(np.abs(a - b).max())


# ---------------------------------------------------------------------------- the numpy trainer beside the scalar engine
GRAD_TOL = 1e-10  # same math in float64: only rounding differs (observed ~1e-16)


NAMES = ['emma', 'ava', 'isabella', 'christopherson', 'liam', 'bob']  # one longer than the block


def scalar_loss_and_grads(model, tokens):
    """doc_loss and every parameter's gradient, {name: array}, from the scalar engine."""
    for p in model.params:
        p.grad = 0.0
    with Tape() as tape:
        loss = doc_loss(model, tokens)
    loss.backward(tape)
    grads = {name: np.array([[p.grad for p in row] for row in matrix])  # (n_out, n_in)
             for name, matrix in model.state_dict.items()}
    return loss.data, grads


def assert_names_as_the_scalar_engine(model, trainer, tokenizer, tol=GRAD_TOL):
    """For each of NAMES alone: trainer.loss_and_grads gives the scalar engine's loss and every
    parameter's gradient, each of the parameter's shape (tests/test_torch_model.py uses it too)."""
    for name in NAMES:
        tokens = doc_tokens(tokenizer, name)
        loss, grads = scalar_loss_and_grads(model, tokens)
        their_loss, their_grads = trainer.loss_and_grads([tokens])
        assert abs(loss - their_loss) < tol
        assert set(their_grads) == set(grads)
        for pname in grads:
            assert their_grads[pname].shape == grads[pname].shape
            assert np.abs(their_grads[pname] - grads[pname]).max() < tol, (name, pname)


# ---------------------------------------------------------------------------- the programs run in this process: exit status, output, logs, Ctrl-C
TINY = ['--n-embd', '8', '--n-head', '2', '--block-size', '12']  # ~1000 parameters, ~300 steps/s


QUIET = ['--num-samples', '0', '--eval-every', '0']


POLL_TIMEOUT = 60.0  # seconds to wait for the subprocess's log before giving up


def run(main, argv, capsys):
    """(exit code, stdout, stderr) of main under the scripts' own guard, cli.run."""
    with pytest.raises(SystemExit) as e:
        cli.run(main, argv)
    out, err = capsys.readouterr()
    return e.value.code, out, err


def assert_one_line_error(code, err, fragment=''):
    assert code not in (0, None)
    assert err.startswith('error: ') and err.count('\n') == 1, err
    assert 'Traceback' not in err
    assert fragment in err, err


def log_of(out):
    """The JSON lines train.py wrote beside checkpoint `out`."""
    with open(str(out)[:-len('.json')] + '.log.jsonl', encoding='utf-8') as f:
        return [json.loads(line) for line in f]


def losses(log):
    return [entry for entry in log if 'loss' in entry]


def running(folder, args, lines):
    """A train.py process started in `folder`, once its log folder/model.log.jsonl holds `lines`
    lines (it runs on after that)."""
    proc = subprocess.Popen([sys.executable, os.path.join(REPO_DIR, 'train.py'), *args], cwd=folder,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log, deadline = folder / 'model.log.jsonl', time.monotonic() + POLL_TIMEOUT
    while not (log.exists() and log.read_text().count('\n') >= lines):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"train.py did not log {lines} lines: {proc.communicate()}")
        time.sleep(0.005)
    return proc


def interrupt_after(monkeypatch, calls, engine=ScalarTrainer):
    """Make train.py receive a real SIGINT during its `calls`-th training step (of the scalar
    engine, or of the engine class given: backprop.Trainer)."""
    real_step = engine.step
    count = [0]

    def step_then_ctrl_c(*args):
        loss = real_step(*args)
        count[0] += 1
        if count[0] == calls:
            os.kill(os.getpid(), signal.SIGINT)  # delivered now, to train.py's own handler
        return loss
    monkeypatch.setattr(engine, 'step', step_then_ctrl_c)


# ---------------------------------------------------------------------------- the exercises' workspace and the learner's slips
def make_workspace(path, solved=catalog.NUMBERS, files=None):
    """A started workspace with the reference solutions of `solved` and `files` ({n: text})."""
    workspace.start(str(path))
    for n in solved:
        (path / catalog.get(n).filename).write_text(catalog.solution_text(n))
    for n, text in (files or {}).items():
        (path / catalog.get(n).filename).write_text(text)
    return str(path)


def with_body(n, body):
    """Exercise n's file with `body` (unindented lines) in place of the stub's raise."""
    stub = catalog.stub_text(n)
    raise_line = next(line for line in stub.split('\n') if 'raise NotImplementedError("' in line)
    indent = raise_line[:len(raise_line) - len(raise_line.lstrip())]
    return stub.replace(raise_line, '\n'.join(indent + line for line in body.strip('\n').split('\n')))


def replaced(n, old, new):
    """Exercise n's solution with one piece of it changed: a typical slip."""
    text = catalog.solution_text(n)
    assert old in text, f"exercise {n}'s solution no longer has {old!r}: update the test's slip"
    return text.replace(old, new)


def lab(argv, capsys, answers=None, monkeypatch=None):
    """(exit status, stdout, stderr) of `python -m microgpt.lab ARGV`, run in this process as
    cli.run runs it (its learner code still runs in the checker's subprocess)."""
    if answers is not None:  # what the learner types, then the end of input (Ctrl-D)
        replies = iter(answers)

        def typed(prompt=''):
            print(prompt, end='')
            for reply in replies:
                return reply
            raise EOFError
        monkeypatch.setattr('builtins.input', typed)
    return run(lab_main, ['exercises', *argv], capsys)


# exercise -> (the wrong file, the case it must fail on, words of the hint it must give)
SLIPS = {
    1: (replaced(1, 'return a * b, (b, a)', 'return a * b, (a, b)'), "fixed 1", "swapped"),
    2: (replaced(2, '(n * x ** (n - 1),)', '(n * x ** n,)'), "fixed 1", "check the power of x"),
    3: (replaced(3, 'return out, (out,)', 'return out, (1.0,)'), "fixed 2", "grow by the same h"),
    4: (replaced(4, '(1.0 / x,)', '(1.0,)'), "fixed 2", "A missing factor"),
    5: (replaced(5, 'float(x > 0)', 'float(x >= 0)'), "fixed 3", "at exactly 0 microgpt picks 0"),
    6: (with_body(6, '''
order, seen = [], set()
def visit(node):
    if node not in seen:
        seen.add(node)
        for child in node._children:
            visit(child)
        order.append(node)
visit(root)
return order'''), "a chain of 3000", "keep your own stack"),
    7: (replaced(7, 'child.grad += local * node.grad', 'child.grad = local * node.grad'), "a diamond",
        "assigned instead of added"),
    8: (replaced(8, 'sum(ai * bi for', 'sum(ai.data * bi.data for'), "fixed 1", "has no graph"),
    9: (replaced(9, '[dot(w_row, x) for w_row in w]', '[dot([row[i] for row in w], x) for i in range(len(x))]'),
        "fixed 1", "ROW o of w"),
    10: (replaced(10, '(z - max_val).exp()', 'z.exp()'), "large logits", "Subtract the largest logit"),
    11: (replaced(11, '(ms + eps) ** -0.5', 'ms ** -0.5'), "fixed 1", "Add eps inside the square root"),
    12: (replaced(12, 'scale = len(q) ** -0.5', 'scale = 1.0'), "three tokens by hand", "sqrt(head_dim)"),
    13: (replaced(13, "x = [t + p for t, p in zip(sd['wte'][token_id], sd['wpe'][pos_id])]\n    x = rmsnorm(x)",
                  "x = [t + p for t, p in zip(sd['wte'][token_id], sd['wpe'][pos_id])]"),
         "1 layer, 2 heads", "the embedding is normalised once"),
    14: (replaced(14, 'return sum(losses) * (1.0 / n)', 'return sum(losses)'), "a name of 4 letters",
         "MEAN over its positions"),
    15: (replaced(15, 'bias1 = 1 - beta1 ** t\n    bias2 = 1 - beta2 ** t', 'bias1 = bias2 = 1.0'),
         "one weight, 3 steps", "bias correction forgotten"),
    16: (replaced(16, 'math.exp((l - top) / temperature)', 'math.exp(l / temperature)'), "large logits",
         "largest logit subtracted first"),
    17: (with_body(17, '''
T, head_dim = q.shape
weights = np.exp(q @ k.T * head_dim ** -0.5)
weights /= weights.sum(axis=-1, keepdims=True)
weights[np.triu(np.ones((T, T), dtype=bool), k=1)] = 0.0
return weights @ v, weights'''), "three tokens by hand", "mask applied after the softmax"),
    18: (replaced(18, 'return dy @ w, dy.T @ x', 'return dy @ w, x.T @ dy'), "one row", "dw has w's shape"),
    19: (replaced(19, 'return p * (dp - (dp * p).sum(axis=-1, keepdims=True))', 'return p * dp'), "one row of 3",
         "missing its row sum"),
    20: (replaced(20, 'dq = dz @ k * s ', 'dq = dz @ k ').replace('dk = dz.T @ q * s', 'dk = dz.T @ q'),
         "three tokens by hand", "multiplied by"),
    21: (replaced(21, 'p.data *= 1 - lr * weight_decay', 'p.grad += weight_decay * p.data'), "no gradient shrink",
         "That is L2 regularization"),
    22: (replaced(22, 'factor = kept / (1.0 - p)', 'factor = kept * 1.0'), "p = 0.1", "divides the kept numbers by 1 - p"),
    23: (replaced(23, 'counts[pair] = counts.get(pair, 0) + 1', 'counts[pair] = 1'), "the Wikipedia example",
         "add one to each pair's count"),
    24: (replaced(24, 'i += 2', 'i += 1'), "the Wikipedia example", "skip BOTH ids"),
    25: (replaced(25, 'ids = merge(ids, pair, 256 + rank[pair])', 'return merge(ids, pair, 256 + rank[pair])'),
         "the Wikipedia example", "while some adjacent pair is in the table"),
    26: (replaced(26, 'theta = pos_id * ', 'theta = '), "position 0", "grows with the position"),
    27: (replaced(27, 'a * c + b * s', 'a * c - b * s').replace('b * c - a * s', 'b * c + a * s'), "positions 0 to 2",
         "the OTHER way"),
    28: (replaced(28, 'ks = h // group * head_dim', 'ks = h % n_kv_head * head_dim'), "4 query heads",
         "h % n_kv_head deals them out"),
}


# ---------------------------------------------------------------------------- the lab's pages
PAGES = [name for name, _ in registry.pages()]  # every page the registry lists, nothing else


DRAWN = 'body[data-drawn]'  # lab.js sets it once a page's first draw is done


# ---------------------------------------------------------------------------- the lab's command line
BRIEF = 300           # characters of a one-line message that quotes such an input, at most


def run_lab(argv, capsys):
    """(exit status, stdout, stderr) of `python -m microgpt.lab ARGV`, under its guard."""
    return run(lab_main, argv, capsys)


def assert_one_line(status, err, fragment):
    assert status == 2 and len(err) < BRIEF, err[:500]
    assert_one_line_error(status, err, fragment)


# ---------------------------------------------------------------------------- the layers of the source tree
# microgpt/'s other top-level files: the package's front door and the `python -m` entry points
ENTRY_POINTS = {'microgpt', 'microgpt.train', 'microgpt.sample', 'microgpt.convert'}


PACKAGES = {'microgpt': 'microgpt', 'microgpt.inference': 'src/inference', 'microgpt.backprop': 'src/backprop',
            'microgpt.torchgpt': 'src/torchgpt'}


ARRAYS = ('inference', 'backprop', 'torchgpt')  # src/'s packages, installed inside microgpt


LAYERS = ('core', 'edge', 'arrays', 'programs', 'lab')


def project_modules():
    """{module name: path} for every .py file of the project's packages."""
    found = {}
    for package, folder in PACKAGES.items():
        top = os.path.join(REPO_DIR, folder)
        for dirpath, _, files in os.walk(top):
            for filename in files:
                if filename.endswith('.py'):
                    parts = os.path.relpath(os.path.join(dirpath, filename), top)[:-3].split(os.sep)
                    if parts[-1] == '__init__':
                        parts = parts[:-1]
                    found['.'.join([package, *parts])] = os.path.join(dirpath, filename)
    return found


def layer_of(module):
    """The layer is the folder: microgpt/ itself (the core), microgpt/edge/, src/ (the arrays),
    microgpt/programs/, microgpt/lab/."""
    package, _, rest = module.partition('.')
    folder = rest.split('.')[0]
    if folder in ARRAYS:
        return 'arrays'
    if module in ENTRY_POINTS:
        return 'programs'
    return folder if folder in ('edge', 'programs', 'lab') else 'core'


# ---------------------------------------------------------------------------- train.py's flags
def train_args(data, out, *extra):
    return ['--data', str(data), '--out', str(out), '--val-size', '6', *TINY, *QUIET, *extra]


# ---------------------------------------------------------------------------- torchrun with gloo on 127.0.0.1
LAUNCH_TIMEOUT = 120   # seconds for one torchrun launch (about 10 here: three Pythons import torch)


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def torchrun(args, program=os.path.join(REPO_DIR, 'train.py'), env=(), **popen):
    """A torchrun of train.py (or `program`, with train.py's flags) with two ranks on the loopback
    interface, in its own session (so the test can tell afterwards whether any of its processes
    survived). env: variables added to the ranks' environment."""
    cmd = [sys.executable, '-m', 'torch.distributed.run', '--nproc_per_node', '2', '--nnodes', '1',
           '--master_addr', '127.0.0.1', '--master_port', str(free_port()), program, '--engine', 'torch', *args]
    return subprocess.Popen(cmd, cwd=REPO_DIR, env=rank_env(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True, **popen)


def rank_env(extra=()):
    """What every rank's environment adds: gloo on the loopback interface, one thread, src/."""
    return {**os.environ, 'GLOO_SOCKET_IFNAME': 'lo', 'OMP_NUM_THREADS': '1',
            'PYTHONPATH': REPO_DIR, **dict(extra)}


def assert_no_process_left(p):
    try:
        os.killpg(p.pid, 0)  # signal 0: only asks whether any process of the session remains
    except ProcessLookupError:
        return
    os.killpg(p.pid, signal.SIGKILL)
    pytest.fail("a process of the torchrun launch outlived it")


def data_values(page, selector, key='value'):
    """float(data-KEY) of every element matching selector, in page order (the browser tests)."""
    return [float(v) for v in page.locator(selector).evaluate_all(f'els => els.map(e => e.dataset.{key})')]


# ---------------------------------------------------------------------------- the modern rungs: each alone, and all at once
RUNGS = {'rope': dict(rope=True), 'gelu': dict(mlp='gelu'), 'swiglu': dict(mlp='swiglu'),
         'norm_gains': dict(norm_gains=True), 'qk_norm': dict(qk_norm=True),
         'grouped': dict(n_kv_head=2), 'multi_query': dict(n_kv_head=1), 'tied': dict(tie_embeddings=True),
         'all': dict(rope=True, mlp='swiglu', norm_gains=True, qk_norm=True, n_kv_head=2, tie_embeddings=True)}
RUNG_DOCS = ['abc', 'fed', 'cabbed', 'face', 'decafbad']  # 6 letters (vocab_size 7); the last passes the block


def rung_setup(rung, seed=3, **changes):
    """(config, weights, tokenizer): the small config (2 layers, 4 heads of 2, block 6) with one
    rung (RUNGS) and `changes`, init_weights' numbers, and the norm gains small and random, not
    0: at 0 a gain's own gradient would be checked only weakly."""
    import random
    from microgpt.model import GPTConfig, init_weights, is_gain
    from microgpt.tokenizer import CharTokenizer
    tokenizer = CharTokenizer.from_docs(RUNG_DOCS)
    config = GPTConfig(tokenizer.vocab_size, n_layer=2, n_embd=8, n_head=4, block_size=6, **{**RUNGS[rung], **changes})
    rng = random.Random(seed)
    weights = {name: [[rng.gauss(0, 0.2) for _ in row] for row in w] if is_gain(name) else w
               for name, w in init_weights(config, seed).items()}
    return config, weights, tokenizer


def python(args, env, cwd):
    """`python ARGS` run in cwd with env: its CompletedProcess, output captured as text."""
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
