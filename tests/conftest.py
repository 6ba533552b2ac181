"""
Shared pytest fixtures (small data, checkpoints trained once per session by train.py, the lab's
server, Chromium) and the hooks that tie a test to the optional extra it needs.
"""

import gc
import importlib.util
import os

import pytest
from helpers import TINY_NAMES, train_text


# ---------------------------------------------------------------------------- the extras
# A test that needs an optional extra carries its marker (pyproject.toml declares them), and is
# skipped, with the command that brings the extra, where it is missing. MICROGPT_EXTRAS=none
# holds every extra back (.ci/run's first step: the suite a newcomer's `make test` runs, even on
# a machine with Chromium); MICROGPT_EXTRAS=all makes a missing one an error (.ci/run's second
# step, which runs the marked tests alone). A test that skips for want of an extra without its
# marker fails: CI would run it in neither step.
EXTRAS = {
    'torch': (('torch',), "PyTorch is not installed: pip install -e '.[torch]'"),
    'plot': (('matplotlib',), "matplotlib is not installed: pip install -e '.[plot]'"),
    'notebooks': (('jupytext', 'nbclient', 'ipykernel', 'matplotlib'),
                  "the notebooks extra is not installed: pip install -e '.[notebooks]'"),
    'browser': (('playwright',), "Playwright is not installed: pip install -e '.[test]'"),
}
CHROMIUM = '/usr/bin/chromium'
EXTRA_WORDS = ('torch', 'matplotlib', 'jupytext', 'nbclient', 'ipykernel', 'playwright', 'chromium', 'notebooks')


def missing(extra):
    """Why the extra's tests cannot run here, or None."""
    if os.environ.get('MICROGPT_EXTRAS') == 'none':
        return f"the {extra} extra is held back (MICROGPT_EXTRAS=none)"
    modules, why = EXTRAS[extra]
    if any(importlib.util.find_spec(m) is None for m in modules):
        return why
    if extra == 'browser' and not os.path.exists(CHROMIUM):
        return f"no browser at {CHROMIUM}: apt-get install chromium"
    return None


def pytest_collection_modifyitems(config, items):
    required = os.environ.get('MICROGPT_EXTRAS') == 'all'
    for item in items:
        for extra in EXTRAS:
            why = item.get_closest_marker(extra) and missing(extra)
            if why and required:
                raise pytest.UsageError(f"MICROGPT_EXTRAS=all, but {why}")
            if why:
                item.add_marker(pytest.mark.skip(reason=why))


def _fail_a_skip_for_an_extra(report, nodeid, marked):
    reason = str(report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr)
    if any(word in reason.lower() for word in EXTRA_WORDS) and (not marked or os.environ.get('MICROGPT_EXTRAS') == 'all'):
        report.outcome, report.longrepr = 'failed', (
            f"{nodeid} skipped for want of an extra ({reason}): "
            + ("MICROGPT_EXTRAS=all asks for every extra" if marked else "give it the extra's marker"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if report.skipped:
        _fail_a_skip_for_an_extra(report, item.nodeid, any(item.get_closest_marker(extra) for extra in EXTRAS))


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    report = (yield).get_result()
    if isinstance(collector, pytest.Module) and report.skipped:
        text = collector.path.read_text()
        _fail_a_skip_for_an_extra(report, collector.nodeid, any(f'pytest.mark.{extra}' in text for extra in EXTRAS))


# ---------------------------------------------------------------------------- measurements, printed
@pytest.fixture
def measured(record_property):
    """measured(text): a test's measurement (times, never asserted), printed at the session's end
    under its name, with its report (so from pytest-xdist workers too), saying so when another
    worker ran other tests meanwhile (times then come out slower than alone)."""
    beside = ("\n  (measured while another pytest worker ran other tests: `pytest` on this file alone, "
              "or bench/, measures alone)" if os.environ.get('PYTEST_XDIST_WORKER') else '')
    return lambda text: record_property('measured', text + beside)


def pytest_terminal_summary(terminalreporter):
    printed = [(report.nodeid, text) for report in terminalreporter.stats.get('passed', [])
               for key, text in getattr(report, 'user_properties', ()) if key == 'measured']
    if printed:
        terminalreporter.section('measured')
        for nodeid, text in printed:
            terminalreporter.write_line(f"{nodeid}:{text}")


@pytest.fixture(scope='session')
def browser():
    """One headless Chromium for every browser test of the session (only tests marked `browser`)."""
    from helpers import CHROMIUM_ARGS
    from playwright.sync_api import sync_playwright
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope='module')
def server(tiny_ckpt, names_file, tmp_path_factory):
    from helpers import live_server
    with live_server(tiny_ckpt, tmp_path_factory.mktemp('lab-runs'), names_file) as s:
        yield s


@pytest.fixture
def window(browser):
    """open(width, height=800) -> a fresh helpers.watched_page of that size, closed after the test."""
    from helpers import watched_page
    contexts = []

    def open_window(width, height=800):
        context = browser.new_context(viewport={'width': width, 'height': height})
        contexts.append(context)
        return watched_page(context)
    yield open_window
    for context in contexts:
        context.close()


@pytest.fixture(scope='session')
def names_file(tmp_path_factory):
    path = tmp_path_factory.mktemp('data') / 'names.txt'
    path.write_text('\n'.join(TINY_NAMES) + '\n', encoding='utf-8')
    return str(path)


@pytest.fixture(scope='session')
def default_ckpt(tmp_path_factory, names_file):
    """A checkpoint of train.py's default size, trained 3 steps on TINY_NAMES: for the pages'
    layout and speed, which depend on the model's size, not on its training."""
    from microgpt.programs import train
    out = tmp_path_factory.mktemp('default') / 'model.json'
    assert train.main(['--data', names_file, '--out', str(out), '--steps', '3', '--eval-every', '0',
                       '--num-samples', '0']) == 0
    return str(out)


@pytest.fixture(scope='module')
def model(tiny_ckpt):
    """tiny_ckpt's model, loaded once a module (the lab's tests)."""
    from microgpt.lab.loading import load
    return load(tiny_ckpt).model


@pytest.fixture(scope='session')
def tiny_ckpt(tmp_path_factory, names_file):
    """Path of a checkpoint trained for 60 steps by train.py on TINY_NAMES (n_embd 8, 2 heads)."""
    from microgpt.programs import train
    out = tmp_path_factory.mktemp('ckpt') / 'model.json'
    status = train.main(['--data', names_file, '--out', str(out), '--steps', '60', '--n-embd', '8',
                         '--n-head', '2', '--block-size', '12', '--val-size', '6',
                         '--eval-every', '0', '--num-samples', '0'])
    assert status == 0
    return str(out)


# Running text with every character of tiny shakespeare's 65 (a newline among them), a few lines
# of a play in its own layout: enough to train a model of running text on for a few steps.
PLAY = ("First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\n"
        "SECOND CITIZEN:\nWould you proceed especially against Caius Marcius?\n\n"
        "MENENIUS:\nWhy, masters, my good friends; mine honest neighbours, will you undo yourselves?\n"
        "Quick: jolly zebras vex 3 big dwarfs & $kings; OXEN, YAK, JAY, QUIZ, VOW; HUGE PLUMB FIGHT!\n\n"
        "ROMEO:\nWell-met, quoth the citizen's wife.\n\n")


@pytest.fixture(scope='session')
def play_file(tmp_path_factory):
    path = tmp_path_factory.mktemp('play') / 'play.txt'
    path.write_text(PLAY * 12, encoding='utf-8')
    return str(path)


@pytest.fixture(scope='session')
def text_ckpt(tmp_path_factory, play_file):
    """A model of running text (--data-mode text), block_size 16, trained 30 steps on PLAY:
    for checking that the lab reads it as train.py trained it."""
    return train_text(tmp_path_factory.mktemp('text') / 'play.json', play_file, 16, '--steps', '30',
                      '--n-embd', '16', '--n-head', '2', '--batch-size', '4', '--eval-every', '10')


@pytest.fixture(scope='session')
def wide_text_ckpt(tmp_path_factory, play_file):
    """A model of running text at the Shakespeare recipe's block (64 positions), its vocabulary
    (66 tokens) and its 4 heads, trained 3 steps: for the pages' layout, which depends on these
    sizes, not on the training; narrow (n_embd 16, one layer), so that the Step page's scalar
    engine takes a 63-position step in a fraction of a second."""
    return train_text(tmp_path_factory.mktemp('wide') / 'play.json', play_file, 64, '--steps', '3',
                      '--n-layer', '1', '--n-embd', '16', '--n-head', '4', '--eval-every', '0')


@pytest.fixture(scope='session')
def bpe_ckpt(tmp_path_factory, names_file):
    """A byte-pair model of TINY_NAMES (--tokenizer bpe --vocab-size 280: 23 merges), trained
    20 steps by train.py on the numpy engine."""
    from microgpt.programs import train
    out = tmp_path_factory.mktemp('bpe') / 'model.json'
    assert train.main(['--data', names_file, '--out', str(out), '--tokenizer', 'bpe', '--vocab-size', '280',
                       '--steps', '20', '--n-embd', '8', '--n-head', '2', '--block-size', '12', '--val-size', '6',
                       '--engine', 'numpy', '--eval-every', '10', '--num-samples', '0']) == 0
    return str(out)


def pytest_runtest_setup(item):
    """What is alive before a test (modules, torch, fixtures) is frozen out of the collector's
    sweeps, and its youngest generation holds 20,000 objects, not 700: a scalar-engine test's many
    Values made it sweep a worker's whole heap over and over."""
    gc.set_threshold(20_000)
    gc.collect()
    gc.freeze()
