"""
The web lab's interaction times in Chromium, on a model of train.py's default size and on the
names recipe's (4 x 64: 200,000 weights, the Step page's slowest case); then, where tiny
shakespeare is, a prompt typed on the Sampling page of the Shakespeare recipe's model.

    python bench/lab_speed.py

Each model trains a few steps (its speed matters, not its training), is served by `lab serve`'s
own server in this process and driven by Playwright in Debian's Chromium: for each input (INPUTS)
the time from the input to the page's redraw, the page's pause for typing included. Skipped
(exit 0) without names.txt in ../shared/data, Playwright or Chromium.
"""

import json
import os
import sys
import tempfile
import threading
import time

from common import REPO_DIR, shared_data

sys.path.insert(0, os.path.join(REPO_DIR, 'tests'))
from helpers import draws, open_page, wait_redraw  # noqa: E402  (tests/helpers.py: the pages' waits)
from microgpt.lab import registry

MODELS = [("train.py's default model", []),
          ("the names recipe's model (n_layer 4, n_embd 64)",
           ['--engine', 'numpy', '--n-layer', '4', '--n-embd', '64', '--n-head', '4'])]
# README's running-text recipe's shape (4 x 128, block 64, 66 tokens: 811,520 weights) on tiny
# shakespeare, for the pages that read running text; skipped where the text is absent
TEXT_MODEL = ("the Shakespeare recipe's model of running text (n_layer 4, n_embd 128, block 64)",
              ['--engine', 'numpy', '--data-mode', 'text', '--n-layer', '4', '--n-embd', '128', '--n-head', '4',
               '--block-size', '64', '--batch-size', '12', '--val-size', '2000'])


# ---------------------------------------------------------------------------- input to redraw
SCALAR = '#result[data-engine="scalar"]'  # the Step page, once the scalar engine's step is drawn


# What to wait for, made before the input (so that it knows the page's state before it): each
# returns the wait itself, called after the input.
def redraw(panel='body', settled=None):
    """One more draw of `panel` (lab.js counts them) than before the input; settled: a selector
    the page's previous answer shows once complete, waited for first."""
    def begin(p):
        if settled:
            p.wait_for_selector(settled, state='attached', timeout=60_000)
        before = draws(p, panel)
        return lambda: wait_redraw(p, before, panel)
    return begin


def shown(css, text=''):
    """An element matching `css` whose text contains `text`: the answer for this input, drawn.
    (Checked at every frame: wait_for_selector polls every 500 ms once it has waited a while.)"""
    test = f"() => document.querySelector({json.dumps(css)})?.textContent.includes({json.dumps(text)})"
    return lambda p: lambda: p.wait_for_function(test, timeout=60_000)


def phase_moved(p):
    """The phases page's next phase (drawn in the page alone: no request)."""
    before = p.get_attribute('body', 'data-phase')
    return lambda: p.wait_for_function(f"() => document.body.dataset.phase !== '{before}'")


def typed(text, delay_ms=80, box='#text'):
    """The learner types TEXT into the box (#text, or the Sampling page's #prompt), a key every
    delay_ms (a quick typist), after clearing it; the time is counted from its last key
    (returned: the typing is the learner's own time)."""
    def act(p):
        p.fill(box, '')
        p.locator(box).press_sequentially(text[:-1], delay=delay_ms)
        p.wait_for_timeout(delay_ms)
        start = time.perf_counter()
        p.locator(box).press(text[-1])
        return start
    return act


def continued(prompt):
    """The Sampling page showing running text's continuations of PROMPT, none of an earlier
    input's left greyed: the page settled."""
    test = ("() => !document.getElementById('drawn').classList.contains('stale') && "
            f"document.querySelector('#names pre.sample b')?.textContent === {json.dumps(prompt)}")
    return lambda p: lambda: p.wait_for_function(test, timeout=120_000)


def stepped(text):
    """The Step page showing the scalar engine's step on TEXT."""
    return shown(f'{SCALAR} #summary', f"'{text}'")


# What the learner does on each page of the registry (registry.pages(), by the page's name):
# [(what, the input, the redraw, what follows it or None)]. A page not timed says why in UNTIMED;
# tests/test_lab_registry.py checks that every page is in one of the two.
INPUTS = {
    'overview': [('a name', lambda p: p.fill('#text', 'emmy'), redraw(), None),
                 ("typed 'olivia'", typed('olivia'), shown('#positions [data-position="6"]'), None)],
    'attention': [('a name', lambda p: p.fill('#text', 'emmy'), redraw(), None)],
    'byhand': [('a vector', lambda p: p.fill('#k-1', '0.9, 0.1, 0.4, 1'), redraw(), None)],
    'phases': [('a name', lambda p: p.fill('#text', 'emma'), redraw(), None),
               ('a phase forward', lambda p: p.click('#forward'), phase_moved, None)],
    'scaling': [('the √d toggle', lambda p: p.uncheck('#scale'), redraw('#row-panel'), None),
                ('a size', lambda p: p.fill('#size-h', '8'), redraw('#index-panel'), None),
                ('n', lambda p: p.fill('#n', '4096'), redraw('#cost-panel'), None)],
    'sampling': [('a prompt', lambda p: p.fill('#prompt', 'em'), redraw(), None)],
    'step': [('a name', lambda p: p.fill('#text', 'emmy'), redraw(settled=SCALAR), stepped('emmy')),
             ("'christopher'", lambda p: p.fill('#text', 'christopher'), redraw(settled=SCALAR),
              stepped('christopher')),
             ("typed 'elizabeth'", typed('elizabeth'), shown('#summary', "'elizabeth'"), stepped('elizabeth'))],
    'embeddings': [('neighbours', lambda p: p.fill('#neighbours', '4'), redraw(), None)],
}


UNTIMED = {'autograd': "not timed yet", 'tokens': "not timed yet",
           'loss': "no input to time: it draws the checkpoint's log once",
           'training': "no redraw to time: the page polls a run of train.py",
           'exercises': "no model to compute: the page lists a workspace's results"}


def steps(on_the_model=False):
    """[(page, what, the input, the redraw, what follows)] for the pages of the registry, in the
    navigation's order; on_the_model: only the pages whose sandbox reads the model, whose times
    grow with its size (main() times those on the larger model)."""
    reads_model = {s.name for s in registry.SANDBOXES if s.model in ('numpy', 'scalar')}
    return [(name, *step) for name, _ in registry.pages() if not on_the_model or name in reads_model
            for step in INPUTS.get(name, ())]


# a model of running text (the Shakespeare recipe's): the pages whose time
# grows with it; the Sampling page draws the distribution for a typed prompt first, then its
# continuations
ON_TEXT = [('overview', "typed 'ROMEO:'", typed('ROMEO:'), shown('.position[data-position="5"] h3', 'reads :'), None),
           ('attention', 'a text', lambda p: p.fill('#text', 'ROMEO:\nWhat say you?'), redraw(), None),
           ('sampling', "typed 'ROMEO:'", typed('ROMEO:', box='#prompt'), shown('#context', 'ROMEO:'),
            continued('ROMEO:'))]


THEN = {'step': "then the scalar engine's step", 'sampling': 'then the continuations'}  # what follows a redraw


def interaction_times(server, browser, steps):
    """[(page, what, seconds to the redraw, seconds to what follows it or None)]: from the input
    (a typed name's last key) to the redraw."""
    times = []
    context = browser.new_context(viewport={'width': 1280, 'height': 800})
    p = context.new_page()
    for name, what, act, first, then in steps:
        if not p.url.endswith('/' + name):
            open_page(p, server, name)
        wait_first, wait_then = first(p), then(p) if then else None
        start = time.perf_counter()
        start = act(p) or start  # a typed name: from its last key
        wait_first()
        drawn = time.perf_counter() - start
        if wait_then:
            wait_then()
        times.append((name, what, drawn, time.perf_counter() - start if then else None))
    context.close()
    return times


def report(label, times):
    """The times as lines of text, for a printout."""
    lines = [f"\ninteraction times on {label}: from the input (a typed name's last key) to the redraw, in ms"]
    for name, what, drawn, then in times:
        after = f"   {THEN[name]} {then * 1000:5.0f}" if then is not None else ''
        lines.append(f"  {name:<11} {what:<18} {drawn * 1000:6.0f}{after}")
    return '\n'.join(lines)


def main():
    import argparse
    argparse.ArgumentParser(description="Time the web lab's pages in Chromium, from an input to its redraw, "
                                        "on three models (prints, never asserts).").parse_args()
    data = shared_data('names.txt')
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    from helpers import CHROMIUM_ARGS
    from conftest import CHROMIUM
    if data is None or sync_playwright is None or not os.path.exists(CHROMIUM):
        print("lab_speed: needs ../shared/data/names.txt, Playwright (pip install -e '.[test]') and "
              f"{CHROMIUM} (apt-get install chromium): skipped")
        return 0
    from microgpt.programs import train
    from microgpt.lab.serve import make_server

    def timed(label, flags, steps, data, name, served=None):
        """Train a model of `flags` three steps on `data`, serve it, and time `steps` on its pages."""
        ckpt = os.path.join(tmp, name)
        train.main(['--data', data, '--out', ckpt, '--steps', '3', '--eval-every', '0', '--num-samples', '0', *flags])
        server = make_server(ckpt, port=0, runs_dir=os.path.join(tmp, 'runs'), data=served)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            print(report(label, interaction_times(server, browser, steps)))
        finally:
            server.shutdown()
            server.server_close()
    text = shared_data('tinyshakespeare.txt')
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for k, (label, flags) in enumerate(MODELS):
            timed(label, flags, steps(on_the_model=k > 0), data, f'model{k}.json', served=data)
        if text:
            timed(TEXT_MODEL[0], TEXT_MODEL[1], ON_TEXT, text, 'text.json')
        else:
            print("\nlab_speed: no tinyshakespeare.txt: the model of running text is skipped")
        browser.close()
    return 0


if __name__ == '__main__':
    sys.exit(main())
