"""
The two records that carry a run, each built once and frozen: the settings (programs/settings.py:
the command line and the resumed run, settled) and the checkpoint (edge/checkpoint.py: one value
whichever its format); and convert, which reads the one and writes it through train.py's checks.
"""

import dataclasses
import os

import pytest

from microgpt.edge.checkpoint import SavedRun, read_checkpoint
from microgpt.edge.errors import UserError
from microgpt.programs import convert, sample, settings, train
from helpers import QUIET, TINY, assert_one_line_error, run


def prose(tmp_path, times=12):
    path = tmp_path / 'prose.txt'
    path.write_text("To be, or not to be, that is the question:\nWhether 'tis nobler in the mind\n" * times)
    return str(path)


@pytest.fixture(scope='module')
def text_ckpt(tmp_path_factory):
    """A running-text checkpoint with its training state, trained 4 steps."""
    folder = tmp_path_factory.mktemp('text')
    out = folder / 'text.json'
    code = train.main(['--data', prose(folder), '--data-mode', 'text', '--out', str(out), '--steps', '4',
                       '--engine', 'numpy', '--batch-size', '2', *TINY, *QUIET])
    assert code == 0
    return str(out)


# ---------------------------------------------------------------------------- the settings record
def settled(argv, ckpt=None, environ=None):
    flags, given = settings.parse_args(argv)
    return settings.resolve_settings(flags, given, ckpt, rank_world=settings.torchrun_rank_world(environ or {}))


def test_the_records_are_frozen_and_the_settings_hold_every_flag(tiny_ckpt):
    """The settings, a checkpoint and its training state are each one frozen record: the
    programs read their fields, and nothing patches one after it is made."""
    s = settled(['--steps', '7', '--engine', 'numpy', '--dtype', 'float32'])
    assert (s.steps, s.engine, s.dtype, s.lr) == (7, 'numpy', 'float32', 0.01)
    flags, _ = settings.parse_args([])
    assert set(vars(flags)) == {f.name for f in dataclasses.fields(settings.Settings)} - {'rank', 'world_size'}
    ckpt = read_checkpoint(tiny_ckpt, training=True)
    for record, field in ((s, 'steps'), (ckpt, 'train_state'), (ckpt.train_state, 'step'), (ckpt.train_state.run, 'lr'),
                          (ckpt.config, 'n_embd')):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(record, field, 0)
    # what a run saves: the settings with a resume rule but the model's size, in the file's order
    assert [f.name for f in dataclasses.fields(SavedRun)] == list(s.saved().recorded()) == settings.SAVED


@pytest.fixture(scope='module')
def resumable(tmp_path_factory, names_file):
    """A 4-step run, saved with settings that differ from every default."""
    out = tmp_path_factory.mktemp('resumable') / 'model.json'
    first = ['--data', names_file, '--out', str(out), '--steps', '4', '--seed', '3', '--lr', '0.02',
             '--batch-size', '2', '--val-size', '6', '--save-every', '2', '--eval-every', '2',
             '--engine', 'numpy', '--dtype', 'float32', *TINY, '--num-samples', '0']
    assert train.main(first) == 0
    return out


@pytest.mark.parametrize('name, rule', sorted(settings.ON_RESUME.items()))
def test_each_resume_rule_through_resolve_settings(resumable, names_file, name, rule):
    """Every row of ON_RESUME, through the one function: a resumed run keeps (SAME), may grow
    (MORE), takes unless given (UNLESS_GIVEN) or takes the checkpoint's (MODEL) that setting."""
    out = resumable
    ckpt = read_checkpoint(str(out), training=True)
    saved = ckpt.train_state.run
    resumed = settled(['--out', str(out), '--resume', '--steps', '6'], ckpt)
    if rule == settings.MODEL:
        assert getattr(resumed, name) == getattr(ckpt.config, name)
        with pytest.raises(Exception, match="contradicts the checkpoint's"):
            value = '300' if name == 'vocab_size' else '64'  # --vocab-size starts at 257: the 256 bytes + BOS
            settled(['--out', str(out), '--resume', '--steps', '6', '--' + name.replace('_', '-'), value], ckpt)
    elif rule == settings.MORE:
        assert resumed.steps == 6 and saved.steps == 4
        with pytest.raises(Exception, match='already trained for 4 steps'):
            settled(['--out', str(out), '--resume', '--steps', '4'], ckpt)
    else:
        assert getattr(resumed, name) == (os.path.abspath(names_file) if name == 'data' else getattr(saved, name))
    if rule == settings.UNLESS_GIVEN:  # given, it wins
        other = {'engine': ['--engine', 'scalar'], 'dtype': ['--dtype', 'float64'],
                 'eval_every': ['--eval-every', '9'], 'save_every': ['--save-every', '9']}[name]
        again = settled(['--out', str(out), '--resume', '--steps', '6', *other], ckpt)
        assert str(getattr(again, name)) == other[1]
    if rule == settings.SAME and name not in ('data', 'reproduce_original', 'data_mode', 'shuffle'):
        value = {'val_size': '5', 'seed': '4', 'lr': '0.03', 'batch_size': '3', 'weight_decay': '0.1',
                 'dropout': '0.3', 'tokenizer': 'bpe'}[name]
        with pytest.raises(Exception, match='differs from the run being resumed'):
            settled(['--out', str(out), '--resume', '--steps', '6', '--' + name.replace('_', '-'), value], ckpt)


# ---------------------------------------------------------------------------- one checkpoint record, both formats
def lists(weights):
    return {name: [list(row) for row in m] for name, m in weights.items()}


def test_a_text_checkpoint_survives_every_format_pair(text_ckpt, tmp_path, capsys):
    """JSON -> safetensors -> JSON and safetensors -> safetensors: the same record, data mode,
    Adam and training state included, and the converted model samples running text."""
    original = read_checkpoint(text_ckpt, training=True)
    a, b, c = (str(tmp_path / n) for n in ('a.safetensors', 'b.json', 'c.safetensors'))
    for source, target in ((text_ckpt, a), (a, b), (a, c)):
        assert run(convert.main, [source, target], capsys)[0] == 0
        got = read_checkpoint(target, training=True)
        assert got.data_mode == 'text' and got.config == original.config and got.vocab == original.vocab
        assert lists(got.weights) == lists(original.weights) and got.train_state == original.train_state
        assert [list(got.optimizer[k]) for k in 'mv'] == [original.optimizer[k] for k in 'mv']
    assert open(b, 'rb').read() == open(text_ckpt, 'rb').read()  # JSON back: the very bytes train.py wrote
    code, out, _ = run(sample.main, ['--ckpt', c, '--length', '30', '--prompt', 'To be'], capsys)
    assert code == 0 and out.startswith('To be') and len(out) == len('To be') + 30 + 1


def test_convert_replaces_a_trained_model_only_with_force(text_ckpt, tmp_path, capsys):
    other = tmp_path / 'other.json'
    other.write_bytes(open(text_ckpt, 'rb').read().replace(b'"step": 4', b'"step": 3'))
    before = other.read_bytes()
    code, _, err = run(convert.main, [text_ckpt, str(other)], capsys)
    assert_one_line_error(code, err, f"target {other} already holds a trained model: choose another target, "
                                     "or replace it with --force")
    assert other.read_bytes() == before
    assert run(convert.main, [text_ckpt, str(other), '--force'], capsys)[0] == 0
    assert other.read_bytes() == open(text_ckpt, 'rb').read()


def test_a_link_is_written_in_its_targets_format_and_resumes(text_ckpt, tmp_path, capsys):
    """lnk.safetensors -> t.json is written as its target's JSON (once as safetensors under that name)."""
    target = tmp_path / 't.json'
    target.write_bytes(open(text_ckpt, 'rb').read())
    link = tmp_path / 'lnk.safetensors'
    link.symlink_to(target)
    code, _, err = run(train.main, ['--out', str(link), '--resume', '--steps', '6', *QUIET], capsys)
    assert code == 0, err
    assert target.read_bytes().startswith(b'{"format": "microgpt"') and link.is_symlink()
    assert read_checkpoint(str(link), training=True).train_state.step == 6


def test_a_text_without_a_newline_trains_and_samples_from_its_first_character(tmp_path, capsys):
    """It once saved, then exited 2 with 'give --prompt', a flag train.py lacks."""
    data = tmp_path / 'one-line.txt'
    data.write_text('abcab cabba bacca ' * 20)
    code, out, err = run(train.main, ['--data', str(data), '--data-mode', 'text', '--out', str(tmp_path / 'm.json'),
                                      '--steps', '2', '--eval-every', '0', *TINY, '--block-size', '4'], capsys)
    assert code == 0 and err == '' and len(out.split('sample:\n')[1]) > 100


# ---------------------------------------------------------------------------- a run too large for this machine
@pytest.mark.parametrize('where', ['build', 'step'])
def test_a_run_that_does_not_fit_in_memory_is_one_line_and_keeps_the_checkpoint(tmp_path, names_file, capsys,
                                                                                  monkeypatch, where):
    """A MemoryError (numpy's of 128 GiB) building the engine or taking a step is one line."""
    out = tmp_path / 'm.json'
    assert run(train.main, ['--data', names_file, '--out', str(out), '--steps', '2', *TINY, *QUIET], capsys)[0] == 0
    before = out.read_bytes()

    def no_memory(*args, **kwargs):
        raise MemoryError
    monkeypatch.setattr(*((train, 'make_trainer') if where == 'build' else (train.ScalarTrainer, 'step')), no_memory)
    code, _, err = run(train.main, ['--out', str(out), '--resume', '--steps', '4'], capsys)
    assert_one_line_error(code, err, "this run's training step does not fit in this machine's memory: lower "
                                     "--batch-size or --block-size")
    assert out.read_bytes() == before


def test_a_run_saved_before_a_setting_existed_reads_as_it_trained(tmp_path, names_file):
    """A run saved before running text, decay, dropout, byte pairs or the engine flags reads as
    names, no decay, no dropout, characters; what it did not record at all is the command line's
    on resume. A required setting missing is a damaged training state."""
    import json
    out = tmp_path / 'old.json'
    assert train.main(['--data', names_file, '--out', str(out), '--steps', '3', '--val-size', '6', '--engine',
                       'numpy', *TINY, '--num-samples', '0']) == 0
    obj = json.loads(out.read_text())
    old = {k: obj['train_state']['run'][k] for k in ('data', 'val_size', 'shuffle', 'seed', 'lr', 'steps')}
    obj['train_state']['run'] = old
    out.write_text(json.dumps(obj))
    run = read_checkpoint(str(out), training=True).train_state.run
    assert (run.data_mode, run.weight_decay, run.dropout, run.tokenizer) == ('lines', 0.0, 0.0, 'char')
    assert run.engine is None
    resumed = settled(['--out', str(out), '--resume', '--steps', '5'], read_checkpoint(str(out), training=True))
    assert resumed.engine == 'scalar' and resumed.lr == old['lr']  # not recorded: the default; recorded: kept
    del obj['train_state']['run']['lr']
    out.write_text(json.dumps(obj))
    with pytest.raises(UserError, match='damaged training state .its lr is missing'):
        read_checkpoint(str(out), training=True)


def test_the_ranks_place_is_read_once_and_needs_torchruns_four_variables(monkeypatch):
    """Set by hand without MASTER_ADDR and MASTER_PORT, RANK and WORLD_SIZE are one line."""
    ranks = {'RANK': '1', 'WORLD_SIZE': '2'}
    assert settings.torchrun_rank_world({}) == (0, None) and settings.torchrun_rank_world(ranks) == (1, 2)
    with pytest.raises(UserError, match='RANK and WORLD_SIZE are set but MASTER_ADDR or MASTER_PORT is not'):
        settled(['--engine', 'torch', '--batch-size', '2'], environ=ranks)
    monkeypatch.setenv('MASTER_ADDR', '127.0.0.1')
    monkeypatch.setenv('MASTER_PORT', '29500')
    assert settled(['--engine', 'torch', '--batch-size', '2'], environ=ranks).rank == 1
