"""
Screenshots of the web lab's pages for the README: `make screenshots` writes docs/img/lab-*.png,
each page at 1280 px wide (lab-NAME.png) and at a phone's 390 px (lab-NAME-390.png).

    python tools/screenshots.py                       # trains a checkpoint first (about 10 s)
    python tools/screenshots.py --ckpt out/model.json
    python tools/screenshots.py --ckpt out/shakespeare.safetensors --prefix lab-text   # README's text recipe

A model of running text (train.py --data-mode text) is shown on its own text: the pages start
with the first lines of its training data (64 positions for the Shakespeare recipe), Attention
and In phases on a query deep in the block, Sampling after "ROMEO:", and a short run of running
text on the Training page.

It starts `python -m microgpt.lab serve`'s server in this process on a free port, opens each
page in Chromium (Debian's /usr/bin/chromium, driven by Playwright; never a downloaded
browser), waits for the page to draw what the API returned, and saves a small PNG. The
Training page is shown after a short run it starts itself, in a temporary runs folder.
"""

import argparse
import os
import sys
import tempfile
import threading

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [REPO_DIR]

from microgpt.lab.serve import make_server  # noqa: E402

CHROMIUM = '/usr/bin/chromium'
CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
                 '--disable-background-networking', '--disable-component-update', '--disable-sync']
WIDTHS = ((1280, 760, ''), (390, 844, '-390'))  # CSS pixels (width, height, file suffix); each
                                               # PNG is cut at the height, so it stays small


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--ckpt', help="checkpoint to show (default: train one now with train.py's defaults)")
    p.add_argument('--out-dir', default=os.path.join(REPO_DIR, 'docs', 'img'), help="where the PNGs go")
    p.add_argument('--train-steps', type=int, default=200, help="steps of the run on the Training page")
    p.add_argument('--prefix', default='lab', help="the PNGs' names: PREFIX-PAGE.png (default lab)")
    args = p.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        ckpt = args.ckpt
        if ckpt is None:
            from microgpt.programs import train
            ckpt = os.path.join(tmp, 'model.json')
            train.main(['--out', ckpt, '--num-samples', '0'])
        server = make_server(ckpt, port=0, runs_dir=os.path.join(tmp, 'runs'))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        os.makedirs(args.out_dir, exist_ok=True)
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                for width, height, suffix in WIDTHS:
                    page = browser.new_page(viewport={'width': width, 'height': height})
                    shoot(page, server.url, args.out_dir, args.train_steps, suffix, args.prefix)
                    page.close()
                browser.close()
        finally:
            server.lab.runs.shutdown()
            server.shutdown()
            server.server_close()


# what each page is shown doing: on a names model, and on a model of running text (whose
# model-free pages, By hand, Scaling and Autograd, the names model's pictures already show)
NAMES = {'text': 'anna', 'cell': (1, 4, 1), 'query': '3', 'prompt': '', 'run': {}, 'model_free': True}
TEXT = {'text': None, 'cell': (1, 40, 39), 'query': '40', 'prompt': 'ROMEO:',  # text None: the page's own
        'run': {'data_mode': 'text', 'steps': 40, 'n_layer': 2, 'n_embd': 64, 'block_size': 64, 'batch_size': 8},
        'model_free': False}


def shoot(page, url, out_dir, train_steps, suffix='', prefix='lab'):
    def save(name):
        path = os.path.join(out_dir, f'{prefix}-{name}{suffix}.png')
        page.screenshot(path=path)
        print(f"wrote {path} ({os.path.getsize(path) // 1024} KiB)")

    def drawn(name):
        page.goto(url + name)
        page.wait_for_selector('body[data-drawn]', state='attached')
        page.wait_for_load_state('networkidle')

    def type_text():  # a names model's name; running text keeps the page's own example
        if how['text'] is not None:
            page.fill('#text', how['text'])
            page.press('#text', 'Control+Enter')
            page.wait_for_load_state('networkidle')

    drawn('overview')
    how = TEXT if page.get_attribute('body', 'data-mode') == 'text' else NAMES
    type_text()
    page.wait_for_selector('.position')
    save('overview')

    drawn('attention')
    head, query, key = how['cell']
    page.select_option('#head', str(head))
    page.wait_for_selector('table.heatmap tr.query')
    page.wait_for_load_state('networkidle')
    page.locator(f'td.filled[data-head="{head}"][data-query="{query}"][data-key="{key}"]').click()
    page.wait_for_selector('#detail-weight')
    page.wait_for_load_state('networkidle')
    save('attention')

    if how['model_free']:
        drawn('byhand')  # the Czech lesson's preset
        save('byhand')

    drawn('phases')  # an earlier query, so the mask shows; the weighted sum of the values
    page.select_option('#query', how['query'])
    page.wait_for_selector(f'#query option[value="{how["query"]}"]:checked', state='attached')
    page.wait_for_load_state('networkidle')
    page.click('button[data-phase=weighted]')
    page.wait_for_selector('#stage g.chip.future', state='attached')
    save('phases')

    if how['model_free']:
        drawn('scaling')  # d = 256 without scaling: the warning
        page.uncheck('#scale')
        page.eval_on_selector('#d', 'e => { e.value = "8"; e.dispatchEvent(new Event("input")); }')
        page.wait_for_selector('#vanishing:not([hidden])')
        save('scaling')

    drawn('embeddings')
    save('embeddings')

    drawn('loss')
    save('loss')

    if how['model_free']:
        page.goto(url + 'autograd')
        page.fill('#expression', 'relu(a * b + c) * a')
        page.click('button[type=submit]')
        page.wait_for_selector('#graph g.node[data-label="*"]')
        page.wait_for_timeout(300)
        save('autograd')

    drawn('sampling')
    if how['prompt']:
        page.fill('#prompt', how['prompt'])
        page.wait_for_function(f"() => document.getElementById('context').textContent.endsWith({how['prompt']!r})")
    page.wait_for_selector('#drawn:not(.stale) #names .draw', timeout=120_000)
    save('sampling')

    drawn('step')
    type_text()
    page.wait_for_selector('#result .panel')
    page.wait_for_load_state('networkidle')
    if page.locator('#scalar-coming').count():  # the scalar engine's step follows: drawn last
        page.wait_for_selector('#result[data-engine=scalar] .panel', timeout=120_000)
    save('step')

    page.goto(url + 'training')
    page.wait_for_selector('body[data-drawn]', state='attached')
    if not suffix:  # one run, started at the first width; the second shows it finished
        run = how['run']
        if run.get('data_mode'):
            page.select_option('#data_mode', run['data_mode'])
        for name, value in {'steps': train_steps, **run}.items():
            if name != 'data_mode':
                page.fill(f'#{name}', str(value))
        page.click('#start')
    page.wait_for_selector('#open-run', timeout=300_000)
    save('training')


if __name__ == '__main__':
    main()
