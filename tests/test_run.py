"""
train.py's run bookkeeping (microgpt/programs/run.py, runlog.py): what keeps a run's data and
checkpoint safe from an unlucky command or machine (each test names the trouble), and the loop,
whatever engine computes a step.
"""

import errno
import os
import re
import signal
import stat
import subprocess
import sys

import pytest

import microgpt.edge.checkpoint
import microgpt.edge.limits
from microgpt.programs import train
from helpers import (QUIET, REPO_DIR, TINY, TINY_NAMES, assert_one_line_error, log_of, losses, run, running, train_args)
from microgpt.edge.checkpoint import read_checkpoint
from microgpt.model import GPT, GPTConfig
from microgpt.optim import Adam
from microgpt.tokenizer import CharTokenizer
from microgpt.training import doc_losses, doc_tokens, learning_rate

UNFUSED_TOL = 1e-12  # composed vs fused blocks: the same math in another float order
BATCH_TOL = 1e-12


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


def trained_at(folder, name, names_file, capsys, *extra):
    """A trained, resumable run at folder/name (its checkpoint, best file and log)."""
    out = folder / name
    assert run(train.main, train_args(names_file, out, '--steps', '4', '--eval-every', '2', *extra), capsys)[0] == 0
    return out


def test_a_fresh_run_never_takes_another_runs_checkpoint_for_its_best(tmp_path, names_file, capsys):
    """A run whose checkpoint is x.best.json (an older microgpt let --out name it) is not the best
    file of a fresh run at x.json: neither that run nor --force touches it or its log."""
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


def test_a_symlinked_out_is_written_through_and_stays_a_link(tmp_path, names_file, capsys):
    """The log and the best validation's weights go beside the file written, so that every name
    of one checkpoint shares one log and lock."""
    target = tmp_path / 'real' / 'model.json'
    target.parent.mkdir()
    link = tmp_path / 'model.json'
    link.symlink_to(target)
    assert run(train.main, train_args(names_file, link, '--steps', '2'), capsys)[0] == 0
    assert os.readlink(link) == str(target) and read_checkpoint(str(target)).train_state.step == 2
    assert sorted(os.listdir(tmp_path)) == ['model.json', 'real']
    assert sorted(os.listdir(target.parent)) == ['model.best.json', 'model.json', 'model.log.jsonl']


def test_a_save_killed_mid_write_leaves_a_temporary_file_the_next_run_removes(tmp_path, names_file, capsys):
    out = tmp_path / 'model.json'
    stale = tmp_path / '.model.json.0123abcd.tmp'   # what SIGKILL during a save leaves
    stale.write_text('{"format": "microgpt", "vers')  # (what is not ours stays: tests/test_damaged.py)
    assert run(train.main, train_args(names_file, out, '--steps', '2'), capsys)[0] == 0
    assert not stale.exists()


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


def stop_a_run(tmp_path, names_file, how, extra=()):
    """A train.py process logging steps, stopped by `how(proc)` after 5 of them: (proc, stdout, stderr)."""
    out = tmp_path / 'model.json'
    proc = running(tmp_path, train_args(names_file, out, '--steps', '100000', '--save-every', '0', *extra), 5)
    try:
        how(proc)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc, stdout, stderr


def assert_saved_and_resumable(out, output, words):
    saved = read_checkpoint(str(out)).train_state.step
    assert saved >= 2 and losses(log_of(out))[-1]['step'] == saved  # 5 lines logged: 2 steps at least
    assert f'{words} after step {saved}; saved {out}. Resume with:\n  python train.py --out {out} --resume' in output


@pytest.mark.parametrize('signum, words', [(signal.SIGTERM, 'terminated'), (signal.SIGHUP, 'the terminal closed')])
def test_sigterm_and_a_closed_terminal_save_like_ctrl_c(tmp_path, names_file, signum, words):
    """SIGHUP once killed train.py without saving (exit 129, 778 steps lost)."""
    proc, stdout, stderr = stop_a_run(tmp_path, names_file, lambda p: p.send_signal(signum))
    assert proc.returncode == 128 + signum and 'Traceback' not in stderr, stderr
    assert_saved_and_resumable(tmp_path / 'model.json', stdout + stderr, words)


def test_a_closed_stdout_saves_and_exits_non_zero(tmp_path, names_file):
    """`train.py | head`: the run saves, says how to resume on stderr, exits 141 (128 + SIGPIPE).
    --eval-every 1 prints a line a step, so the closed pipe is found at once."""
    proc, _, stderr = stop_a_run(tmp_path, names_file, lambda p: p.stdout.close(), extra=['--eval-every', '1'])
    assert proc.returncode == 141, stderr
    assert_saved_and_resumable(tmp_path / 'model.json', stderr, 'its output closed')
    assert 'Exception ignored' not in stderr and 'Traceback' not in stderr


def test_two_runs_on_one_out_the_second_refuses(tmp_path, names_file):
    out = tmp_path / 'model.json'
    args = train_args(names_file, out, '--steps', '100000', '--save-every', '0')
    first = running(tmp_path, args, 3)
    log = tmp_path / 'model.log.jsonl'
    try:
        second = subprocess.run([sys.executable, os.path.join(REPO_DIR, 'train.py'), *args], cwd=tmp_path,
                                capture_output=True, text=True, timeout=60)
        assert_one_line_error(second.returncode, second.stderr, f'another train.py is writing {out}')
        assert log.read_text().count('\n') >= 3  # the first run's log was not truncated
        first.send_signal(signal.SIGINT)
        assert first.wait(timeout=60) == 130
    finally:
        first.kill()


# ---------------------------------------------------------------------------- a damaged log
@pytest.fixture
def finished(tmp_path, names_file, capsys):
    out = tmp_path / 'model.json'
    assert run(train.main, train_args(names_file, out, '--steps', '4'), capsys)[0] == 0
    return out


@pytest.mark.parametrize('garbage', [b'{"step": 3, "loss": \xff\xfe}\n{"step": 2', b'\0' * 100_000,
                                     b'{"step": 3}\n{"step": 2, "loss": 1e400}\n{"step": 1, "val_loss": -1}\n'],
                         ids=['cut-short', 'nul-bytes', 'what-lab-loss-refuses'])
def test_resume_survives_a_damaged_log(finished, capsys, garbage):
    """What a crash leaves past the saved steps (a line cut short, bytes that are not text, a
    tail of NUL bytes), and lines `lab loss` would refuse, are cut off: the resumed run's log is
    the uninterrupted run's, and `lab loss` reads it."""
    from microgpt.lab.loss import read_log
    log = finished.parent / 'model.log.jsonl'
    log.write_bytes(log.read_bytes() + garbage)
    code, _, err = run(train.main, ['--out', str(finished), '--resume', '--steps', '6'], capsys)
    assert code == 0, err
    assert [step for step, _, _ in read_log(str(log))[0]] == [1, 2, 3, 4, 5, 6]


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
def test_a_batch_step_is_the_token_weighted_mean_of_its_names(tmp_path, names_file, capsys):
    """Step s trains names (s-1)*B .. s*B-1 (wrapping); the loss is the mean over every
    predicted token of the batch, so a long name weighs more than a short one."""
    out = tmp_path / 'model.json'
    assert run(train.main, ['--data', names_file, '--out', str(out), '--steps', '3', '--batch-size', '4',
                            '--no-shuffle', '--val-size', str(len(TINY_NAMES) - 10), *TINY, *QUIET], capsys)[0] == 0
    train_docs = TINY_NAMES[:10]  # 3 steps of 4: the third wraps round to the first names
    tok = CharTokenizer.from_docs(TINY_NAMES)
    model = GPT(GPTConfig(tok.vocab_size, n_layer=1, n_embd=8, n_head=2, block_size=12), seed=42, tokenizer=tok)
    opt = Adam(model.params)
    expected = []
    for s in range(3):
        names = [train_docs[(s * 4 + b) % 10] for b in range(4)]
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
    code, stdout, _ = run(train.main, train_args(names_file, unfused, '--steps', '15', '--unfused'), capsys)
    assert code == 0 and 'engine=scalar-unfused batch_size=1' in stdout
    a, b = losses(log_of(fused)), losses(log_of(unfused))
    assert len(a) == len(b) == 15
    assert max(abs(x['loss'] - y['loss']) for x, y in zip(a, b)) < UNFUSED_TOL


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


def test_the_lock_holds_by_any_name_and_before_the_checkpoint_is_read(finished, names_file, capsys):
    """The lock is on the log of the file written, taken before the checkpoint is read: with it
    held, a link to the checkpoint is refused, and a damaged checkpoint is answered by the lock."""
    from microgpt.programs.runlog import log_path_for, open_locked_log
    link = finished.parent / 'b.json'
    link.symlink_to(finished)
    held = open_locked_log(log_path_for(str(finished)), str(finished))  # run A, writing a.json
    try:
        before = files_of(finished.parent)
        for extra in (['--seed', '7', '--force'], ['--resume', '--steps', '8']):
            code, _, err = run(train.main, train_args(names_file, link, *extra), capsys)
            assert_one_line_error(code, err, f'another train.py is writing {link} right now')
        finished.write_text('{"format": "microgpt", "version": 1')  # cut short: unreadable
        code, _, err = run(train.main, ['--out', str(finished), '--resume', '--steps', '8'], capsys)
        assert_one_line_error(code, err, 'another train.py is writing')
        assert files_of(finished.parent) == {**before, 'model.json': finished.read_bytes()}
    finally:
        held.close()
    code, _, err = run(train.main, ['--out', str(finished), '--resume', '--steps', '8'], capsys)
    assert_one_line_error(code, err, 'is not valid JSON')


def test_two_checkpoint_names_never_share_a_log(tmp_path, names_file, capsys):
    """A checkpoint's name ends in its format's extension, and its log is that name's stem."""
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


def test_a_model_over_the_parameter_cap_is_refused_and_one_at_it_reads_back(tmp_path, names_file, capsys):
    """22M parameters once trained, saved 1.4 GB, and no reader would open it: refused at once.
    limits.MAX_PARAMETERS keeps every run's checkpoint readable: the longest floats repr()
    writes, with Adam's two moments, take under 27 bytes a number, so a model at the cap stays
    within limits.MAX_FILE_BYTES."""
    code, stdout, err = run(train.main, train_args(names_file, tmp_path / 'huge.json', '--n-embd', '512',
                                                   '--n-layer', '7', '--n-head', '4', '--block-size', '16'), capsys)
    assert_one_line_error(code, err, 'this model has 22,054,912 parameters; microgpt trains and reads at most 10,000,000')
    assert stdout == '' and os.listdir(tmp_path) == []
    from microgpt.edge.checkpoint import Checkpoint, SavedRun, TrainState, write_checkpoint
    from microgpt.edge.limits import MAX_FILE_BYTES, MAX_PARAMETERS, parameter_count
    worst, config = -2.2250738585072014e-308, GPTConfig(vocab_size=40, n_layer=2, n_embd=16, n_head=2, block_size=5)
    model = GPT(config, tokenizer=CharTokenizer([chr(0x1F600 + i) for i in range(39)]))  # escaped pairs
    weights, n = {k: [[worst] * len(row) for row in m] for k, m in model.weights().items()}, parameter_count(config)
    state = TrainState(1, SavedRun(data=None, val_size=None, shuffle=True, steps=1000, lr=0.01, seed=42), '0' * 64)
    path = tmp_path / 'model.json'
    write_checkpoint(str(path), Checkpoint.of(model, optimizer={'t': 1, 'm': [worst] * n, 'v': [worst] * n},
                                              train_state=state, weights=weights))
    assert path.stat().st_size < 27 * 3 * n
    assert 27 * 3 * MAX_PARAMETERS < MAX_FILE_BYTES


def test_a_log_that_cannot_grow_is_one_line_and_the_checkpoint_kept(tmp_path, names_file, capsys, monkeypatch):
    """A full disk where the log goes: one line (closing the log once flushed again: a traceback)."""
    from microgpt.programs.runlog import Log
    out, real, lines = tmp_path / 'model.json', Log.write, []

    def full_after_six(log, entry):
        lines.append(entry)
        if len(lines) > 6:
            raise OSError(errno.ENOSPC, 'No space left on device')
        real(log, entry)
    monkeypatch.setattr(Log, 'write', full_after_six)
    code, _, err = run(train.main, train_args(names_file, out, '--steps', '8', '--save-every', '4'), capsys)
    assert_one_line_error(code, err, f'could not write the log {tmp_path / "model.log.jsonl"}: the disk is full; '
                                     f'{out} holds step 4: resume with python train.py --out {out} --resume')
    assert read_checkpoint(str(out)).train_state.step == 4


def test_a_learning_rate_that_explodes_stops_before_the_log_holds_what_lab_loss_refuses(tmp_path, names_file, capsys):
    """A loss beyond limits.MAX_LOSS is divergence: --lr 1e10 once left a log `lab loss` refuses."""
    from microgpt.lab.loss import read_log
    out = tmp_path / 'model.json'
    code, _, err = run(train.main, train_args(names_file, out, '--steps', '20', '--lr', '1e10'), capsys)
    assert code == 1
    assert_one_line_error(code, err, 'more than any log keeps (1e+06) at step ')
    assert 'training diverged): lower --lr (now 10000000000.0)' in err
    train_records, _ = read_log(str(out)[:-len('.json')] + '.log.jsonl')
    assert train_records and not out.exists()


def test_a_diverging_run_is_said_to_diverge_and_a_stable_one_is_not(tmp_path, names_file, capsys):
    """A loss far above ln(vocab_size) is a warning on stderr while the run goes and at its end;
    the default lr never gives one (the negative control)."""
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
    (b'', 'has no documents'),
    (b'emma\nav\x00a\n', 'line 2 holds the control character U+0000'),
    (b'emma\rava\rm\x1bia', 'line 3 holds the control character U+001B'),
    (b'emma\tcount\n', 'line 1 holds the control character U+0009'),
    (b'emma\rava\rmi\xffa', 'line 3 is not valid UTF-8'),
], ids=['empty', 'nul', 'escape-after-cr-lines', 'tab', 'bad-utf8-after-cr-lines'])
def test_control_characters_and_other_bad_data_are_one_line(tmp_path, capsys, content, fragment):
    data = tmp_path / 'names.txt'
    data.write_bytes(content)
    code, stdout, err = run(train.main, ['--data', str(data), '--out', str(tmp_path / 'm.json')], capsys)
    assert_one_line_error(code, err, fragment)
    assert stdout == '' and sorted(os.listdir(tmp_path)) == ['names.txt']


def test_a_model_trained_on_nfd_text_samples_an_nfc_prompt(tmp_path, capsys):
    """Both the data and sample.py's prompt are NFC, so either spelling of é is one token."""
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


def test_resuming_with_more_steps_says_the_learning_rate_jumps(finished, capsys):
    """The decay is spread over the new total: step 4 of 4 trained at lr 0.01/4, step 5 of 8
    trains at 0.01 * 4/8. The rule is in --help (tested below), and the jump is printed when it happens."""
    code, stdout, _ = run(train.main, ['--out', str(finished), '--resume', '--steps', '8'], capsys)
    assert code == 0
    assert ('note: the learning rate now decays to 0 over 8 steps instead of 4: step 4 trained at lr 0.0025, '
            'step 5 trains at 0.005') in stdout
    assert [e['lr'] for e in losses(log_of(finished))][3:5] == [learning_rate(0.01, 3, 4), learning_rate(0.01, 4, 8)]


def test_a_reproduce_original_run_resumes_with_more_steps(tmp_path, names_file, capsys, monkeypatch):
    """It was a dead end (drop --reproduce-original, a flag the user never passed): it goes on,
    and says that from there on it is no longer the original's run."""
    from helpers import interrupt_after
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


def test_help_shows_every_real_default_and_the_resume_rule(capsys):
    """--help shows each flag's default, and a resumed run's rule (settings.ON_RESUME)."""
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
    assert 'the learning rate\'s decay is then spread over the new total' in text
    assert set(ON_RESUME) <= set(vars(args)) and set(SAVED) == set(ON_RESUME) - {'n_layer', 'n_embd', 'n_head',
                                                                                  'block_size', 'vocab_size'}
    assert train.parse_args(['--seed', '42', '--no-shuffle'])[1] == {'seed', 'shuffle'}


def test_a_signal_caught_while_the_ranks_agree_stops_them_after_the_next_step(tmp_path, names_file):
    """Under torchrun a signal usually lands while agree() waits for the other ranks, after this
    rank's number was sent: it counts at the next step's agreement, not written over by this one's
    answer (it was, and 1 run in 5 trained on to its last step)."""
    from microgpt.programs.run import Output, Run
    from microgpt.programs.settings import resolve_settings

    class OneRank:  # agree() as torchgpt.distributed.World's, for a world of this rank alone
        calls = []

        def agree(self, signum):
            if not self.calls:
                run._on_signal(signal.SIGINT, None)  # Ctrl-C while the all-reduce waits
            self.calls.append(signum)
            return signum

        def rank0_works_alone(self):  # nothing to wait for in a world of one
            pass
    flags, given = train.parse_args(train_args(names_file, tmp_path / 'model.json'))
    settings = resolve_settings(flags, given)
    built = train.build(settings, None)
    built.trainer.world = OneRank()  # as torchgpt's trainer holds its World
    with Output(flags.out, True, False) as output, Run(settings, output, built) as run:
        run.log_step(1, 3.0, 0.01)
        assert run.stop_signal is None  # the ranks sent None at step 1: none stops there
        run.log_step(2, 3.0, 0.01)
        assert run.world.calls == [None, signal.SIGINT] and run.stop_signal == signal.SIGINT
