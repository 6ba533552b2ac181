"""
Tests of train.py's run bookkeeping (microgpt/programs/run.py): what keeps a run's data and checkpoint
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
import re
import signal
import stat
import subprocess
import sys
import time

import pytest

import microgpt.edge.checkpoint
import microgpt.edge.limits
from microgpt.programs import train
from conftest import REPO_DIR, TINY_NAMES
from microgpt.edge.checkpoint import read_checkpoint
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
    assert read_checkpoint(str(out)).train_state.step == 3
    assert [e['step'] for e in losses(log_of(out))] == [1, 2, 3]


def trained_at(folder, name, names_file, capsys, *extra):
    """A trained, resumable run at folder/name (its checkpoint, best file and log)."""
    out = folder / name
    assert run(train.main, train_args(names_file, out, '--steps', '4', '--eval-every', '2', *extra), capsys)[0] == 0
    return out


def test_a_fresh_run_never_takes_another_runs_checkpoint_for_its_best(tmp_path, names_file, capsys):
    """A run whose checkpoint is x.best.json (an older microgpt let --out name it) is not the
    best file of a fresh run at x.json: neither that run nor --force removes it or its log."""
    other = trained_at(tmp_path / 'b', 'y.json', names_file, capsys)
    for suffix in ('.json', '.log.jsonl'):  # moved to x.best.json as that older microgpt would have named it
        os.rename(str(other)[:-5] + suffix, tmp_path / 'b' / f'x.best{suffix}')
    os.remove(tmp_path / 'b' / 'y.best.json')
    before = files_of(tmp_path / 'b')
    for extra in ([], ['--force']):
        code, stdout, err = run(train.main, train_args(names_file, tmp_path / 'b' / 'x.json', '--steps', '2', *extra),
                                capsys)
        assert_one_line_error(code, err, 'is the checkpoint of another run')
        assert stdout == '' and files_of(tmp_path / 'b') == before
    code, _, err = run(train.main, train_args(names_file, tmp_path / 'b' / 'x.best.json', '--resume', '--steps', '6'),
                       capsys)
    assert_one_line_error(code, err, 'where the run at')  # a best file's name is never a run's --out
    assert files_of(tmp_path / 'b') == before


def test_a_run_stopped_before_its_first_save_keeps_its_best_and_log(tmp_path, names_file, capsys):
    """Killed after it saved r.best.json and before any r.json: a fresh run at r.json without
    --force refuses, every byte kept; --force replaces them."""
    out = trained_at(tmp_path, 'r.json', names_file, capsys)
    os.remove(out)
    before = files_of(tmp_path)
    code, stdout, err = run(train.main, train_args(names_file, out, '--steps', '2'), capsys)
    assert_one_line_error(code, err, 'r.best.json')
    assert '--force' in err and stdout == '' and files_of(tmp_path) == before
    assert run(train.main, train_args(names_file, out, '--steps', '2', '--force'), capsys)[0] == 0
    assert read_checkpoint(str(out)).train_state.step == 2
    assert [e['step'] for e in losses(log_of(out))] == [1, 2]


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
    assert read_checkpoint(str(target)).train_state.step == 2
    assert stat.S_IMODE(target.stat().st_mode) == 0o644  # what a new file gets under umask 022
    # the log (and the best validation's weights) go beside the file written, so every name of one
    # checkpoint shares one log and lock
    assert sorted(os.listdir(tmp_path)) == ['model.json', 'real']
    assert sorted(os.listdir(target.parent)) == ['model.best.json', 'model.json', 'model.log.jsonl']
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
    monkeypatch.setattr(microgpt.edge.checkpoint.os, 'fsync', disk_full_on_second_save)
    code, _, err = run(train.main, train_args(names_file, out, '--steps', '6', '--save-every', '2'), capsys)
    assert_one_line_error(code, err, f'after step 4: could not write {out}: the disk is full; the previous '
                                     f'{out} is intact; it holds step 2; fix that, then resume: '
                                     f'python train.py --out {out} --resume')
    assert read_checkpoint(str(out)).train_state.step == 2
    assert sorted(os.listdir(tmp_path)) == ['model.json', 'model.log.jsonl']
    assert [e['step'] for e in log_of(out)] == [1, 2]  # the log tells no step the checkpoint lacks
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
    monkeypatch.setattr(microgpt.edge.checkpoint.os, 'open', read_only_after_first_save)
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
    saved = read_checkpoint(str(out)).train_state.step
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
    assert read_checkpoint(str(out)).train_state.run.data == str(moved)


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
            from microgpt import backprop
            interrupt_after(monkeypatch, 6, backprop.Trainer)
        code, _, _ = run(train.main, train_args(names_file, out, '--steps', '12', '--engine', first), capsys)
        monkeypatch.undo()
        assert code == 130 and read_checkpoint(str(out)).train_state.step == 6
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


# ---------------------------------------------------------------------------- the edges of a run
def files_of(folder):
    """Every file under folder (links as links) and its bytes: the exact state a test compares."""
    state = {}
    for root, dirs, names in os.walk(folder):
        for name in names + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, folder)
            state[rel] = ('link', os.readlink(path)) if os.path.islink(path) else open(path, 'rb').read()
    return state


def test_a_symlinked_out_shares_the_lock_of_the_file_it_names(finished, names_file, capsys):
    """A second name for a.json once walked around a.json's lock. The lock is on the log
    of the file written, so b.json -> a.json is refused while a run holds a.json."""
    from microgpt.programs.runlog import log_path_for, open_locked_log
    link = finished.parent / 'b.json'
    link.symlink_to(finished)
    assert log_path_for(str(link)) == log_path_for(str(finished))
    before = files_of(finished.parent)
    held = open_locked_log(log_path_for(str(finished)), str(finished))  # run A, writing a.json
    try:
        for extra in (['--seed', '7', '--force'], ['--resume', '--steps', '8']):
            code, _, err = run(train.main, train_args(names_file, link, *extra), capsys)
            assert_one_line_error(code, err, f'another train.py is writing {link} right now')
        assert files_of(finished.parent) == before  # not even a stale-temporary cleanup
    finally:
        held.close()


def test_the_lock_is_taken_before_the_checkpoint_is_read(finished, names_file, capsys):
    """A --resume once read the checkpoint, then waited for nothing, then took the lock:
    it could resume a step the running run had already saved past. A damaged checkpoint shows
    the order: with the lock held, the answer is the lock, not the damage."""
    from microgpt.programs.runlog import log_path_for, open_locked_log
    finished.write_text('{"format": "microgpt", "version": 1')  # cut short: unreadable
    held = open_locked_log(log_path_for(str(finished)), str(finished))
    try:
        code, _, err = run(train.main, ['--out', str(finished), '--resume', '--steps', '8'], capsys)
        assert_one_line_error(code, err, 'another train.py is writing')
    finally:
        held.close()
    code, _, err = run(train.main, ['--out', str(finished), '--resume', '--steps', '8'], capsys)
    assert_one_line_error(code, err, 'is not valid JSON')


def test_init_onto_itself_is_refused_by_any_name(finished, names_file, capsys):
    """--init out/model.json with the default --out once replaced the model it started from."""
    before = files_of(finished.parent)
    same = finished.parent / '.' / 'model.json'
    link = finished.parent / 'alias.json'
    link.symlink_to(finished)
    for init in (finished, same, link):
        code, _, err = run(train.main, ['--init', str(init), '--data', names_file, '--out', str(finished),
                                        '--force', *QUIET], capsys)
        assert_one_line_error(code, err, f'would overwrite the checkpoint --init starts from {init}')
    assert files_of(finished.parent) == {**before, 'alias.json': ('link', str(finished))}


def stop_a_run(tmp_path, names_file, how, **popen):
    """A train.py process logging steps, stopped by `how(proc)` after 5 of them: (proc, stdout, stderr)."""
    out = tmp_path / 'model.json'
    proc = subprocess.Popen([sys.executable, os.path.join(REPO_DIR, 'train.py'),
                             *train_args(names_file, out, '--steps', '100000', '--save-every', '0', *popen.pop('extra', []))],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = tmp_path / 'model.log.jsonl'
    deadline = time.monotonic() + 60
    try:
        while not (log.exists() and log.read_text().count('\n') >= 5):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.01)
        how(proc)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc, stdout, stderr


def assert_saved_and_resumable(out, stderr, words):
    saved = read_checkpoint(str(out)).train_state.step
    assert saved >= 2 and losses(log_of(out))[-1]['step'] == saved  # 5 lines logged: 2 steps at least
    assert 'Traceback' not in stderr
    assert f'{words} after step {saved}; saved {out}. Resume with:\n  python train.py --out {out} --resume' in stderr


def test_a_closed_terminal_sighup_saves_like_ctrl_c(tmp_path, names_file):
    """SIGHUP once killed train.py without saving (exit 129, 778 steps lost)."""
    proc, _, stderr = stop_a_run(tmp_path, names_file, lambda p: p.send_signal(signal.SIGHUP))
    assert proc.returncode == 128 + signal.SIGHUP, stderr
    assert_saved_and_resumable(tmp_path / 'model.json', stderr, 'the terminal closed')


def test_a_closed_stdout_saves_and_exits_non_zero(tmp_path, names_file):
    """`train.py | head` once ended training with exit status 0 and no word. The reader
    leaves (its end of the pipe closed); the run saves, says how to resume on stderr, exits 141
    (128 + SIGPIPE, what a shell reports). --eval-every 1 prints a line a step, so the closed
    pipe is found at once (a progress line comes every 10 s otherwise)."""
    proc, _, stderr = stop_a_run(tmp_path, names_file, lambda p: p.stdout.close(), extra=['--eval-every', '1'])
    assert proc.returncode == 141, stderr
    assert_saved_and_resumable(tmp_path / 'model.json', stderr, 'its output closed')
    assert 'Exception ignored' not in stderr


def test_two_checkpoint_names_never_share_a_log(tmp_path, names_file, capsys):
    """--out run and --out run.json once shared run.log.jsonl. A checkpoint's name ends
    in its format's extension, and the log is that name's stem."""
    from microgpt.programs.runlog import log_path_for
    code, stdout, err = run(train.main, train_args(names_file, tmp_path / 'run', '--steps', '2'), capsys)
    assert_one_line_error(code, err, f'--out {tmp_path / "run"} does not end in .json')
    assert stdout == '' and os.listdir(tmp_path) == []
    names = ['run.json', 'run.log.json', 'a/run.json', 'run.json.json', 'x.y.json']
    assert len({log_path_for(str(tmp_path / n)) for n in names}) == len(names)
    link = tmp_path / 'link.json'
    link.symlink_to(tmp_path / 'target.txt')  # a link to a name that is not a checkpoint's
    code, _, err = run(train.main, train_args(names_file, link, '--steps', '2'), capsys)
    assert_one_line_error(code, err, f'(a link to {tmp_path / "target.txt"}) does not end in .json')


@pytest.mark.parametrize('engine', ['numpy', 'scalar'])
def test_a_model_too_big_to_read_back_is_refused_before_it_is_built(tmp_path, names_file, capsys, engine):
    """22M parameters once trained, saved 1.4 GB, and no reader would open it. Refused at
    once now, nothing written (the scalar engine would take minutes to build its Values)."""
    t0 = time.monotonic()
    code, stdout, err = run(train.main, ['--data', names_file, '--out', str(tmp_path / 'huge.json'), '--engine',
                                         engine, '--n-embd', '512', '--n-layer', '7'], capsys)
    n_params = microgpt.edge.limits.parameter_count(GPTConfig(vocab_size=26, n_layer=7, n_embd=512, n_head=4,
                                                              block_size=16))
    assert_one_line_error(code, err, f'a model of {n_params:,} parameters makes a checkpoint of up to 1.7 GB with its '
                                     'Adam moments, more than the 1,024 MiB microgpt reads back')
    assert time.monotonic() - t0 < 5 and stdout == '' and os.listdir(tmp_path) == []


def test_the_size_bound_holds_for_the_longest_numbers_json_writes(tmp_path):
    """checkpoint_bytes is an upper bound: a checkpoint of the longest floats repr() writes, with
    its training state, and the longest escaped characters, stays within it (and near it)."""
    from microgpt.edge.checkpoint import Checkpoint, SavedRun, TrainState, checkpoint_bytes, write_checkpoint
    from microgpt.model import parameter_shapes
    worst = -2.2250738585072014e-308  # 24 characters
    config = GPTConfig(vocab_size=40, n_layer=2, n_embd=8, n_head=2, block_size=5)
    model = GPT(config, tokenizer=CharTokenizer([chr(0x1F600 + i) for i in range(39)]))  # escaped pairs
    for p in model.params:
        p.data = worst
    n = sum(a * b for a, b in parameter_shapes(config).values())
    saved_run = SavedRun(data=None, val_size=None, shuffle=True, steps=1000, lr=0.01, seed=42)
    state = TrainState(1, saved_run, '0' * 64)
    path = tmp_path / 'model.json'
    write_checkpoint(str(path), Checkpoint.of(model, optimizer={'t': 1, 'm': [worst] * n, 'v': [worst] * n},
                                              train_state=state))
    size, bound = path.stat().st_size, checkpoint_bytes(str(path), config)
    assert size <= bound < 1.1 * size + 4096


def test_a_log_that_cannot_grow_is_one_line_and_the_checkpoint_kept(tmp_path, names_file, capsys):
    """A full disk (/dev/full, for real) where the log goes once ended in a
    traceback after the one-line error, because closing the log flushed again."""
    out = tmp_path / 'model.json'
    (tmp_path / 'model.log.jsonl').symlink_to('/dev/full')
    code, _, err = run(train.main, train_args(names_file, out, '--steps', '4'), capsys)
    assert_one_line_error(code, err, f'could not write the log {tmp_path / "model.log.jsonl"}: the disk is full; '
                                     'this run saved nothing yet')
    assert files_of(tmp_path) == {'model.log.jsonl': ('link', '/dev/full')}


def test_a_file_size_limit_on_the_log_is_one_line(tmp_path, names_file):
    """The same under a real `ulimit -f`: the log outgrows 16 kB (the checkpoint, of a very
    small model, fits), one line, exit 2, and the checkpoint saved before is whole."""
    resource = pytest.importorskip('resource')
    out = tmp_path / 'model.json'

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (16384, 16384))
    result = subprocess.run([sys.executable, os.path.join(REPO_DIR, 'train.py'), '--data', names_file,
                             '--out', str(out), '--n-embd', '2', '--n-head', '1', '--block-size', '4',
                             '--steps', '5000', '--save-every', '20', *QUIET], cwd=tmp_path, preexec_fn=limit,
                            capture_output=True, text=True, timeout=120)
    assert_one_line_error(result.returncode, result.stderr, 'the file would exceed the file-size limit (ulimit -f); '
                                                            f'{out} holds step ')
    saved = read_checkpoint(str(out)).train_state.step
    assert saved % 20 == 0 and f'holds step {saved}: resume with' in result.stderr


def test_a_log_linked_to_dev_null_is_written_to_and_left_a_link(tmp_path, names_file, capsys):
    """`ln -s /dev/null model.log.jsonl`, a common way to silence a log, once ended in
    OSError from truncate(). A device is written to, never truncated, read or locked."""
    out = tmp_path / 'model.json'
    (tmp_path / 'model.log.jsonl').symlink_to('/dev/null')
    assert run(train.main, train_args(names_file, out, '--steps', '3'), capsys)[0] == 0
    assert run(train.main, ['--out', str(out), '--resume', '--steps', '5'], capsys)[0] == 0
    assert read_checkpoint(str(out)).train_state.step == 5
    assert os.readlink(tmp_path / 'model.log.jsonl') == '/dev/null'


def test_a_learning_rate_that_explodes_stops_before_the_log_holds_what_lab_loss_refuses(tmp_path, names_file, capsys):
    """--lr 1e10 once finished with exit 0 and a log of losses of 1e32 that lab loss
    refuses. A loss beyond limits.MAX_LOSS is divergence now; the log it leaves is readable."""
    from microgpt.lab.loss import read_log
    out = tmp_path / 'model.json'
    code, _, err = run(train.main, train_args(names_file, out, '--steps', '20', '--lr', '1e10'), capsys)
    assert code == 1
    assert_one_line_error(code, err, 'more than any log keeps (1e+06) at step ')
    assert 'training diverged): lower --lr (now 10000000000.0)' in err
    train_records, _ = read_log(str(out)[:-len('.json')] + '.log.jsonl')
    assert train_records and not out.exists()


def test_a_log_over_the_size_cap_is_refused_on_resume_without_reading_it(finished, capsys):
    """--resume once read a 3 GB log whole (25 s, 6.4 GB of memory). Every reader stops
    at 1 GiB: a sparse file one byte over it is refused at once, and left as it was."""
    log = finished.parent / 'model.log.jsonl'
    with open(log, 'r+b') as f:
        f.truncate(microgpt.edge.limits.MAX_FILE_BYTES + 1)  # sparse: no disk used
    t0 = time.monotonic()
    code, _, err = run(train.main, ['--out', str(finished), '--resume', '--steps', '8'], capsys)
    assert_one_line_error(code, err, f'the log {log} is larger than 1,024 MiB, the most microgpt reads')
    assert time.monotonic() - t0 < 5 and log.stat().st_size == microgpt.edge.limits.MAX_FILE_BYTES + 1


def test_a_log_of_nul_bytes_is_read_a_line_at_a_time_on_resume(finished, capsys):
    """A crash can leave megabytes of NUL bytes with no newline: skipped in pieces of
    MAX_LOG_LINE, never held whole, and the good lines around them kept."""
    from microgpt.programs.runlog import MAX_LOG_LINE, _lines
    import io
    pieces = list(_lines(io.BytesIO(b'a\n' + b'\0' * 3_000_000 + b'\nb\n' + b'c' * 10)))
    assert pieces == [(0, b'a\n', 2), (3_000_003, b'b\n', 3_000_005), (3_000_005, b'c' * 10 + b'\n', 3_000_015)]
    log = finished.parent / 'model.log.jsonl'
    good = log.read_bytes()
    log.write_bytes(good + b'\0' * (4 * MAX_LOG_LINE + 7))
    assert run(train.main, ['--out', str(finished), '--resume', '--steps', '6'], capsys)[0] == 0
    assert [e['step'] for e in losses(log_of(finished))] == [1, 2, 3, 4, 5, 6]


def test_a_thousand_folders_deep_out_is_made_and_a_deeper_one_is_one_line(tmp_path, names_file, capsys, monkeypatch):
    """os.makedirs recursed once a folder and ended in RecursionError. Folders are
    made in a loop now: 1,000 deep works (whatever the recursion limit), and a path longer than
    the system takes (2,100 folders, over 4,096 characters) is the file system's one line."""
    monkeypatch.chdir(tmp_path)
    out = 'a/' * 1000 + 'model.json'
    try:
        assert run(train.main, train_args(names_file, out, '--steps', '2'), capsys)[0] == 0
        assert read_checkpoint(out).train_state.step == 2
        deeper = 'b/' * 2100 + 'model.json'
        code, stdout, err = run(train.main, train_args(names_file, deeper, '--steps', '2'), capsys)
        assert_one_line_error(code, err, 'the file name is too long: choose another --out')
        assert stdout == '' and sorted(os.listdir(tmp_path)) == ['a']
    finally:  # by hand, from the bottom: pytest's recursive cleanup would hit the recursion limit
        folder = os.path.dirname(out)
        for name in os.listdir(folder) if os.path.isdir(folder) else []:
            os.remove(os.path.join(folder, name))
        while folder:
            if os.path.isdir(folder):
                os.rmdir(folder)
            folder = os.path.dirname(folder)


def test_a_symlink_loop_at_out_is_refused_and_stays_a_link(tmp_path, names_file, capsys):
    """A link to itself was replaced by a regular file."""
    loop = tmp_path / 'loop.json'
    loop.symlink_to(loop)
    code, _, err = run(train.main, train_args(names_file, loop, '--steps', '2'), capsys)
    assert_one_line_error(code, err, f'--out {loop} is a symbolic link that loops back on itself')
    assert files_of(tmp_path) == {'loop.json': ('link', str(loop))}


def test_a_diverging_run_is_said_to_diverge_and_a_stable_one_is_not(tmp_path, names_file, capsys):
    """Slow divergence (lr 0.3 to 100) finished with exit 0 and no word. A loss far above
    ln(vocab_size) is a warning on stderr while the run goes and at its end; the default lr
    never gives one (the negative control)."""
    code, _, err = run(train.main, train_args(names_file, tmp_path / 'hot.json', '--steps', '60', '--lr', '1.0',
                                              '--engine', 'numpy'), capsys)
    assert code == 0
    lines = err.splitlines()
    assert len(lines) == 2 and lines[0].startswith('warning: the run is diverging: after step 50, the mean of '
                                                   'the last 50 training losses is ')
    assert lines[1].startswith('warning: the run ended diverging: after step 60')
    assert 'far above ln(26) = 3.26' in lines[0] and lines[0].endswith('lower --lr (now 1.0)')
    code, _, err = run(train.main, train_args(names_file, tmp_path / 'cool.json', '--steps', '60'), capsys)
    assert code == 0 and err == ''


def test_the_engines_agree_while_a_run_is_stable(tmp_path, names_file, capsys):
    """The reading guide says why the scalar and numpy engines part in a chaotic run (rounding,
    amplified): at the default lr, 100 steps of either give the same losses to ENGINE_TOL."""
    logs = []
    for engine in ('scalar', 'numpy'):
        out = tmp_path / f'{engine}.json'
        assert run(train.main, train_args(names_file, out, '--steps', '100', '--engine', engine), capsys)[0] == 0
        logs.append(losses(log_of(out)))
    assert [e['step'] for e in logs[0]] == [e['step'] for e in logs[1]] == list(range(1, 101))
    assert max(abs(a['loss'] - b['loss']) for a, b in zip(*logs)) < ENGINE_TOL


@pytest.mark.parametrize('content, docs', [
    ('\ufeffemma\nava\n'.encode(), ['emma', 'ava']),                         # a BOM: not a character
    (b'emma\rava\rmia', ['emma', 'ava', 'mia']),                            # CR alone (old Mac)
    (b'emma\r\nava\r\n\r\nmia\r\n', ['emma', 'ava', 'mia']),                # CRLF, a blank line
    ('jose\u0301\nzoe\u0308\n'.encode(), ['jos\u00e9', 'zo\u00eb']),        # NFD becomes NFC
], ids=['bom', 'cr', 'crlf', 'nfd'])
def test_odd_but_honest_data_is_read_as_meant(tmp_path, content, docs):
    from microgpt.edge.data import load_docs
    path = tmp_path / 'names.txt'
    path.write_bytes(content)
    assert load_docs(str(path)) == docs


@pytest.mark.parametrize('content, fragment', [
    (b'emma\nav\x00a\n', 'line 2 holds the control character U+0000'),
    (b'emma\rava\rm\x1bia', 'line 3 holds the control character U+001B'),
    (b'emma\tcount\n', 'line 1 holds the control character U+0009'),
    (b'emma\rava\rmi\xffa', 'line 3 is not valid UTF-8'),
], ids=['nul', 'escape-after-cr-lines', 'tab', 'bad-utf8-after-cr-lines'])
def test_control_characters_in_data_are_one_line(tmp_path, capsys, content, fragment):
    data = tmp_path / 'names.txt'
    data.write_bytes(content)
    code, stdout, err = run(train.main, ['--data', str(data), '--out', str(tmp_path / 'm.json')], capsys)
    assert_one_line_error(code, err, fragment)
    assert stdout == '' and sorted(os.listdir(tmp_path)) == ['names.txt']


def test_a_model_trained_on_nfd_text_samples_an_nfc_prompt(tmp_path, capsys):
    """Tokens are code points: e + U+0301 and the precomposed é were two vocabularies. Both the
    data and sample.py's prompt are NFC now, so either spelling works."""
    from microgpt.programs import sample
    data = tmp_path / 'names.txt'
    data.write_bytes('jose\u0301\nrene\u0301e\nchloe\n'.encode())
    out = tmp_path / 'm.json'
    assert run(train.main, ['--data', str(data), '--out', str(out), '--steps', '2', '--val-size', '0',
                            *TINY, *QUIET], capsys)[0] == 0
    assert '\u0301' not in read_checkpoint(str(out)).vocab and '\u00e9' in read_checkpoint(str(out)).vocab
    for prompt in ('jos\u00e9', 'jose\u0301'):
        code, names, err = run(sample.main, ['--ckpt', str(out), '--num', '2', '--prompt', prompt], capsys)
        assert code == 0, err
        assert all(n.startswith('jos\u00e9') for n in names.splitlines())


def test_top_k_is_capped_by_the_models_vocabulary(tiny_ckpt, capsys):
    """sample.py took --top-k up to 1,114,113 where the web lab refuses more than vocab_size."""
    from microgpt.programs import sample
    code, out, err = run(sample.main, ['--ckpt', tiny_ckpt, '--top-k', '27'], capsys)
    assert_one_line_error(code, err, "--top-k 27 is more than the model's 26 tokens: use 1..26")
    assert out == ''
    assert run(sample.main, ['--ckpt', tiny_ckpt, '--top-k', '26', '--num', '3'], capsys)[0] == 0


def test_resuming_with_more_steps_says_the_learning_rate_jumps(finished, capsys):
    """The decay is spread over the new total: step 4 of 4 trained at lr 0.01/4, step 5 of 8
    trains at 0.01 * 4/8. The rule is in --help, and the jump is printed when it happens."""
    code, stdout, _ = run(train.main, ['--out', str(finished), '--resume', '--steps', '8'], capsys)
    assert code == 0
    assert ('note: the learning rate now decays to 0 over 8 steps instead of 4: step 4 trained at lr 0.0025, '
            'step 5 trains at 0.005') in stdout
    assert [e['lr'] for e in losses(log_of(finished))][3:5] == [learning_rate(0.01, 3, 4), learning_rate(0.01, 4, 8)]
    with pytest.raises(SystemExit):
        train.parse_args(['--help'])
    assert 'the learning rate\'s decay is then spread over the new total' in ' '.join(capsys.readouterr().out.split())


def test_a_reproduce_original_run_resumes_with_more_steps(tmp_path, names_file, capsys, monkeypatch):
    """It was a dead end: --resume --steps 1200 said "--steps 1200 would change the original's run
    ... drop --reproduce-original", a flag the user never passed. It continues now, and says
    that from there on it is no longer the original's run."""
    from test_cli import interrupt_after
    out = tmp_path / 'model.json'
    interrupt_after(monkeypatch, 3)
    code, _, _ = run(train.main, ['--reproduce-original', '--data', names_file, '--out', str(out),
                                  '--num-samples', '0', '--eval-every', '0'], capsys)
    monkeypatch.undo()
    assert code == 130
    code, stdout, err = run(train.main, ['--out', str(out), '--resume', '--steps', '5', '--num-samples', '0'], capsys)
    assert code == 0, err
    assert "note: the original microgpt.py trains 1000 steps: from step 4 this is no longer the original's run" in stdout
    assert [e['step'] for e in losses(log_of(out))] == [1, 2, 3, 4, 5]
    assert read_checkpoint(str(out)).train_state.run.reproduce_original is True


def test_edited_data_with_new_characters_says_the_data_changed(tmp_path, capsys):
    data = tmp_path / 'names.txt'
    data.write_text('\n'.join(TINY_NAMES[:10]), encoding='utf-8')
    out = tmp_path / 'model.json'
    assert run(train.main, ['--data', str(data), '--out', str(out), '--steps', '3', '--val-size', '0',
                            *TINY, *QUIET], capsys)[0] == 0
    before = files_of(tmp_path)
    data.write_text('\n'.join(TINY_NAMES[:10] + ['Zoë']), encoding='utf-8')  # Z and ë: new characters
    code, _, err = run(train.main, ['--out', str(out), '--resume', '--steps', '6'], capsys)
    assert_one_line_error(code, err, f'the data ({data}) changed since {out} was saved')
    assert {k: v for k, v in files_of(tmp_path).items() if k != 'names.txt'} == \
        {k: v for k, v in before.items() if k != 'names.txt'}


def test_resume_drops_log_lines_that_lab_loss_would_refuse(finished, capsys):
    from microgpt.lab.loss import read_log
    log = finished.parent / 'model.log.jsonl'
    log.write_bytes(log.read_bytes() + b'{"step": 3}\n{"step": 2, "loss": 1e400}\n{"step": 1, "val_loss": -1}\n')
    assert run(train.main, ['--out', str(finished), '--resume', '--steps', '6'], capsys)[0] == 0
    train_records, _ = read_log(str(log))
    assert [s for s, _, _ in train_records] == [1, 2, 3, 4, 5, 6]
    assert b'1e400' not in log.read_bytes() and b'{"step": 3}\n' not in log.read_bytes()


def test_help_shows_every_real_default_and_the_resume_rule(capsys):
    """The flags once defaulted to None, the real values hid in run.py; now --help shows
    each one, and a resumed run's rule is one table (settings.ON_RESUME), named in --help."""
    from microgpt.programs.settings import ON_RESUME, SAVED
    with pytest.raises(SystemExit):
        train.parse_args(['--help'])
    raw = capsys.readouterr().out
    text = ' '.join(raw.split())
    entries = {}  # each flag's entry: from its line '  --flag ...' to the next such line
    for chunk in re.split(r'\n(?=  --)', raw.split('show this help message and exit')[1]):
        entries[chunk.split()[0]] = ' '.join(chunk.split())
    args, given = train.parse_args([])
    assert given == set()
    for name, value in vars(args).items():
        if value is not None and not isinstance(value, bool):
            flag = '--' + name.replace('_', '-')
            assert f'(default {value})' in entries[flag], flag
    assert 'stay the run\'s (they decide its losses); --steps may grow' in text
    assert set(ON_RESUME) <= set(vars(args)) and set(SAVED) == set(ON_RESUME) - {'n_layer', 'n_embd', 'n_head',
                                                                                  'block_size', 'vocab_size'}
    assert train.parse_args(['--seed', '42', '--no-shuffle'])[1] == {'seed', 'shuffle'}


def test_a_signal_caught_while_the_ranks_agree_stops_them_after_the_next_step(tmp_path, names_file):
    """Under torchrun a rank spends most of a step waiting in agree() for the others, so that is
    where a signal usually lands: the handler then runs after this rank's number was sent. It
    must count at the next step's agreement, not be written over by this one's answer (it was:
    1 run in 5 of test_torch_distributed's Ctrl-C test trained on to its last step)."""
    from microgpt.programs.run import Run

    class OneRank:  # agree() as torchgpt.distributed.World's, for a world of this rank alone
        def agree(self, signum):
            if not self.calls:
                run._on_signal(signal.SIGINT, None)  # Ctrl-C while the all-reduce waits
            self.calls.append(signum)
            return signum

        def rank0_works_alone(self):  # nothing to wait for in a world of one
            pass

    from microgpt.programs.run import Output
    from microgpt.programs.settings import settle
    from microgpt.programs.train import build
    flags, given = train.parse_args(train_args(names_file, tmp_path / 'model.json'))
    settings = settle(flags, given)
    built = build(settings, None)
    built.trainer.world = OneRank()  # as torchgpt's trainer holds its World
    built.trainer.world.calls = []
    with Output.of_run(flags) as output, Run(settings, output, built) as run:
        run.log_step(1, 3.0, 0.01)
        assert run.stop_signal is None  # the ranks sent None at step 1: none stops there
        run.log_step(2, 3.0, 0.01)
        assert run.world.calls == [None, signal.SIGINT] and run.stop_signal == signal.SIGINT
