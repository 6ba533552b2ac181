"""
The two records that carry a run: the settings (microgpt/programs/settings.py) and the
checkpoint (microgpt/edge/checkpoint.py), and convert, which is read-then-write of the second.

A run's settings are settled once into a frozen record, by one function, whatever the
command line, the resumed run or the engine says; a checkpoint is one value whichever format
it is in, so converting it between the formats keeps every field (the running-text data mode
too: before, a converted text model sampled names), and convert writes through the same output
checks as train.py: the lock, --force, the real target's format.

Run: .venv/bin/python -m pytest -q tests/test_records.py
"""

import dataclasses
import os
import resource
import struct
import subprocess
import sys
from array import array

import pytest

from conftest import REPO_DIR
from microgpt.edge.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from microgpt.edge.errors import UserError
from microgpt.model import GPTConfig, parameter_shapes
from microgpt.programs import convert, sample, settings, train
from test_cli import QUIET, TINY, assert_one_line_error, run


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
    return settings.settle(flags, given, ckpt, place=settings.torchrun_place(environ or {}))


def test_the_settings_record_is_frozen_and_holds_every_flag():
    s = settled(['--steps', '7', '--engine', 'numpy', '--dtype', 'float32'])
    assert (s.steps, s.engine, s.dtype, s.lr) == (7, 'numpy', 'float32', 0.01)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.steps = 8
    flags, _ = settings.parse_args([])
    assert set(vars(flags)) == {f.name for f in dataclasses.fields(settings.Settings)} - {'rank', 'world_size'}


def test_the_trainers_and_the_loop_read_only_the_record(tmp_path, names_file, monkeypatch):
    """main() hands build and loop the record; the parsed flags are never written to (a
    namespace that refuses writes goes through a whole run)."""
    import argparse

    class ReadOnly(argparse.Namespace):
        def __setattr__(self, name, value):
            if getattr(self, '_sealed', False):
                raise AssertionError(f"the flags were written to: {name} = {value!r}")
            super().__setattr__(name, value)
    real = settings.parse_args

    def sealed(argv=None, prog=None):
        flags, given = real(argv, prog)
        ro = ReadOnly(**vars(flags))
        ro._sealed = True
        return ro, given
    monkeypatch.setattr(train, 'parse_args', sealed)
    seen = []
    real_build = train.build
    monkeypatch.setattr(train, 'build', lambda s, ckpt: seen.append(s) or real_build(s, ckpt))
    out = tmp_path / 'model.json'
    assert train.main(['--data', names_file, '--out', str(out), '--steps', '3', *TINY, *QUIET]) == 0
    assert train.main(['--out', str(out), '--resume', '--steps', '5', '--engine', 'numpy', *QUIET]) == 0
    assert [type(s) for s in seen] == [settings.Settings] * 2 and seen[1].engine == 'numpy' and seen[1].data


@pytest.mark.parametrize('name, rule', sorted(settings.ON_RESUME.items()))
def test_each_resume_rule_through_settle(tmp_path, names_file, name, rule):
    """Every row of ON_RESUME, through the one function: a resumed run keeps (SAME), may grow
    (MORE), takes unless given (HABIT) or takes the checkpoint's (MODEL) that setting."""
    out = tmp_path / 'model.json'
    first = ['--data', names_file, '--out', str(out), '--steps', '4', '--seed', '3', '--lr', '0.02',
             '--batch-size', '2', '--val-size', '6', '--save-every', '2', '--eval-every', '2',
             '--engine', 'numpy', '--dtype', 'float32', *TINY, '--num-samples', '0']
    assert train.main(first) == 0
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
    if rule == settings.HABIT:  # given, it wins
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


def test_convert_refuses_a_trained_model_without_force_and_a_locked_target(text_ckpt, tmp_path, capsys):
    other = tmp_path / 'other.json'
    other.write_bytes(open(text_ckpt, 'rb').read().replace(b'"step": 4', b'"step": 3'))
    before = other.read_bytes()
    code, _, err = run(convert.main, [text_ckpt, str(other)], capsys)
    assert_one_line_error(code, err, f"target {other} already holds a trained model: choose another target, "
                                     "or replace it with --force")
    assert other.read_bytes() == before
    # a run writing the target holds its lock: convert waits for nobody and writes nothing
    from microgpt.programs.runlog import log_path_for, open_locked_log
    log = open_locked_log(log_path_for(str(other)), str(other))
    try:
        code, _, err = run(convert.main, [text_ckpt, str(other), '--force'], capsys)
        assert_one_line_error(code, err, f"another train.py is writing {other} right now")
        assert other.read_bytes() == before
    finally:
        log.close()
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
    """A text with no newline once saved, then exited 2 with 'give --prompt', a flag train.py lacks."""
    data = tmp_path / 'one-line.txt'
    data.write_text('abcab cabba bacca ' * 20)
    code, out, err = run(train.main, ['--data', str(data), '--data-mode', 'text', '--out', str(tmp_path / 'm.json'),
                                      '--steps', '2', '--eval-every', '0', *TINY, '--block-size', '4'], capsys)
    assert code == 0 and err == '' and len(out.split('sample:\n')[1]) > 100


# ---------------------------------------------------------------------------- memory before it is spent
def crafted(path, tensors, metadata):
    """A .safetensors file of F16 zeros: {name: n numbers}, with this metadata."""
    header, offset = {'__metadata__': metadata}, 0
    for name, n in tensors.items():
        header[name] = {'dtype': 'F16', 'shape': [n], 'data_offsets': [offset, offset + 2 * n]}
        offset += 2 * n
    import json
    text = json.dumps(header).encode()
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(text)) + text)
        f.truncate(8 + len(text) + offset)


def read_with_memory_limit(path, limit):
    """The finished process of reading the checkpoint at `path`, as every program does, with at
    most `limit` bytes of heap (the reader alone: numpy's own import needs more than that)."""
    def cap():
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    code = ("import sys\nfrom microgpt.programs import cli\nfrom microgpt.edge.checkpoint import read_checkpoint\n"
            "cli.run(lambda argv: read_checkpoint(sys.argv[1]) and 0)")
    return subprocess.run([sys.executable, '-c', code, str(path)], capture_output=True, text=True,
                          preexec_fn=cap, timeout=60, cwd=REPO_DIR)


def test_a_safetensors_file_is_checked_before_its_numbers_are_read(tmp_path):
    """16 MB of F16 with metadata {"format": "microgpt"} once took 406 MB before its
    refusal, and ended in MemoryError under a memory limit. Now the header and metadata are
    refused before a byte of a tensor is read, within a 96 MiB heap."""
    path = tmp_path / 'crafted.safetensors'
    crafted(path, {'wte': 8_000_000}, {'format': 'microgpt'})
    r = read_with_memory_limit(path, 96 << 20)
    assert r.returncode == 2 and r.stderr.startswith('error: ') and r.stderr.count('\n') == 1, r.stderr
    assert 'holds tensors but no microgpt metadata' in r.stderr


def test_a_real_checkpoint_reads_within_a_small_multiple_of_its_size(tmp_path):
    """The numbers are read into float64 arrays, not a Python float each: a 13 MB checkpoint of
    1.6M weights reads under a heap of 64 MiB plus twice the file."""
    config = GPTConfig(vocab_size=27, n_layer=2, n_embd=256, n_head=4, block_size=64)
    weights = {n: [array('d', [0.01] * n_in) for _ in range(n_out)] for n, (n_out, n_in) in parameter_shapes(config).items()}
    path = tmp_path / 'big.safetensors'
    write_checkpoint(str(path), Checkpoint(config, tuple('abcdefghijklmnopqrstuvwxyz'), weights))
    size = os.path.getsize(path)
    r = read_with_memory_limit(path, (64 << 20) + 2 * size)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize('engine', ['scalar', 'numpy', pytest.param('torch', marks=pytest.mark.torch)])
@pytest.mark.parametrize('sizes', [['--block-size', '65536', '--val-size', '0'], ['--batch-size', '100000', '--block-size', '64']],
                         ids=['block', 'batch'])
def test_a_step_that_cannot_fit_in_memory_is_refused_before_it_starts(tmp_path, capsys, engine, sizes):
    """Was MemoryError, numpy's _ArrayMemoryError (128 GiB) or PyTorch's allocator, with a
    traceback, on every engine. Now one line, at once, naming the size, the memory and the flag."""
    out = tmp_path / 'm.json'
    code, _, err = run(train.main, ['--data', prose(tmp_path, times=2000), '--data-mode', 'text', '--out', str(out),
                                    '--engine', engine, *sizes], capsys)
    assert_one_line_error(code, err, 'GiB this machine has free: lower --batch-size or --block-size')
    assert not out.exists()


def test_the_training_state_and_the_model_config_are_frozen_records(tmp_path, names_file):
    """A checkpoint's training state is one frozen TrainState, read and written by
    edge/checkpoint.py alone: the programs read its fields, and nothing patches it; the same
    for GPTConfig, the model's size."""
    from microgpt.edge.checkpoint import SavedRun, TrainState
    out = tmp_path / 'm.json'
    assert train.main(['--data', names_file, '--out', str(out), '--steps', '3', '--val-size', '6',
                       *TINY, '--num-samples', '0']) == 0
    ckpt = read_checkpoint(str(out), training=True)
    state = ckpt.train_state
    assert isinstance(state, TrainState) and state.step == 3 and state.run.steps == 3
    assert isinstance(state.run, SavedRun) and state.run.data == os.path.abspath(names_file)
    for record, field in ((state, 'step'), (state.run, 'lr'), (ckpt.config, 'n_embd'), (ckpt, 'train_state')):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(record, field, 0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        GPTConfig(vocab_size=5).n_layer = 2


def test_the_saved_run_holds_the_settings_with_a_resume_rule_but_the_models_size():
    """settings.py declares what a run saves (its flags with a resume rule, but the model's
    size); the checkpoint's SavedRun holds exactly those, in that order, which is the file's."""
    from microgpt.edge.checkpoint import SavedRun
    assert [f.name for f in dataclasses.fields(SavedRun)] == settings.SAVED
    assert list(settled(['--steps', '7']).saved().recorded()) == settings.SAVED


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
    """torchrun's RANK and WORLD_SIZE are read once, by the Output that locks --out (settle takes
    them from there); set by hand without MASTER_ADDR and MASTER_PORT they are one line."""
    ranks = {'RANK': '1', 'WORLD_SIZE': '2'}
    assert settings.torchrun_place({}) == (0, None) and settings.torchrun_place(ranks) == (1, 2)
    with pytest.raises(UserError, match='RANK and WORLD_SIZE are set but MASTER_ADDR or MASTER_PORT is not'):
        settled(['--engine', 'torch', '--batch-size', '2'], environ=ranks)
    monkeypatch.setenv('MASTER_ADDR', '127.0.0.1')
    monkeypatch.setenv('MASTER_PORT', '29500')
    assert settled(['--engine', 'torch', '--batch-size', '2'], environ=ranks).rank == 1
