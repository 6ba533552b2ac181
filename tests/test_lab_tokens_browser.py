"""
The Tokens page in Chromium (as tests/test_lab_browser.py): typing redraws the route's tokens,
and a click on a token or a cut says why, in the route's words.
"""

import pytest

from helpers import check_layout, live_server, open_page, request

pytestmark = pytest.mark.browser


@pytest.fixture(scope='module')
def server(tmp_path_factory, bpe_ckpt, names_file):
    with live_server(bpe_ckpt, tmp_path_factory.mktemp('runs'), names_file) as s:
        yield s


def test_typing_redraws_the_routes_tokens_a_click_says_why_and_the_pages_say_token(server, window):
    p = window(390)
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
    text = 'emma olivia'
    status, want, _ = request(server, 'POST', '/api/tokens', {'text': text, 'merges': 20})
    assert status == 200 and len(want['cuts']) >= 2 and any(t['merge'] is not None for t in want['tokens'])
    p.fill('#text', text)
    p.wait_for_function(f"() => document.querySelectorAll('#pieces .cut').length === {len(want['cuts'])}")
    labels = [t['label'] for t in want['tokens']]
    for c in (len(want['cuts']) - 1, 0):
        p.locator(f'#pieces .cut[data-cut="{c}"]').click()
        assert p.inner_text('#why') == f"'{labels[c]}' | '{labels[c + 1]}': {want['cuts'][c]['why']}"
        assert p.locator('#pieces .chosen').get_attribute('data-cut') == str(c)
    k = next(k for k, t in enumerate(want['tokens']) if t['merge'] is not None)
    p.locator(f'#pieces .token[data-index="{k}"]').hover()
    assert p.inner_text('#why') == f"'{labels[k]}' (id {want['tokens'][k]['id']}): {want['tokens'][k]['why']}"
    assert want['tokens'][k]['why'].startswith(f"merge {want['tokens'][k]['merge']}: ")
    assert p.locator('#tokens-table tr').nth(1 + k).locator('td').nth(3).inner_text() == f"merge {want['tokens'][k]['merge']}"
    check_layout(p, 'tokens', 390)
    why = p.locator('#why').bounding_box()
    assert why['x'] >= 0 and why['x'] + why['width'] <= 390
    cut = p.locator('#pieces .cut').first.bounding_box()
    assert cut['width'] >= 10  # wide enough to tap
    # the Overview and Sampling pages' sentences on a byte-pair model: the next token, not the
    # next character (the server's word for what the checkpoint reads)
    open_page(p, server, 'overview')
    assert 'predicts the next token' in ' '.join(p.inner_text('.lead').split())
    assert 'character' not in ' '.join(p.locator('.unit-word').all_inner_texts())
    open_page(p, server, 'sampling')
    assert p.inner_text('.panel h3 >> nth=0').startswith('next token after')
    p.wait_for_function("() => document.querySelector('#sandbox').textContent.includes('top-k keeps')")
    assert 'tokens top-k keeps' in p.inner_text('#sandbox') and 'character' not in p.inner_text('#sandbox')
    assert p.errors == []
