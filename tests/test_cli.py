"""
train.py and sample.py end to end, on tiny models and a few steps, in-process through
cli.run(main, argv) (the guard the scripts run under: the exit status and `error: ...` line a
user sees) and as real processes: the log is a hand-written loop's, loss for loss; a run cut by
a real Ctrl-C and resumed is the uninterrupted run; a bad input is one line; and no failure
(an unwritable --out, divergence) damages a good checkpoint.
"""

import dataclasses
import json
import os
import shlex
import signal
import subprocess
import sys

import pytest

import microgpt.programs.run
from helpers import (POLL_TIMEOUT, QUIET, REPO_DIR, TINY, TINY_NAMES, assert_one_line_error, log_of, losses, run, running)
from microgpt.programs import sample, train
from microgpt import load_checkpoint
from microgpt.edge.checkpoint import read_checkpoint, write_checkpoint
from microgpt.model import GPT, GPTConfig
from microgpt.optim import Adam
from microgpt.tokenizer import CharTokenizer
from microgpt.training import doc_loss, doc_tokens, learning_rate

LR_TOL = 1e-15       # the logged lr is the schedule's float, up to rounding
SIGINT_STEPS = 150   # long enough (~0.5 s) that a Ctrl-C sent after 15 logged steps lands mid-run


def run_script(script, args, cwd):
    return subprocess.run([sys.executable, os.path.join(REPO_DIR, script), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


# ---------------------------------------------------------------------------- train.py end to end
def test_train_prints_its_config_saves_and_logs_a_hand_written_loops_losses(tmp_path, names_file, capsys,
                                                                              monkeypatch):
    """The resolved configuration first; a checkpoint every --save-every steps and at the end;
    a log line per step and per validation. Step s trains on train_docs[(s - 1) % len] with the
    linearly decayed lr, each loss logged at full precision: 60 steps over 48 training names
    also check the wrap-around. The loop is microgpt's recipe written out, not train_step: every
    grad starts at 0."""
    out, saved_steps = tmp_path / 'run' / 'model.json', []
    real_write = microgpt.programs.run.write_checkpoint

    def recording_write(path, ckpt):
        if path == str(out):  # not the best validation's weights, kept beside (tests/test_best_step.py)
            saved_steps.append(ckpt.train_state.step)
        real_write(path, ckpt)
    monkeypatch.setattr(microgpt.programs.run, 'write_checkpoint', recording_write)
    code, stdout, _ = run(train.main, ['--data', names_file, '--out', str(out), '--steps', '60', '--no-shuffle',
                                       '--val-size', '6', '--eval-every', '20', '--save-every', '25',
                                       '--num-samples', '3', *TINY], capsys)
    assert code == 0 and saved_steps == [25, 50, 60]
    assert sorted(os.listdir(out.parent)) == ['model.best.json', 'model.json', 'model.log.jsonl']
    lines = stdout.splitlines()
    assert lines[0].startswith(f'data: {names_file}: 54 names, 48 train / 6 val, vocab 26')
    assert lines[1].startswith('model: n_layer=1 n_embd=8 n_head=2 head_dim=4 block_size=12')
    assert lines[2].startswith('training: steps=60 lr=0.01 seed=42 shuffle=False start_step=0')
    assert 'step 20: val loss' in stdout and 'step 60: val loss' in stdout
    samples = lines[lines.index('samples:') + 1:]
    assert len(samples) == 3 and all(set(s.strip()) <= set(''.join(TINY_NAMES)) for s in samples)

    log = log_of(out)
    steps = losses(log)
    assert [e['step'] for e in steps] == list(range(1, 61))  # one line per step, from 1
    assert all(set(e) == {'step', 'loss', 'lr'} for e in steps)
    assert all(abs(e['lr'] - 0.01 * (1 - (e['step'] - 1) / 60)) <= LR_TOL for e in steps)
    vals = [e for e in log if 'val_loss' in e]
    assert [e['step'] for e in vals] == [20, 40, 60]
    assert all(set(e) == {'step', 'val_loss', 'train_loss', 'val_bpc', 'train_bpc'} for e in vals)
    ckpt = read_checkpoint(str(out), training=True)
    assert ckpt.vocab == tuple(sorted(set(''.join(TINY_NAMES)))) and ckpt.optimizer['t'] == 60
    assert (ckpt.train_state.step, ckpt.train_state.val_loss) == (60, vals[-1]['val_loss'])

    train_docs = TINY_NAMES[:48]  # no shuffle: the last 6 of the file are held out
    tok = CharTokenizer.from_docs(TINY_NAMES)
    model = GPT(GPTConfig(tok.vocab_size, n_layer=1, n_embd=8, n_head=2, block_size=12),
                seed=42, tokenizer=tok, fused=True)  # train.py's blocks: the same sums, bit for bit
    opt = Adam(model.params)
    expected = []
    for s in range(60):
        for p in model.params:
            p.grad = 0.0
        loss = doc_loss(model, doc_tokens(tok, train_docs[s % 48]))
        loss.backward()
        opt.step(learning_rate(0.01, s, 60))
        expected.append(loss.data)
    assert [e['loss'] for e in steps] == expected
    assert load_checkpoint(str(out)).weights() == model.weights()


# ---------------------------------------------------------------------------- sample.py end to end
def test_sample_same_seed_same_names_and_a_prompt(tiny_ckpt, capsys):
    args = ['--ckpt', tiny_ckpt, '--num', '6', '--seed', '7']
    code, first, err = run(sample.main, args, capsys)
    assert code == 0 and err == ''
    names = first.splitlines()
    assert len(names) == 6
    assert all(set(n) <= set(''.join(TINY_NAMES)) and len(n) <= 11 for n in names)
    assert run(sample.main, args, capsys)[1] == first
    assert run(sample.main, ['--ckpt', tiny_ckpt, '--num', '6', '--seed', '8'], capsys)[1] != first
    code, out, _ = run(sample.main, ['--ckpt', tiny_ckpt, '--num', '5', '--prompt', 'ja', '--temperature', '1.5'],
                       capsys)
    assert code == 0 and len(out.splitlines()) == 5 and all(n.startswith('ja') for n in out.splitlines())
    # the longest prompt that leaves room: 11 characters + BOS fill the 12-position block
    code, out, _ = run(sample.main, ['--ckpt', tiny_ckpt, '--num', '2', '--prompt', 'abcdefghijk'], capsys)
    assert code == 0 and all(n.startswith('abcdefghijk') for n in out.splitlines())


@pytest.mark.parametrize('args, fragment', [
    (['--prompt', 'jaZ'], "character 'Z' is not in the vocabulary"),
    (['--prompt', 'abcdefghijkl'], 'use at most 11 characters'),
    (['--top-k', '0'], '--top-k: 0 is out of range: give an integer from 1 to'),
    (['--top-k', '27'], '--top-k is 27: give an integer from 1 to 26'),  # the model's 26 tokens
    (['--temperature', '-1'], '--temperature: -1 is out of range: give a number from 0 to 1000'),
    (['--num', '-2'], '--num'),
    (['--engine', 'gpu'], '--engine'),
    (['--length', '30'], '--length is for running-text models: a names model ends each name at its end token; use --num'),
], ids=['prompt-unknown-char', 'prompt-too-long', 'top-k-0', 'top-k-above-the-vocabulary', 'temperature-negative',
        'num-negative', 'engine-unknown', 'length-on-names'])
def test_sample_bad_input_is_a_one_line_error(tiny_ckpt, capsys, args, fragment):
    code, out, err = run(sample.main, ['--ckpt', tiny_ckpt, *args], capsys)
    assert_one_line_error(code, err, fragment)
    assert out == ''


def test_sample_and_init_read_the_tutorial_export_with_n_head(tmp_path, tiny_ckpt, names_file, capsys):
    model = load_checkpoint(tiny_ckpt)  # n_head 2, which the export does not record
    path = tmp_path / 'tutorial.json'
    path.write_text(json.dumps(dict(model.weights(), _vocab=model.tokenizer.chars, _bos_id=model.tokenizer.bos,
                                    _vocab_size=model.tokenizer.vocab_size)), encoding='utf-8')
    expected = run(sample.main, ['--ckpt', tiny_ckpt, '--num', '5'], capsys)[1]
    code, out, _ = run(sample.main, ['--ckpt', str(path), '--num', '5', '--n-head', '2'], capsys)
    assert code == 0 and out == expected
    out = tmp_path / 'model.json'
    code, stdout, err = run(train.main, ['--init', str(path), '--n-head', '2', '--data', names_file, '--out', str(out),
                                         '--steps', '2', '--no-shuffle', '--val-size', '6', *QUIET], capsys)
    assert code == 0 and 'n_head=2' in stdout, err
    fast = GPT.from_weights(model.config, model.weights(), model.tokenizer, fused=True)  # train.py's blocks
    assert losses(log_of(out))[0]['loss'] == doc_loss(fast, doc_tokens(model.tokenizer, TINY_NAMES[0])).data
    # --n-head is only for the export: on a microgpt checkpoint it may not contradict the file
    code, _, err = run(sample.main, ['--ckpt', tiny_ckpt, '--n-head', '4'], capsys)
    assert_one_line_error(code, err, "--n-head 4 contradicts the checkpoint's n_head 2")


@pytest.mark.parametrize('engine', ['scalar', 'numpy'])
def test_sampling_a_diverged_model_is_a_one_line_error_on_either_engine(tmp_path, tiny_ckpt, engine, capsys):
    """Finite but huge weights (what a diverged run leaves): the logits overflow. The scalar
    engine stops at the op; the numpy port carries inf/nan to the sampler, which must say so."""
    ckpt = json.loads(open(tiny_ckpt, encoding='utf-8').read())
    ckpt['state_dict']['lm_head'] = [[1e308] * len(row) for row in ckpt['state_dict']['lm_head']]
    path = tmp_path / 'huge.json'
    path.write_text(json.dumps(ckpt), encoding='utf-8')
    code, out, err = run(sample.main, ['--ckpt', str(path), '--engine', engine, '--num', '2'], capsys)
    assert out == ''
    assert_one_line_error(code, err, "the model's logits are not finite numbers")


# ---------------------------------------------------------------------------- real processes
def test_scripts_fail_with_one_line_and_no_traceback_as_processes(tmp_path):
    result = run_script('sample.py', ['--ckpt', 'missing.json'], tmp_path)
    assert result.returncode == 2 and result.stdout == ''
    assert_one_line_error(result.returncode, result.stderr, 'missing.json does not exist: train one first with')

    result = run_script('train.py', ['--data', 'missing.txt', '--out', 'o/m.json'], tmp_path)
    assert result.returncode == 2 and result.stdout == ''
    assert_one_line_error(result.returncode, result.stderr, 'data file missing.txt does not exist')

    result = run_script('train.py', ['--steps', 'ten'], tmp_path)
    assert_one_line_error(result.returncode, result.stderr, "'ten' is not an integer")
    assert os.listdir(tmp_path) == []  # no log, no checkpoint, not even the --out folder it made


def test_real_ctrl_c_saves_the_last_step_and_resume_equals_the_uninterrupted_run(tmp_path, names_file, capsys):
    """A real SIGINT to a train.py process mid-run, evaluations and saves on: the command it
    prints resumes it, and the two runs' log and checkpoint are the uninterrupted run's."""
    args = ['--data', names_file, '--steps', str(SIGINT_STEPS), '--val-size', '6', '--eval-every', '10',
            '--save-every', '15', '--num-samples', '0', *TINY]
    out = tmp_path / 'model.json'
    proc = running(tmp_path, [*args, '--out', str(out)], 15)
    try:
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=POLL_TIMEOUT)
    finally:
        proc.kill()
    assert proc.returncode == 130 and 'Traceback' not in stderr, stderr
    saved = read_checkpoint(str(out)).train_state.step
    assert 10 <= saved < SIGINT_STEPS, "the Ctrl-C came after the run had finished: machine too slow?"
    assert losses(log_of(out))[-1]['step'] == saved  # the checkpoint holds the last completed step
    resume_line = stdout.splitlines()[-1].strip()
    assert f'interrupted after step {saved}; saved {out}' in stdout
    assert resume_line == f'python train.py --out {out} --resume'
    assert run(train.main, shlex.split(resume_line)[2:], capsys)[0] == 0  # the very command it printed
    whole = tmp_path / 'whole' / 'model.json'
    assert run(train.main, [*args, '--out', str(whole)], capsys)[0] == 0
    assert log_of(out) == log_of(whole)  # loss for loss, lr for lr, every validation
    a, b = json.loads(out.read_text()), json.loads(whole.read_text())
    assert a['state_dict'] == b['state_dict'] and a['train_state'] == b['train_state']


# ---------------------------------------------------------------------------- --out
@pytest.mark.parametrize('where, fragment', [('blocker/model.json', 'cannot write the checkpoint to'),
                                             ('folder/', 'is a directory'), ('', '--out is empty')])
def test_an_out_that_cannot_be_written_fails_before_training(tmp_path, names_file, capsys, monkeypatch, where,
                                                             fragment):
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'blocker').write_text('a regular file, so nothing can be created under it')
    (tmp_path / 'folder').mkdir()
    code, stdout, err = run(train.main, ['--data', names_file, '--out', where, *TINY], capsys)
    assert_one_line_error(code, err, fragment)
    assert stdout == '' and sorted(os.listdir(tmp_path)) == ['blocker', 'folder']  # no log, nothing started


# ---------------------------------------------------------------------------- divergence
@pytest.fixture
def good_ckpt_at_out(tmp_path, tiny_ckpt):
    """--out already holding a good checkpoint (a copy of tiny_ckpt): (path, its bytes)."""
    out = tmp_path / 'model.json'
    with open(tiny_ckpt, 'rb') as f:
        good = f.read()
    out.write_bytes(good)
    return out, good


@pytest.mark.parametrize('extra, fragment', [
    (['--steps', '20'], 'the loss became non-finite at step 2 (training diverged): lower --lr'),
    (['--steps', '20', '--engine', 'numpy'], 'the loss became non-finite at step 2 (training diverged): lower --lr'),
    (['--steps', '1', '--eval-every', '1'], 'the validation loss became non-finite after step 1'),
], ids=['scalar', 'numpy', 'found-by-the-evaluation'])
def test_divergence_stops_with_an_error_and_keeps_the_good_checkpoint(good_ckpt_at_out, names_file, capsys, extra,
                                                                      fragment):
    """A step whose own loss is finite may leave weights that are not: the evaluation finds it."""
    out, good = good_ckpt_at_out
    code, _, err = run(train.main, ['--data', names_file, '--out', str(out), '--lr', '1e100', '--force', '--val-size',
                                    '6', *TINY, *QUIET, *extra], capsys)
    assert code == 1
    assert_one_line_error(code, err, fragment)
    assert out.read_bytes() == good
    assert [e['step'] for e in losses(log_of(out))] == [1]  # the last finite step is logged


def test_a_diverged_run_never_leaves_an_unreadable_checkpoint(tmp_path, names_file, capsys):
    """Saving every step, the file at --out is always a whole, valid checkpoint of the last finite step."""
    out = tmp_path / 'model.json'
    code, _, err = run(train.main, ['--data', names_file, '--out', str(out), '--steps', '20',
                                    '--lr', '1e100', '--save-every', '1', *TINY, *QUIET], capsys)
    assert_one_line_error(code, err, 'non-finite')
    assert read_checkpoint(str(out)).train_state.step == 1
    assert sorted(os.listdir(tmp_path)) == ['model.json', 'model.log.jsonl']  # no temporary files left


# ---------------------------------------------------------------------------- --init
def test_init_starts_from_the_checkpoint_weights_and_config_and_its_vocabulary(tmp_path, tiny_ckpt, names_file, capsys):
    out = tmp_path / 'model.json'
    code, stdout, _ = run(train.main, ['--init', tiny_ckpt, '--data', names_file, '--out', str(out),
                                       '--steps', '5', '--no-shuffle', '--val-size', '6', *QUIET], capsys)
    assert code == 0
    assert 'n_embd=8 n_head=2 head_dim=4 block_size=12' in stdout  # the checkpoint's, not the defaults
    start = read_checkpoint(tiny_ckpt).model(fused=True)  # train.py's blocks: the same loss, bit for bit
    first_loss = doc_loss(start, doc_tokens(start.tokenizer, TINY_NAMES[0])).data
    log = losses(log_of(out))
    assert log[0]['loss'] == first_loss and len(log) == 5
    ckpt = read_checkpoint(str(out), training=True)
    assert ckpt.train_state.step == 5 and ckpt.optimizer['t'] == 5  # a fresh optimizer, counted from 0
    data = tmp_path / 'names.txt'
    data.write_text('emma\nZoe\n', encoding='utf-8')
    code, _, err = run(train.main, ['--init', tiny_ckpt, '--data', str(data), '--out', str(tmp_path / 'm.json')], capsys)
    assert_one_line_error(code, err, "character 'Z' is not in the vocabulary")


# ---------------------------------------------------------------------------- --resume
@pytest.fixture
def finished_run(tmp_path, tiny_ckpt):
    """--out holding the 60-step tiny_ckpt run (its train_state names names_file as the data)."""
    out = tmp_path / 'model.json'
    with open(tiny_ckpt, 'rb') as f:
        out.write_bytes(f.read())
    return out


def test_resume_needs_a_training_state(tmp_path, tiny_ckpt, capsys):
    out = tmp_path / 'model.json'
    write_checkpoint(str(out), dataclasses.replace(read_checkpoint(tiny_ckpt), train_state=None))  # a model alone
    code, _, err = run(train.main, ['--out', str(out), '--resume'], capsys)
    assert_one_line_error(code, err, f'has no training state to resume: start a new run with --init {out}')
    code, _, err = run(train.main, ['--out', str(tmp_path / 'none.json'), '--resume'], capsys)
    assert_one_line_error(code, err, 'does not exist')


@pytest.mark.parametrize('damage', [
    lambda s: s.pop('run'),
    lambda s: s.pop('adam'),
    lambda s: s['adam'].update(m=s['adam']['m'][:-1]),
    lambda s: s.update(step='20'),
    lambda s: s['run'].pop('lr'),
    lambda s: s['run'].update(lr='0.01'),
    lambda s: s['run'].update(engine='gpu'),
    lambda s: s['adam']['v'].__setitem__(3, -1.0),
], ids=['no-run', 'no-adam', 'adam-too-short', 'step-string', 'run-no-lr', 'run-lr-string', 'run-engine-unknown',
        'adam-v-negative'])
def test_resume_with_a_damaged_training_state_is_a_one_line_error(finished_run, capsys, damage):
    obj = json.loads(finished_run.read_text(encoding='utf-8'))
    damage(obj['train_state'])
    finished_run.write_text(json.dumps(obj), encoding='utf-8')
    before = finished_run.read_bytes()
    code, _, err = run(train.main, ['--out', str(finished_run), '--resume', '--steps', '70'], capsys)
    assert_one_line_error(code, err, 'training state')
    assert finished_run.read_bytes() == before


# ---------------------------------------------------------------------------- bad flags
@pytest.mark.parametrize('args, fragment', [
    (['--steps', '0'], '--steps: 0 is out of range: give an integer of at least 1'),
    (['--lr', '0'], '--lr: 0 is out of range: give a number greater than 0'),
    (['--val-size', '-1'], '--val-size: -1 is not a fraction between 0 and 1 (exclusive) nor a count'),
    (['--n-embd', '10', '--n-head', '4'], 'n_embd (10) must be divisible by n_head (4)'),
    (['--val-size', '54'], '--val-size 54 leaves no training documents out of 54'),
    (['--bogus'], 'unrecognized arguments: --bogus'),
    (['--batch-size', '50'], '--batch-size 50 is larger than the 49 training names'),
    (['--tokenizer', 'bpe', '--vocab-size', '16385'], '--vocab-size: 16385 is out of range: give an integer from 257 to 16,384'),
    (['--tokenizer', 'bpe', '--vocab-size', '256'], '--vocab-size: 256 is out of range: give an integer from 257'),
    (['--tokenizer', 'wordpiece'], "--tokenizer: invalid choice: 'wordpiece' (choose from 'char', 'bpe')"),
    (['--dropout', '1'], '--dropout: 1 is out of range: give a number from 0 to less than 1'),
    (['--dropout', 'nan'], '--dropout: nan is out of range'),
    (['--weight-decay', '-1'], '--weight-decay: -1 is out of range: give a number from 0 to 10'),
    (['--weight-decay', 'lots'], '--weight-decay'),
    (['--reproduce-original', '--dropout', '0.1'], "--dropout 0.1 would change the original's run"),
    (['--reproduce-original', '--weight-decay', '0.1'], "--weight-decay 0.1 would change the original's run"),
    (['--reproduce-original', '--n-embd', '32'], "--n-embd 32 would change the original"),  # check_flags: tests/test_original.py
], ids=['steps-0', 'lr-0', 'val-size-negative', 'heads-do-not-divide', 'val-size-all',
        'unknown-flag', 'batch-above-the-names', 'vocab-size-above-the-cap', 'vocab-size-below-the-bytes', 'tokenizer-unknown',
        'dropout-1', 'dropout-nan', 'weight-decay-negative', 'weight-decay-not-a-number', 'original-with-dropout',
        'original-with-decay', 'original-with-n-embd'])
def test_train_bad_flags_are_one_line_errors(tmp_path, names_file, capsys, args, fragment):
    out = tmp_path / 'model.json'
    code, _, err = run(train.main, ['--data', names_file, '--out', str(out), *args], capsys)
    assert_one_line_error(code, err, fragment)
    assert code == 2 and os.listdir(tmp_path) == []  # a usage error, and neither checkpoint nor log


def test_one_range_checks_a_flag_a_web_field_and_a_saved_value_alike():
    """checks.Range is the one declaration of what a number may be: argparse's type (parse),
    the lab's and the web routes' check, a saved run's holds. Both ends are in, nothing
    beyond, never a bool or a number that is not finite; above and below leave an end out."""
    import argparse
    from microgpt.edge.checks import Range
    from microgpt.edge.errors import UserError
    count = Range(int, 1, 10)
    assert (count.parse('1'), count.parse('10'), count.parse(' 7 ')) == (1, 10, 7)
    for text in ('0', '11', '-1', '1.5', 'ten', ''):
        with pytest.raises(argparse.ArgumentTypeError):
            count.parse(text)
    assert [count.holds(v) for v in (1, 10, 0, 11, 1.0, True, None, '3')] == [True, True] + [False] * 6
    with pytest.raises(UserError, match=r"^--n is 11: give an integer from 1 to 10$"):
        count.check(11, '--n')
    rate = Range(float, 0, above=True)
    assert rate.parse('1e-308') == 1e-308 and rate.holds(3) and not rate.holds(0.0)
    for text in ('0', '-1', 'nan', 'inf'):
        with pytest.raises(argparse.ArgumentTypeError):
            rate.parse(text)
    dropout = Range(float, 0, 1, below=True)
    assert dropout.holds(0.0) and dropout.holds(0.999) and not dropout.holds(1.0)
    assert dropout.text() == 'a number from 0 to less than 1'
    assert Range(float, 0, 1000, above=True).text() == 'a number greater than 0 and at most 1000'
    assert Range(float, 0, 1, above=True, below=True).text() == 'a number greater than 0 and less than 1'
