"""
The By hand, Scaling, In phases, Embeddings and Loss pages in Chromium (as test_lab_browser.py):
each shows the lessons' numbers and otherwise exactly what its API route answers.
"""

import shutil

import pytest

from helpers import data_values as values, draws, live_server, open_page, post, wait_redraw

pytestmark = pytest.mark.browser


@pytest.fixture
def page(window):
    return window(1280, 900)


def texts(page, selector):
    return page.locator(selector).all_inner_texts()


# ---------------------------------------------------------------------------- by hand
def test_by_hand_shows_the_lessons_numbers_and_redraws_as_a_vector_is_typed(server, page):
    open_page(page, server, 'byhand')
    want = post(server, '/api/byhand', {})
    assert [page.input_value(f'#{n}-3') for n in 'qkv'] == ['0.9, 0.8, 0.2, 0.1', '0.8, 0.9, 0.1, 0',
                                                           '0.1, 0.2, 0.9, 0.4']
    assert values(page, '#softmax-table [data-kind=weight]') == want['head']['weights']
    assert texts(page, '#softmax-table [data-kind=weight]') == ['0.309', '0.297', '0.395']  # 0.394521
    assert texts(page, '#out-row [data-kind=out]') == ['0.309', '0.356', '0.444', '0.189']
    assert texts(page, '#score-table [data-kind=raw]') == ['0.970', '0.890', '1.460']
    assert texts(page, '#score-table [data-kind=score]') == ['0.485', '0.445', '0.730']
    assert values(page, '#softmax-table [data-kind=exp]') == want['head']['exps']
    assert page.inner_text('#exp-sum') == '5.260'
    assert page.inner_text('#score-numbers') == '33,554,432' and page.inner_text('#score-mib') == '64 MiB'
    assert 'no q2' in page.inner_text('#note')
    before = draws(page)
    page.select_option('#query', '1')
    wait_redraw(page, before)
    assert texts(page, '#softmax-table [data-kind=weight]') == ['1.000', '0.000', '0.000']  # two masked
    assert texts(page, '#out-row [data-kind=out]') == ['0.200', '0.800', '0.000', '0.100']  # out1 = v1
    page.select_option('#query', '3')
    page.select_option('#n_head', '2')  # an answer overtaken by the next request is never drawn
    page.wait_for_selector('#heads-table tr[data-head="1"]')
    page.wait_for_load_state('networkidle')
    want = post(server, '/api/byhand', {'n_head': 2})
    assert page.locator('#heads-table tr[data-head]').count() == 2
    assert page.get_attribute('#concat', 'data-values') == str(want['concat']).replace(' ', '')
    before = draws(page)
    page.fill('#k-1', '0.9, 0.1, 0.4, 2')  # fill types into the box: no Enter, no blur
    wait_redraw(page, before)
    want = post(server, '/api/byhand', {'k': ['0.9, 0.1, 0.4, 2', '0, 1, 0, 0.9', '0.8, 0.9, 0.1, 0']})
    assert values(page, '#softmax-table [data-kind=weight]') == want['head']['weights']
    assert values(page, '#out-row [data-kind=out]') == want['head']['out']
    page.fill('#v-2', '0.7, x, 0.3, 0')
    page.wait_for_selector('#error:not([hidden])')
    assert page.inner_text('#error') == "v2: 'x' is not a number"
    assert page.locator('#softmax-table').count() == 0  # no result left beside the bad input
    # the browser logs the refused request itself; nothing else went wrong
    assert [e for e in page.errors if 'status of 400 (Bad Request)' not in e] == []


# ---------------------------------------------------------------------------- scaling
def row_stats(page):
    return {k: float(page.get_attribute(f'#stats-table [data-name={k}]', 'data-value'))
            for k in ('spread', 'entropy', 'max_weight', 'gradient_scale')}


def test_the_scaling_widgets_draw_the_apis_numbers_and_the_lessons(server, page):
    open_page(page, server, 'scaling')
    assert page.get_attribute('#stats-table tr[data-d]', 'data-d') == '64'
    scaled = row_stats(page)
    want = post(server, '/api/scaling', {'part': 'row', 'row_d': 64})
    assert scaled == {k: want['stats'][k] for k in scaled}
    assert values(page, '#row-table [data-kind=weight]') == want['weights']
    assert page.locator('#vanishing').is_hidden()
    before = draws(page, '#row-panel')
    page.uncheck('#scale')
    wait_redraw(page, before, '#row-panel')
    unscaled = row_stats(page)
    assert unscaled['max_weight'] > scaled['max_weight'] and unscaled['entropy'] < scaled['entropy']
    assert page.locator('#vanishing').is_hidden()  # d = 64 unscaled: saturating, not yet vanishing
    before = draws(page, '#row-panel')
    page.eval_on_selector('#d', 'e => { e.value = "8"; e.dispatchEvent(new Event("input")); }')  # d = 256
    wait_redraw(page, before, '#row-panel')
    assert page.get_attribute('#stats-table tr[data-d]', 'data-d') == '256'
    assert page.locator('#vanishing').is_visible() and 'gradient vanishes' in page.inner_text('#vanishing')
    before = draws(page, '#row-panel')
    page.check('#scale')
    wait_redraw(page, before, '#row-panel')
    assert page.locator('#vanishing').is_hidden()
    assert page.inner_text('#index-elements') == '49,152' and page.inner_text('#index-macs') == '3,145,728'
    assert page.inner_text('#index-shape') == '[1, 12, 64, 64]' and page.inner_text('#index-per') == '64'
    roles = dict(zip(texts(page, '#index-table tr[data-index] td.mono'), texts(page, '#index-table td.kept, #index-table td.summed')))
    assert roles == {'b': 'kept', 'h': 'kept', 'q': 'kept', 'd': 'summed', 'k': 'kept'}
    before = draws(page, '#index-panel')
    page.click('button[data-tab=output]')
    wait_redraw(page, before, '#index-panel')
    assert page.inner_text('#spec') == 'bhqk,bhkd → bhqd' and page.inner_text('#index-macs') == '3,145,728'
    before = draws(page, '#index-panel')
    page.fill('#size-h', '8')
    wait_redraw(page, before, '#index-panel')
    assert page.inner_text('#index-elements') == '32,768'
    # Var(q.k) = d: the API's measurements
    want = post(server, '/api/scaling', {'part': 'variance', 'samples': 5000})
    assert values(page, '#variance-table [data-kind=var]') == [r['var'] for r in want['rows']]
    # the cost: n / (2D) at D = 768 for n = 128, 1024, 8192, and at the page's n
    assert texts(page, '#cost-examples-table [data-kind=ratio]') == ['0.0833', '0.6667', '5.3333']
    assert page.inner_text('#cost-ratio') == '0.6667'
    before = draws(page, '#row-panel')
    page.select_option('#source', 'model')
    wait_redraw(page, before, '#row-panel')
    attention = post(server, '/api/attention', {'text': 'anna', 'layer': 0, 'head': 0})
    assert texts(page, '#row-table td.l.mono') == attention['labels']
    assert values(page, '#row-table [data-kind=weight]') == pytest.approx(attention['weights'], abs=1e-12)
    assert page.get_attribute('#stats-table tr[data-d]', 'data-d') == str(attention['head_dim'])
    assert page.locator('#d').is_hidden()  # the model's head_dim, not the slider's
    before = draws(page, '#row-panel')
    page.fill('#text', 'emma')
    wait_redraw(page, before, '#row-panel')
    assert texts(page, '#row-table td.l.mono')[1] == 'e'
    assert page.errors == []


# ---------------------------------------------------------------------------- phases
PHASES = ['tokens', 'qkv', 'scores', 'mask', 'softmax', 'weighted', 'heads']


def record_phases(page):
    """From now on, window.seen lists every phase the page shows, in order."""
    page.evaluate("""() => { window.seen = [];
      if (window.watching) return;
      window.watching = new MutationObserver(() => window.seen.push(document.body.dataset.phase));
      window.watching.observe(document.body, {attributes: true, attributeFilter: ['data-phase']}); }""")


def test_phases_play_in_order_highlight_their_lines_and_draw_the_apis_weights(server, page):
    from microgpt.lab import phases
    open_page(page, server, 'phases')
    assert page.get_attribute('body', 'data-phase') == 'tokens'
    page.select_option('#speed', '250')
    record_phases(page)
    page.click('#play')
    page.wait_for_selector('body[data-phase=heads]', timeout=10_000)
    page.wait_for_selector('#play:has-text("Play")')  # it stopped at the last phase
    assert page.evaluate('window.seen') == PHASES[1:]
    assert page.locator('#forward').is_disabled()
    record_phases(page)
    for _ in PHASES[1:]:
        page.click('#back')
    assert page.evaluate('window.seen') == PHASES[-2::-1]
    assert page.locator('#back').is_disabled()
    code = phases.gpt_source()
    for n, phase in enumerate(PHASES):
        page.click(f'button[data-phase={phase}]')
        page.wait_for_selector(f'body[data-phase={phase}]')
        lit = [int(x) for x in page.locator('#code div.hl').evaluate_all('ds => ds.map(d => d.dataset.line)')]
        assert lit == code['phases'][phase] and lit, phase
    page.click('button[data-phase=softmax]')
    assert 'softmax(attn_logits)' in ''.join(texts(page, '#code div.hl'))
    assert 'attn_wo' not in ''.join(texts(page, '#code div.hl'))
    want = post(server, '/api/phases', {'text': 'anna', 'layer': 0, 'head': 0})
    rays = page.locator('#stage path.ray')
    assert rays.count() == want['query'] + 1 == 5
    assert values(page, '#stage path.ray', 'weight') == want['weights']
    assert texts(page, '#numbers-table tr[data-key] td:last-child') == [f'{w:.4f}' for w in want['weights']]
    before = draws(page)
    page.fill('#text', 'emma')
    wait_redraw(page, before)
    chips = page.locator('#stage g.chip').evaluate_all('gs => gs.map(g => g.dataset.label)')
    assert chips == ['<BOS>', 'e', 'm', 'm', 'a']
    before = draws(page)
    page.select_option('#query', '2')  # an earlier query: the future is masked
    wait_redraw(page, before)
    assert page.locator('#wall').count() == 1 and page.locator('#stage path.ray').count() == 3
    assert page.locator('#stage g.chip.future').count() == 2
    page.uncheck('#show-mask')
    assert page.locator('#wall').count() == 0
    assert page.errors == []


# ---------------------------------------------------------------------------- embeddings, loss
def test_embeddings_and_loss_draw_what_their_routes_answer(server, page):
    open_page(page, server, 'embeddings')
    want = post(server, '/api/embeddings', {'neighbours': 3})
    labels = page.locator('#scatter text[data-label]')
    assert labels.count() == len(want['labels'])
    assert values(page, '#scatter text[data-label]', 'x') == [c[0] for c in want['coords']]
    assert page.locator('#wpe-table td.cell').count() == len(want['wpe_cosine']) ** 2
    before = draws(page)
    page.fill('#neighbours', '2')
    wait_redraw(page, before)
    assert page.locator('#near-table tr[data-label]').first.locator('td').count() == 3  # the char and 2
    assert page.errors == []
    open_page(page, server, 'loss')
    want = post(server, '/api/loss', {})['runs'][0]
    assert page.get_attribute('#loss-chart', 'data-train-points') == str(len(want['train'])) == '60'
    assert page.locator('#stretch-table tr').count() == len(want['stretches']) + 1
    assert page.get_attribute('#loss-chart', 'data-val-points') == str(len(want['val'])) == '1'  # the last step's
    assert page.inner_text('#last-val') == f"{want['val'][-1][1]:.4f}"
    assert values(page, '#loss-chart circle.val') == [v for _, v, _ in want['val']]
    # each evaluation's training loss, measured alike, drawn beside its validation loss
    assert values(page, '#loss-chart path.estimate') == [t for _, _, t in want['val']]
    assert page.errors == []


def test_a_model_py_that_does_not_parse_and_a_checkpoint_without_a_log(tiny_ckpt, names_file, tmp_path, page,
                                                                       monkeypatch):
    """Once a 500 and a logged 400: a model.py that does not parse leaves every phase its numbers,
    and on a checkpoint with no log beside it the Loss page asks nothing."""
    from microgpt.lab import phases
    broken = tmp_path / 'model.py'
    broken.write_text('def gpt(self:\n', encoding='utf-8')
    monkeypatch.setattr(phases, 'MODEL_FILE', str(broken))
    bare = tmp_path / 'converted' / 'model.json'
    bare.parent.mkdir()
    shutil.copy(tiny_ckpt, bare)
    with live_server(str(bare), tmp_path / 'runs', names_file) as server:
        open_page(page, server, 'phases')
        assert page.inner_text('#code-title').startswith('microgpt/model.py does not parse: ')
        assert page.locator('#code div').count() == 0
        for phase in PHASES:
            page.click(f'button[data-phase={phase}]')
            page.wait_for_selector(f'body[data-phase={phase}]')
            assert page.locator('#numbers h3').inner_text() and page.locator('#numbers table, #numbers p').count()
        open_page(page, server, 'loss')
        assert 'has no training log beside it' in page.inner_text('#source')
        assert not [url for url in page.requests if '/api/loss' in url]
        assert page.locator('#loss-chart *').count() == 0
    assert page.errors == []
