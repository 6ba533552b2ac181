"""
A run goes down the layers and comes back with little back and forth: train.py's main, traced.

test_layout.py holds the imports to the layers' order (core < edge < arrays < programs < lab);
this test holds to it the calls of a tiny fresh run and its resumption, recorded under
sys.setprofile: few entries from programs/ into checkpoint.py and model.py, none from a layer
into one above it. Made-up calls that break either rule fail the same checks.
"""

import collections
import inspect
import os
import sys

from helpers import LAYERS, QUIET, REPO_DIR, TINY, layer_of, project_modules, run
from microgpt.programs import train

MAX_ENTRIES = 8  # from programs/ into checkpoint.py (besides each write's two), and into model.py
CHECKPOINT, MODEL = 'microgpt/edge/checkpoint.py', 'microgpt/model.py'
SCRIPTS = ('train.py', 'sample.py')  # the checkout's entry points, programs like microgpt/train.py
FIRST_ONLY = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


def layers_by_file():
    """{path relative to the repository: its layer}, for every file of the project."""
    found = {os.path.relpath(path, REPO_DIR): layer_of(module) for module, path in project_modules().items()}
    found.update({script: 'programs' for script in SCRIPTS})
    return found


def traced_calls(main, argv, capsys):
    """(exit code, [(caller's file, callee's file, callee's name)]) of main(argv), files relative
    to the repository, for the project's own calls only."""
    layers, calls, entered, known = layers_by_file(), [], {}, {}  # entered: the generators' frames, kept alive

    def project_file(code):  # relpath once a file (known), not once a call: the engine makes millions
        if code.co_filename not in known:
            path = os.path.relpath(code.co_filename, REPO_DIR)
            known[code.co_filename] = path if path in layers else None
        return known[code.co_filename]

    def profile(frame, event, arg):
        code = frame.f_code
        if event != 'call' or code.co_name.startswith('<'):
            return
        callee = project_file(code)
        if callee is None:
            return
        if code.co_flags & FIRST_ONLY:  # a generator's each resumption is a 'call' too
            if entered.get(id(frame)) is frame:
                return
            entered[id(frame)] = frame
        caller = frame.f_back
        while caller is not None and project_file(caller.f_code) is None:  # through the standard library
            caller = caller.f_back
        if caller is not None:
            calls.append((project_file(caller.f_code), callee, code.co_name))
    sys.setprofile(profile)
    try:
        code = run(main, argv, capsys)[0]
    finally:
        sys.setprofile(None)
    return code, calls


def crossings(calls, layers=None):
    """(entries from programs/ into each of checkpoint.py and model.py, files written, the calls
    from a layer into one above it)."""
    layers = layers or layers_by_file()
    entries = collections.Counter(callee for caller, callee, _ in calls
                                  if layers[caller] == 'programs' and callee in (CHECKPOINT, MODEL))
    writes = sum(1 for caller, callee, name in calls if layers[caller] == 'programs' and name == 'write_checkpoint')
    climbs = [(caller, callee, name) for caller, callee, name in calls
              if LAYERS.index(layers[callee]) > LAYERS.index(layers[caller])]
    return entries, writes, climbs


def check_crossings(calls, layers=None):
    entries, writes, climbs = crossings(calls, layers)
    assert entries[CHECKPOINT] - 2 * writes <= MAX_ENTRIES, \
        f"programs/ enter checkpoint.py {entries[CHECKPOINT]} times for {writes} files written"
    assert entries[MODEL] <= MAX_ENTRIES, f"programs/ enter model.py {entries[MODEL]} times"
    assert not climbs, f"calls back up the layers: {climbs}"


def test_a_fresh_and_a_resumed_run_cross_the_layers_little_and_never_climb(tmp_path, names_file, capsys):
    out = tmp_path / 'model.json'
    fresh = ['--data', names_file, '--out', str(out), '--val-size', '6', '--steps', '3', *TINY, *QUIET]
    resumed = ['--out', str(out), '--resume', '--steps', '5']
    for argv in (fresh, resumed):
        code, calls = traced_calls(train.main, argv, capsys)
        assert code == 0
        entries, writes, _ = crossings(calls)
        assert writes == 2 and entries[CHECKPOINT] and entries[MODEL]  # the trace sees the run: best and --out
        check_crossings(calls)


def test_the_checks_fail_on_one_entry_too_many_and_on_a_climb():
    """Negative controls: made-up calls, counted as the run's are."""
    layers = {'p.py': 'programs', CHECKPOINT: 'edge', MODEL: 'core', 'lab.py': 'lab'}
    calls = [('p.py', CHECKPOINT, 'read_checkpoint')] * (MAX_ENTRIES + 1)
    for bad in (calls, [('p.py', MODEL, 'weights')] * (MAX_ENTRIES + 1),
                [(CHECKPOINT, 'p.py', 'weights')], [('p.py', 'lab.py', 'serve')]):
        try:
            check_crossings(bad, layers)
        except AssertionError:
            continue
        raise AssertionError(f"{bad[0]} passed the checks")
    # the two of each file written are set aside, and no more
    written = [('p.py', CHECKPOINT, 'of'), ('p.py', CHECKPOINT, 'write_checkpoint')]
    check_crossings(calls[:MAX_ENTRIES] + written, layers)
    assert crossings(calls + written, layers)[:2] == ({CHECKPOINT: MAX_ENTRIES + 3}, 1)
