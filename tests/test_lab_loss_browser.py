"""
The Loss page in Chromium (as tests/test_lab_browser.py): other runs offered only where there
are some, each named with its size, in the colours the marks are really painted in.
"""

import json
import math
import re
import shutil

import pytest

from helpers import live_server, open_page, quiet
from microgpt.programs import train
from microgpt.programs.runlog import log_path_for

pytestmark = pytest.mark.browser

# the colours a reader would call by these names, as a browser computes them
NAMES = {'rgb(31, 95, 191)': 'blue', 'rgb(124, 58, 237)': 'purple', 'rgb(14, 116, 144)': 'teal',
         'rgb(190, 24, 93)': 'pink', 'rgb(77, 124, 15)': 'olive', 'rgb(146, 64, 14)': 'brown',
         'rgb(194, 65, 12)': 'orange', 'rgb(6, 118, 71)': 'green'}
WORDS = re.compile(r'\b(' + '|'.join(set(NAMES.values())) + r'|red|yellow)\b')
# a computed style of the first element matching a selector
STYLE = '([selector, name]) => getComputedStyle(document.querySelector(selector))[name]'


@pytest.fixture
def server(tmp_path, tiny_ckpt, names_file):
    """A server on out/model.json, a copy of tiny_ckpt and its log, with nothing beside it yet."""
    out = tmp_path / 'out'
    out.mkdir()
    shutil.copy(tiny_ckpt, out / 'model.json')
    shutil.copy(log_path_for(tiny_ckpt), log_path_for(str(out / 'model.json')))
    with live_server(str(out / 'model.json'), tmp_path / 'runs', names_file) as s:
        s.out = out
        yield s


def colour(p, selector, name):
    return NAMES[p.evaluate(STYLE, [selector, name])]  # a KeyError: a colour no one has named


def said(p):
    """The colour words of the page's own text about the picture: its lead and its legend."""
    return set(WORDS.findall(p.inner_text('p.lead') + ' ' + p.inner_text('#legend')))


def test_one_run_then_two_each_in_the_colours_the_legend_names(server, window, names_file):
    """Bits per character are the log's own val_bpc: the page computes nothing of it."""
    with open(log_path_for(str(server.out / 'model.json')), encoding='utf-8') as f:
        last = [r for r in map(json.loads, f) if 'val_loss' in r][-1]
    p = window(1280)
    open_page(p, server, 'loss')
    assert p.locator('#compare input').count() == 0
    assert 'tick' not in p.inner_text('main').lower()  # no box to tick is promised
    assert 'No other run' in p.inner_text('#compare')  # but where one would come from
    painted = {colour(p, '#loss-chart path.smooth', 'stroke'): 'line',
               colour(p, '#loss-chart circle.val', 'fill'): 'circles',
               colour(p, '#loss-chart path.estimate', 'fill'): 'triangles'}
    legend = p.inner_text('#legend')
    for word, shape in painted.items():
        assert f'({word} {shape})' in legend, (word, legend)
    assert said(p) == set(painted)  # and no colour the picture does not show
    nats = float(p.inner_text('#last-val'))
    p.select_option('#unit', 'bits')
    p.wait_for_function("() => document.querySelector('#source').textContent.includes('bits per character')")
    bits = float(p.inner_text('#last-val'))
    assert nats == pytest.approx(last['val_loss'], abs=1e-4)
    assert bits == pytest.approx(last['val_bpc'], abs=1e-4) and bits == pytest.approx(nats / math.log(2), abs=1e-3)

    other = str(server.out / 'wide.json')
    assert train.main(['--data', names_file, '--out', other, '--steps', '6', '--n-embd', '12', '--n-head', '2',
                       '--block-size', '12', '--eval-every', '3', '--num-samples', '0']) == 0
    open_page(p, server, 'loss')  # the page asks the server anew: the run from the command line is there
    box = p.locator('#compare input[data-id="file:wide.json"]')
    assert box.count() == 1 and 'wide.json: 6 steps, 1x12' in p.inner_text('#compare')
    assert 'Tick other runs' in p.inner_text('#compare')
    box.check()
    p.wait_for_selector('#loss-chart[data-runs="2"]')
    quiet(p)
    legend = p.inner_text('#legend')
    words = set()
    for run in ('start', 'file:wide.json'):
        line = colour(p, f'#loss-chart g.run[data-run="{run}"] path.smooth', 'stroke')
        assert colour(p, f'#loss-chart circle.val[data-run="{run}"]', 'stroke') == line  # all its marks
        assert colour(p, f'#loss-chart path.estimate[data-run="{run}"]', 'fill') == line
        label = p.inner_text(f'#legend b[data-run="{run}"]')
        assert f'{label} ({line})' in legend, (label, line, legend)
        words.add(line)
    assert len(words) == 2 and said(p) == words  # 'orange circles' and 'green triangles' no more
    # 60 steps beside 6: the steps on a log scale, where the short run takes half the picture's
    # width, not its first tenth (six runs once buried the short ones in the left 3%)
    def right_edge():
        return max(float(x) for x in p.locator('#loss-chart circle.val[data-run="file:wide.json"]').evaluate_all(
            'cs => cs.map(c => c.getAttribute("cx"))'))
    assert p.get_attribute('#loss-chart', 'data-xscale') == 'log' and right_edge() > 0.4 * 760
    p.select_option('#xscale', 'linear')
    p.wait_for_selector('#loss-chart[data-xscale="linear"]')
    assert right_edge() < 0.2 * 760
    assert p.errors == []
