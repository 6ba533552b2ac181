"""
The web lab's layouts in Chromium (as tests/test_lab_browser.py): every page within the window
from 390 px to 1920 px, on a checkpoint of train.py's default shape.
"""

import pytest

from helpers import DRAWN, PAGES, check_layout, live_server, post, quiet, settled, wait_for_run

pytestmark = pytest.mark.browser

# each page's title: its <h1> up to the colon, in the frame every page shares (web/frame.html)
TITLES = {'overview': 'Overview', 'attention': 'Attention', 'byhand': 'Attention by hand',
          'phases': 'Attention in phases', 'autograd': 'Autograd', 'scaling': 'Scaling', 'loss': 'Loss',
          'sampling': 'Sampling', 'step': 'Lesson 04', 'embeddings': 'Embeddings', 'tokens': 'Tokens',
          'training': 'Training', 'exercises': 'Exercises'}
LONG = 'abcdefghijklmno'  # 15 characters: block_size 16 with BOS
EXPRESSION = '(a*b + c*d) * (e + f) - exp(a) / (b + 2) + relu(c - d)'  # 24 nodes, 8 columns deep
# an element's box in page coordinates (not the viewport's, which scrolls): [left, top, width, height]
BOX = 'e => { const r = e.getBoundingClientRect(); return [r.left + scrollX, r.top + scrollY, r.width, r.height]; }'


@pytest.fixture(scope='module')
def server(default_ckpt, names_file, tmp_path_factory):
    with live_server(default_ckpt, tmp_path_factory.mktemp('layout-runs'), names_file) as s:
        yield s


def open_page(p, server, name):
    p.goto(server.url + name)
    p.wait_for_selector(DRAWN, state='attached')  # the first draw is done: the page's whole layout


def type_name(p, text):
    p.fill('#text', text)
    p.press('#text', 'Enter')
    p.wait_for_selector(f'table.heatmap th:has-text("{len(text)} {text[-1]}")')
    settled(p)  # and no later answer still to come: a redraw after a click drops it


@pytest.fixture(scope='module')
def trained(server):
    """A short run, ended: with nothing drawn, the Training chart's legend over 'step 1' went unseen."""
    post(server, '/api/train/start', {'steps': 12, 'n_embd': 8, 'n_head': 2, 'block_size': 12, 'batch_size': 16})
    status, records, _ = wait_for_run(server)
    assert status['state'] == 'finished' and any('val_loss' in r for r in records)
    return status


def test_every_page_loads_whole_and_fits_its_window(server, trained, window):
    """Every page at 390, 1280 and 1920 px: no console error, no request to another server, and
    tests/helpers.py's layout rules. A 64-position model is tests/test_lab_text_browser.py's."""
    p = window(390)
    for name in PAGES:
        p.set_viewport_size({'width': 390, 'height': 800})
        open_page(p, server, name)
        if name == 'step':
            p.wait_for_selector('#result[data-engine="scalar"] #engines')
        if name == 'training':  # the ended run's whole log drawn, its evaluations with it
            p.wait_for_selector('#chart circle.val', state='attached')
            p.wait_for_selector('#open-run', state='attached')
            assert server.lab.runs.data and f'It trains on {server.lab.runs.data}' in p.inner_text('#data')
            assert 'each step (mean of 16 names)' in p.locator('#chart-legend').text_content()
        quiet(p)
        assert p.locator('#error').is_hidden(), name
        assert p.get_attribute('nav a.here', 'href') == '/' + name and p.title() == f'microgpt lab: {TITLES[name]}'
        assert p.locator('nav a').evaluate_all('as => as.map(a => a.getAttribute("href"))') == ['/' + n for n in PAGES]
        if name in ('overview', 'attention', 'step'):  # a names model asks for a name
            assert p.locator('.input-word').first.inner_text() == 'name', name
        for width in (390, 1280, 1920):
            p.set_viewport_size({'width': width, 'height': 800})
            p.wait_for_timeout(50)  # the pages' resize handlers: the first at once (Lab.debounced)
            quiet(p)
            header = p.locator('header').evaluate(BOX)
            assert header[2] == width, name  # the band spans the window, no wider
            for part in ('nav a:last-child', '#config', '#ckpt'):  # nothing of it cut off at the right
                box = p.locator(part).evaluate(BOX)
                assert box[0] >= 0 and box[0] + box[2] <= width + 0.5, (name, part, box)
            check_layout(p, name, width)
    assert p.errors == []
    assert len(p.requests) >= 4 * len(PAGES) and all(url.startswith(server.url) for url in p.requests)


# the Training chart as it was drawn: its legend's line at the height of the axis's step labels
LEGEND_OVER_AXIS = '''<main><div style="position: relative"><svg width="760" height="300" viewBox="0 0 760 300"
  style="font: 11px system-ui, sans-serif; max-width: 100%; height: auto">
  <text x="50" y="288">step 1</text><text x="745" y="288" text-anchor="end">step 600</text>
  <text x="380" y="288" text-anchor="middle">{legend}</text></svg>{floating}</div></main>'''
LONG_LEGEND = ('training loss: each step (one name), running mean · validation loss (held-out names) · '
               '▲ training loss measured alike')


def test_the_overlap_rule_sees_labels_drawn_over_each_other(window):
    """The rule itself, on made-up pages: the old Training chart's legend over 'step 1', and an
    HTML label placed over an SVG's text, are each refused; the same labels apart pass."""
    p, width = window(390), 390
    p.set_content(LEGEND_OVER_AXIS.format(legend=LONG_LEGEND, floating=''))
    with pytest.raises(AssertionError, match='step 1'):
        check_layout(p, 'made-up', width)
    over = '<div style="position: absolute; left: 0; bottom: 0; font-size: 30px">over it</div>'  # on 'step 1'
    p.set_content(LEGEND_OVER_AXIS.format(legend='loss', floating=over))
    with pytest.raises(AssertionError, match='over it'):
        check_layout(p, 'made-up', width)
    p.set_content(LEGEND_OVER_AXIS.format(legend='loss', floating=''))  # the control: nothing overlaps
    check_layout(p, 'made-up', width)


def test_a_name_as_long_as_the_block_fits_and_a_clicked_cells_breakdown_opens_next_to_it(server, window):
    p = window(1280)
    open_page(p, server, 'attention')
    type_name(p, LONG)
    for width in (1280, 390):
        p.set_viewport_size({'width': width, 'height': 800})
        assert p.evaluate('document.documentElement.scrollWidth') <= width
        if width == 1280:  # the heads two by two, not one per row: under 2000 px (2968 before)
            tops = p.locator('#heads > .head').evaluate_all('hs => hs.map(h => h.offsetTop)')
            assert len(tops) == 4 and len(set(tops)) == 2, tops
            assert p.evaluate('document.documentElement.scrollHeight') < 2000
        for head in (0, 3):  # a head on the first row of heads, and one on the last
            query, key = 15, 7
            p.locator(f'td.filled[data-head="{head}"][data-query="{query}"][data-key="{key}"]').click()
            p.wait_for_selector(f'#detail h3:has-text("key {key}")')  # the last cell clicked was key 2
            cell = p.locator(f'td.filled[data-head="{head}"][data-query="{query}"][data-key="{key}"]').evaluate(BOX)
            detail = p.locator('#detail').evaluate(BOX)
            gap = detail[1] - (cell[1] + cell[3])  # from the cell's bottom edge to the breakdown's top
            assert 0 <= gap < 60, (cell, detail)  # the cell is in the last row of its heatmap
            want = post(server, '/api/attention', {'text': LONG, 'head': head, 'query': query})
            assert float(p.get_attribute('#detail-weight', 'data-value')) == want['weights'][key]
            # a cell higher up in its heatmap: the breakdown still opens under that row of heads,
            # within one heatmap's height, not under every head
            p.locator(f'td.filled[data-head="{head}"][data-query="9"][data-key="2"]').click()
            p.wait_for_selector('#detail h3:has-text("query 9")')
            cell = p.locator(f'td.filled[data-head="{head}"][data-query="9"][data-key="2"]').evaluate(BOX)
            heatmap = p.locator(f'table.heatmap[data-head="{head}"]').evaluate(BOX)
            detail = p.locator('#detail').evaluate(BOX)
            assert 0 <= detail[1] - (cell[1] + cell[3]) <= heatmap[3] and detail[1] >= heatmap[1] + heatmap[3]
    p.locator('#head').select_option('1')  # a new head, no cell picked: the breakdown goes back below
    p.wait_for_selector('#detail p.muted')
    assert p.evaluate("document.getElementById('detail').parentElement.id") == ''
    assert p.errors == []


def boxes_and_paths(p):
    return p.evaluate('''() => {
      const g = document.getElementById('graph'), m = g.getScreenCTM();
      const boxes = Array.from(g.querySelectorAll('g.node rect')).map(r => r.getBBox && (() => {
        const t = r.parentElement.transform.baseVal.consolidate().matrix;
        return [t.e, t.f, r.width.baseVal.value, r.height.baseVal.value]; })());
      const paths = Array.from(g.querySelectorAll('path')).map(path => {
        const n = path.getTotalLength(), pts = [];
        for (let s = 0; s <= 40; s++) { const q = path.getPointAtLength(n * s / 40); pts.push([q.x, q.y]); }
        return pts; });
      return {boxes, paths};
    }''')


def test_a_deep_expression_fits_1280_and_no_edge_runs_under_a_box(server, window):
    p = window(1280)
    open_page(p, server, 'autograd')
    p.fill('#expression', EXPRESSION)
    p.press('#expression', 'Enter')
    p.wait_for_selector('#graph g.node[data-label="relu"]')
    want = post(server, '/api/autograd', {'expression': EXPRESSION, 'values': {}, 'lenient': True})
    assert p.locator('#graph g.node').count() == len(want['nodes']) >= 16
    assert p.evaluate('document.documentElement.scrollWidth') <= 1280
    graph = p.locator('#graph').evaluate(BOX)
    assert graph[0] + graph[2] <= 1280
    drawn = boxes_and_paths(p)
    for points in drawn['paths']:  # every sampled point of every edge is outside every box
        for x, y in points[1:-1]:
            for bx, by, bw, bh in drawn['boxes']:
                assert not (bx + 1 < x < bx + bw - 1 and by + 1 < y < by + bh - 1), ((x, y), (bx, by))
    assert p.errors == []
