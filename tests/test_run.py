"""
Tests of train.py's run bookkeeping (microgpt/run.py): what keeps a run's data and checkpoint
safe when the user or the machine does something unlucky, and the engine-independent loop.

Each test names the kind of trouble it covers: the data file given as --out, a file that is not
ours at --out, two runs on one --out, SIGTERM, a save killed mid-write, a symlinked --out, a
save that fails mid-run (disk full, simulated), names the file system refuses, a damaged or
hostile training state, a damaged log, a moved data file, and batches and the composed
(--unfused) blocks giving the losses they must.

Run: .venv/bin/python -m pytest -q tests/test_run.py
"""

import errno
import json
import os
import signal
import stat
import subprocess
import sys
import time

import pytest

import microgpt.checkpoint
from microgpt import train
from conftest import REPO_DIR, TINY_NAMES
from microgpt.checkpoint import read_checkpoint
from microgpt.model import GPT, GPTConfig
from microgpt.optim import Adam
from microgpt.tokenizer import CharTokenizer
from microgpt.training import doc_losses, doc_tokens, learning_rate
from test_cli import QUIET, TINY, assert_one_line_error, log_of, losses, run

UNFUSED_TOL = 1e-12  # composed vs fused blocks: the same math in another float order
BATCH_TOL = 1e-12
ENGINE_TOL = 1e-9   # the scalar engine and the numpy path: the same math, rounded differently


def train_args(data, out, *extra):
    return ['--data', str(data), '--out', str(out), '--val-size', '6', *TINY, *QUIET, *extra]


# ---------------------------------------------------------------------------- the user's own files
def test_out_that_is_the_data_file_is_refused_and_the_data_kept(tmp_path, names_file, capsys):
    data = tmp_path / 'names.txt'
    data.write_bytes(open(names_file, 'rb').read())
    before = data.read_bytes()
    code, _, err = run(train.main, train_args(data, data, '--steps', '2'), capsys)
    assert_one_line_error(code, err, 'would overwrite the data file')
    assert data.read_bytes() == before
    # the data reached through a symlink, or as the log's path, is refused too
    link = tmp_path / 'link.json'
    link.symlink_to(data)
    code, _, err = run(train.main, train_args(data, link, '--steps', '2'), capsys)
    assert_one_line_error(code, err, 'would overwrite the data file')
    log_named = tmp_path / 'names.log.jsonl'
    log_named.write_bytes(before)
    code, _, err = run(train.main, train_args(log_named, tmp_path / 'names.json', '--steps', '2'), capsys)
    assert_one_line_error(code, err, 'with the log')
    assert data.read_bytes() == log_named.read_bytes() == before


def test_out_that_is_not_a_checkpoint_is_never_replaced(tmp_path, names_file, capsys):
    out = tmp_path / 'notes.json'
    out.write_text('{"my": "own notes"}')
    code, _, err = run(train.main, train_args(names_file, out, '--steps', '2'), capsys)
    assert_one_line_error(code, err, 'exists and is not a microgpt checkpoint')
    assert out.read_text() == '{"my": "own notes"}'


def test_a_fresh_run_over_a_trained_model_is_refused_unless_forced(tmp_path, names_file, capsys):
    """A fresh run replaced a 300-step model without a word (and Ctrl-C to abort the mistake
    saved the new run over it): now it names --resume and another --out, and --force replaces."""
    out = tmp_path / 'model.json'
    assert run(train.main, train_args(names_file, out, '--steps', '2'), capsys)[0] == 0
    before = {name: (tmp_path / name).read_bytes() for name in os.listdir(tmp_path)}
    code, stdout, err = run(train.main, train_args(names_file, out, '--steps', '3'), capsys)
    assert_one_line_error(code, err, f'--out {out} already holds a trained model: continue it with '
                                     '--resume, write this run elsewhere with another --out, or replace it with --force')
    assert stdout == '' and {name: (tmp_path / name).read_bytes() for name in os.listdir(tmp_path)} == before
    assert run(train.main, train_args(names_file, out, '--steps', '3', '--force'), capsys)[0] == 0
    assert read_checkpoint(str(out))['train_state']['step'] == 3
    assert [e['step'] for e in losses(log_of(out))] == [1, 2, 3]


@pytest.mark.parametrize('out, fragment', [
    ('', '--out is empty'),
    ('somedir/', 'is a directory'),
    ('x' * 300 + '.json', 'the file name is too long'),
], ids=['empty', 'trailing-slash', 'name-too-long'])
def test_out_names_the_file_system_refuses_fail_before_training(tmp_path, names_file, capsys, monkeypatch,
                                                                out, fragment):
    monkeypatch.chdir(tmp_path)
    code, stdout, err = run(train.main, train_args(names_file, out, '--steps', '2'), capsys)
    assert_one_line_error(code, err, fragment)
    assert stdout == '' and os.listdir(tmp_path) == []


def test_a_symlinked_out_is_written_through_with_normal_permissions(tmp_path, names_file, capsys):
    target = tmp_path / 'real' / 'model.json'
    target.parent.mkdir()
    link = tmp_path / 'model.json'
    link.symlink_to(target)
    old_umask = os.umask(0o022)
    try:
        assert run(train.main, train_args(names_file, link, '--steps', '2'), capsys)[0] == 0
    finally:
        os.umask(old_umask)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert read_checkpoint(str(target))['train_state']['step'] == 2
    assert stat.S_IMODE(target.stat().st_mode) == 0o644  # what a new file gets under umask 022
    # the log goes beside the file written, so every name of one checkpoint shares one log and lock
    assert sorted(os.listdir(tmp_path)) == ['model.json', 'real']
    assert sorted(os.listdir(target.parent)) == ['model.json', 'model.log.jsonl']
    assert stat.S_IMODE((target.parent / 'model.log.jsonl').stat().st_mode) == 0o644


def test_a_save_killed_mid_write_leaves_a_temporary_file_the_next_run_removes(tmp_path, names_file, capsys):
    out = tmp_path / 'model.json'
    stale = tmp_path / '.model.json.0123abcd.tmp'   # what SIGKILL during a save leaves
    stale.write_text('{"format": "microgpt", "vers')
    not_ours = tmp_path / '.model.json.notes.tmp'  # another pattern: not ours to remove
    not_ours.write_text('keep me')
    assert run(train.main, train_args(names_file, out, '--steps', '2'), capsys)[0] == 0
    assert not stale.exists() and not_ours.exists()


# ---------------------------------------------------------------------------- failures mid-run
def test_a_save_that_fails_mid_run_is_one_line_and_keeps_the_last_good_checkpoint(
        tmp_path, names_file, capsys, monkeypatch):
    out = tmp_path / 'model.json'
    real_fsync = os.fsync
    calls = [0]

    def disk_full_on_second_save(fd):
        if stat.S_ISREG(os.fstat(fd).st_mode):  # a checkpoint's data, not its folder
            calls[0] += 1
            if calls[0] == 2:
                raise OSError(errno.ENOSPC, 'No space left on device')
        return real_fsync(fd)
    monkeypatch.setattr(microgpt.checkpoint.os, 'fsync', disk_full_on_second_save)
    code, _, err = run(train.main, train_args(names_file, out, '--steps', '6', '--save-every', '2'), capsys)
    assert_one_line_error(code, err, f'after step 4: could not write {out}: the disk is full; the previous '
                                     f'{out} is intact; it holds step 2; fix that, then resume: '
                                     f'python train.py --out {out} --resume')
    assert read_checkpoint(str(out))['train_state']['step'] == 2
    assert sorted(os.listdir(tmp_path)) == ['model.json', 'model.log.jsonl']
    monkeypatch.undo()
    code, _, err = run(train.main, ['--out', str(out), '--resume'], capsys)  # the advice works
    assert code == 0, err


def test_a_folder_made_read_only_mid_run_is_one_line(tmp_path, names_file, capsys, monkeypatch):
    out = tmp_path / 'model.json'
    real_open = os.open

    def read_only_after_first_save(path, flags, *args):
        if str(path).endswith('.tmp') and (tmp_path / 'model.json').exists():
            raise OSError(errno.EROFS, 'Read-only file system')
        return real_open(path, flags, *args)
    monkeypatch.setattr(microgpt.checkpoint.os, 'open', read_only_after_first_save)
    code, _, err = run(train.main, train_args(names_file, out, '--steps', '4', '--save-every', '2'), capsys)
    assert_one_line_error(code, err, 'after step 4: could not write')
    assert 'read-only file system' in err


def long_run_logging(tmp_path, args, lines):
    """A train.py process that has logged at least `lines` steps (it runs on after that)."""
    proc = subprocess.Popen([sys.executable, os.path.join(REPO_DIR, 'train.py'), *args], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = tmp_path / 'model.log.jsonl'
    deadline = time.monotonic() + 60
    while not (log.exists() and log.read_text().count('\n') >= lines):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"train.py did not log {lines} steps: {proc.communicate()}")
        time.sleep(0.01)
    return proc


def test_sigterm_saves_like_ctrl_c(tmp_path, names_file):
    out = tmp_path / 'model.json'
    proc = long_run_logging(tmp_path, train_args(names_file, out, '--steps', '100000', '--save-every', '0'), 5)
    try:
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    assert 'Traceback' not in stderr
    saved = read_checkpoint(str(out))['train_state']['step']
    assert saved >= 5 and losses(log_of(out))[-1]['step'] == saved
    assert f'terminated after step {saved}; saved {out}' in stdout


def test_two_runs_on_one_out_the_second_refuses(tmp_path, names_file):
    out = tmp_path / 'model.json'
    args = train_args(names_file, out, '--steps', '100000', '--save-every', '0')
    first = long_run_logging(tmp_path, args, 3)
    log = tmp_path / 'model.log.jsonl'
    try:
        second = subprocess.run([sys.executable, os.path.join(REPO_DIR, 'train.py'), *args], cwd=tmp_path,
                                capture_output=True, text=True, timeout=60)
        assert_one_line_error(second.returncode, second.stderr, f'another train.py is writing {out}')
        assert log.read_text().count('\n') >= 3  # the first run's log was not truncated
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 130
    # the lock died with the first run: a third run may go ahead
    third = subprocess.run([sys.executable, os.path.join(REPO_DIR, 'train.py'),
                            *train_args(names_file, out, '--steps', '2', '--force')], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)
    assert third.returncode == 0, third.stderr


# ---------------------------------------------------------------------------- damaged or hostile state
@pytest.fixture
def finished(tmp_path, names_file, capsys):
    out = tmp_path / 'model.json'
    assert run(train.main, train_args(names_file, out, '--steps', '4'), capsys)[0] == 0
    return out


@pytest.mark.parametrize('damage', [
    lambda s: s['run'].update(steps='70'),
    lambda s: s['run'].update(lr='0.01'),
    lambda s: s['run'].update(seed=[1, 2]),
    lambda s: s['adam'].update(t=-1),
    lambda s: s['run'].update(data=0),
    lambda s: s['run'].update(data=1),
    lambda s: s['run'].update(shuffle=1),
    lambda s: s['run'].update(batch_size=0),
    lambda s: s['run'].update(engine='gpu'),
    lambda s: s['run'].update(eval_every=-5),
    lambda s: s.update(val_loss='low'),
    lambda s: s.update(step=10 ** 400),
], ids=['steps-string', 'lr-string', 'seed-list', 'adam-t-negative', 'data-0', 'data-1', 'shuffle-int',
        'batch-size-0', 'engine-unknown', 'eval-every-negative', 'val-loss-string', 'step-huge'])
def test_resume_checks_every_field_of_the_training_state(finished, capsys, damage):
    obj = json.loads(finished.read_text())
    damage(obj['train_state'])
    finished.write_text(json.dumps(obj))
    before = finished.read_bytes()
    code, _, err = run(train.main, ['--out', str(finished), '--resume', '--steps', '8'], capsys)
    assert_one_line_error(code, err, 'damaged training state')
    assert finished.read_bytes() == before


def test_resume_survives_a_damaged_log(finished, names_file, capsys):
    log = finished.parent / 'model.log.jsonl'
    good = log.read_bytes()
    log.write_bytes(good + b'{"step": 3, "loss": \xff\xfe}\n' + b'[' * 100_000 + b'\n' + b'{"step": 2')
    code, _, err = run(train.main, ['--out', str(finished), '--resume', '--steps', '6'], capsys)
    assert code == 0, err
    assert [e['step'] for e in losses(log_of(finished))] == [1, 2, 3, 4, 5, 6]


def test_a_directory_where_the_log_goes_is_one_line(tmp_path, names_file, capsys):
    out = tmp_path / 'model.json'
    (tmp_path / 'model.log.jsonl').mkdir()
    code, _, err = run(train.main, train_args(names_file, out, '--steps', '2'), capsys)
    assert_one_line_error(code, err, 'is a directory')
    assert not out.exists()


# ---------------------------------------------------------------------------- resume, exact in everything
def test_resume_accepts_the_same_data_at_a_new_path(tmp_path, names_file, capsys):
    data = tmp_path / 'names.txt'
    data.write_bytes(open(names_file, 'rb').read())
    out = tmp_path / 'model.json'
    assert run(train.main, train_args(data, out, '--steps', '3'), capsys)[0] == 0
    moved = tmp_path / 'moved.txt'
    data.rename(moved)
    code, _, err = run(train.main, ['--out', str(out), '--resume', '--steps', '5'], capsys)
    assert_one_line_error(code, err, f'the run\'s data file {data} is gone: if it moved, pass --data')
    code, _, err = run(train.main, ['--out', str(out), '--resume', '--steps', '5', '--data', str(moved)], capsys)
    assert code == 0, err
    assert read_checkpoint(str(out))['train_state']['run']['data'] == str(moved)


# ---------------------------------------------------------------------------- batches and engines
@pytest.mark.parametrize('extra, fragment', [
    (['--batch-size', '0'], '--batch-size: 0 is out of range'),
    (['--batch-size', '-3'], '--batch-size: -3 is out of range'),
    (['--batch-size', '49'], '--batch-size 49 is larger than the 48 training names'),
    (['--engine', 'gpu'], "--engine: invalid choice: 'gpu'"),
], ids=['batch-0', 'batch-negative', 'batch-too-large', 'engine-unknown'])
def test_bad_batch_sizes_and_engines_are_one_line_errors(tmp_path, names_file, capsys, extra, fragment):
    out = tmp_path / 'model.json'
    code, _, err = run(train.main, train_args(names_file, out, '--steps', '2', *extra), capsys)
    assert_one_line_error(code, err, fragment)
    assert not out.exists()


def test_resume_with_another_batch_size_is_refused(finished, capsys):
    before = finished.read_bytes()
    code, _, err = run(train.main, ['--out', str(finished), '--resume', '--steps', '8', '--batch-size', '2'],
                       capsys)
    assert_one_line_error(code, err, '--batch-size 2 differs from the run being resumed (1)')
    assert finished.read_bytes() == before


def test_a_batch_step_is_the_token_weighted_mean_of_its_names(tmp_path, names_file, capsys):
    """Step s trains names (s-1)*B .. s*B-1 (wrapping); the loss is the mean over every
    predicted token of the batch, so a long name weighs more than a short one."""
    out = tmp_path / 'model.json'
    assert run(train.main, ['--data', names_file, '--out', str(out), '--steps', '3', '--batch-size', '20',
                            '--no-shuffle', '--val-size', '6', *TINY, *QUIET], capsys)[0] == 0
    train_docs = TINY_NAMES[:48]
    tok = CharTokenizer.from_docs(TINY_NAMES)
    model = GPT(GPTConfig(tok.vocab_size, n_layer=1, n_embd=8, n_head=2, block_size=12), seed=42, tokenizer=tok)
    opt = Adam(model.params)
    expected = []
    for s in range(3):
        names = [train_docs[(s * 20 + b) % 48] for b in range(20)]
        per_token = [loss for name in names for loss in doc_losses(model, doc_tokens(tok, name))]
        loss = sum(per_token) / len(per_token)  # composed here: an independent sum
        for p in model.params:
            p.grad = 0.0
        loss.backward()
        opt.step(learning_rate(0.01, s, 3))
        expected.append(loss.data)
    got = [e['loss'] for e in losses(log_of(out))]
    assert max(abs(a - b) for a, b in zip(got, expected)) < BATCH_TOL


def test_unfused_training_logs_the_fused_losses(tmp_path, names_file, capsys):
    """microgpt's composed blocks (ops.py) and the fused ones (fused.py): same losses, step by step."""
    fused, unfused = tmp_path / 'fused.json', tmp_path / 'unfused.json'
    assert run(train.main, train_args(names_file, fused, '--steps', '15'), capsys)[0] == 0
    assert run(train.main, train_args(names_file, unfused, '--steps', '15', '--unfused'), capsys)[0] == 0
    a, b = losses(log_of(fused)), losses(log_of(unfused))
    assert len(a) == len(b) == 15
    assert max(abs(x['loss'] - y['loss']) for x, y in zip(a, b)) < UNFUSED_TOL


def test_the_printed_config_names_the_engine_and_batch_size(tmp_path, names_file, capsys):
    code, stdout, _ = run(train.main, train_args(names_file, tmp_path / 'm.json', '--steps', '1', '--unfused',
                                                 '--batch-size', '2'), capsys)
    assert code == 0
    assert 'engine=scalar-unfused batch_size=2' in stdout


def test_a_checkpoint_from_one_engine_resumes_on_the_other(tmp_path, names_file, capsys, monkeypatch):
    """Batch size 1: a scalar run cut by Ctrl-C at step 6 and resumed with --engine numpy logs
    the losses of the scalar run that never switched (the same math; only rounding differs),
    and the other way round."""
    from test_cli import interrupt_after
    whole = tmp_path / 'whole.json'
    assert run(train.main, train_args(names_file, whole, '--steps', '12'), capsys)[0] == 0
    for first, second in (('scalar', 'numpy'), ('numpy', 'scalar')):
        out = tmp_path / f'{first}-then-{second}.json'
        if first == 'scalar':
            interrupt_after(monkeypatch, 6)
        else:  # the numpy engine's step, cut the same way
            import backprop
            real_step = backprop.Trainer.step
            calls = [0]

            def step_then_ctrl_c(self, batch, lr):
                loss = real_step(self, batch, lr)
                calls[0] += 1
                if calls[0] == 6:
                    os.kill(os.getpid(), signal.SIGINT)
                return loss
            monkeypatch.setattr(backprop.Trainer, 'step', step_then_ctrl_c)
        code, _, _ = run(train.main, train_args(names_file, out, '--steps', '12', '--engine', first), capsys)
        monkeypatch.undo()
        assert code == 130 and read_checkpoint(str(out))['train_state']['step'] == 6
        code, stdout, _ = run(train.main, ['--out', str(out), '--resume', '--engine', second,
                                           '--num-samples', '0'], capsys)
        assert code == 0 and f'engine={second}' in stdout
        got, want = losses(log_of(out)), losses(log_of(whole))
        assert [e['step'] for e in got] == list(range(1, 13))
        assert max(abs(a['loss'] - b['loss']) for a, b in zip(got, want)) < ENGINE_TOL


def test_a_resumed_run_keeps_its_engine_unless_told(tmp_path, names_file, capsys):
    out = tmp_path / 'model.json'
    assert run(train.main, train_args(names_file, out, '--steps', '3', '--engine', 'numpy',
                                      '--batch-size', '4'), capsys)[0] == 0
    code, stdout, _ = run(train.main, ['--out', str(out), '--resume', '--steps', '5'], capsys)
    assert code == 0 and 'engine=numpy batch_size=4' in stdout


def test_a_diverging_numpy_run_stops_like_a_scalar_one(tmp_path, names_file, tiny_ckpt, capsys):
    """Divergence handling is shared: the numpy engine's non-finite step is the same one line,
    exit 1, and the good checkpoint at --out is left as it was."""
    out = tmp_path / 'model.json'
    good = open(tiny_ckpt, 'rb').read()
    out.write_bytes(good)
    code, _, err = run(train.main, train_args(names_file, out, '--steps', '20', '--lr', '1e100',
                                              '--engine', 'numpy', '--batch-size', '2', '--force'), capsys)
    assert code == 1
    assert_one_line_error(code, err, 'at step 2 (training diverged)')
    assert out.read_bytes() == good
