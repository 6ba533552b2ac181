"""
The numpy engine in float32 (backprop.Trainer(..., dtype='float32'), train.py --dtype float32)
against float64, the path proven equal to the scalar engine: losses and gradients agree to a
relative 1e-4, a float32 checkpoint is the same format, and a float32 run resumes on float64
and on the scalar engine. Also the BLAS thread choice (backprop/threads.py).

Run: .venv/bin/python -m pytest -q tests/test_backprop_float32.py
"""

import functools
import json

import numpy as np
import pytest

from microgpt import backprop
from microgpt.backprop import threads
import helpers
from microgpt.programs import train
from microgpt.edge import text
from microgpt.edge.checkpoint import read_checkpoint
from microgpt.model import GPT, GPTConfig
from microgpt.tokenizer import CharTokenizer

REL_TOL = 1e-4  # float32 carries ~7 digits; 50 steps of Adam keep 4 of them
LR = 0.003      # the recipe's. (At 0.01 this model is on the edge of stability, where any rounding
                # grows step by step: float32 drifts 4e-4 from float64 by step 41, measured.)
PROSE = ("Now is the winter of our discontent made glorious summer by this sun of York;\n"
         "and all the clouds that lour'd upon our house in the deep bosom of the ocean buried.\n") * 4


def make(dtype, n_layer=2, n_embd=32, block_size=16):
    tok = CharTokenizer.from_docs([PROSE])
    config = GPTConfig(tok.vocab_size, n_layer=n_layer, n_embd=n_embd, n_head=4, block_size=block_size)
    return backprop.Trainer(config, GPT(config, seed=1).weights(), tok, dtype=dtype), tok.encode(PROSE)


def test_float32_losses_follow_float64_for_50_steps():
    t64, ids = make('float64')
    t32, _ = make('float32')
    assert t32.flat.dtype == np.float32 and t32.optimizer.m.dtype == np.float32
    for step in range(1, 51):
        batch = text.train_windows(ids, 16, 4, seed=0, step=step)
        l64, l32 = t64.step(batch, LR), t32.step(batch, LR)
        assert abs(l32 - l64) <= REL_TOL * abs(l64), (step, l64, l32)
    assert t32.flat.dtype == np.float32  # nothing promoted it to float64 on the way


def test_float32_gradients_follow_float64():
    t64, ids = make('float64', n_layer=3)
    t32, _ = make('float32', n_layer=3)
    batch = text.train_windows(ids, 16, 6, seed=0, step=1) + [ids[:5], ids[7:17]]  # padded rows too
    _, g64 = t64.loss_and_grads(batch)
    _, g32 = t32.loss_and_grads(batch)
    for name, g in g64.items():
        assert g32[name].dtype == np.float32, name
        scale = np.abs(g).max()
        assert np.abs(g32[name] - g).max() <= REL_TOL * scale, name
    # negative control: a real change in the weights is far outside the tolerance
    t32.params['layer0.attn_wq'][0, 0] += 1e-2
    _, moved = t32.loss_and_grads(batch)
    assert np.abs(moved['layer0.attn_wq'] - g64['layer0.attn_wq']).max() > REL_TOL * np.abs(g64['layer0.attn_wq']).max()


run = functools.partial(helpers.run, train.main)  # run(argv, capsys): train.py's (status, stdout, stderr)


def test_a_float32_run_saves_the_same_format_and_resumes_on_float64_and_scalar(tmp_path, capsys):
    data = tmp_path / 'prose.txt'
    data.write_text(PROSE, encoding='utf-8')
    flags = ['--data-mode', 'text', '--data', str(data), '--n-embd', '16', '--n-head', '2',
             '--block-size', '16', '--batch-size', '2', '--eval-every', '0', '--num-samples', '0']
    out = tmp_path / 'f32.json'
    code, stdout, err = run([*flags, '--engine', 'numpy', '--dtype', 'float32', '--steps', '4',
                             '--out', str(out)], capsys)
    assert code == 0, err
    assert 'dtype=float32' in stdout
    saved = json.loads(out.read_text())
    assert all(type(x) is float for row in saved['state_dict']['wte'] for x in row)
    assert saved['train_state']['run']['dtype'] == 'float32'
    for x in saved['state_dict']['wte'][0]:
        assert float(np.float32(x)) == x  # float32 numbers, written as the float64s they are
    for engine_flags in (['--dtype', 'float64'], ['--engine', 'scalar']):
        copy = tmp_path / f'resumed{len(engine_flags[1])}.json'
        copy.write_bytes(out.read_bytes())
        code, stdout, err = run(['--out', str(copy), '--resume', '--steps', '6', *engine_flags], capsys)
        assert code == 0, err
        assert read_checkpoint(str(copy)).train_state.step == 6
        assert 'start_step=4' in stdout


def test_threads_are_the_users_when_set_and_measured_otherwise(monkeypatch):
    trainer, ids = make('float32')
    monkeypatch.setenv('OPENBLAS_NUM_THREADS', '1')
    assert threads.choose_threads(trainer, 2) == (trainer, '1 (OPENBLAS_NUM_THREADS)')
    assert threads.choose_threads(trainer, 2, requested=2) == (trainer, '2 (--threads)')
    monkeypatch.delenv('OPENBLAS_NUM_THREADS')
    monkeypatch.delenv('OMP_NUM_THREADS', raising=False)
    if threads.get_threads() is None:
        pytest.skip("threadpoolctl finds no BLAS in this numpy: its threads cannot be set")
    if threads.cores() == 1:
        pytest.skip("one core: nothing to choose")
    trial, said = threads.choose_threads(trainer, 2)
    assert isinstance(trial, threads.Trial) and said.startswith(f'timed on the first {len(trial.schedule)} steps')
    for step in range(1, len(trial.schedule) + 1):
        assert trial.chosen is None  # decided after the last step of the schedule, not before
        trial.step(text.train_windows(ids, 16, 2, seed=0, step=step), LR)
    count = int(trial.chosen.split()[1])
    assert trial.chosen.startswith('threads: ') and 'measured' in trial.chosen and count in (1, threads.cores())
    get = threads.get_threads
    assert get() == (1 if 'in each of' in trial.chosen else count)  # what it said is what the BLAS now runs with
    assert trainer.workers == (threads.cores() if 'in each of' in trial.chosen else 1)
    assert trial.weights() is not None and trial.config is trainer.config  # the trainer, to the loop
    threads.set_threads(1)
    trainer.use_workers(1)
    assert get() == 1


def test_a_trial_trains_the_float64_losses_of_one_thread(monkeypatch):
    """The first steps, tried three ways, are real steps: the same losses as one thread to 1e-12
    (the split adds the same numbers in another order), and so are the steps after."""
    monkeypatch.delenv('OPENBLAS_NUM_THREADS', raising=False)
    monkeypatch.delenv('OMP_NUM_THREADS', raising=False)
    if threads.get_threads() is None or threads.cores() == 1:
        pytest.skip("no BLAS threads to set, or one core")
    one, ids = make('float64')
    trial, _ = threads.choose_threads(make('float64')[0], 4)
    threads.set_threads(1)
    expected = [one.step(text.train_windows(ids, 16, 4, seed=0, step=s), LR) for s in range(1, 32)]
    got = [trial.step(text.train_windows(ids, 16, 4, seed=0, step=s), LR) for s in range(1, 32)]
    threads.set_threads(1)
    trial.use_workers(1)
    assert got == pytest.approx(expected, rel=1e-12)


def test_running_text_is_evaluated_on_the_cores_the_user_gave(tmp_path, capsys, monkeypatch):
    """Evaluation spreads its windows over every core, one BLAS thread each, unless --threads or
    OPENBLAS_NUM_THREADS says how many the run may use."""
    from microgpt import inference
    used, evaluate_windows = [], inference.evaluate_windows
    monkeypatch.setattr(inference, 'evaluate_windows', lambda port, windows, **options: (
        used.append(options['workers']), evaluate_windows(port, windows, **options))[1])
    monkeypatch.delenv('OPENBLAS_NUM_THREADS', raising=False)
    monkeypatch.delenv('OMP_NUM_THREADS', raising=False)
    data = tmp_path / 'prose.txt'
    data.write_text(PROSE, encoding='utf-8')
    flags = ['--data-mode', 'text', '--data', str(data), '--n-embd', '16', '--n-head', '2', '--block-size', '16',
             '--batch-size', '2', '--steps', '2', '--eval-every', '2', '--num-samples', '0', '--engine', 'numpy']
    for extra, workers in ((['--threads', '1'], 1), ([], threads.cores())):
        code, _, err = run([*flags, *extra, '--out', str(tmp_path / f'{workers}{len(extra)}.json')], capsys)
        assert code == 0, err
        assert used == [workers, workers]  # the validation part, then the training estimate
        used.clear()
    threads.set_threads(1)
