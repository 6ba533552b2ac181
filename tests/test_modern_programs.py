"""
The rungs (docs/modern.md) at the programs' edge: train.py's six flags, the checkpoint that
records them, and sample.py and convert that read them back. A trained run's checkpoint holds
its rungs, and sample.py rebuilds the very model train.py sampled; convert round-trips it bit for
bit; torch trains the same run and samples the same names; a run stopped and resumed logs the
losses of one never stopped, on numpy and on torch. Every bad combination, on the command line
or in a checkpoint, is one line and exit 2, and touches nothing. One run (every rung, numpy)
serves them all.
"""

import contextlib
import io
import json
import os
import pathlib

import pytest

from helpers import GRAD_TOL, assert_one_line_error, interrupt_after, log_of, losses, run, train_args
from microgpt.edge.checkpoint import read_checkpoint
from microgpt.model import SIZE_FIELDS, parameter_shapes
from microgpt.programs import convert, sample, train
from microgpt.programs.runlog import log_path_for

STEPS = 8
# Every rung on train_args' tiny model (n_embd 8; 4 heads of 2), and what the checkpoint's config
# records besides the sizes: a rung only where it is on.
FLAGS = ['--n-head', '4', '--rope', '--mlp', 'swiglu', '--norm-gains', '--qk-norm', '--n-kv-head', '2',
         '--tie-embeddings']
RECORDED = {'rope': True, 'mlp': 'swiglu', 'norm_gains': True, 'qk_norm': True, 'n_kv_head': 2, 'tie_embeddings': True}
SAVED = ['--steps', str(STEPS), '--eval-every', '4', '--save-every', '3', '--num-samples', '5']


def run_args(names_file, out, engine):
    """train.py's STEPS steps with every rung on `engine` (one BLAS thread for numpy: a thread
    count timed afresh on resuming moves a sum's last digit)."""
    return train_args(names_file, out, *FLAGS, *SAVED, '--engine', engine, *['--threads', '1'] * (engine == 'numpy'))


def trained_run(names_file, out, engine):
    """The run's closing samples."""
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        assert train.main(run_args(names_file, out, engine)) == 0
    lines = printed.getvalue().splitlines()
    return [line.strip() for line in lines[lines.index('samples:') + 1:]]


@pytest.fixture(scope='module')
def trained(tmp_path_factory, names_file):
    """(checkpoint, train.py's closing samples) of a numpy run with every rung."""
    out = tmp_path_factory.mktemp('rungs') / 'm.json'
    return out, trained_run(names_file, out, 'numpy')


def test_the_checkpoint_records_its_rungs_and_sample_rebuilds_the_model_train_sampled(trained, tmp_path, capsys):
    out, samples = trained
    obj = json.loads(out.read_text())
    assert {k: v for k, v in obj['config'].items() if k not in SIZE_FIELDS} == RECORDED
    assert set(obj['state_dict']) == set(parameter_shapes(read_checkpoint(str(out)).config))
    for engine in ('scalar', 'numpy'):  # the names train.py drew from its trainer's own model
        code, printed, err = run(sample.main, ['--ckpt', str(out), '--num', '5', '--engine', engine], capsys)
        assert code == 0 and printed.splitlines() == samples, err
    st, back = tmp_path / 'm.safetensors', tmp_path / 'back.json'  # convert round-trips it bit for bit
    assert run(convert.main, [str(out), str(st)], capsys)[0] == 0
    assert run(convert.main, [str(st), str(back)], capsys)[0] == 0
    assert back.read_bytes() == out.read_bytes()


def stopped_and_resumed(names_file, whole, parts, engine, trainer_class, capsys, monkeypatch):
    """Ctrl-C in step 5 of STEPS, evaluations and saves on, then --resume: the log of the run
    never stopped (`whole`), loss for loss, and its weights."""
    interrupt_after(monkeypatch, 5, trainer_class)
    assert run(train.main, run_args(names_file, parts, engine), capsys)[0] == 130
    monkeypatch.undo()
    assert read_checkpoint(str(parts)).train_state.step == 5
    code, _, err = run(train.main, ['--out', str(parts), '--resume', *['--threads', '1'] * (engine == 'numpy')], capsys)
    assert code == 0, err
    assert [e['step'] for e in losses(log_of(parts))] == list(range(1, STEPS + 1))
    assert log_of(parts) == log_of(whole)
    a, b = json.loads(parts.read_text()), json.loads(whole.read_text())
    assert a['config'] == b['config'] and a['state_dict'] == b['state_dict']


def test_a_stopped_and_resumed_run_logs_the_losses_of_one_never_stopped(trained, tmp_path, names_file, capsys,
                                                                        monkeypatch):
    from microgpt import backprop
    stopped_and_resumed(names_file, trained[0], tmp_path / 'parts.json', 'numpy', backprop.Trainer, capsys, monkeypatch)


@pytest.mark.torch
def test_torch_trains_the_same_run_samples_its_names_and_resumes_it(trained, tmp_path, names_file, capsys, monkeypatch):
    """The same run on the torch engine: the same losses to rounding, the same closing names;
    and stopped and resumed, torch's own run loss for loss."""
    import torch
    from microgpt import torchgpt
    torch.set_num_threads(1)  # tiny matrices: more threads only contend on a shared machine (7 s a run)
    out, samples = trained
    whole = tmp_path / 'torch.json'
    assert trained_run(names_file, whole, 'torch') == samples
    got, want = losses(log_of(whole)), losses(log_of(out))
    assert len(got) == STEPS and max(abs(a['loss'] - b['loss']) for a, b in zip(got, want)) < GRAD_TOL
    stopped_and_resumed(names_file, whole, tmp_path / 'parts.json', 'torch', torchgpt.Trainer, capsys, monkeypatch)


# ---------------------------------------------------------------------------- refusals
# Each refusal on the trained run's --out: its flags, a fragment of its one line, and for --init
# {copy} what is changed in the config of the copy of the checkpoint it reads.
REFUSED = {
    'kv-heads-do-not-divide': (['--force', '--n-embd', '12', '--n-kv-head', '3'],
                               'n_kv_head (3) must divide n_head (4): each head of keys and values serves'),
    'kv-heads-above-the-heads': (['--force', '--n-kv-head', '5'], 'n_kv_head must be an integer from 1 to n_head (4)'),
    'rope-odd-head-dim': (['--force', '--rope', '--n-embd', '12'], 'RoPE needs an even head_dim, got 3 (n_embd 12 / n_head 4)'),
    'mlp-unknown': (['--force', '--mlp', 'geglu'], "--mlp: invalid choice: 'geglu' (choose from 'relu', 'gelu', 'swiglu')"),
    'original-with-a-rung': (['--force', '--reproduce-original', '--rope'],
                             "--rope is for a rung, and the original's model is microgpt's: drop --rope"),
    'tied-resumed-untied': (['--resume', '--steps', '20', '--no-tie-embeddings'],
                            "--no-tie-embeddings contradicts the checkpoint's tie_embeddings true: the model, its size "
                            "and rungs, is the checkpoint's: drop --no-tie-embeddings"),
    'resumed-with-another-mlp': (['--resume', '--steps', '20', '--mlp', 'relu'],
                                 "--mlp relu contradicts the checkpoint's mlp swiglu: the model"),
    'init-untied': (['--force', '--init', '{copy}', '--no-tie-embeddings'],
                    "--no-tie-embeddings contradicts the checkpoint's tie_embeddings true"),
    'checkpoint-unknown-rung': (['--force', '--init', '{copy}'], "'flash' is not a rung this microgpt knows",
                                lambda c: c.update(flash=True)),
    'checkpoint-unknown-mlp': (['--force', '--init', '{copy}'], "bad config: mlp must be relu, gelu or swiglu, got 'geglu'",
                               lambda c: c.update(mlp='geglu')),
    'checkpoint-switch-not-bool': (['--force', '--init', '{copy}'], 'tie_embeddings must be true or false, got 1',
                                   lambda c: c.update(tie_embeddings=1)),
    'checkpoint-rung-dropped': (['--force', '--init', '{copy}'], 'weights missing for lm_head',
                                lambda c: c.pop('tie_embeddings')),
    'checkpoint-relu-with-a-gate': (['--force', '--init', '{copy}'], 'unexpected weights layer0.mlp_gate',
                                    lambda c: c.update(mlp='relu')),
}


@pytest.mark.parametrize('case', REFUSED)
def test_a_bad_combination_is_one_line_and_leaves_the_run_byte_for_byte(trained, names_file, tmp_path, capsys, case):
    extra, fragment, *change = REFUSED[case]
    out = trained[0]
    files = [pathlib.Path(out), pathlib.Path(log_path_for(str(out)))]
    before = [f.read_bytes() for f in files]
    copy = tmp_path / 'copy.json'
    obj = json.loads(out.read_text())
    for c in change:
        c(obj['config'])
    copy.write_text(json.dumps(obj), encoding='utf-8')
    code, _, err = run(train.main, ['--data', names_file, '--out', str(out), '--val-size', '6', '--n-embd', '8',
                                    '--n-head', '4', '--block-size', '12', *[a.format(copy=copy) for a in extra]], capsys)
    assert_one_line_error(code, err, fragment)
    assert code == 2 and [f.read_bytes() for f in files] == before
    assert not [f for f in os.listdir(out.parent) if f.endswith('.tmp')]
