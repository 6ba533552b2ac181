"""
The byte-pair tokenizer: microgpt/bpe.py (the plain algorithm: recount, merge, again) on a
worked example done by hand, and bpe_fast.py (counts kept up to date) against it, merge for
merge and id for id. Any valid Unicode text round-trips, whatever training saw.
"""

import json
import math
import os
import random

import pytest
from hypothesis import given, settings, strategies as st

from helpers import REPO_DIR, log_of
from microgpt import bpe, bpe_fast
from microgpt.bpe import BPETokenizer, learn_merges
from microgpt.bpe_fast import FastBPETokenizer
from microgpt.edge.data import load_docs

SETTINGS = settings(max_examples=200, deadline=None, derandomize=True)


# ---------------------------------------------------------------------------- the worked example
@pytest.mark.parametrize('way', [bpe, bpe_fast])
def test_the_worked_example_learns_aa_then_ab_then_their_pair(way):
    merges = way.learn_merges(['aaabdaaabac'], 3)
    a, b = ord('a'), ord('b')
    assert merges == [(a, a), (a, b), (256, 257)]  # Z = aa, Y = ab (tied with Za: the smaller pair), X = ZY
    tok = (BPETokenizer if way is bpe else FastBPETokenizer)(merges)
    assert tok.encode('aaabdaaabac') == [258, ord('d'), 258, a, ord('c')]  # XdXac
    assert tok.vocab[258] == b'aaab' and tok.chars[258] == 'aaab'
    assert tok.bos == 259 and tok.vocab_size == 260


@pytest.mark.parametrize('way', [bpe, bpe_fast])
def test_training_stops_when_no_pair_is_left(way):
    assert way.learn_merges(['ab'], 10) == [(97, 98)]  # one merge and 'ab' is one token
    assert way.learn_merges(['', 'a'], 10) == []
    assert BPETokenizer(learn_merges(['ab'], 10)).vocab_size == 258


# ---------------------------------------------------------------------------- fast = plain
RANDOM_TEXTS = st.lists(st.text(alphabet='ab c\né', max_size=40), min_size=1, max_size=4)


@SETTINGS
@given(RANDOM_TEXTS, st.integers(1, 30))
def test_the_fast_trainer_learns_what_recounting_learns(texts, n_merges):
    """Runs of one letter ('aaaa'), pairs that overlap and several texts (no pair crosses two)
    are where keeping counts up to date can go wrong."""
    assert bpe_fast.learn_merges(texts, n_merges) == learn_merges(texts, n_merges)


def test_the_two_agree_on_names_and_on_longer_random_texts():
    """The merges and the ids of 300 names (the bundled ones), and of random runs of few letters."""
    names = load_docs()
    docs = names[:300]
    merges = bpe_fast.learn_merges(docs, 60)
    assert merges == learn_merges(docs, 60)
    plain, fast = BPETokenizer(merges), FastBPETokenizer(merges)
    assert all(plain.encode(d) == fast.encode(d) for d in names[300:600])
    rng = random.Random(0)
    for _ in range(3):
        texts = [''.join(rng.choice('aab ba\n') for _ in range(rng.randrange(300))) for _ in range(3)]
        assert bpe_fast.learn_merges(texts, 40) == learn_merges(texts, 40)


def test_a_trainer_that_forgets_the_pairs_a_merge_forms_is_seen():
    """Negative control: never recounting after a merge learns other merges."""
    texts = ['abababcabc']
    counts, broken = bpe.get_stats([list(texts[0].encode())]), []
    for _ in range(3):
        pair = min(counts, key=lambda p: (-counts[p], p))
        broken.append(pair)
        del counts[pair]
    assert broken != learn_merges(texts, 3) == bpe_fast.learn_merges(texts, 3)


@SETTINGS
@given(RANDOM_TEXTS, st.text(alphabet='ab c\né', max_size=60), st.integers(1, 20))
def test_fast_encoding_equals_merging_the_earliest_pair_until_none(texts, text, n_merges):
    merges = learn_merges(texts, n_merges)
    assert FastBPETokenizer(merges).encode(text) == BPETokenizer(merges).encode(text)


# ---------------------------------------------------------------------------- round trips
TRAINED = FastBPETokenizer(learn_merges(['the cat sat on the mat\r\n', 'emma olivia ava'], 60))
UNICODE = st.text(st.characters(exclude_categories=['Cs']), max_size=80)  # any character but half a pair


@SETTINGS
@given(UNICODE)
def test_any_text_round_trips(text):
    assert TRAINED.decode(TRAINED.encode(text)) == text


@SETTINGS
@given(st.lists(st.sampled_from(['e\u0301', '👩\u200d👩\u200d👧', '\r', '\r\n', 'ř', '\U0010FFFF', 'cat', ' ']),
                max_size=20))
def test_combining_marks_emoji_and_line_ends_round_trip(parts):
    text = ''.join(parts)
    ids = TRAINED.encode(text)
    assert TRAINED.decode(ids) == text
    assert TRAINED.unknown(text) is None
    assert all(0 <= i < TRAINED.bos for i in ids)


def test_characters_training_never_saw_are_their_utf8_bytes():
    assert TRAINED.encode('ř') == list('ř'.encode('utf-8')) == [197, 153]
    assert TRAINED.encode('') == [] and TRAINED.decode([]) == ''
    assert TRAINED.decode([TRAINED.bos] + TRAINED.encode('cat') + [TRAINED.bos]) == 'cat'  # BOS has no text


def test_a_whole_file_round_trips_with_merges_learned_on_another():
    with open(os.path.join(REPO_DIR, 'docs', 'training.md'), encoding='utf-8') as f:
        training = f.read()
    with open(os.path.join(REPO_DIR, 'README.md'), encoding='utf-8') as f:
        readme = f.read()
    tok = FastBPETokenizer(bpe_fast.learn_merges([training], 200))
    ids = tok.encode(readme)
    assert tok.decode(ids) == readme
    assert len(ids) < 0.7 * len(readme.encode('utf-8'))  # the merges compress text they did not see


def test_the_decoder_holds_back_a_character_until_its_last_byte():
    """Streaming: a token that ends inside a character yields nothing until the rest comes."""
    tok = BPETokenizer([])  # bytes only: 'ř' is two tokens
    piece = tok.decoder()
    assert [piece(i) for i in tok.encode('ař!')] == ['a', '', 'ř', '!']
    assert tok.decode([197]) == '\ufffd'  # half a character alone: the replacement character


# ---------------------------------------------------------------------------- through the programs
def test_a_byte_pair_checkpoint_keeps_its_merges_in_both_formats(tmp_path, bpe_ckpt):
    from microgpt.edge.checkpoint import read_checkpoint, write_checkpoint
    ckpt = read_checkpoint(bpe_ckpt)
    assert ckpt.tokenizer_kind == 'bpe' and ckpt.vocab == () and len(ckpt.merges) == 280 - 257
    for name in ('again.json', 'again.safetensors'):
        write_checkpoint(str(tmp_path / name), ckpt)
        back = read_checkpoint(str(tmp_path / name))
        assert back.merges == ckpt.merges and back.config == ckpt.config
        assert back.tokenizer.encode('emma ř') == ckpt.tokenizer.encode('emma ř')


BPE_RUN = ['--tokenizer', 'bpe', '--vocab-size', '270', '--n-embd', '8', '--n-head', '2', '--block-size', '12',
           '--val-size', '6', '--num-samples', '0']  # 13 merges of TINY_NAMES, ~2,500 parameters
ENGINE_TOL = 1e-9  # the scalar engine and the numpy port: the same math, rounded differently


def test_a_byte_pair_model_trains_and_samples_on_the_scalar_engine(tmp_path, names_file, capsys):
    """The Value engine takes byte pairs as it takes characters: its losses are the numpy
    engine's step for step, and sample.py draws from its checkpoint the names the numpy port
    draws, each of them text the merges decode."""
    from helpers import run
    from microgpt.programs import sample, train
    from microgpt.sampling import sample_names
    from microgpt import inference
    from microgpt.edge.checkpoint import read_checkpoint
    outs = {engine: tmp_path / f'{engine}.json' for engine in ('scalar', 'numpy')}
    for engine, out in outs.items():
        code, printed, _ = run(train.main, ['--data', names_file, *BPE_RUN, '--engine', engine, '--steps', '6',
                                            '--eval-every', '3', '--out', str(out)], capsys)
        assert code == 0 and f'engine={engine}' in printed and 'tokenizer=bpe vocab_size=270' in printed
    scalar, port = (log_of(outs[e]) for e in ('scalar', 'numpy'))
    assert [r['step'] for r in scalar if 'loss' in r] == list(range(1, 7))
    assert max(abs(a['loss'] - b['loss']) for a, b in zip(scalar, port) if 'loss' in a) < ENGINE_TOL
    assert [r['val_loss'] for r in scalar if 'val_loss' in r] == pytest.approx(
        [r['val_loss'] for r in port if 'val_loss' in r], abs=ENGINE_TOL)
    code, printed, _ = run(sample.main, ['--ckpt', str(outs['scalar']), '--num', '5', '--seed', '3',
                                         '--engine', 'scalar'], capsys)
    ckpt = read_checkpoint(str(outs['scalar']))
    want = sample_names(inference.NumpyGPT(ckpt.config, ckpt.weights, tokenizer=ckpt.tokenizer), num=5, seed=3)
    assert code == 0 and printed.splitlines() == want and ckpt.tokenizer_kind == 'bpe'


def test_a_byte_pair_run_stopped_and_resumed_logs_the_uninterrupted_runs_losses(tmp_path, names_file, capsys,
                                                                                  monkeypatch):
    """Ctrl-C at step 6 of 12, then --resume: the log of the run that never stopped, loss for
    loss and evaluation for evaluation, and the merges the first part learned (none relearned:
    the resumed part reads the checkpoint's). One BLAS thread, as the dropout run's check."""
    from microgpt import backprop
    from helpers import interrupt_after, run
    from microgpt.edge.checkpoint import read_checkpoint
    from microgpt.programs import train
    whole, parts = tmp_path / 'whole.json', tmp_path / 'parts.json'
    args = ['--data', names_file, *BPE_RUN, '--engine', 'numpy', '--threads', '1', '--steps', '12',
            '--eval-every', '4', '--save-every', '4']
    assert run(train.main, [*args, '--out', str(whole)], capsys)[0] == 0
    interrupt_after(monkeypatch, 6, backprop.Trainer)
    assert run(train.main, [*args, '--out', str(parts)], capsys)[0] == 130
    monkeypatch.undo()
    assert read_checkpoint(str(parts)).train_state.step == 6
    code, printed, _ = run(train.main, ['--out', str(parts), '--resume', '--threads', '1'], capsys)
    assert code == 0 and 'start_step=6' in printed
    assert [r['step'] for r in log_of(parts) if 'loss' in r] == list(range(1, 13))
    assert log_of(parts) == log_of(whole)
    assert read_checkpoint(str(parts)).merges == read_checkpoint(str(whole)).merges


def test_init_from_a_byte_pair_model_keeps_its_tokenizer(tmp_path, bpe_ckpt, names_file, capsys):
    from microgpt.programs import train
    out = tmp_path / 'init.json'
    assert train.main(['--init', bpe_ckpt, '--data', names_file, '--steps', '2', '--out', str(out),
                       '--num-samples', '0', '--eval-every', '0']) == 0
    assert 'tokenizer=bpe vocab_size=280' in capsys.readouterr().out
    from microgpt.edge.checkpoint import read_checkpoint
    assert read_checkpoint(str(out)).merges == read_checkpoint(bpe_ckpt).merges


# ---------------------------------------------------------------------------- bits per character
def test_bits_per_character_are_the_loss_over_ln2_for_characters_and_scaled_for_byte_pairs(tmp_path, play_file,
                                                                                          bpe_ckpt, names_file):
    """The factor train.py logs by, against counts taken here from the text itself: running
    text's validation part is predicted once, token by token, so its bits per character are
    loss x its tokens / its characters / ln 2; a name predicts its letters and the end marker.
    The running text's byte-pair model samples from a prompt its training never saw."""
    from microgpt.edge import text
    from microgpt.edge.checkpoint import read_checkpoint
    from microgpt.edge.data import load_docs, split_docs
    from microgpt.programs import sample, train
    out = tmp_path / 'play.json'
    assert train.main(['--engine', 'numpy', '--data', play_file, '--data-mode', 'text', '--tokenizer', 'bpe',
                       '--vocab-size', '300', '--block-size', '16', '--steps', '2', '--eval-every', '2',
                       '--num-samples', '0', '--out', str(out)]) == 0
    record = [r for r in log_of(out) if 'val_loss' in r][-1]
    tok = read_checkpoint(str(out)).tokenizer
    _, val_text = text.split_text(text.load_text(play_file), None, 16)
    expected = record['val_loss'] * len(tok.encode(val_text)) / len(val_text) / math.log(2)
    assert record['val_bpc'] == pytest.approx(expected, rel=1e-12)
    assert len(tok.encode(val_text)) < 0.8 * len(val_text)  # the factor is not 1 / ln 2 here
    assert sample.main(['--ckpt', str(out), '--length', '30', '--prompt', 'ROMEO: ř']) == 0

    names = [r for r in log_of(bpe_ckpt) if 'val_loss' in r][-1]
    _, val_docs = split_docs(load_docs(names_file), 6, seed=42, shuffle=True)
    tok = read_checkpoint(bpe_ckpt).tokenizer
    tokens = sum(len(tok.encode(d)) + 1 for d in val_docs)  # no name is cut by the block of 12
    assert names['val_bpc'] == pytest.approx(names['val_loss'] * tokens / sum(len(d) + 1 for d in val_docs)
                                             / math.log(2), rel=1e-12)


def test_a_character_models_bits_per_character_are_its_loss_over_ln2(tiny_ckpt):
    for record in (r for r in log_of(tiny_ckpt) if 'val_loss' in r):
        assert record['val_bpc'] == pytest.approx(record['val_loss'] / math.log(2), rel=1e-12)


def test_lab_loss_in_bits_uses_the_logs_figures_and_refuses_a_log_without_them(tmp_path, bpe_ckpt, capsys):
    from microgpt.edge.errors import UserError
    from microgpt.lab import loss
    from microgpt.programs.runlog import log_path_for
    records = log_of(bpe_ckpt)
    evals = [r for r in records if 'val_loss' in r]
    factor = evals[0]['train_bpc'] / evals[0]['train_loss']
    train, val = loss.read_log(log_path_for(bpe_ckpt), unit='bits')
    assert [v for _, v, _ in val] == [r['val_bpc'] for r in evals]
    steps = [r['loss'] for r in records if 'loss' in r]
    assert [l for _, l, _ in train] == pytest.approx([l * factor for l in steps], rel=1e-12)
    assert factor < 1 / math.log(2)  # byte pairs: fewer tokens than characters
    old = tmp_path / 'old.log.jsonl'  # a log from before bits per character were measured
    old.write_text('{"step": 1, "loss": 3.0, "lr": 0.01}\n{"step": 1, "val_loss": 2.9, "train_loss": 3.0}\n')
    with pytest.raises(UserError, match="line 2 has no bits per character .*: use --unit nats"):
        loss.compute(str(old), unit='bits')
    assert loss.compute(str(old))['runs'][0]['val'] == [(1, 2.9, 3.0)]


# A byte 0xff in a command line reaches Python as the lone surrogate '\udcff' (its filesystem
# encoding's escape), and a JSON request may hold '\ud800': neither is a character, and neither
# encodes to UTF-8. Every engine, tokenizer and route says so in one line.
SURROGATES = ['a\udcff', '\ud800b']


@pytest.mark.parametrize('model', ['tiny_ckpt', 'bpe_ckpt'])
def test_a_lone_surrogate_is_one_line_on_every_command(model, request, capsys):
    from microgpt.lab.__main__ import main as lab_main
    from microgpt.programs import sample
    from helpers import assert_one_line_error, run
    path = request.getfixturevalue(model)
    capsys.readouterr()  # what training the fixture printed
    for text in SURROGATES:
        for main, argv in ((sample.main, ['--ckpt', path, '--prompt', text, '--engine', 'scalar']),
                           (sample.main, ['--ckpt', path, '--prompt', text, '--engine', 'numpy']),
                           (lab_main, ['tokens', text, '--ckpt', path]),
                           (lab_main, ['overview', text, '--ckpt', path])):
            code, out, err = run(main, argv, capsys)
            assert_one_line_error(code, err, 'is not a character')
            assert code == 2 and out == ''


@pytest.mark.parametrize('model', ['tiny_ckpt', 'bpe_ckpt'])
def test_a_lone_surrogate_is_a_400_from_every_route(model, request, names_file, tmp_path):
    from helpers import live_server, request as ask
    with live_server(request.getfixturevalue(model), tmp_path / 'runs', names_file) as server:
        for route, field in (('tokens', 'text'), ('overview', 'text'), ('attention', 'text'), ('phases', 'text'),
                             ('step', 'text'), ('sampling', 'prompt')):
            for text in SURROGATES:
                status, body, _ = ask(server, 'POST', f'/api/{route}', {field: text})
                assert status == 400 and 'is not a character' in body['error'], (route, status, body)
