"""
Tests for microgpt/edge/checkpoint.py: saving, loading, and every way a checkpoint file can be wrong.

A checkpoint must give back exactly the model that was saved (the same logits, bit for bit),
and turn each problem in a file into one line that names the file and the fault. The 3D tutorial's flat weights export is
built here from a model, so the import is checked against the logits of the model it came from.

Run: .venv/bin/python -m pytest -q tests/test_checkpoint.py
"""

import json
import os

import pytest

from microgpt import load_checkpoint
from microgpt.edge.checkpoint import Checkpoint, SavedRun, TrainState, read_checkpoint, write_checkpoint
from microgpt.edge.errors import UserError
from microgpt.model import GPT, GPTConfig
from microgpt.optim import Adam
from microgpt.tokenizer import CharTokenizer
from microgpt.training import doc_tokens, learning_rate, train_step

A_RUN = SavedRun(data=None, val_size=None, shuffle=True, steps=1000, lr=0.01, seed=42)  # a run's settings, as saved

DOCS = ['abe', 'bead', 'dab', 'cab', 'ace', 'dace']  # vocab 'abcde' + BOS = 6 tokens
PROBE = ['bad', 'cede', 'a']  # names whose logits are compared after a round trip


def trained_model(n_embd=8, n_head=2, n_layer=1, steps=8):
    """A model a few Adam steps away from its init, so the weights are not just the seed's."""
    tok = CharTokenizer.from_docs(DOCS)
    model = GPT(GPTConfig(tok.vocab_size, n_layer=n_layer, n_embd=n_embd, n_head=n_head,
                          block_size=6), seed=5, tokenizer=tok)
    opt = Adam(model.params)
    for s in range(steps):
        train_step(model, opt, doc_tokens(tok, DOCS[s % len(DOCS)]), learning_rate(0.01, s, steps))
    return model


def all_logits(model):
    """Every position's logits for every PROBE name, as floats."""
    out = []
    for name in PROBE:
        keys, values = model.empty_cache()
        for t, tok in enumerate(doc_tokens(model.tokenizer, name)[:-1]):
            out.append([l.data for l in model.gpt(tok, t, keys, values)])
    return out


def one_line_error(path, **kwargs):
    """read_checkpoint's UserError message, checked to be one line that names the file."""
    with pytest.raises(UserError) as e:
        read_checkpoint(str(path), **kwargs)
    message = str(e.value)
    assert '\n' not in message
    assert str(path) in message
    return message


# ---------------------------------------------------------------------------- round trips
def test_train_save_load_gives_identical_logits_and_save_again_the_same_bytes(tmp_path):
    model = trained_model()
    path = tmp_path / 'model.json'
    write_checkpoint(str(path), Checkpoint.of(model))
    loaded = load_checkpoint(str(path))
    assert loaded.config == model.config
    assert loaded.tokenizer.chars == model.tokenizer.chars
    assert loaded.weights() == model.weights()     # repr floats read back bit for bit ...
    assert all_logits(loaded) == all_logits(model)  # ... so the logits are identical, not close
    obj = json.loads(path.read_text(encoding='utf-8'))  # the layout on disk
    assert list(obj) == ['format', 'version', 'data_mode', 'config', 'vocab', 'state_dict', 'train_state']
    assert (obj['format'], obj['version'], obj['vocab']) == ('microgpt', 1, list('abcde'))
    assert obj['config'] == model.config.to_dict() and obj['state_dict']['wte'] == model.weights()['wte']
    ckpt = read_checkpoint(str(path))
    assert ckpt.format == 'json' and ckpt.train_state is None and ckpt.data_mode == 'lines'
    # with Adam and a training state: save, load, save is byte identical
    n = sum(len(row) for m in model.weights().values() for row in m)
    adam = {'t': 8, 'm': [0.1] * n, 'v': [0.2] * n}
    state = TrainState(8, A_RUN, '0' * 64)
    first, second = tmp_path / 'a.json', tmp_path / 'b.json'
    write_checkpoint(str(first), Checkpoint.of(model, optimizer=adam, train_state=state))
    loaded = read_checkpoint(str(first), training=True)
    assert loaded.train_state == state and loaded.optimizer == adam
    write_checkpoint(str(second), loaded)
    assert first.read_bytes() == second.read_bytes()


# ---------------------------------------------------------------------------- never a non-finite weight
def test_a_model_with_a_non_finite_weight_is_never_written(tmp_path):
    path = tmp_path / 'model.json'
    write_checkpoint(str(path), Checkpoint.of(trained_model()))
    good = path.read_bytes()
    broken = trained_model()
    broken.state_dict['wpe'][0][0].data = float('nan')
    with pytest.raises(ValueError):
        write_checkpoint(str(path), Checkpoint.of(broken))
    assert path.read_bytes() == good
    assert os.listdir(tmp_path) == ['model.json']


# ---------------------------------------------------------------------------- validation
def valid_checkpoint():
    """A checkpoint's JSON object, to be damaged by each case below."""
    model = trained_model(steps=1)
    return {'format': 'microgpt', 'version': 1, 'data_mode': 'lines', 'config': model.config.to_dict(),
            'vocab': list(model.tokenizer.chars), 'state_dict': model.weights(), 'train_state': None}


# (id, change to a valid checkpoint dictionary, a fragment the one-line error must contain)
BAD_OBJECTS = [
    ('wrong-format', lambda o: o.update(format='nanogpt'), "format 'nanogpt', expected 'microgpt'"),
    ('wrong-version', lambda o: o.update(version=2), 'version 2'),
    ('no-config', lambda o: o.pop('config'), "lacks the 'config' field"),
    ('config-field-missing', lambda o: o['config'].pop('n_head'), "it holds ['block_size', 'n_embd', 'n_layer'"),
    ('config-of-another-tool', lambda o: o['config'].update(dropout=0.1), "its config should hold vocab_size, n_layer"),
    ('config-heads-do-not-divide', lambda o: o['config'].update(n_head=3), 'divisible by n_head'),
    ('config-float-size', lambda o: o['config'].update(n_embd=8.0), 'n_embd must be a positive integer'),
    ('weight-missing', lambda o: o['state_dict'].pop('lm_head'), 'weights missing for lm_head'),
    ('weight-extra', lambda o: o['state_dict'].update({'layer1.attn_wq': [[0.0]]}), 'unexpected weights layer1.attn_wq'),
    ('weight-row-missing', lambda o: o['state_dict']['wte'].pop(), 'wte should be 6x8'),
    ('weight-string', lambda o: o['state_dict']['wte'][0].__setitem__(0, '0.1'), "holds '0.1', not a finite number"),
    ('vocab-size-mismatch', lambda o: o['vocab'].pop(), '4 characters plus BOS make 5 tokens, but vocab_size is 6'),
    ('vocab-duplicate-char', lambda o: o['vocab'].__setitem__(1, 'a'), 'lists a character twice'),
    ('state-dict-not-object', lambda o: o.update(state_dict=[]), "'state_dict' must be an object"),
]


@pytest.mark.parametrize('change, fragment', [c[1:] for c in BAD_OBJECTS], ids=[c[0] for c in BAD_OBJECTS])
def test_a_damaged_checkpoint_is_a_one_line_error(tmp_path, change, fragment):
    obj = valid_checkpoint()
    change(obj)
    path = tmp_path / 'model.json'
    path.write_text(json.dumps(obj), encoding='utf-8')
    assert fragment in one_line_error(path)


def first_weight_replaced(text):
    """A valid checkpoint's text with its first weight (wte[0][0]) replaced by `text`."""
    obj = valid_checkpoint()
    marker = 123.456  # not a value the init can produce, so the replacement hits exactly it
    obj['state_dict']['wte'][0][0] = marker
    return json.dumps(obj).replace(repr(marker), text, 1)


# (id, the file's text, a fragment of the error)
BAD_TEXTS = [
    ('nan-literal', lambda: first_weight_replaced('NaN'), 'holds nan, not a finite number'),
    ('truncated', lambda: json.dumps(valid_checkpoint())[:200], 'is not valid JSON (column '),
    ('empty-file', lambda: '', 'is not valid JSON'),
    ('top-level-list', lambda: '[1, 2]', 'expected a JSON object'),
    ('neither-format', lambda: '{"weights": {}}', "neither a 'format' field"),
    ('not-utf8', lambda: b'{"format": "micr\xffgpt"}', 'not UTF-8'),
]


@pytest.mark.parametrize('make_text, fragment', [c[1:] for c in BAD_TEXTS], ids=[c[0] for c in BAD_TEXTS])
def test_a_corrupt_checkpoint_file_is_a_one_line_error(tmp_path, make_text, fragment):
    path = tmp_path / 'model.json'
    text = make_text()
    path.write_bytes(text if isinstance(text, bytes) else text.encode('utf-8'))
    assert fragment in one_line_error(path)


def test_a_directory_is_not_a_checkpoint(tmp_path):  # (--n-head against a checkpoint: test_cli.py)
    assert 'is a directory' in one_line_error(tmp_path)


# ---------------------------------------------------------------------------- tutorial export


def write_export(tmp_path, model, change=None):
    """The 3D tutorial's flat export of `model` (the state_dict names at the top level, and its
    vocabulary), changed by change(obj), written to tutorial.json."""
    obj = dict(model.weights(), _vocab=list(model.tokenizer.chars), _bos_id=model.tokenizer.bos,
               _vocab_size=model.tokenizer.vocab_size)
    if change:
        change(obj)
    path = tmp_path / 'tutorial.json'
    path.write_text(json.dumps(obj), encoding='utf-8')
    return path


def test_a_tutorial_export_gives_identical_logits_with_its_n_head(tmp_path):
    """The export does not record its heads: 4 unless --n-head says. With the wrong count the
    weights are the same, split into other heads, and the logits differ: why --n-head exists."""
    model = trained_model(n_embd=8, n_head=2, n_layer=2)
    path = write_export(tmp_path, model)
    ckpt = read_checkpoint(str(path), n_head=2)
    assert ckpt.format == 'tutorial' and ckpt.train_state is None
    assert ckpt.config == model.config  # n_layer, n_embd, vocab and block read off the shapes
    assert all_logits(load_checkpoint(str(path), n_head=2)) == all_logits(model)
    four = load_checkpoint(str(path))
    assert four.config.n_head == 4 and four.weights() == model.weights() and all_logits(four) != all_logits(model)
    path = write_export(tmp_path, trained_model(n_embd=6, n_head=3))
    assert 'n_embd (6) must be divisible by n_head (4)' in one_line_error(path)
    assert read_checkpoint(str(path), n_head=3).config.n_head == 3


BAD_EXPORTS = [
    ('no-bos-id', lambda o: o.pop('_bos_id'), 'lacks _bos_id'),
    ('no-wpe', lambda o: o.pop('wpe'), 'lacks wpe'),
    ('wrong-bos-id', lambda o: o.update(_bos_id=0), '_bos_id 0 and _vocab_size 6 disagree'),
    ('vocab-shorter-than-wte', lambda o: o['_vocab'].pop(), '4 characters plus BOS make 5 tokens'),
    ('wte-not-a-matrix', lambda o: o.update(wte=[]), "'wte' and 'wpe' must be non-empty lists of rows"),
    ('lm-head-missing', lambda o: o.pop('lm_head'), 'weights missing for lm_head'),
    ('no-layers', lambda o: [o.pop(k) for k in list(o) if k.startswith('layer')], 'n_layer must be a positive integer'),
]


@pytest.mark.parametrize('change, fragment', [c[1:] for c in BAD_EXPORTS], ids=[c[0] for c in BAD_EXPORTS])
def test_a_damaged_tutorial_export_is_a_one_line_error(tmp_path, change, fragment):
    assert fragment in one_line_error(write_export(tmp_path, trained_model(steps=1), change), n_head=2)
