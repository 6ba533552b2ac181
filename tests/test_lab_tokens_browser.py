"""
The Tokens page in Chromium: typing a text redraws it as the route's tokens, one coloured piece
each whose hover text is the token's id and bytes, and the merges the route lists.

Playwright driving /usr/bin/chromium, as tests/test_lab_browser.py; skipped without them.
"""

import pytest

from chromium import open_page, skip_without_a_browser
from labserver import live_server, request

skip_without_a_browser()


@pytest.fixture
def server(tmp_path, bpe_ckpt, names_file):
    with live_server(bpe_ckpt, tmp_path / 'runs', names_file) as s:
        yield s


def test_typing_redraws_the_routes_tokens_in_colours_with_their_ids(server, window):
    p = window(1280)
    open_page(p, server, 'tokens')
    p.fill('#text', 'emma ř')
    p.wait_for_function("() => document.querySelector('#summary').textContent.includes('6 characters')")
    status, want, _ = request(server, 'POST', '/api/tokens', {'text': 'emma ř', 'merges': 20})
    assert status == 200
    chips = p.locator('#pieces .token')
    assert chips.count() == len(want['tokens'])
    for k, t in enumerate(want['tokens']):
        assert chips.nth(k).get_attribute('title') == f"id {t['id']}: bytes {' '.join(map(str, t['bytes']))}"
    colours = {chips.nth(k).evaluate('e => getComputedStyle(e).backgroundColor') for k in range(min(2, chips.count()))}
    assert len(colours) == min(2, chips.count())  # neighbours differ
    assert p.locator('#merges-table tr').count() == 1 + len(want['merges'])
    assert p.errors == []
