"""
Damaged files and failing writes: each ends as one line, `error: ...`, and loses nothing. A save
that fails part-way leaves the old checkpoint byte for byte and no temporary file; a checkpoint
edited by hand, or cut short, is one line naming the fault; a diverged model's overflow is one
line in every reader.
"""

import errno
import json
import os
import stat
import tempfile

import numpy as np
import pytest

from microgpt import inference
from microgpt.edge.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from microgpt.edge.errors import UserError
from microgpt.edge.files import WriteError, remove_stale_temporaries, write_json_atomic
from microgpt.lab.__main__ import main as lab_main
from microgpt.model import GPT, GPTConfig
from microgpt.tokenizer import CharTokenizer
from helpers import assert_one_line_error, run

TEXT = 'emma'


def small():
    return Checkpoint.of(GPT(GPTConfig(vocab_size=4, n_layer=1, n_embd=4, n_head=2, block_size=4),
                             tokenizer=CharTokenizer(['a', 'b', 'c'])))


def edited(tmp_path, ckpt, change, name='edited.json'):
    """A copy of the JSON checkpoint at `ckpt`, its object changed by change(obj)."""
    with open(ckpt, encoding='utf-8') as f:
        obj = json.load(f)
    change(obj)
    path = tmp_path / name
    path.write_text(json.dumps(obj), encoding='utf-8')
    return str(path)


# ---------------------------------------------------------------------------- 1) writing
def _fail_with(code):
    def fail(*args, **kwargs):
        raise OSError(code, os.strerror(code))
    return fail


@pytest.mark.parametrize('where, code, words', [
    ('fsync', errno.ENOSPC, 'the disk is full'),
    ('replace', errno.EROFS, 'the folder is on a read-only file system'),
    ('fchmod', errno.EACCES, 'permission denied'),
])
def test_a_failing_save_is_one_line_and_the_old_checkpoint_is_intact(tmp_path, monkeypatch, capsys, where, code, words):
    path = tmp_path / 'model.json'
    write_checkpoint(str(path), small())
    good = path.read_bytes()
    monkeypatch.setattr(os, where, _fail_with(code))
    status, _, err = run(lambda argv: write_checkpoint(str(path), small()), [], capsys)
    assert_one_line_error(status, err, f"could not write {path}: {words}; the previous {path} is intact")
    assert path.read_bytes() == good and os.listdir(tmp_path) == ['model.json']


def test_a_name_too_long_for_the_temporary_is_one_line(tmp_path):
    """For real: a 250-character name fits, its temporary's name does not."""
    with pytest.raises(WriteError, match='the file name is too long; no file was left at'):
        write_json_atomic(str(tmp_path / ('m' * 245 + '.json')), {'a': 1})
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize('umask', [0o022, 0o077])
def test_a_new_checkpoint_gets_the_umasks_permissions_and_an_old_one_keeps_its_own(tmp_path, umask):
    """mkstemp makes 0600; a checkpoint must be like any new file (the oracle: one made with open)."""
    old = os.umask(umask)
    try:
        write_checkpoint(str(tmp_path / 'model.json'), small())
        (tmp_path / 'plain.txt').write_text('x')
    finally:
        os.umask(old)
    mode = lambda name: stat.S_IMODE(os.stat(tmp_path / name).st_mode)  # noqa: E731
    assert mode('model.json') == 0o666 & ~umask == mode('plain.txt')
    os.chmod(tmp_path / 'model.json', 0o640)
    write_checkpoint(str(tmp_path / 'model.json'), small())
    assert mode('model.json') == 0o640


def test_what_a_killed_save_left_is_removed_and_nothing_else(tmp_path):
    """Only `.model.json.<8 characters>.tmp`, a regular file beside model.json (or beside a link's
    target), is a temporary of ours."""
    (tmp_path / 'real').mkdir()
    out = tmp_path / 'model.json'
    out.symlink_to(tmp_path / 'real' / 'model.json')
    write_checkpoint(str(out), small())
    fd, ours = tempfile.mkstemp(prefix='.model.json.', suffix='.tmp', dir=tmp_path / 'real')
    os.close(fd)
    keep = ['.model.json.tmp', '.model.json.abc.tmp', '.other.json.abcd1234.tmp', 'model.json.abcd1234.tmp', 'notes.txt']
    for name in keep:
        (tmp_path / 'real' / name).write_text('keep me')
    (tmp_path / 'real' / '.model.json.dir12345.tmp').mkdir()  # our pattern, but a folder
    assert remove_stale_temporaries(str(out)) == [ours]
    assert set(os.listdir(tmp_path / 'real')) == {'model.json', *keep, '.model.json.dir12345.tmp'}


# ---------------------------------------------------------------------------- 2) damaged checkpoints
@pytest.mark.parametrize('damage, words', [
    (lambda o: o.update(merges='aa'), "merges must be a list"),
    (lambda o: o['merges'].__setitem__(0, [300, 97]), "merge 0 is [300, 97], not a pair of the 256 ids before it"),
    (lambda o: o['merges'].__setitem__(1, [97, 98, 99]), "merge 1 is [97, 98, 99], not a pair"),
    (lambda o: o['merges'].__setitem__(3, [97, 266]), "merge 3 is [97, 266], not a pair of the 259 ids before it"),
    (lambda o: o['merges'].pop(), "22 merges make 279 tokens (256 bytes, the merges, BOS), but vocab_size is 280"),
    (lambda o: o.update(vocab=['a', 'b']), "both byte-pair merges and a vocabulary of characters"),
])
def test_damaged_or_hand_edited_merges_are_one_line(tmp_path, bpe_ckpt, damage, words):
    with pytest.raises(UserError) as e:
        read_checkpoint(edited(tmp_path, bpe_ckpt, damage))
    assert words in str(e.value)


# ---------------------------------------------------------------------------- 3) diverged models
DIVERGED_WEIGHTS = {
    'huge embedding': (['wte'], 1e300),       # squares to inf inside the first rmsnorm
    'huge queries and keys': (['layer0.attn_wq', 'layer0.attn_wk'], 1e200),  # q.k overflows
    'huge lm_head': (['lm_head'], 1e308),     # the logits themselves overflow
}


@pytest.fixture(params=DIVERGED_WEIGHTS)
def diverged_ckpt(request, tmp_path, tiny_ckpt):
    names, value = DIVERGED_WEIGHTS[request.param]

    def change(obj):
        for name in names:
            obj['state_dict'][name] = [[value] * len(row) for row in obj['state_dict'][name]]
    return edited(tmp_path, tiny_ckpt, change, 'diverged.json')


@pytest.mark.parametrize('argv', [['overview', TEXT], ['attention', TEXT], ['step', TEXT], ['sampling', '--num', '1']])
def test_every_lab_reader_of_a_diverged_model_says_so_in_one_line(diverged_ckpt, argv, capsys):
    """overview and attention crashed with NaN errors, step with a NonFiniteError traceback."""
    assert_one_line_error(*run(lab_main, argv + ['--ckpt', diverged_ckpt], capsys)[::2],
                          "the model's logits are not finite numbers: its weights are too large (its training "
                          "diverged); retrain it with a lower --lr")


def test_the_port_raises_one_error_that_is_also_a_floating_point_error(diverged_ckpt, tiny_ckpt):
    """The port's forwards, loss and evaluate share the check; train.py's validation loss,
    which catches FloatingPointError to report divergence, still sees one. The negative control:
    a trained model passes the check with its numbers unchanged."""
    port = inference.load_checkpoint(diverged_ckpt)
    ids = [port.tokenizer.bos] + port.tokenizer.encode(TEXT)
    for call in (lambda: port.forward(ids, capture='all'), lambda: port.forward_batch([ids]),
                 lambda: port.loss(ids), lambda: inference.evaluate(port, [TEXT])):
        with pytest.raises(inference.model.DivergedModelError):
            call()
        with pytest.raises(FloatingPointError):
            call()
    healthy = inference.load_checkpoint(tiny_ckpt)
    with np.errstate(all='ignore'):
        plain = type(healthy).forward.__wrapped__(healthy, ids)[0]  # the method without its check
    assert np.array_equal(healthy.forward(ids)[0], plain) and np.isfinite(plain).all()
