"""
The web lab's interaction times in Chromium, on a model of train.py's default size and on the
names recipe's (n_layer 4, n_embd 64, n_head 4: 200,000 weights, the Step page's slowest case).

    python bench/lab_speed.py

Each model is trained for a few steps on makemore's names (its speed is what matters, not its
training), served by `lab serve`'s own server in this process, and driven by Playwright in
Debian's Chromium: for each input (tests/helpers.py lists them) the time from the input to the page's redraw, the page's
pause for typing included. Prints, never asserts. The default model's share also runs in the
test suite (tests/test_lab_pages_browser.py); the recipe's model takes tens of seconds. Last,
where ../shared/data/tinyshakespeare.txt is, a model of the Shakespeare recipe's shape: a
prompt typed on the Sampling page, until its distribution and then its continuations are drawn.
Data: ../shared/data/names.txt beside the checkout; skipped (exit 0) when it, Playwright or
Chromium is absent.
"""

import os
import sys
import tempfile
import threading

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(BENCH_DIR)
sys.path[:0] = [REPO_DIR, os.path.join(REPO_DIR, 'tests'), BENCH_DIR]

MODELS = [("train.py's default model", []),
          ("the names recipe's model (n_layer 4, n_embd 64)",
           ['--engine', 'numpy', '--n-layer', '4', '--n-embd', '64', '--n-head', '4'])]
# README's running-text recipe's shape (4 x 128, block 64, 66 tokens: 811,520 weights) on tiny
# shakespeare, for the pages that read running text; skipped where the text is absent
TEXT_MODEL = ("the Shakespeare recipe's model of running text (n_layer 4, n_embd 128, block 64)",
              ['--engine', 'numpy', '--data-mode', 'text', '--n-layer', '4', '--n-embd', '128', '--n-head', '4',
               '--block-size', '64', '--batch-size', '12', '--val-size', '2000'])


def main():
    import argparse
    argparse.ArgumentParser(description="Time the web lab's pages in Chromium, from an input to its redraw, "
                                        "on three models (prints, never asserts).").parse_args()
    from common import shared_data
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
    import helpers
    from microgpt.programs import train
    from microgpt.lab.serve import make_server
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for k, (label, flags) in enumerate(MODELS):
            ckpt = os.path.join(tmp, f'model{k}.json')
            train.main(['--data', data, '--out', ckpt, '--steps', '3', '--eval-every', '0',
                        '--num-samples', '0', *flags])
            server = make_server(ckpt, port=0, runs_dir=os.path.join(tmp, 'runs'), data=data)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            try:
                steps = helpers.steps(on_the_model=k > 0)
                print(helpers.report(label, helpers.interaction_times(server, browser, steps)))
            finally:
                server.shutdown()
                server.server_close()
        text = shared_data('tinyshakespeare.txt')
        if text:
            label, flags = TEXT_MODEL
            ckpt = os.path.join(tmp, 'text.json')
            train.main(['--data', text, '--out', ckpt, '--steps', '3', '--eval-every', '0', '--num-samples', '0',
                        *flags])
            server = make_server(ckpt, port=0, runs_dir=os.path.join(tmp, 'runs'))
            threading.Thread(target=server.serve_forever, daemon=True).start()
            try:
                print(helpers.report(label, helpers.interaction_times(server, browser, helpers.ON_TEXT)))
            finally:
                server.shutdown()
                server.server_close()
        else:
            print(f"\nlab_speed: no {text}: the model of running text is skipped")
        browser.close()
    return 0


if __name__ == '__main__':
    sys.exit(main())
