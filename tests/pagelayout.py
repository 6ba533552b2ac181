"""
What the browser tests check of a page's layout, whatever the model: the page no wider than its
window, no table cut off where it should scroll, and no two labels drawn over each other or run
together (the text of each table header against the others of its row, each SVG's texts against
each other, and HTML placed over a picture against every SVG text). Used by
tests/test_lab_text_browser.py (a 64-position model of running text) and
tests/test_lab_layout_browser.py (train.py's default names model), at 390 and 1280 px.
"""

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
