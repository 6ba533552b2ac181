"""
The rungs (docs/modern.md) at the programs' edge: train.py's six flags, the checkpoint that
records them, and sample.py and convert that read them back. A trained run's checkpoint holds
its rungs, and sample.py rebuilds the very model train.py sampled; a run stopped and resumed logs
the losses of one never stopped, rungs on; convert round-trips it bit for bit. Every bad
combination, on the command line or in a checkpoint, is one line and exit 2, and touches nothing.
"""

import contextlib
import io
import json
import os
import pathlib
import shutil

import pytest

from helpers import GRAD_TOL, assert_one_line_error, interrupt_after, log_of, losses, run, train_args
from microgpt.edge.checkpoint import read_checkpoint
from microgpt.model import SIZE_FIELDS, parameter_shapes
from microgpt.programs import convert, sample, train
from microgpt.programs.runlog import log_path_for

STEPS = 12
# A couple of rung configs on train_args' tiny model (n_embd 8, n_head 2): the flags, and what
# the checkpoint's config records besides the sizes (a rung only where it is on).
RUNGS = {
    'every-rung': (['--n-head', '4', '--rope', '--mlp', 'swiglu', '--norm-gains', '--qk-norm', '--n-kv-head', '2',
                    '--tie-embeddings'],
                   {'rope': True, 'mlp': 'swiglu', 'norm_gains': True, 'qk_norm': True, 'n_kv_head': 2,
                    'tie_embeddings': True}),
    'gelu-multi-query': (['--mlp', 'gelu', '--n-kv-head', '1'], {'mlp': 'gelu', 'n_kv_head': 1}),
}


@pytest.fixture(scope='module', params=RUNGS)
def trained(request, tmp_path_factory, names_file):
    """(rung config's name, checkpoint, train.py's closing samples) of a STEPS-step run."""
    out = tmp_path_factory.mktemp('rungs') / 'm.json'
    flags, _ = RUNGS[request.param]
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        assert train.main(train_args(names_file, out, '--steps', str(STEPS), *flags, '--num-samples', '5')) == 0
    lines = printed.getvalue().splitlines()
    return request.param, out, [line.strip() for line in lines[lines.index('samples:') + 1:]]


def test_the_checkpoint_records_its_rungs_and_sample_rebuilds_the_model_train_sampled(trained, capsys):
    name, out, samples = trained
    obj = json.loads(out.read_text())
    assert {k: v for k, v in obj['config'].items() if k not in SIZE_FIELDS} == RUNGS[name][1]
    config = read_checkpoint(str(out)).config
    assert set(obj['state_dict']) == set(parameter_shapes(config))
    for engine in ('scalar', 'numpy'):  # the names train.py drew from its trainer's own model
        code, printed, err = run(sample.main, ['--ckpt', str(out), '--num', '5', '--engine', engine], capsys)
        assert code == 0 and printed.splitlines() == samples, err


@pytest.mark.torch
def test_a_rung_run_trained_by_torch_samples_the_scalar_runs_names(trained, tmp_path, names_file):
    """The same run on the torch engine: the same losses to rounding, the same closing names."""
    name, out, samples = trained
    torch_out = tmp_path / 'torch.json'
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        assert train.main(train_args(names_file, torch_out, '--steps', str(STEPS), *RUNGS[name][0], '--num-samples', '5',
                                     '--engine', 'torch')) == 0
    lines = printed.getvalue().splitlines()
    assert [line.strip() for line in lines[lines.index('samples:') + 1:]] == samples
    got, want = losses(log_of(torch_out)), losses(log_of(out))
    assert len(got) == STEPS and max(abs(a['loss'] - b['loss']) for a, b in zip(got, want)) < GRAD_TOL


def test_convert_round_trips_a_rung_checkpoint_bit_for_bit(trained, tmp_path, capsys):
    _, out, _ = trained
    st, back = tmp_path / 'm.safetensors', tmp_path / 'back.json'
    assert run(convert.main, [str(out), str(st)], capsys)[0] == 0
    assert run(convert.main, [str(st), str(back)], capsys)[0] == 0
    assert back.read_bytes() == out.read_bytes()
    assert read_checkpoint(str(st)).config == read_checkpoint(str(out)).config


def trainer_class(engine):  # the class whose step interrupt_after stops
    if engine == 'torch':
        from microgpt import torchgpt
        return torchgpt.Trainer
    from microgpt import backprop
    return backprop.Trainer if engine == 'numpy' else train.ScalarTrainer


@pytest.mark.parametrize('name, engine', [(name, engine) for name in RUNGS for engine in ('scalar', 'numpy')]
                         + [pytest.param('every-rung', 'torch', marks=pytest.mark.torch)])  # torch: ~7 s a run
def test_a_stopped_and_resumed_run_logs_the_losses_of_one_never_stopped(tmp_path, names_file, capsys, monkeypatch,
                                                                        name, engine):
    """Ctrl-C in step 5 of STEPS, evaluations and saves on, then --resume: the same log, loss for
    loss, and the same weights. One BLAS thread for numpy (a thread count timed afresh on
    resuming moves a sum's last digit)."""
    args = [*RUNGS[name][0], '--steps', str(STEPS), '--eval-every', '4', '--save-every', '3', '--engine', engine,
            *(['--threads', '1'] if engine == 'numpy' else [])]
    whole, parts = tmp_path / 'whole.json', tmp_path / 'parts.json'
    assert run(train.main, train_args(names_file, whole, *args), capsys)[0] == 0
    interrupt_after(monkeypatch, 5, trainer_class(engine))
    assert run(train.main, train_args(names_file, parts, *args), capsys)[0] == 130
    monkeypatch.undo()
    assert read_checkpoint(str(parts)).train_state.step == 5
    code, _, err = run(train.main, ['--out', str(parts), '--resume', *(['--threads', '1'] * (engine == 'numpy'))],
                       capsys)
    assert code == 0, err
    assert [e['step'] for e in losses(log_of(parts))] == list(range(1, STEPS + 1))
    assert log_of(parts) == log_of(whole)
    a, b = json.loads(parts.read_text()), json.loads(whole.read_text())
    assert a['config'] == b['config'] and a['state_dict'] == b['state_dict']


# ---------------------------------------------------------------------------- refusals
@pytest.fixture(scope='module')
def tied(tmp_path_factory, names_file):
    """--out of a trained run with tied embeddings, SwiGLU and one head of keys and values."""
    out = tmp_path_factory.mktemp('tied') / 'm.json'
    assert train.main(train_args(names_file, out, '--steps', '3', '--tie-embeddings', '--mlp', 'swiglu',
                                 '--n-kv-head', '1')) == 0
    return out


def damaged(change):  # the tied checkpoint's JSON with its config changed
    def damage(obj):
        change(obj['config'])
        return obj
    return damage


# Each refusal on the tied run's --out: its flags, a fragment of its one line, and for --init
# {damaged} what is changed in the copy of the checkpoint it reads.
REFUSED = {
    'kv-heads-do-not-divide': (['--force', '--n-embd', '12', '--n-head', '4', '--n-kv-head', '3'],
                               'n_kv_head (3) must divide n_head (4): each head of keys and values serves'),
    'kv-heads-above-the-heads': (['--force', '--n-kv-head', '4'], 'n_kv_head must be an integer from 1 to n_head (2)'),
    'rope-odd-head-dim': (['--force', '--rope', '--n-embd', '12', '--n-head', '4'],
                          'RoPE needs an even head_dim, got 3 (n_embd 12 / n_head 4)'),
    'mlp-unknown': (['--force', '--mlp', 'geglu'], "--mlp: invalid choice: 'geglu' (choose from 'relu', 'gelu', 'swiglu')"),
    'original-with-a-rung': (['--force', '--reproduce-original', '--rope'],
                             "--rope is for a rung, and the original's model is microgpt's: drop --rope"),
    'tied-resumed-untied': (['--resume', '--steps', '9', '--no-tie-embeddings'],
                            "--no-tie-embeddings contradicts the checkpoint's tie_embeddings true: the model, its size "
                            "and rungs, is the checkpoint's: drop --no-tie-embeddings"),
    'resumed-with-rope': (['--resume', '--steps', '9', '--rope'], "--rope contradicts the checkpoint's rope false"),
    'resumed-with-another-mlp': (['--resume', '--steps', '9', '--mlp', 'relu'],
                                 "--mlp relu contradicts the checkpoint's mlp swiglu: the model"),
    'resumed-with-other-kv-heads': (['--resume', '--steps', '9', '--n-kv-head', '2'],
                                    "--n-kv-head 2 contradicts the checkpoint's n_kv_head 1"),
    'init-untied': (['--force', '--init', '{copy}', '--no-tie-embeddings'],
                    "--no-tie-embeddings contradicts the checkpoint's tie_embeddings true"),
    'checkpoint-unknown-rung': (['--force', '--init', '{damaged}'], "'flash' is not a rung this microgpt knows",
                                damaged(lambda c: c.update(flash=True))),
    'checkpoint-unknown-mlp': (['--force', '--init', '{damaged}'], "bad config: mlp must be relu, gelu or swiglu, "
                               "got 'geglu'", damaged(lambda c: c.update(mlp='geglu'))),
    'checkpoint-switch-not-bool': (['--force', '--init', '{damaged}'], 'tie_embeddings must be true or false, got 1',
                                   damaged(lambda c: c.update(tie_embeddings=1))),
    'checkpoint-kv-heads-above': (['--force', '--init', '{damaged}'], 'n_kv_head must be an integer from 1 to n_head',
                                  damaged(lambda c: c.update(n_kv_head=3))),
    'checkpoint-rung-dropped': (['--force', '--init', '{damaged}'], 'weights missing for lm_head',
                                damaged(lambda c: c.pop('tie_embeddings'))),
    'checkpoint-rope-with-wpe': (['--force', '--init', '{damaged}'], 'unexpected weights wpe',
                                 damaged(lambda c: c.update(rope=True))),
}


@pytest.mark.parametrize('case', REFUSED)
def test_a_bad_combination_is_one_line_and_leaves_the_run_byte_for_byte(tied, names_file, tmp_path, capsys, case):
    extra, fragment, *damage = REFUSED[case]
    files = [pathlib.Path(tied), pathlib.Path(log_path_for(str(tied)))]
    before = [f.read_bytes() for f in files]
    copy = tmp_path / 'copy.json'
    shutil.copy(tied, copy)
    if damage:
        copy.write_text(json.dumps(damage[0](json.loads(copy.read_text()))), encoding='utf-8')
    extra = [a.format(copy=copy, damaged=copy) for a in extra]
    code, _, err = run(train.main, ['--data', names_file, '--out', str(tied), '--val-size', '6', '--n-embd', '8',
                                    '--n-head', '2', '--block-size', '12', *extra], capsys)
    assert code == 2
    assert_one_line_error(code, err, fragment)
    assert [f.read_bytes() for f in files] == before
    assert not [f for f in os.listdir(tied.parent) if f.endswith('.tmp')]
