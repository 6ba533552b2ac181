"""
Inverted dropout (train.py --dropout, src/backprop/dropout.py): one function, three engines.

The oracles: central finite differences for the hand-derived backward with a fixed mask
(src/backprop/layers.py; attention's and the whole model's: tests/test_backprop_layers.py);
the scalar engine's graph (gpt()'s `dropout=`) and PyTorch's autograd for the same masks,
loss and every gradient to 1e-10 in float64; the masks' own statistics
(the share dropped, the 1 / (1 - P) kept, their independence of anything but seed and step).
A run with dropout logs the same losses on every engine, resumes exactly, keeps a best whose
weights give the logged loss, and evaluates and samples as the same weights without dropout.
"""

import importlib.util

import numpy as np
import pytest

from microgpt.backprop import layers
from microgpt.backprop.dropout import draw, sites
from microgpt.backprop.model import loss_and_grads
from microgpt.edge.checkpoint import read_checkpoint
from microgpt.edge.data import load_docs, split_docs
from microgpt.engine import Tape
from microgpt.model import GPT, GPTConfig
from microgpt.programs import sample, train
from microgpt.sampling import iter_names
from microgpt.programs.taps import dropout_batch_loss
from microgpt.training import evaluate, num_predictions
from helpers import (FD_TOL, TINY, assert_one_line_error, interrupt_after, log_of, losses, max_diff, numeric_grad_array, run)

CONFIG = GPTConfig(vocab_size=6, n_layer=2, n_embd=4, n_head=2, block_size=5)
BATCH = [[5, 1, 2, 5], [5, 3, 5], [5, 4, 0, 0, 1, 2, 5]]  # the last is cut at block_size


def weights_of(seed=0):
    return GPT(CONFIG, seed=seed, init_std=0.4).weights()


# ---------------------------------------------------------------------------- the masks
def test_a_mask_drops_its_share_and_scales_the_rest():
    config = GPTConfig(vocab_size=27, n_layer=2, n_embd=64, n_head=4, block_size=16)
    masks = draw(0.25, 42, 7, 32, config)
    assert list(masks.arrays) == list(sites(config))
    for site, a in masks.arrays.items():
        assert a.shape == (32,) + sites(config)[site]
        assert set(np.unique(a)) == {0.0, 1 / 0.75}       # dropped, or kept and scaled
        assert abs((a == 0).mean() - 0.25) < 0.01, site    # 16,384 numbers or more: 4 sigma is 0.014
        assert abs(a.mean() - 1.0) < 0.02                 # the expectation is kept


def test_the_masks_depend_on_the_seed_and_the_step_alone():
    a, again = draw(0.5, 3, 10, 4, CONFIG), draw(0.5, 3, 10, 4, CONFIG)
    assert all(np.array_equal(a.arrays[s], again.arrays[s]) for s in a.arrays)
    for other in (draw(0.5, 3, 11, 4, CONFIG), draw(0.5, 4, 10, 4, CONFIG)):
        assert not np.array_equal(a.arrays['embedding'], other.arrays['embedding'])
    part = a[1:3]  # a part of the batch holds its names' masks
    assert len(part) == 2 and np.array_equal(part.arrays['layer1.mlp_out'], a.arrays['layer1.mlp_out'][1:3])


# ---------------------------------------------------------------------------- the backward
def test_dropout_backward_against_finite_differences():
    r = np.random.default_rng(0)
    x, R = r.normal(size=(7, 4)), r.normal(size=(7, 4))
    m = (r.random((7, 4)) >= 0.4) / 0.6

    def loss():
        return float((R * layers.dropout_forward(x, m)[0]).sum())
    assert max_diff(layers.dropout_backward(R, m), numeric_grad_array(loss, x)) < FD_TOL
    assert np.all(layers.dropout_backward(R, m)[m == 0] == 0)  # a dropped number learns nothing


# ---------------------------------------------------------------------------- the engines
def scalar_loss_and_grads(weights, masks):
    model = GPT.from_weights(CONFIG, weights)
    dropout = [masks.positions(b, num_predictions(tokens, CONFIG.block_size)) for b, tokens in enumerate(BATCH)]
    with Tape() as tape:
        loss = dropout_batch_loss(model, BATCH, dropout)
    loss.backward(tape)
    return loss.data, {name: np.array([[p.grad for p in row] for row in m]) for name, m in model.state_dict.items()}


def test_the_scalar_engine_computes_the_numpy_function_on_the_same_masks():
    weights, masks = weights_of(), draw(0.3, 9, 4, len(BATCH), CONFIG)
    loss, grads = loss_and_grads({n: np.array(w) for n, w in weights.items()}, CONFIG, BATCH, dropout=masks)
    scalar, scalar_grads = scalar_loss_and_grads(weights, masks)
    assert abs(loss - scalar) < 1e-12
    assert max(max_diff(grads[n], scalar_grads[n]) for n in grads) < 1e-10
    plain, _ = loss_and_grads({n: np.array(w) for n, w in weights.items()}, CONFIG, BATCH)
    assert abs(plain - loss) > 1e-3  # and the masks changed the function


@pytest.mark.torch
def test_pytorch_computes_the_same_function_on_the_same_masks():
    import torch
    from microgpt.torchgpt.trainer import Trainer
    weights, masks = weights_of(), draw(0.3, 9, 4, len(BATCH), CONFIG)
    loss, grads = loss_and_grads({n: np.array(w) for n, w in weights.items()}, CONFIG, BATCH, dropout=masks)
    trainer = Trainer(CONFIG, weights, tokenizer=None)
    tensors = {site: torch.from_numpy(a) for site, a in masks.arrays.items()}
    torch_loss = trainer.model.loss(*trainer._batch(BATCH), masks=tensors)
    torch_loss.backward()
    assert abs(torch_loss.item() - loss) < 1e-12
    for name, p in trainer.model.named_parameters():
        assert max_diff(p.grad.numpy(), grads[name]) < 1e-10, name


def train_args(names_file, out, *extra, dropout='0.2'):
    return ['--data', names_file, '--out', str(out), '--batch-size', '3', '--lr', '0.02', '--dropout', dropout,
            '--weight-decay', '0.1', '--num-samples', '0', *TINY, *extra]


def test_the_engines_log_the_same_losses_with_dropout_and_decay_on(tmp_path, names_file, capsys):
    engines = ['scalar', 'numpy'] + (['torch'] if importlib.util.find_spec('torch') else [])
    logs = {}
    for engine in engines:
        out = tmp_path / f'{engine}.json'
        code, _, err = run(train.main, train_args(names_file, out, '--steps', '12', '--eval-every', '6',
                                                  '--engine', engine), capsys)
        assert code == 0, err
        logs[engine] = [e.get('loss', e.get('val_loss')) for e in log_of(out) if 'loss' in e or 'val_loss' in e]
    for engine in engines[1:]:  # every step's loss and every validation, in the order logged
        assert len(logs[engine]) == len(logs['scalar']) == 12 + 2
        assert max(abs(a - b) for a, b in zip(logs['scalar'], logs[engine])) < 1e-10, engine
    code, _, _ = run(train.main, train_args(names_file, tmp_path / 'plain.json', '--steps', '12', '--engine', 'numpy',
                                            '--eval-every', '6', dropout='0'), capsys)
    plain = [e['loss'] for e in losses(log_of(tmp_path / 'plain.json'))]
    dropped = [e['loss'] for e in losses(log_of(tmp_path / 'numpy.json'))]
    assert code == 0 and max(abs(a - b) for a, b in zip(plain, dropped)) > 1e-4


# ---------------------------------------------------------------------------- the run
def test_a_run_with_dropout_and_decay_resumes_exactly(tmp_path, names_file, capsys, monkeypatch):
    """Stopped by Ctrl-C at step 6 of 14 and resumed: the losses of the run never stopped (the
    masks of a step come from the seed and the step, so nothing about them needs saving). One
    BLAS thread: the numpy engine's choice of threads, timed afresh on resuming, moves the last
    digit of a sum, not the masks."""
    from microgpt import backprop
    whole, parts = tmp_path / 'whole.json', tmp_path / 'parts.json'
    args = ['--engine', 'numpy', '--threads', '1', '--eval-every', '4', '--save-every', '4', '--steps', '14']
    assert run(train.main, train_args(names_file, whole, *args), capsys)[0] == 0
    interrupt_after(monkeypatch, 6, backprop.Trainer)
    assert run(train.main, train_args(names_file, parts, *args), capsys)[0] == 130
    monkeypatch.undo()
    code, printed, _ = run(train.main, ['--out', str(parts), '--resume', '--threads', '1'], capsys)  # the rest unasked
    assert code == 0 and 'dropout=0.2' in printed and 'weight_decay=0.1' in printed
    assert [e['loss'] for e in losses(log_of(whole))] == [e['loss'] for e in losses(log_of(parts))]


def test_evaluation_sampling_and_the_best_file_never_drop_and_a_resume_keeps_the_rate(tmp_path, names_file, capsys):
    """The best checkpoint's weights, evaluated by the scalar engine without any mask, give the
    validation loss the run logged for them; sample.py draws the names of the weights alone; a
    resume with another --dropout is refused in one line."""
    out = tmp_path / 'm.json'
    code, _, _ = run(train.main, train_args(names_file, out, '--steps', '20', '--eval-every', '5', '--engine', 'numpy',
                                            '--val-size', '8'), capsys)
    assert code == 0
    vals = [(e['step'], e['val_loss']) for e in log_of(out) if 'val_loss' in e]
    step, best = min(vals, key=lambda e: e[1])
    kept = read_checkpoint(str(tmp_path / 'm.best.json'))
    assert kept.train_state.step == step
    _, val_docs = split_docs(load_docs(names_file), val_size=8, seed=42)
    assert abs(evaluate(kept.model(), val_docs) - best) < 1e-10
    code, printed, _ = run(sample.main, ['--ckpt', str(out), '--num', '5', '--seed', '3', '--engine', 'scalar'], capsys)
    assert code == 0 and printed.split() == list(iter_names(read_checkpoint(str(out)).model(), num=5, seed=3))
    code, _, err = run(train.main, ['--out', str(out), '--resume', '--steps', '30', '--dropout', '0.5'], capsys)
    assert_one_line_error(code, err, '--dropout 0.5 differs from the run being resumed (0.2)')


# ---------------------------------------------------------------------------- the flag
def test_dropout_zero_is_microgpts_model(tmp_path, names_file, capsys):
    """--dropout 0 draws no masks: the losses of a run without the flag, float for float."""
    logs = []
    for extra in ([], ['--dropout', '0']):
        out = tmp_path / f'm{len(extra)}.json'
        assert run(train.main, ['--data', names_file, '--out', str(out), '--steps', '8', '--batch-size', '2',
                                '--num-samples', '0', *TINY, *extra], capsys)[0] == 0
        logs.append([e['loss'] for e in losses(log_of(out))])
    assert logs[0] == logs[1]


def test_a_float32_run_stays_float32_through_its_masks(monkeypatch):
    """The masks are drawn in float64; a float32 step takes them in float32, or every array
    after the first dropout would silently compute in float64 (at twice the time)."""
    from microgpt import backprop
    import microgpt.backprop.model  # noqa: F401  (loads backprop.model)
    seen = []
    real = backprop.model.dropout_forward

    def spy(x, m):
        y, cache = real(x, m)
        seen.append(y.dtype)
        return y, cache
    monkeypatch.setattr(backprop.model, 'dropout_forward', spy)
    trainer = backprop.Trainer(CONFIG, weights_of(), tokenizer=None, dtype='float32')
    trainer.step(BATCH, 0.01, draw(0.3, 1, 1, len(BATCH), CONFIG))
    assert seen and set(seen) == {np.dtype(np.float32)}
