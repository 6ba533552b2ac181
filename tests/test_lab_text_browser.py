"""
The web lab on a model of running text, in Chromium (as tests/test_lab_browser.py): the pages
read text as train.py does, and stay readable at the Shakespeare recipe's size at 390 px.
"""

import pytest

from microgpt import inference
from helpers import PAGES, check_layout, live_server, open_page, post, quiet
from microgpt.edge.checkpoint import read_checkpoint
from microgpt.lab import registry

pytestmark = pytest.mark.browser

TOL = 1e-10
SCALAR = '#result[data-engine="scalar"]'  # the Step page, once the scalar engine's step is drawn
# the pages that show the model's text, or its log, or train one: the others read no model's text
MODEL_PAGES = {s.name for s in registry.SANDBOXES if s.model in ('numpy', 'scalar', 'log')} | {'training'}


@pytest.fixture(scope='module')
def server(wide_text_ckpt, names_file, tmp_path_factory):
    with live_server(wide_text_ckpt, tmp_path_factory.mktemp('text-runs'), names_file) as s:
        yield s


def test_every_page_is_readable_at_64_positions_and_reads_text_as_train_py_does(server, window, wide_text_ckpt):
    """At 390 px, where 64 positions are hardest to hold (wider: test_lab_layout_browser.py);
    then, at 1280 px, the heatmaps trade numbers for colour and a read-out."""
    p = window(390, 900)
    for name in PAGES:
        p.set_viewport_size({'width': 390, 'height': 900})
        open_page(p, server, name)
        if name == 'step':
            p.wait_for_selector(SCALAR, timeout=60_000)  # section 6's headers are the scalar engine's
        if name == 'attention':  # a cell deep in the block, picked: its breakdown opens beside it
            p.locator('td.filled[data-head="1"][data-query="40"][data-key="36"]').click()
            p.wait_for_selector('#detail-weight')
        quiet(p)
        check_layout(p, name, 390)
        if name in ('overview', 'attention', 'step'):  # a model of running text asks for text
            assert p.locator('.input-word').first.inner_text() == 'text', name
        if name in MODEL_PAGES:
            text = p.inner_text('main').replace(p.inner_text('#code') if name == 'phases' else '', '')  # not model.py's
            assert '<BOS>' not in text and '[BOS]' not in text, name
            assert ' name' not in text.replace('names', ''), name
        p.set_viewport_size({'width': 1280, 'height': 900})
        p.wait_for_timeout(50)  # the pages' resize handlers: the first at once (Lab.debounced)
        if name in PAGE_CHECKS:
            PAGE_CHECKS[name](p, server, wide_text_ckpt)
    assert p.errors == []


def attention(p, server, _):
    T = len(post(server, '/api/attention', {'text': server.lab.checkpoints.listing()[0]['example']})['labels'])
    assert T > 60
    cell = p.locator('td.filled[data-head="2"][data-query="50"][data-key="10"]')
    assert cell.inner_text() == '' and cell.evaluate('td => td.getBoundingClientRect().width') >= 6
    cell.hover()
    readout = p.inner_text('#readout')
    assert readout.startswith('head 2 · query 50') and f"weight {float(cell.get_attribute('data-value')):.4f}" in readout
    tops = p.locator('#heads > .head').evaluate_all('hs => hs.map(h => h.offsetTop)')
    assert len(set(tops)) == 2  # four heads, two a row


def embeddings(p, server, _):
    p.locator('#wpe-table td.cell[data-i="9"][data-j="3"]').hover()
    assert p.inner_text('#wpe-readout').startswith('positions 9 and 3: cosine similarity')


def phases(p, server, _):  # zoomed on the query: its window of the block, and the block beneath
    shown = int(p.get_attribute('#stage', 'data-last')) - int(p.get_attribute('#stage', 'data-first')) + 1
    assert 4 <= shown <= 12 and p.locator('#window-mark').count() == 1


def overview(p, server, wide_text_ckpt):
    ckpt = read_checkpoint(wide_text_ckpt)
    port = inference.NumpyGPT(ckpt.config, ckpt.weights, tokenizer=ckpt.tokenizer)
    text = p.input_value('#text')
    assert '\n' in text and text.startswith('First Citizen:')  # the text's own first lines, newlines kept
    want = inference.evaluate_windows(port, [ckpt.tokenizer.encode(text)])  # train.py's loss on this window
    assert abs(float(p.get_attribute('#mean-loss', 'data-value')) - want) < TOL
    newline = text.index('\n')  # the position that reads it shows a sign, large enough to read
    sign = p.locator(f'.position[data-position="{newline}"] h3 .glyph').first
    assert sign.inner_text() == '⏎' and sign.evaluate('s => parseFloat(getComputedStyle(s).fontSize)') >= 15


def sampling(p, server, _):  # a newline typed into the box is text, not "submit": Enter breaks the line
    p.fill('#length', '30')
    p.fill('#prompt', 'ROMEO:')
    p.press('#prompt', 'Enter')
    p.wait_for_function("() => document.getElementById('context').textContent.endsWith('ROMEO:⏎')")
    p.wait_for_selector('#drawn:not(.stale) pre.sample')
    quiet(p)
    want = post(server, '/api/sampling', {'prompt': 'ROMEO:\n', 'temperatures': [0.5], 'names_at': [0.5], 'num': 1,
                                        'length': 30, 'top_k': 5})
    shown = p.locator('pre.sample').evaluate_all('ps => ps.map(p => p.textContent)')
    assert shown == ['ROMEO:⏎\n' + d['texts'][0].replace('\n', '⏎\n') for d in want['draws']]
    assert all(len(d['texts'][0]) == 30 for d in want['draws'])


PAGE_CHECKS = {'attention': attention, 'embeddings': embeddings, 'phases': phases, 'overview': overview,
               'sampling': sampling}


def test_the_training_page_trains_running_text(server, window, play_file):
    p = window(1280, 900)
    open_page(p, server, 'training')
    assert server.lab.runs.text == play_file  # the text the checkpoint was trained on
    # on a model of running text the page offers to train one like it: the recipe's settings
    assert p.input_value('#data_mode') == 'text' and p.input_value('#block_size') == '64'
    assert p.input_value('#engine') == 'numpy'
    for name, value in {'steps': 4, 'n_layer': 1, 'n_embd': 16, 'n_head': 2, 'block_size': 32, 'batch_size': 4}.items():
        p.fill(f'#{name}', str(value))
    p.click('#start')
    p.wait_for_selector('#open-run', timeout=60_000)
    legend = p.locator('#chart-legend').text_content()
    assert 'windows' in legend and 'held-out characters' in legend
    assert p.locator('#samples pre.text-block').count() >= 1
    assert p.locator('#chart path.estimate').count() >= 1  # each evaluation's training loss beside val's
    ckpt = read_checkpoint(server.lab.runs.run.out)
    assert ckpt.data_mode == 'text' and ckpt.config.block_size == 32
    # the Loss page draws that run beside the checkpoint's own, each with its name
    open_page(p, server, 'loss')
    run_id = f'run{server.lab.runs.run.number}'
    p.check(f'#compare input[data-id="{run_id}"]')
    p.wait_for_selector('#loss-chart[data-runs="2"]')
    want = post(server, '/api/loss', {'also': [run_id]})['runs']
    for r, run in zip(want, ('start', run_id)):
        drawn = p.locator(f'#loss-chart circle.val[data-run="{run}"]').evaluate_all('cs => cs.map(c => Number(c.dataset.value))')
        assert drawn == [v for _, v, _ in r['val']] and drawn
    labels = {c['id']: c['label'] for c in server.lab.checkpoints.listing()}
    assert p.locator('#legend b').all_inner_texts() == [labels['start'], labels[run_id]]
    assert p.errors == []
