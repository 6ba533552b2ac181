"""
The lab on a model of running text (train.py --data-mode text, conftest's text_ckpt): every
sandbox reads TEXT as train.py trained the model, with no BOS, and its losses are the training
code's own (inference.evaluate_windows, edge/text.py's evaluate, sample.py's stream_text).
"""

import io
import math

import pytest

from microgpt import inference
from microgpt.edge.errors import UserError
from microgpt.edge.text import evaluate
from microgpt.lab import attention, embeddings, overview, phases, sampling, step
from microgpt.lab.loading import load
from microgpt.lab.render import BOS_LABEL
from microgpt.programs.sample import stream_text

TOL = 1e-10  # the port against the scalar engine, and a loss against another path's
WINDOW = "Speak, speak.\n\nSECOND"  # 21 characters: the first 17 are a whole window of block 16


@pytest.fixture(scope='module')
def text_model(text_ckpt):
    return load(text_ckpt, 'numpy')


def window_ids(model, text):
    return model.tokenizer.encode(text)


@pytest.mark.parametrize('length', [17, 9, 2])  # a whole window (block_size + 1), shorter ones
def test_overview_scores_the_window_as_train_py_does(text_model, length):
    ckpt, model = text_model
    text = WINDOW[:length]
    d = overview.compute(model, text, ckpt=ckpt)
    ids = window_ids(model, text)
    want = inference.evaluate_windows(model, [ids])  # train.py's validation loss of this window
    assert d['scored'] == length - 1
    assert abs(d['mean_loss'] - want) < TOL
    assert abs(d['mean_loss'] - evaluate(ckpt.model(), [ids])) < TOL  # the scalar engine's
    assert d['uniform_loss'] == math.log(model.config.vocab_size)
    rows = d['positions']
    assert [r['reads'] for r in rows][0] == text[0]  # position 0 reads the first character: no BOS
    assert all(BOS_LABEL not in (r['reads'], r['target']) for r in rows)
    # a window shorter than block_size + 1: the last position reads the last character, unscored
    assert len(rows) == min(length, 16) and (rows[-1]['loss'] is None) == (length <= 16)


def test_overview_continues_running_text_through_the_sliding_window(text_model):
    ckpt, model = text_model
    d = overview.compute(model, WINDOW[:17], temperature=0.8, seed=3, ckpt=ckpt)
    out = io.StringIO()  # sample.py's own text for the same prompt, length and seed
    stream_text(model, WINDOW[:17], 1, overview.CONTINUATION, 0.8, None, 3, out=out)
    assert d['continuation'] == out.getvalue()[:-1]  # sample.py ends with a newline of its own
    text = overview.render(d)
    assert 'name' not in text and BOS_LABEL not in text and 'predicted characters' in text


def test_attention_and_phases_read_no_bos(text_model):
    ckpt, model = text_model
    a = attention.compute(model, 'ROMEO:\nWell', query=3, ckpt=ckpt)
    p = phases.compute(model, 'ROMEO:\nWell', query=3, ckpt=ckpt)
    assert a['labels'] == p['labels'] == ['R', 'O', 'M', 'E', 'O', ':', '⏎', 'W', 'e', 'l', 'l']
    assert abs(a['weights'] - p['weights']).max() == 0
    # a whole window: the model reads its first block_size characters
    assert len(attention.compute(model, WINDOW[:17], ckpt=ckpt)['labels']) == 16
    with pytest.raises(UserError, match='positions 0..10$'):
        attention.compute(model, 'ROMEO:\nWell', query=11, ckpt=ckpt)


@pytest.mark.parametrize('engine, length', [('numpy', 17), ('scalar', 6)])  # (the scalar graph: short)
def test_a_step_trains_the_window_as_train_py_does(text_ckpt, engine, length):
    ckpt, model = load(text_ckpt, 'scalar')
    r = step.compute(model, WINDOW[:length], engine=engine, ckpt=ckpt)
    ids = window_ids(model, WINDOW[:length])
    assert r['tokens'] == ids and r['n'] == length - 1 and BOS_LABEL not in r['labels']
    port = inference.NumpyGPT(ckpt.config, ckpt.weights, tokenizer=ckpt.tokenizer)
    assert abs(r['loss_before'] - inference.evaluate_windows(port, [ids])) < TOL
    text = step.render(r)
    assert 'name' not in text.replace('names', '') and "the window's characters but its last" in text


def test_the_sampler_draws_sample_pys_continuations(text_model):
    ckpt, model = text_model
    d = sampling.compute(model, 'ROMEO:', temperatures=(0.5, 1.0), top_k=3, num=2, length=40, seed=7, ckpt=ckpt)
    assert BOS_LABEL not in d['chars'] and len(d['chars']) == model.config.vocab_size - 1
    assert d['context'] == list('ROMEO:')
    assert [(s['temperature'], s['top_k']) for s in d['draws']] == [(0.5, None), (0.5, 3), (1.0, None), (1.0, 3)]
    for s in d['draws']:
        out = io.StringIO()
        stream_text(model, 'ROMEO:', 2, 40, s['temperature'], s['top_k'], 7, out=out)
        assert out.getvalue() == 'ROMEO:' + s['texts'][0] + '\n\nROMEO:' + s['texts'][1] + '\n'
    assert all(abs(sum(p) - 1) < 1e-12 for p in d['probs'])  # over the characters alone
    text = sampling.render(d)
    assert 'name' not in text and '2 continuations of 40 characters' in text


def test_the_sampler_starts_running_text_after_a_newline(text_model):
    ckpt, model = text_model
    d = sampling.compute(model, '', temperatures=(0.0,), num=1, length=10, ckpt=ckpt)
    assert d['context'] == ['⏎']


@pytest.mark.parametrize('ckpt_name, call, message', [
    ('text_ckpt', lambda m, c: overview.compute(m, '', ckpt=c), 'give at least one character'),
    ('text_ckpt', lambda m, c: overview.compute(m, WINDOW[:18], ckpt=c), 'at most block_size \\+ 1 = 17'),
    ('text_ckpt', lambda m, c: step.compute(m, 'R', engine='numpy', ckpt=c), 'two characters'),
    ('text_ckpt', lambda m, c: sampling.compute(m, '', num=100, length=2000, ckpt=c), 'at most 10,000'),
    ('tiny_ckpt', lambda m, c: sampling.compute(m, 'a', length=10, ckpt=c), '--length is for running-text models'),
])
def test_what_the_model_cannot_read_or_draw_is_one_line(request, ckpt_name, call, message):
    ckpt, model = load(request.getfixturevalue(ckpt_name), 'numpy')
    with pytest.raises(UserError, match=message):
        call(model, ckpt)


def test_embeddings_leave_out_the_bos_row_running_text_never_reads(text_model):
    ckpt, model = text_model
    e = embeddings.compute(model, ckpt=ckpt)
    assert ckpt.data_mode == 'text'
    assert BOS_LABEL not in e['labels'] and len(e['labels']) == model.config.vocab_size - 1


def test_past_its_graphs_size_the_step_is_the_numpy_engines_unless_the_scalar_is_asked_for(text_ckpt, monkeypatch):
    # the scalar engine's graph grows with weights x positions: past SCALAR_STEP_WORK, seconds and gigabytes
    from microgpt.edge.limits import parameter_count
    from microgpt.lab import registry
    ckpt, model = load(text_ckpt, 'scalar')
    monkeypatch.setattr(registry, 'SCALAR_STEP_WORK', 5 * parameter_count(model.config))  # 5 positions
    assert registry.scalar_step_positions(model.config) == 5
    with pytest.raises(UserError, match='take it with --engine numpy'):
        step.compute(model, WINDOW[:7], engine='scalar', ckpt=ckpt)  # 6 positions
    assert step.compute(model, WINDOW[:7], engine='numpy', ckpt=ckpt)['n'] == 6
    chosen = step.compute(model, WINDOW[:7], ckpt=ckpt)  # no --engine: the one whose graph fits
    assert chosen['engine'] == 'numpy' and chosen['engine_chosen']
    assert "6) computed by the numpy training path: the scalar engine's graph of 6 positions" in step.render(chosen)
    assert step.compute(model, WINDOW[:6], ckpt=ckpt)['engine'] == 'scalar'  # 5 positions: the graph fits


def test_the_training_page_trains_running_text_only_where_it_has_one(tmp_path, play_file):
    from microgpt.lab.runs import RunManager
    from microgpt.lab.serve import make_server
    from microgpt.lab.api import ApiError
    with pytest.raises(ApiError, match='--text FILE'):
        RunManager(str(tmp_path), None).params({'data_mode': 'text'})
    _, flags = RunManager(str(tmp_path), None, text=play_file).params({'data_mode': 'text', 'block_size': 64})
    assert flags[-4:] == ['--data-mode', 'text', '--data', play_file] and '64' in flags
    with pytest.raises(UserError, match='--text .* is not a file'):
        make_server(play_file, port=0, text=str(tmp_path / 'none.txt'))
