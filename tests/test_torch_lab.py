"""
`lab step` and the web Step page through all three engines (scalar, numpy, PyTorch), matrix by
matrix. Needs PyTorch; the page's test also Playwright and /usr/bin/chromium.
"""

import re

import numpy as np

import pytest

from helpers import live_server, post, run
from microgpt.lab import step
from microgpt.lab.__main__ import main as lab_main

pytestmark = pytest.mark.torch

torch = pytest.importorskip("torch", reason="needs PyTorch: pip install -e '.[torch]'")
torch.set_num_threads(1)

ENGINE_TOL = 1e-10  # float64 everywhere: one step's gradients differ only by rounding


def test_lab_step_prints_every_matrix_through_the_three_engines(tiny_ckpt, capsys):
    code, out, _ = run(lab_main, ['step', 'emma', '--ckpt', tiny_ckpt], capsys)
    assert code == 0
    assert re.search(r"PyTorch's autograd \(package `torchgpt`\): the same gradients, largest difference ", out)
    rows = re.findall(r'^  (wte|wpe|lm_head|layer0\.\w+) +(\S+) +(\S+) +(\S+)$', out, re.M)
    assert [r[0] for r in rows] == ['wte', 'wpe', 'lm_head'] + [f'layer0.{n}' for n in (
        'attn_wq', 'attn_wk', 'attn_wv', 'attn_wo', 'mlp_fc1', 'mlp_fc2')]
    assert all(float(r[2]) < ENGINE_TOL and float(r[3]) < ENGINE_TOL for r in rows)


def test_each_engine_difference_is_real(tiny_ckpt):
    """The per-matrix differences are computed, not assumed: a scalar gradient that is off in
    one matrix shows in that matrix's row alone, for both other engines."""
    from microgpt.lab.loading import load
    from microgpt.training import doc_tokens
    model = load(tiny_ckpt, 'scalar').model
    tokens = doc_tokens(model.tokenizer, 'emma')
    weights = {name: np.array(rows) for name, rows in model.weights().items()}
    grads = {name: np.zeros_like(w) for name, w in weights.items()}
    exact = {e: r['matrices'] for e, r in step.engine_gradients(model, weights, tokens, grads).items()}  # = |true grad|
    grads['layer0.mlp_fc1'][0][0] = 1.0
    off = step.engine_gradients(model, weights, tokens, grads)
    for engine in ('numpy', 'torch'):
        changed = [name for name, d in off[engine]['matrices'].items() if d != exact[engine][name]]
        assert changed == ['layer0.mlp_fc1']


def test_the_step_api_and_page_show_the_torch_column(tiny_ckpt, names_file, tmp_path, request):
    with live_server(tiny_ckpt, tmp_path, names_file) as server:
        answer = post(server, '/api/step', {'text': 'emma'})
        assert answer['torch']['max_diff'] < ENGINE_TOL and answer['numpy']['max_diff'] < ENGINE_TOL
        assert set(answer['torch']['matrices']) == {name for name, _ in answer['matrix_norms']}
        page = request.getfixturevalue('window')(1280, 720)  # in the session's Chromium; skips without one
        page.goto(server.url + 'step')
        page.fill('#text', 'emma')
        page.press('#text', 'Enter')
        page.wait_for_selector("#result[data-engine=scalar] #summary:has-text(\"'emma'\")")
        want = post(server, '/api/step', {'text': 'emma', 'lr': float(page.input_value('#lr'))})
        assert 'torchgpt' in page.inner_text('#torch-check')
        cells = page.locator('#engines tr').evaluate_all(
            'rows => rows.slice(1).map(r => [...r.querySelectorAll(".num")].map(n => Number(n.dataset.value)))')
        assert cells == [[n, want['numpy']['matrices'][name], want['torch']['matrices'][name]]
                         for name, n in want['matrix_norms']]
        assert page.errors == []
