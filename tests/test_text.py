"""
Running text (microgpt/edge/text.py, train.py --data-mode text): the windows, the split, the exact
validation loss, the checkpoint's mode, resume and --init, and the bad inputs.

The oracle for the validation loss is a direct computation: every validation character's
-log p, each from the loop forward of the numpy port (inference.NumpyGPT.forward, not the
batched forward that train.py uses) over exactly the context its window gives it.

Run: .venv/bin/python -m pytest -q tests/test_text.py
"""

import functools
import math
import os

import numpy as np
import pytest

import helpers
from helpers import log_of
from microgpt import inference
from microgpt.programs import train
from microgpt.edge import text
from microgpt.edge.checkpoint import read_checkpoint
from microgpt.model import GPT, GPTConfig
from microgpt.tokenizer import CharTokenizer
from microgpt.training import doc_losses

PROSE = ("The storm arrived at dusk, and the old man sat by the window watching the sea.\n"
         "He had seen storms before; this one, he thought, would not be the last.\n") * 6
TINY = ['--n-embd', '8', '--n-head', '2', '--block-size', '16', '--num-samples', '0']
LOSS_TOL = 1e-9  # float64 sums of the same numbers in another order


@pytest.fixture
def prose_file(tmp_path):
    path = tmp_path / 'prose.txt'
    path.write_text(PROSE, encoding='utf-8')
    return str(path)


run = functools.partial(helpers.run, train.main)  # run(argv, capsys): train.py's (status, stdout, stderr)


# ---------------------------------------------------------------------------- windows and split
def test_training_windows_come_from_the_training_part_and_predict_the_next_character():
    train_text, val_text = text.split_text(PROSE, 0.25, block_size=8)
    assert train_text + val_text == PROSE and len(val_text) == int(len(PROSE) * 0.25)
    tok = CharTokenizer.from_docs([PROSE])
    ids = tok.encode(PROSE)
    train_ids = ids[:len(train_text)]
    seen_starts = set()
    for step in range(1, 200):
        starts = text.window_starts(len(train_ids), 8, 4, seed=3, step=step)
        for s, w in zip(starts, text.train_windows(train_ids, 8, 4, seed=3, step=step)):
            assert 0 <= s and s + 9 <= len(train_ids)  # the whole window inside the training part
            assert w == ids[s:s + 9] and len(w) == 9   # block_size inputs, each followed by its target
            seen_starts.add(s)
    assert max(seen_starts) > 0.9 * (len(train_ids) - 9)  # the draws cover the training part
    assert text.train_windows(train_ids, 8, 4, 3, 7) == text.train_windows(train_ids, 8, 4, 3, 7)
    assert text.train_windows(train_ids, 8, 4, 3, 7) != text.train_windows(train_ids, 8, 4, 3, 8)


def test_validation_windows_predict_every_validation_character_once():
    ids = list(range(100))
    for n_val, block in ((30, 8), (32, 8), (9, 8), (57, 5)):
        windows = text.validation_windows(ids, n_val, block)
        targets = [t for w in windows for t in w[1:]]
        assert targets == ids[-n_val:]                 # each once, in order
        assert all(2 <= len(w) <= block + 1 for w in windows)
        assert windows[0][0] == ids[-n_val - 1]        # the context of the first is the last training id


def test_the_split_takes_a_fraction_or_a_count():
    assert len(text.split_text(PROSE, None, 16)[1]) == int(0.1 * len(PROSE))
    assert len(text.split_text(PROSE, 0.2, 16)[1]) == int(0.2 * len(PROSE))
    assert len(text.split_text(PROSE, 100, 16)[1]) == 100
    assert text.split_text(PROSE, 0, 16)[1] == ''


def test_the_validation_loss_equals_a_direct_computation_over_the_validation_part():
    tok = CharTokenizer.from_docs([PROSE])
    config = GPTConfig(tok.vocab_size, n_layer=2, n_embd=8, n_head=2, block_size=8)
    model = GPT(config, seed=5)
    port = inference.NumpyGPT(config, model.weights(), tokenizer=tok)
    ids = tok.encode(PROSE)
    n_val = 45
    windows = text.validation_windows(ids, n_val, config.block_size)
    got = inference.evaluate_windows(port, windows, batch_size=2)
    assert inference.evaluate_windows(port, windows, batch_size=2, workers=2) == got  # to the last bit
    # direct: character p of the validation part, from the context its window starts at
    cut = len(ids) - n_val
    losses = []
    for p in range(cut, len(ids)):
        start = cut - 1 + ((p - cut) // config.block_size) * config.block_size
        logits, _ = port.forward(ids[start:p])            # the loop forward, position by position
        z = logits[-1]
        losses.append(math.log(np.exp(z - z.max()).sum()) + z.max() - z[ids[p]])
    assert len(losses) == n_val
    assert abs(got - sum(losses) / n_val) < LOSS_TOL
    # and the scalar engine, window by window, agrees
    scalar = [l.data for w in windows for l in doc_losses(model, w)]
    assert abs(got - sum(scalar) / len(scalar)) < LOSS_TOL


# ---------------------------------------------------------------------------- train.py
def test_a_text_run_is_deterministic_records_its_mode_resumes_exactly_and_inits_text(prose_file, tmp_path, capsys,
                                                                             monkeypatch):
    flags = ['--data-mode', 'text', '--data', prose_file, '--steps', '8', '--batch-size', '3',
             '--val-size', '0.2', '--eval-every', '4', *TINY]
    a, b = tmp_path / 'a.json', tmp_path / 'b.json'
    code, out, _ = run(flags + ['--out', str(a)], capsys)
    assert code == 0 and 'running text' in out and 'data_mode=text' in out
    code, _, _ = run(flags + ['--out', str(b)], capsys)
    assert code == 0 and log_of(a) == log_of(b)  # the same windows, the same exact validation loss
    vals = [e for e in log_of(a) if 'val_loss' in e]
    assert [e['step'] for e in vals] == [4, 8]
    ckpt = read_checkpoint(str(a))
    assert ckpt.data_mode == 'text' and ckpt.train_state.run.data_mode == 'text'
    # Ctrl-C during step 5, then resumed: the same log as the run that went straight through
    c = tmp_path / 'c.json'
    helpers.interrupt_after(monkeypatch, 5)
    assert run(flags + ['--out', str(c)], capsys)[0] == 130
    monkeypatch.undo()
    assert read_checkpoint(str(c)).train_state.step == 5
    code, _, err = run(['--out', str(c), '--resume'], capsys)
    assert code == 0, err
    assert log_of(c) == log_of(a)
    # --init from it, without --data-mode: a model of running text goes on reading running text
    code, out, _ = run(['--data', prose_file, '--steps', '3', '--eval-every', '0', '--num-samples', '0',
                        '--init', str(a), '--out', str(tmp_path / 'd.json')], capsys)
    assert code == 0 and 'data_mode=text' in out and read_checkpoint(str(tmp_path / 'd.json')).data_mode == 'text'


def test_the_engines_train_running_text_alike(prose_file, tmp_path, capsys):
    """The same windows through the scalar and the numpy engine: the same losses."""
    logs = []
    for engine in ('scalar', 'numpy'):
        out = tmp_path / f'{engine}.json'
        assert run(['--data-mode', 'text', '--data', prose_file, '--steps', '4', '--batch-size', '2',
                    '--engine', engine, '--eval-every', '2', *TINY, '--out', str(out)], capsys)[0] == 0
        logs.append(log_of(out))
    for x, y in zip(*logs):
        assert x.keys() == y.keys()
        for key in ('loss', 'val_loss'):
            if key in x:
                assert abs(x[key] - y[key]) < 1e-10


def test_long_documents_are_reported_with_the_fix(tmp_path, capsys):
    path = tmp_path / 'prose.txt'
    lines = PROSE.splitlines()
    path.write_text('\n'.join(lines + ['ab', 'cd'] * 3), encoding='utf-8')
    code, out, _ = run(['--data', str(path), '--steps', '1', '--eval-every', '0', *TINY,
                        '--out', str(tmp_path / 'm.json')], capsys)
    assert code == 0
    note = next(line for line in out.splitlines() if line.startswith('note:'))
    assert f"{len(lines)} of {len(lines) + 6} documents" in note
    assert f"longest {max(map(len, lines))} characters" in note
    assert 'first 16 characters' in note and '--block-size' in note and '--data-mode text' in note
    code, out, _ = run(['--data', str(path), '--steps', '1', '--eval-every', '0', *TINY[:-2],
                        '--block-size', '128', '--out', str(tmp_path / 'n.json')], capsys)
    assert code == 0 and 'note:' not in out  # nothing is cut, nothing is said


# ---------------------------------------------------------------------------- bad input
def one_line_error(argv, capsys, fragment):
    code, _, err = run(argv, capsys)
    assert code == 2
    helpers.assert_one_line_error(code, err, fragment)


def test_bad_running_text_input_is_one_line_and_overwrites_nothing(prose_file, tmp_path, capsys):
    good = tmp_path / 'good.json'
    assert run(['--data-mode', 'text', '--data', prose_file, '--steps', '2', '--eval-every', '0',
                *TINY, '--out', str(good)], capsys)[0] == 0
    before = good.read_bytes()
    short = tmp_path / 'short.txt'
    short.write_text('To be, or not to be', encoding='utf-8')
    binary = tmp_path / 'image.png'
    binary.write_bytes('UTF-16 text'.encode('utf-16-le'))  # valid UTF-8, but every other byte a NUL
    names = tmp_path / 'names.json'
    names_data = tmp_path / 'names.txt'
    names_data.write_text('emma\nolivia\nava\nmia\nliam\nnoah\n' * 3, encoding='utf-8')
    assert run(['--data', str(names_data), '--steps', '2', '--eval-every', '0', *TINY,
                '--out', str(names)], capsys)[0] == 0
    names_before = names.read_bytes()
    text_flags = ['--data-mode', 'text', '--steps', '3', *TINY, '--force', '--out', str(good)]  # --force: only the bad input may stop it
    one_line_error(['--data', str(short), *text_flags], capsys, 'fewer than two windows')
    one_line_error(['--data', prose_file, '--val-size', '10', *text_flags], capsys,
                   'fewer than one window of block_size + 1 = 17: give a larger --val-size')
    one_line_error(['--data', str(binary), *text_flags], capsys, 'looks like a binary file')
    one_line_error(['--data-mode', 'text', '--out', str(names), '--resume', '--steps', '5'], capsys,
                   "--data-mode text differs from the run being resumed (lines): drop the flag")
    one_line_error([*text_flags[:-3], '--out', str(tmp_path / 'x.json')], capsys, 'needs a file')
    one_line_error(['--data', prose_file, '--val-size', '1.5', *text_flags], capsys, 'not a fraction')
    one_line_error(['--data', prose_file, '--dtype', 'float32', *text_flags], capsys,
                   '--dtype float32 is for the numpy')
    assert good.read_bytes() == before and names.read_bytes() == names_before
    assert not os.path.exists(tmp_path / 'x.json')


def test_the_lab_reads_a_running_text_model(prose_file, tmp_path, capsys):
    """The lab's commands take a text checkpoint as a names one; newline and space are visible."""
    from microgpt.lab.__main__ import main as lab_main
    out = tmp_path / 'text.json'
    assert run(['--data-mode', 'text', '--data', prose_file, '--steps', '2', '--eval-every', '0', *TINY,
                '--out', str(out)], capsys)[0] == 0
    for argv in (['overview', '--ckpt', str(out), 'He had\nseen'], ['attention', '--ckpt', str(out), 'the sea'],
                 ['sampling', '--ckpt', str(out)], ['embeddings', '--ckpt', str(out)]):
        assert lab_main(argv) in (0, None), argv
        shown = capsys.readouterr().out
        assert '\u2423' in shown or argv[0] == 'sampling', argv  # the space, made visible
    lab_main(['overview', '--ckpt', str(out), 'He had\nseen'])
    assert '\u23ce' in capsys.readouterr().out  # the newline, made visible

