"""
The web lab's Exercises page in Chromium: without --exercises it lists the path and runs nothing;
with `serve --exercises DIR` it shows the saved results, and its check button draws the report.
"""

import pytest

from helpers import SLIPS, live_server, make_workspace, open_page
from microgpt.lab import registry
from microgpt.lab.exercises import catalog, workspace

N = len(catalog.EXERCISES)


pytestmark = pytest.mark.browser


def test_the_page_lists_the_path_with_a_link_to_each_idea_and_says_its_table_scrolls(server, window):
    """Was: at 390 px the path's table was 1075 px wide in its scrolling box, with no cue; at
    1920 px it fits, and the cue goes."""
    page = window(390, 800)
    open_page(page, server, 'exercises')
    rows = page.locator('#path tr[data-number]')
    assert rows.count() == N
    pages = dict(registry.pages())
    links = page.locator('#path a.idea').evaluate_all('as => as.map(a => [a.getAttribute("href"), a.textContent])')
    assert links == [[f'/{e.page}', pages[e.page]] for e in catalog.EXERCISES]
    assert page.locator('button.check').count() == 0 and page.locator('#no-workspace').is_visible()
    assert 'python -m microgpt.lab exercises start' in page.inner_text('#start')
    box = page.locator('div.scroll:has(#path)')
    for width, overflows in ((390, True), (1920, False)):
        page.set_viewport_size({'width': width, 'height': 800})
        page.wait_for_function(f"() => document.getElementById('path').closest('div.scroll')"
                               f".hasAttribute('data-overflows') === {str(overflows).lower()}")
        cue = box.evaluate("b => getComputedStyle(b, '::before').content")
        assert ('scroll sideways' in cue) == overflows, cue
    assert page.errors == []  # (each linked page loads: test_lab_browser.py opens every page of the registry)


def test_with_a_workspace_it_shows_the_last_results_checks_on_request_and_says_where_to_go(
        tiny_ckpt, names_file, tmp_path, window):
    """Once every exercise has passed (the results `check` saves, recorded here: whether the
    checker passes the solved files is test_exercises.py's question), the page says where to go."""
    folder = tmp_path / 'mine'
    ws = make_workspace(folder, solved=[1, 2, 3], files={4: SLIPS[4][0]})
    passed = {'status': 'pass', 'line': 'passed'}
    workspace.Workspace.open(ws).record({1: passed, 2: passed})  # as `check` leaves them
    before = (folder / 'ex04_log.py').read_text()
    with live_server(tiny_ckpt, tmp_path / 'runs', names_file, exercises=ws) as server:
        page = window(1280, 900)
        open_page(page, server, 'exercises')
        status = page.locator('#path td.result').evaluate_all('tds => tds.map(td => td.dataset.status)')
        assert status == ['pass', 'pass'] + ['none'] * (N - 2)
        assert 'mine' in page.inner_text('#workspace') and page.locator('#next').count() == 0
        page.click('button.check[data-number="4"]')
        page.wait_for_selector('#report-row[data-number="4"][data-status="fail"]')
        report = page.inner_text('#report')
        assert "exercise 4 (log): case 'fixed 2': d out/d x differs" in report and 'A missing factor' in report
        assert page.get_attribute('#path tr[data-number="4"] td.result', 'data-status') == 'fail'
        page.click('button.check[data-number="5"]')
        page.wait_for_selector('#report-row[data-number="5"][data-status]')
        assert page.locator('#report-row').count() == 1  # the last check's report only, under its row
        assert page.get_attribute('#path tr[data-number="5"] td.result', 'data-status') == 'todo'
        assert (folder / 'ex04_log.py').read_text() == before  # the page reads the learner's files, never writes them
        assert workspace.Workspace.open(ws).results()['4']['status'] == 'fail'  # the command line sees it too
        workspace.Workspace.open(ws).record({n: passed for n in catalog.NUMBERS})
        page.goto(server.url + 'exercises')
        page.wait_for_selector('#next li')
        assert page.locator('#next li').all_inner_texts() == list(catalog.WHAT_NEXT)
        assert page.errors == []
