"""
The browser tests' Chromium: Debian's, driven by Playwright for Python, launched by its path.

Every browser test module is marked `browser` (conftest.py), so that it skips, saying how to
install what is missing, where Playwright or Chromium is absent (CI installs both). The browser
itself is one per session (conftest's `browser` fixture: a launch costs seconds), and
each test opens its own pages with conftest's `window` fixture (or `watched_page` on a context
of its own), which collects the console's errors.
"""

import time


# headless as root, with none of Chromium's own connections (this machine reaches no network)
CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
                 '--disable-background-networking', '--disable-component-update', '--disable-sync']


def watched_page(context):
    """A new page of `context` whose console errors and uncaught exceptions are collected in
    page.errors, and the URL of every request it makes in page.requests."""
    p = context.new_page()
    p.errors, p.requests, p.in_flight = [], [], set()
    p.on('request', lambda r: (p.requests.append(r.url), p.in_flight.add(r)))
    p.on('requestfinished', lambda r: p.in_flight.discard(r))
    p.on('requestfailed', lambda r: p.in_flight.discard(r))
    p.on('console', lambda m: p.errors.append(m.text) if m.type == 'error' else None)
    p.on('pageerror', lambda e: p.errors.append(str(e)))
    return p


def quiet(page, timeout_s=30):
    """Until a watched_page has no request in flight: sooner than the network's idle state,
    which Playwright reports after 500 ms without one."""
    deadline = time.monotonic() + timeout_s
    while page.in_flight:
        assert time.monotonic() < deadline, f"requests still in flight: {[r.url for r in page.in_flight]}"
        page.wait_for_timeout(10)


def settled(page, idle_s=0.2, timeout_s=30):
    """Until a watched_page has had no request in flight for idle_s: Playwright's network idle,
    which waits 500 ms without one, with a spell long enough for lab.js's debounced requests
    (100 or 150 ms after the event that asks) to have started."""
    if not hasattr(page, 'in_flight'):  # a page not opened by watched_page: Playwright's own rule
        page.wait_for_load_state('networkidle')
        return
    deadline, idle_from = time.monotonic() + timeout_s, None
    while True:
        if page.in_flight:
            idle_from = None
        elif idle_from is None:
            idle_from = time.monotonic()
        elif time.monotonic() - idle_from >= idle_s:
            return
        assert time.monotonic() < deadline, f"requests still in flight: {[r.url for r in page.in_flight]}"
        page.wait_for_timeout(10)


def open_page(page, server, name):
    """Open the lab's page NAME and wait until it has drawn its first answer and asked for no more."""
    page.goto(server.url + name)
    page.wait_for_selector('body[data-drawn]', state='attached')
    settled(page)


def draws(page, selector='body'):
    """How many times the page (or a panel) has drawn: lab.js counts them in data-draws."""
    return int(page.locator(selector).first.get_attribute('data-draws') or 0)


def wait_redraw(page, before, selector='body'):
    """Until the page (or a panel) has drawn once more than `before`."""
    page.wait_for_function(f"() => Number(document.querySelector('{selector}').dataset.draws || 0) > {before}")
