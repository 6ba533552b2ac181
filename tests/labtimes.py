"""
How long the web lab takes from a learner's input to its redraw, page by page, in Chromium.

test_lab_pages_browser.test_interaction_times prints it on a model of train.py's default size;
bench/lab_speed.py on that and on the names recipe's 4x64 model. Each entry of a list is
(page, what the learner does, the panel that redraws, the page's pause for that input in ms):
the pause (lab.js's debounce, waiting for the learner to stop typing) is part of the time.
"""

import time

from chromium import draws, open_page, wait_redraw

MODEL_FREE = [('byhand', lambda p: p.fill('#k-1', '0.9, 0.1, 0.4, 1'), 'body', 150),
              ('scaling', lambda p: p.uncheck('#scale'), '#row-panel', 0),
              ('scaling', lambda p: p.fill('#size-h', '8'), '#index-panel', 150),
              ('scaling', lambda p: p.fill('#n', '4096'), '#cost-panel', 150),
              ('phases', lambda p: p.fill('#text', 'emma'), 'body', 150),
              ('phases', lambda p: p.click('#forward'), None, 0),
              ('embeddings', lambda p: p.fill('#neighbours', '4'), 'body', 150)]
# the pages whose time grows with the model
ON_THE_MODEL = [('overview', lambda p: p.fill('#text', 'emmy'), 'body', 150),
                ('attention', lambda p: p.fill('#text', 'emmy'), 'body', 250),
                ('sampling', lambda p: p.fill('#prompt', 'em'), 'body', 150),
                ('step', lambda p: p.fill('#text', 'emmy'), 'body', 300),
                ('step', lambda p: p.fill('#text', 'christopher'), 'body', 300)]


def interaction_times(server, browser, steps):
    """[(page, panel, pause in ms, seconds)]: each step's time from the input to the redraw."""
    times = []
    context = browser.new_context(viewport={'width': 1280, 'height': 800})
    p = context.new_page()
    for name, act, panel, pause in steps:
        if not p.url.endswith('/' + name):
            open_page(p, server, name)
        before = draws(p, panel) if panel else p.get_attribute('body', 'data-phase')
        start = time.perf_counter()
        act(p)
        if panel:
            wait_redraw(p, before, panel)
        else:  # a step through the phases asks nothing of the server
            p.wait_for_function(f"() => document.body.dataset.phase !== '{before}'")
        times.append((name, panel or 'a phase', pause, time.perf_counter() - start))
    context.close()
    return times


def report(label, times):
    print(f"\ninteraction times on {label}: input to redraw in ms, and the page's pause in it "
          "(waiting for the learner to stop typing)")
    for name, panel, pause, seconds in times:
        print(f"  {name:<11} {panel:<13} {seconds * 1000:6.0f}   pause {pause:3d}")
