"""
The lab's model commands (attention, overview, loss) on conftest's small checkpoint, against
the port's captured arrays and the scalar engine's loss; every mistake is one line, exit 2.
"""

import json
import os
import re
import sys

import numpy as np
import pytest

from helpers import assert_one_line, run_lab
from microgpt.edge.checkpoint import load_checkpoint as load_scalar
from microgpt.lab import attention, loss, overview
from microgpt.lab.__main__ import main
from microgpt.programs.runlog import log_path_for as log_of
from microgpt.training import doc_loss, doc_tokens

EXACT_TOL = 1e-12    # the same float64 arithmetic in another order
ENGINE_TOL = 1e-9    # the scalar engine against the numpy port
TEXT = 'emma'        # every character is in the tiny vocabulary


# ---------------------------------------------------------------------------- attention
def test_attention_rows_sum_to_one_and_match_the_model(model):
    ids = [model.tokenizer.bos] + model.tokenizer.encode(TEXT)
    T = len(ids)
    for layer in range(model.config.n_layer):
        for head in range(model.config.n_head):
            for query in range(T):
                v = attention.head_view(model, ids, layer, head, query)
                assert abs(v['weights'].sum() - 1) < EXACT_TOL
                assert (v['weights'] >= 0).all()
                assert np.abs(v['weights'] - v['model_weights'][head, :query + 1]).max() < EXACT_TOL
                # the terms of the dot product add up to the score, and the score is scaled
                assert np.abs(v['products'].sum(axis=1) - v['raw']).max() < EXACT_TOL
                assert np.abs(v['scores'] - v['raw'] / model.config.head_dim ** 0.5).max() < EXACT_TOL
                assert np.abs(v['weighted_values'].sum(axis=0) - v['out']).max() < EXACT_TOL


def test_every_heads_matrix_is_causal(model):
    ids = [model.tokenizer.bos] + model.tokenizer.encode(TEXT)
    _, caps = model.forward(ids, capture=['attention_softmax', 'head_output'])
    v = attention.head_view(model, ids, 0, 0, len(ids) - 1)
    W = v['all_heads']                                       # (n_head, T, T)
    future = np.triu(np.ones(W.shape[1:], dtype=bool), k=1)  # (T, T)
    assert np.isnan(W[:, future]).all()                      # masked: no weight, not even 0
    assert np.abs(np.nan_to_num(W) - np.nan_to_num(caps['attention_softmax'][0])).max() < EXACT_TOL
    assert np.abs(v['out'] - caps['head_output'][0, 0, -1]).max() < EXACT_TOL


def test_what_if_knobs(model):
    ids = [model.tokenizer.bos] + model.tokenizer.encode(TEXT)
    plain = attention.head_view(model, ids, 0, 1, 3)
    unscaled = attention.head_view(model, ids, 0, 1, 3, scale=False)
    hot = attention.head_view(model, ids, 0, 1, 3, temperature=2.0)
    assert np.abs(unscaled['scores'] - plain['raw']).max() < EXACT_TOL
    for v in (unscaled, hot):
        assert abs(v['weights'].sum() - 1) < EXACT_TOL
        assert np.abs(v['weights'] @ v['values'] - v['out']).max() < EXACT_TOL
    assert np.abs(hot['scores'] - plain['scores'] / 2).max() < EXACT_TOL


def test_attention_command(tiny_ckpt, capsys):
    assert main(['attention', TEXT, '--ckpt', tiny_ckpt, '--head', '1', '--query', '2']) == 0
    out = capsys.readouterr().out
    # a long checkpoint path wraps the first line to fit 100 columns: compare its words
    assert ' '.join(out.split()).startswith(f'checkpoint {tiny_ckpt}: n_layer=1 n_embd=8 n_head=2 head_dim=4')
    assert 'query position 2' in out and 'keys 3..4 are in the future' in out
    assert out.count('masked: -inf') == 2                     # keys 3 and 4
    assert 'sum of the weights: 1.000000000000' in out
    assert "check: the model's own captured weights agree" in out
    for step in ('1) q.k', '2) scores', '3) the output', '4) every head', '5) this row'):
        assert step in out
    assert 'without scaling' in out and 'with scaling' in out
    # the default query is the last; with the knobs changed there is nothing to check against
    assert main(['attention', TEXT, '--ckpt', tiny_ckpt, '--no-scale', '--temperature', '0.5']) == 0
    out = capsys.readouterr().out
    assert f'query position {len(TEXT)}' in out and 'none lies in the future' in out
    assert 'NOT divided' in out and "check:" not in out


def test_query_0_sees_one_key_and_prints_no_negative_zero(tiny_ckpt, capsys):
    # BOS sees only itself: weight 1, entropy exactly 0 bits, which once printed as -0.000
    assert main(['attention', TEXT, '--ckpt', tiny_ckpt, '--query', '0']) == 0
    out = capsys.readouterr().out
    assert 'key 0 is visible, keys 1..4 are in the future' in out
    assert '(temperature 1; 1 visible key)' in out
    assert re.search(r'\n  0  <BOS> +\S+ +\S+ +visible +1\.0000 ', out)  # its weight must be 1
    rows = [line.split() for line in out.splitlines() if line.lstrip().startswith(('without', 'with '))]
    assert [r[-4] for r in rows] == ['0.000', '0.000']  # the entropy column, both rows
    assert [r[-1] for r in rows] == ['0.000e+00', '0.000e+00']  # one key: no gradient at all
    assert 'exactly 0 for one key' in out  # and no -0.000: test_no_negative_zero_in_any_attention_printout


def test_no_negative_zero_in_any_attention_printout(model):
    # every query and head, with and without the what-if knobs: tiny products such as
    # w_j * v_j = -1e-5 used to print as -0.000
    for query in range(len(TEXT) + 1):
        for head in range(2):
            for knobs in ({}, {'scale': False, 'temperature': 0.1}):
                out = attention.render(attention.compute(model, TEXT, head=head, query=query, **knobs))
                assert not re.search(r'-0\.0+(?![0-9])', out), (query, head, knobs)


# ---------------------------------------------------------------------------- overview
def test_overview_loss_is_the_training_loss(tiny_ckpt, model):
    d = overview.compute(model, TEXT)
    text, rows, mean = overview.render(d), d['positions'], d['mean_loss']
    scalar = load_scalar(tiny_ckpt)
    assert abs(mean - doc_loss(scalar, doc_tokens(scalar.tokenizer, TEXT)).data) < ENGINE_TOL
    assert [r['target'] for r in rows] == list(TEXT) + ['<BOS>']
    for r in rows:
        assert r['hit'] == (r['rank'] == 1)
        probs = [p for _, p in r['top']]
        assert probs == sorted(probs, reverse=True) and sum(probs) <= 1 + EXACT_TOL
    assert 'mean loss over 5 positions' in text


def test_overview_command(tiny_ckpt, capsys):
    assert main(['overview', TEXT, '--ckpt', tiny_ckpt, '--top', '3']) == 0
    out = capsys.readouterr().out
    assert out.count('<- true') == len(TEXT) + 1  # one true character per position
    assert 'mean loss over' in out and f'sampled after {TEXT!r}' in out
    assert f'{TEXT}|' in out
    assert main(['overview', '', '--ckpt', tiny_ckpt]) == 0  # empty text: predicts the first character
    assert 'mean loss over 1 position:' in capsys.readouterr().out


def test_overview_bars_are_at_temperature_1_whatever_temperature_is(tiny_ckpt, model, capsys):
    # the bars are the model's probabilities, softmax(logits); --temperature only changes
    # the sampled continuation
    ids = [model.tokenizer.bos] + model.tokenizer.encode(TEXT)
    logits, _ = model.forward(ids)                             # (T, vocab_size)
    z = logits - logits.max(axis=-1, keepdims=True)            # (T, vocab_size)
    probs = np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)  # (T, vocab_size): temperature 1
    bars = {}
    for temperature in (0.5, 2.0):
        assert main(['overview', TEXT, '--ckpt', tiny_ckpt, '--temperature', str(temperature)]) == 0
        out = capsys.readouterr().out
        bars[temperature] = [line for line in out.splitlines() if line.startswith('      ')]
        assert 'at temperature 1 whatever --temperature is' in out
    assert bars[0.5] == bars[2.0]
    rows = overview.compute(model, TEXT, temperature=2.0)['positions']
    targets = ids[1:] + [model.tokenizer.bos]
    for i, r in enumerate(rows):
        assert abs(r['p'] - probs[i, targets[i]]) < EXACT_TOL
        assert abs(r['top'][0][1] - probs[i].max()) < EXACT_TOL
    # negative control: at temperature 2 the top probability would be visibly lower
    hot = np.exp(z / 2) / np.exp(z / 2).sum(axis=-1, keepdims=True)  # (T, vocab_size)
    assert np.abs(hot.max(axis=-1) - probs.max(axis=-1)).max() > 0.01


# ---------------------------------------------------------------------------- loss
def test_loss_reads_the_training_log(tiny_ckpt, capsys):
    train, val = loss.read_log(log_of(tiny_ckpt))
    assert [s for s, _, _ in train] == list(range(1, 61))
    assert len(val) == 1 and val[0][0] == 60  # --eval-every 0: one evaluation, at the end
    assert main(['loss', log_of(tiny_ckpt), '--width', '30', '--height', '6']) == 0
    out = capsys.readouterr().out
    assert '60 training steps' in out and 'last validation loss' in out
    # train.py logs {step, val_loss, train_loss}: the training loss measured as the validation loss is
    records = [json.loads(line) for line in open(log_of(tiny_ckpt)) if 'val_loss' in line]
    assert val == [(r['step'], r['val_loss'], r['train_loss']) for r in records]


def test_several_logs_on_one_picture(tiny_ckpt, text_ckpt, tmp_path, capsys):
    old = tmp_path / 'old.log.jsonl'  # a log of before the estimate: validation alone
    old.write_text('{"step": 1, "loss": 3.0, "lr": 0.01}\n{"step": 2, "loss": 2.5, "lr": 0.01}\n'
                   '{"step": 2, "val_loss": 2.9}\n')
    d = loss.compute([log_of(tiny_ckpt), log_of(text_ckpt), str(old)], width=40, height=8)
    assert [r['path'] for r in d['runs']] == [log_of(tiny_ckpt), log_of(text_ckpt), str(old)]
    assert d['runs'][2]['val'] == [(2, 2.9, None)] and len(d['runs'][1]['val']) == 3  # every 10 of 30 steps
    assert main(['loss', log_of(tiny_ckpt), log_of(text_ckpt), '--width', '40', '--height', '8']) == 0
    out = capsys.readouterr().out
    for path, (train, val, estimate) in zip((log_of(tiny_ckpt), log_of(text_ckpt)), loss.MARKS):
        assert f"{path}: {train} training loss" in out and f"{val} validation loss" in out
        assert f"{estimate} training loss measured alike" in out
    status, _, err = run_lab(['loss', *[str(old)] * (len(loss.MARKS) + 1)], capsys)
    assert status == 2 and f'at most {len(loss.MARKS)} on one picture' in err


def test_running_mean_against_numpy():
    """Each smoothed loss is the mean of the losses so far weighted by beta**age, written out
    in full: the recursion's bias correction makes it exactly that weighted mean."""
    losses = np.random.default_rng(0).uniform(1, 4, 37)
    for window in (1, 5, 40):
        beta = (window - 1) / (window + 1)
        want = [np.average(losses[:t], weights=beta ** np.arange(t - 1, -1, -1.0)) for t in range(1, 38)]
        assert np.abs(np.array(loss.running_mean(list(losses), window)) - want).max() < EXACT_TOL
    assert loss.running_mean(list(losses), 1) == list(losses)  # window 1: no smoothing
    assert loss.running_mean(list(losses), 5)[0] == losses[0]  # the first step is its own loss


KINK_TOL = 0.05  # of a ramp's slope: the change of the smoothed slope from one step to the next


def slope_changes(curve, slope):
    """The largest change of a curve's slope between two steps, in units of `slope`."""
    return np.abs(np.diff(np.asarray(curve), 2)).max() / slope


def test_the_running_mean_bends_nowhere_on_a_straight_loss():
    """A mean over a window that grows to full size, then slides (the negative control) bends at
    step `window`, which read as an event in every run."""
    steps, window, slope = 1500, loss.smoothing_window(1500), 0.001
    ramp = 3.0 - slope * np.arange(1, steps + 1)
    assert slope_changes(loss.running_mean(list(ramp), window), slope) < KINK_TOL
    grown = [ramp[max(0, t - window):t].mean() for t in range(1, steps + 1)]
    assert slope_changes(grown, slope) > 0.4
    assert np.argmax(np.abs(np.diff(grown, 2))) + 2 in (window, window + 1)  # the kink, where it was


def test_a_partial_last_line_is_skipped(tmp_path):
    path = tmp_path / 'run.log.jsonl'
    path.write_text('{"step": 1, "loss": 3.0, "lr": 0.01}\n{"step": 2, "loss": 2.5, "lr": 0.0')  # cut mid-write
    train, val = loss.read_log(str(path))
    assert train == [(1, 3.0, 0.01)] and val == []


# ---------------------------------------------------------------------------- errors
BAD_LOGS = {
    'not JSON': ('{"step": 1, "loss": 3.0}\nnonsense\n', 'line 2 is not valid JSON'),
    'no step': ('{"loss": 3.0}\n', "with an integer 'step'"),
    'nan': ('{"step": 1, "loss": NaN}\n', 'loss is nan, not a finite number'),
    'no loss': ('{"step": 1, "acc": 0.5}\n', "neither 'loss' nor 'val_loss'"),
    'empty': ('', 'no training steps'),
    'checkpoint': ('{"format": "microgpt", "state_dict": {}}\n', 'is a checkpoint, not a training log: give the .log.jsonl file beside it'),
}


@pytest.mark.parametrize('name', BAD_LOGS)
def test_bad_log_is_one_line_error(name, tmp_path, capsys):
    content, message = BAD_LOGS[name]
    path = tmp_path / 'bad.log.jsonl'
    path.write_text(content)
    status, _, err = run_lab(['loss', str(path)], capsys)
    assert_one_line(status, err, message)


def test_bad_input_is_one_line_error(tiny_ckpt, tmp_path, capsys, monkeypatch):
    long_text = 'a' * 12  # the tiny block holds 12 positions, one of them BOS
    cases = [
        (['attention', TEXT, '--ckpt', str(tmp_path / 'none.json')], 'train one first with `python train.py'),
        (['overview', TEXT], 'no checkpoint at out/model.json'),  # absent in tmp_path
        (['attention', 'EMMA', '--ckpt', tiny_ckpt], "character 'E' is not in the vocabulary"),
        (['overview', 'em ma', '--ckpt', tiny_ckpt], "character ' ' is not in the vocabulary"),
        (['attention', long_text, '--ckpt', tiny_ckpt], 'at most 11'),
        (['overview', long_text, '--ckpt', tiny_ckpt], 'at most 11'),
        (['attention', TEXT, '--ckpt', tiny_ckpt, '--layer', '1'], '--layer 1 is out of range'),
        (['attention', TEXT, '--ckpt', tiny_ckpt, '--head', '2'], '--head 2 is out of range'),
        (['attention', TEXT, '--ckpt', tiny_ckpt, '--query', '5'], '--query 5 is out of range'),
        (['attention', TEXT, '--ckpt', tiny_ckpt, '--query', '-1'], '-1 is out of range: give an integer from 0'),
        (['attention', TEXT, '--ckpt', tiny_ckpt, '--temperature', '0'], '0 is out of range: give a number greater than 0 and at most 1000'),
        (['autograd', 'a.__class__', 'a=1'], 'attribute access is not allowed'),
        (['autograd', 'a * b', 'a=1'], 'no value for b'),
        (['loss', str(tmp_path / 'none.log.jsonl')], 'does not exist: train.py writes one beside the checkpoint'),
        (['loss', log_of(tiny_ckpt), '--width', '5'], '5 is out of range: give an integer from 20 to 1,000'),
        (['autograd', 'a', 'a=1', '--dot', str(tmp_path / 'a-file' / 'x.dot')], '--dot: could not write'),
        (['scaling', '--samples', '0'], '0 is out of range: give an integer from 2 to 1,000,000'),
        ([], 'required'),
    ]
    (tmp_path / 'a-file').write_text('a file, where the --dot path wants a folder\n')
    monkeypatch.chdir(tmp_path)  # so that the default checkpoint path does not exist
    for argv, message in cases:
        status, _, err = run_lab(argv, capsys)
        assert_one_line(status, err, message)


def test_png_without_matplotlib_says_how_to_install(tiny_ckpt, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, 'matplotlib', None)  # `import matplotlib` now fails
    for argv in (['attention', TEXT, '--ckpt', tiny_ckpt], ['overview', TEXT, '--ckpt', tiny_ckpt],
                 ['loss', log_of(tiny_ckpt)]):
        status, out, err = run_lab(argv + ['--png', str(tmp_path / 'x.png')], capsys)
        assert_one_line(status, err, 'needs matplotlib')
        assert "pip install -e '.[plot]'" in err
        assert out == ''  # refused before any work is printed
    assert not (tmp_path / 'x.png').exists()


# ---------------------------------------------------------------------------- pictures
PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'


@pytest.mark.plot
def test_png_pictures(tiny_ckpt, tmp_path, capsys):
    for name, argv in (('attention', ['attention', TEXT, '--ckpt', tiny_ckpt, '--query', '2']),
                       ('overview', ['overview', TEXT, '--ckpt', tiny_ckpt]),
                       ('loss', ['loss', log_of(tiny_ckpt)]), ('step', ['step', TEXT, '--ckpt', tiny_ckpt]),
                       ('embeddings', ['embeddings', '--ckpt', tiny_ckpt]),
                       ('scaling', ['scaling', '--samples', '500', '--draws', '100'])):
        path = tmp_path / f'{name}.png'
        assert main(argv + ['--png', str(path)]) == 0
        data = path.read_bytes()
        assert data[:8] == PNG_SIGNATURE and len(data) > 5000, name
        assert f'wrote {path}' in capsys.readouterr().out


@pytest.mark.plot
def test_several_runs_are_named_by_their_files_in_a_legend_beside_the_plot(tiny_ckpt, tmp_path, monkeypatch):
    """Was: each run named by its whole path (a temporary folder's, in notebook 5), in a legend
    drawn over the curves."""
    from microgpt.lab import plot
    drawn = []
    monkeypatch.setattr(plot, '_save', lambda fig, path: drawn.append(fig))
    plot.loss_curves('unused.png', loss.compute([log_of(tiny_ckpt)] * 2)['runs'], 'two runs')
    legend = drawn[0].axes[0].get_legend()
    names = [t.get_text() for t in legend.get_texts()]
    assert names and all(n.startswith(os.path.basename(log_of(tiny_ckpt)) + ':') for n in names), names
    assert legend.get_bbox_to_anchor().x0 > drawn[0].axes[0].get_window_extent().x1  # right of the axes


@pytest.mark.plot
def test_the_heads_share_one_column_of_query_names(monkeypatch):
    """Was: every head's heatmap named its queries, and the names ran into the heatmap beside
    (notebook 2's '<BOS>' over head 0's last column)."""
    from microgpt.lab import plot
    drawn = []
    monkeypatch.setattr(plot, '_save', lambda fig, path: drawn.append(fig))
    labels = ['<BOS>', 'a', 'n', 'n', 'a']
    weights = np.tril(np.full((4, 5, 5), 0.2)) + np.triu(np.full((4, 5, 5), np.nan), 1)  # (n_head, T, T)
    plot.attention_heatmaps('unused.png', weights, labels, 3, 'four heads')
    heads = [ax for ax in drawn[0].axes if ax.get_title().startswith('head')]
    named = [[t.get_text() for t in ax.get_yticklabels()] for ax in heads]
    assert named[0] == labels and all(not any(n) for n in named[1:]), named
