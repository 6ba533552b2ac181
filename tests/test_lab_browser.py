"""
The web lab's pages in a real browser (Playwright driving /usr/bin/chromium; skipped without
them): each page draws exactly what its API route returns, one page load per page.
"""

import json

import pytest

from helpers import DRAWN, data_values, post, request, settled

from microgpt.lab import registry

TEXT = 'emma'

pytestmark = pytest.mark.browser


@pytest.fixture
def page(window):
    return window(1100, 800)


def test_the_step_page_draws_the_newest_step_its_error_and_the_numpy_step_first(server, page, monkeypatch):
    """A small model's page asks the scalar engine alone; an answer overtaken (held back here)
    is never drawn: the learner's name is, once."""
    held, sent = [], []

    def hold_first(route):
        sent.append(json.loads(route.request.post_data)['engine'])
        held.append(route) if not held else route.continue_()
    page.route('**/api/step', hold_first)
    page.goto(server.url + 'step')
    page.wait_for_selector('#form')
    page.wait_for_function('() => true')  # let the first request reach the route
    page.fill('#text', TEXT)
    page.press('#text', 'Enter')
    page.wait_for_timeout(200)
    assert len(held) == 1 and page.get_attribute('body', 'data-draws') is None  # nothing drawn yet
    held[0].continue_()  # the default name's answer arrives, overtaken
    # emma's, not the first draw's anna; and the scalar engine's step
    page.wait_for_selector(f"#result[data-engine=scalar] #summary:has-text(\"'{TEXT}'\")")
    settled(page)
    assert page.get_attribute('body', 'data-draws') == '1'
    assert sent == ['scalar', 'scalar'] and not [u for u in page.requests if 'engine=numpy' in u]
    want = post(server, '/api/step', {'text': TEXT, 'lr': float(page.input_value('#lr'))})
    assert float(page.get_attribute('#loss-before', 'data-value')) == want['loss_before']
    assert float(page.get_attribute('#loss-after', 'data-value')) == want['loss_after']
    assert page.inner_text('#loss-before') == f"{want['loss_before']:.6f}"
    assert page.locator('#positions tr[data-position]').count() == want['n'] == len(TEXT) + 1
    assert data_values(page, '#positions td .num') == [p[k] for p in want['positions']
                                                       for k in ('loss', 'p_before', 'p_after')]
    assert data_values(page, '#top-grads .num') == [g for row in want['top_grads'] for _, g, _, _ in row]
    assert data_values(page, '#stages .num') == [v for _, v in want['stages']]
    assert data_values(page, '#matrix-norms .num') == [v for _, v in want['matrix_norms']]
    adam = want['adam']
    shown = {name: float(page.get_attribute(f'#adam [data-name="{name}"]', 'data-value'))
             for name in ('g', 'm', 'v', 'm_hat', 'v_hat', 'update', 'before', 'after')}
    assert shown == {name: adam[name] for name in shown}
    assert adam['param'] in page.inner_text('#result')
    assert f"all {want['n_with_grad']} of {want['n_params']} weights" in page.inner_text('#fresh-adam')
    assert f"{want['graph_nodes']} nodes" in page.inner_text('#graph-size')
    assert page.inner_text('#without-grad') == want['without_grad']['text']
    assert 'MLP hidden units whose ReLU is 0' in want['without_grad']['text']
    assert page.locator('#error').is_hidden() and page.errors == []
    bad = 'an9a'  # a name the API refuses: its one-line error
    status, answer, _ = request(server, 'POST', '/api/step', {'text': bad})
    assert status == 400 and '9' in answer['error']
    page.fill('#text', bad)
    page.press('#text', 'Enter')
    page.wait_for_selector('#error:not([hidden])')
    assert page.inner_text('#error') == answer['error']
    # A step on a large model once took seconds before anything showed. The numpy engine's step
    # is drawn first, with a sign that the scalar engine's is coming (and the page not greyed: its
    # numbers are this name's); then the scalar engine's, with the graph's size. (The server says
    # a model is large by its number of weights: from here every model is.)
    monkeypatch.setattr(registry, "STEP_NUMPY_FIRST_ABOVE", 0)
    page.unroute('**/api/step')
    held, sent = [], []

    def hold_scalar(route):
        body = json.loads(route.request.post_data)
        sent.append((body['engine'], body['text']))
        if body['engine'] == 'scalar' and not held:
            held.append(route)
        else:
            route.continue_()
    page.route('**/api/step*', hold_scalar)  # both routes: /api/step and /api/step?engine=numpy
    page.goto(server.url + 'step')
    page.wait_for_selector('#result[data-engine=numpy] #scalar-coming')
    quick = post(server, '/api/step', {'text': 'anna', 'lr': float(page.input_value('#lr')), 'engine': 'numpy'})
    assert float(page.get_attribute('#loss-before', 'data-value')) == quick['loss_before']
    page.wait_for_timeout(400)  # past lab.js's busy delay: the scalar step is on its way
    assert len(held) == 1 and page.evaluate("document.body.classList.contains('busy')") is False
    held[0].continue_()
    page.wait_for_selector('#result[data-engine=scalar] #graph-size:has-text("nodes recorded")')
    assert page.locator('#scalar-coming').count() == 0
    # typing a name key by key: the page ends on the scalar engine's step of the whole name; the
    # steps overtaken on the way (waiting in lab.js for the one being answered) are never sent
    page.locator('#text').fill('')
    page.locator('#text').press_sequentially('christopher', delay=30)
    page.wait_for_selector("#result[data-engine=scalar] #summary:has-text(\"'christopher'\")")
    scalar = [text for engine, text in sent if engine == 'scalar']
    assert scalar[0] == 'anna' and scalar[-1] == 'christopher', scalar
    assert len([text for engine, text in sent if engine == 'numpy']) >= 3  # the letters were drawn
    assert page.locator('#error').is_hidden()
    assert [e for e in page.errors if 'status of 400' not in e] == []  # the refused name's answer alone


def test_the_sampling_sandbox_has_a_column_per_temperature_with_the_apis_entropies(server, page):
    page.goto(server.url + 'sampling')
    page.wait_for_selector('#temperatures')
    page.eval_on_selector('#temperature', 'e => { e.value = "1.5"; e.dispatchEvent(new Event("input")); }')
    page.wait_for_selector('#temperatures th[data-temperature="1.5"]')
    page.wait_for_selector('#drawn:not(.stale)')  # the draws, asked once the distribution is drawn
    want = post(server, '/api/sampling', {'prompt': '', 'temperatures': [0, 0.5, 1, 2, 1.5], 'num': 10, 'seed': 42})
    assert want['temperatures'] == [0.0, 0.5, 1.0, 1.5, 2.0]
    headers = page.locator('#temperatures th[data-temperature]')
    assert [float(t) for t in headers.evaluate_all('ths => ths.map(t => t.dataset.temperature)')] \
        == want['temperatures']
    assert [float(e) for e in headers.evaluate_all('ths => ths.map(t => t.dataset.entropy)')] == want['entropy']
    rows = page.locator('#temperatures tr:has(td)')
    assert rows.first.locator('td').count() == len(want['temperatures'])
    kept = ' '.join(want['top_k_kept'])
    assert f"top-k {want['top_k']} at T=1 keeps {kept}: {want['top_k_mass']:.3f}" in page.inner_text('#top-k-line')
    # the names at this page's temperature, marked * where lab sampling marks them
    for d in (d for d in want['draws'] if d['temperature'] == 1.5):
        shown = page.locator(f"#names ol[data-top-k=\"{d['top_k'] or 'none'}\"] li").all_inner_texts()
        assert shown == [(n or '(empty: BOS first)') + ('*' if known else '') for n, known in zip(d['names'], d['known'])]
    assert want['marked'] and page.locator('#names li.new').count() + page.locator('#names li.known').count() == 20
    assert page.errors == []


def test_attention_heatmaps_redraw_as_a_name_is_typed_and_a_click_shows_the_api_numbers(server, page):
    page.goto(server.url + 'attention')
    page.fill('#text', TEXT)
    page.press('#text', 'Enter')
    page.wait_for_selector('table.heatmap th:has-text("1 e")')  # emma's, not the first draw's anna
    n_head, T = 2, len(TEXT) + 1
    assert page.locator('table.heatmap').count() == n_head
    assert page.locator('td.cell.filled').count() == n_head * T * (T + 1) // 2
    assert page.locator('td.cell.blank').count() == n_head * T * (T - 1) // 2
    head, query, key = 1, 3, 1
    page.locator(f'td.filled[data-head="{head}"][data-query="{query}"][data-key="{key}"]').click()
    page.wait_for_selector(f'#detail h3:has-text("query {query}")')
    want = post(server, '/api/attention', {'text': TEXT, 'head': head, 'query': query})
    shown = {name: float(page.get_attribute(f'#detail-{name}', 'data-value'))
             for name in ('raw', 'scaled', 'score', 'weight')}
    assert shown == {'raw': want['raw'][key], 'scaled': want['scaled'][key],
                     'score': want['scores'][key], 'weight': want['weights'][key]}
    assert page.inner_text('#detail-weight') == f"{want['weights'][key]:.4f}"
    products = [float(v) for v in page.locator('td[data-kind="product"]').evaluate_all(
        'cells => cells.map(c => c.dataset.value)')]
    assert products == want['products'][key]
    page.locator('#text').press('End')
    page.locator('#text').press_sequentially('e', delay=20)  # 'emma' -> 'emmae': at each letter typed,
    page.wait_for_selector('table.heatmap th:has-text("5 e")', timeout=5000)  # not only on Enter or blur
    assert page.evaluate('document.activeElement.id') == 'text'
    assert page.locator('td.cell.filled').count() == n_head * (T + 1) * (T + 2) // 2
    page.fill('#text', 'em')  # shorter than the query drawn last: an Enter at once must not ask for it
    page.press('#text', 'Enter')
    page.wait_for_function(f"() => document.querySelectorAll('td.cell.filled').length === {n_head * 6}")
    assert page.errors == []


def variable_grads(page):
    return {g.get_attribute('data-variable'): float(g.get_attribute('data-grad'))
            for g in page.locator('#graph g.node.variable').all()}


def test_autograd_shows_the_lesson_gradients_and_follows_a_slider(server, page):
    page.goto(server.url + 'autograd')
    page.wait_for_selector('#graph g.node.variable')
    assert page.input_value('#expression') == '(a + b) * c'
    assert variable_grads(page) == {'a': 10.0, 'b': 10.0, 'c': -1.0}
    assert 'c.grad = -1' in page.inner_text('#result')
    page.focus('#slider-a')
    page.keyboard.press('ArrowRight')  # a: 2 -> 2.1, so c.grad = a + b = -0.9
    page.wait_for_selector('#result:has-text("c.grad = -0.9")')
    assert variable_grads(page) == {'a': 10.0, 'b': 10.0, 'c': pytest.approx(-0.9, abs=1e-12)}
    assert page.inner_text('#value-a') == '2.1'
    assert page.errors == []


def test_the_training_page_refuses_in_one_line_streams_a_run_and_its_checkpoint_loads(server, window):
    """A refused start was once said off-screen at 390 px with Start still enabled: it is the
    API's one line under the form."""
    page = window(390, 700)
    page.goto(server.url + 'training')
    page.wait_for_selector(DRAWN, state='attached')  # the page has its options
    assert page.locator('#engine option').all_inner_texts() == ['scalar', 'numpy']  # both always offered
    assert page.locator('#batch_size').is_visible()
    last_run = post(server, '/api/train/status', {'offset': 0}).get('run')
    assert page.get_attribute('label:has(#weight_decay)', 'title').startswith('shrink every weight')  # --help
    for name, value in {'steps': 20000, 'n_embd': 8, 'n_head': 3, 'block_size': 12, 'weight_decay': 0.2}.items():
        page.fill(f'#{name}', str(value))
    page.click('#start')  # 8 does not divide by 3
    refused = request(server, 'POST', '/api/train/start', {'n_embd': 8, 'n_head': 3})[1]['error']
    page.locator('#form-error', has_text='does not divide by n_head 3').wait_for()
    assert page.inner_text('#form-error') == refused and page.is_disabled('#start')
    box = page.locator('#form-error').bounding_box()
    assert 0 <= box['y'] and box['y'] + box['height'] <= 700  # in the window, where the learner is
    assert page.locator('#error').is_hidden()  # said once, here
    assert post(server, '/api/train/status', {'offset': 0}).get('run') == last_run  # nothing started
    page.fill('#n_head', '2')
    assert page.is_enabled('#start') and page.locator('#form-error').is_hidden()
    page.click('#start')
    pace = page.locator('#estimate', has_text="left, at this run's")
    pace.wait_for(timeout=30_000)
    assert ' s so far, about ' in pace.inner_text()
    page.click('#stop')
    page.locator('#status', has_text='stopped').wait_for(timeout=30_000)
    run = post(server, '/api/train/status', {'offset': 0})['params']
    assert (run['weight_decay'], run['dtype']) == (0.2, 'float64')
    page.fill('#steps', '30')
    page.click('#start')
    page.locator('#status', has_text='finished, step 30/30').wait_for(timeout=60_000)
    page.wait_for_selector('#open-run')
    assert page.get_attribute('#chart', 'data-train-points') == '30'
    assert int(page.get_attribute('#chart', 'data-val-points')) >= 1
    # the loss axis: five heights labelled, each with its grid line (it had the top and bottom only)
    texts = page.locator('#chart text').evaluate_all('ts => ts.map(t => t.textContent)')
    labels = [float(t) for t in texts if not t.startswith('step')]
    assert len(labels) == 5 and labels == sorted(labels) and page.locator('#chart line.grid').count() == 5
    assert page.locator('#samples li').count() >= 1
    number = post(server, '/api/train/start', {'steps': 30, 'n_embd': 8, 'n_head': 2, 'block_size': 12})['run']
    page.evaluate('run = -1; offset = 10 ** 6; poll()')  # as if run -1's log had been read to 1 MB
    page.locator('#status', has_text=f'run {number}: finished').wait_for(timeout=60_000)
    page.locator('#chart[data-train-points="30"]').wait_for(timeout=10_000)  # none lost
    page.wait_for_selector('#open-run')
    page.click('#open-run')  # the run's checkpoint becomes the one every page looks at
    ckpt_id = page.input_value('#ckpt')
    assert ckpt_id == f'run{number}'
    assert page.locator('input[type=number]#steps').count() == 1  # the form drawn again, not twice
    from microgpt import inference
    model = inference.load_checkpoint(server.lab.checkpoints.path(ckpt_id))
    assert model.config.n_embd == 8
    page.goto(server.url + 'overview')
    page.wait_for_selector('.position')
    assert page.input_value('#ckpt') == ckpt_id and 'block_size=12' in page.inner_text('#config')
    assert all('status of 400' in e for e in page.errors)  # the refused field's answer, and nothing else
