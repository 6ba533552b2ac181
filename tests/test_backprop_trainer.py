"""
backprop.Trainer against the scalar engine's training: same losses step after step, the same
Adam state, the same checkpoint, an exact resume, and no silent step past an overflow.

The oracle is microgpt.training.train_step with microgpt.optim.Adam, started from the same
initial weights on the same names with the same learning-rate schedule. For batches of more than
one name, the scalar side builds the batch loss (the names' token losses summed, divided by the
batch's predicted tokens) as one graph and lets Adam step on it.
"""

import json
import math

import numpy as np
import pytest

from microgpt import inference
from microgpt.backprop import Trainer
from microgpt.edge.checkpoint import Checkpoint, SavedRun, TrainState, read_checkpoint, write_checkpoint
from microgpt.engine import Tape
from microgpt.fused import vsum
from microgpt.model import GPT, GPTConfig
from microgpt.optim import Adam
from microgpt.tokenizer import CharTokenizer
from microgpt.training import doc_loss, doc_tokens, learning_rate, num_predictions, train_step

A_RUN = SavedRun(data=None, val_size=None, shuffle=True, steps=1000, lr=0.01, seed=42)  # a run's settings, as saved

LOSS_TOL = 1e-9    # 100 steps of the same math: rounding differences only (observed ~1e-15)
STATE_TOL = 1e-12  # Adam's moments and the weights after those steps
NAMES = ['ava', 'bo', 'eli', 'mia', 'leo', 'zoe', 'ian', 'amy', 'max', 'kai']  # short: fast
STEPS = 100


def fresh(n_layer=1, n_embd=16, n_head=4, block_size=16, seed=42):
    tokenizer = CharTokenizer.from_docs(NAMES)
    config = GPTConfig(tokenizer.vocab_size, n_layer, n_embd, n_head, block_size)
    model = GPT(config, seed=seed, tokenizer=tokenizer, fused=True)  # the fast blocks
    return model, Trainer(config, model.weights(), tokenizer), tokenizer


def test_100_steps_give_the_scalar_engines_losses():
    model, trainer, tokenizer = fresh()
    optimizer = Adam(model.params)
    tokens = [doc_tokens(tokenizer, name) for name in NAMES]
    for step in range(STEPS):
        lr = learning_rate(0.01, step, STEPS)
        scalar = train_step(model, optimizer, tokens[step % len(tokens)], lr)
        numpy_loss = trainer.step([tokens[step % len(tokens)]], lr)
        assert isinstance(numpy_loss, float)
        assert abs(scalar - numpy_loss) < LOSS_TOL, step
    state, scalar_state = trainer.optimizer_state(), optimizer.state()
    assert state['t'] == scalar_state['t'] == STEPS
    for key in ('m', 'v'):
        assert all(isinstance(x, float) for x in state[key])
        assert np.abs(np.array(state[key]) - scalar_state[key]).max() < STATE_TOL
    for name, w in model.weights().items():
        assert np.abs(np.array(trainer.weights()[name]) - w).max() < STATE_TOL


def test_batched_steps_give_the_scalar_batch_losses():
    model, trainer, tokenizer = fresh(n_layer=2, n_embd=8, n_head=2)
    optimizer = Adam(model.params)
    tokens = [doc_tokens(tokenizer, name) for name in NAMES]
    B = 3
    for step in range(10):
        batch = [tokens[(step * B + b) % len(tokens)] for b in range(B)]
        lr = learning_rate(0.01, step, 10)
        counts = [num_predictions(t, model.config.block_size) for t in batch]
        with Tape() as tape:  # the scalar batch loss: token losses summed over the batch, / tokens
            loss = vsum([doc_loss(model, t) * n for t, n in zip(batch, counts)]) * (1.0 / sum(counts))
        loss.backward(tape)
        optimizer.step(lr)
        assert abs(trainer.step(batch, lr) - loss.data) < LOSS_TOL, step


def test_resume_from_a_saved_state_is_exact(tmp_path):
    _, trainer, tokenizer = fresh()
    tokens = [doc_tokens(tokenizer, name) for name in NAMES]
    for step in range(5):
        trainer.step(tokens[step:step + 2], 0.01)
    path = str(tmp_path / 'model.json')
    state = TrainState(5, A_RUN, '0' * 64)
    write_checkpoint(path, Checkpoint.of(trainer, optimizer=trainer.optimizer_state(), train_state=state))
    ckpt = read_checkpoint(path, training=True)
    resumed = Trainer(ckpt.config, ckpt.weights, ckpt.tokenizer)
    resumed.load_optimizer_state(ckpt.optimizer)
    for step in range(5, 10):
        assert trainer.step(tokens[step:step + 2], 0.01) == resumed.step(tokens[step:step + 2], 0.01)
    assert trainer.weights() == resumed.weights()
    assert trainer.optimizer_state() == resumed.optimizer_state()


def test_a_checkpoint_holds_what_the_scalar_engine_would_write(tmp_path):
    model, trainer, tokenizer = fresh()
    optimizer = Adam(model.params)
    tokens = doc_tokens(tokenizer, 'ava')
    train_step(model, optimizer, tokens, 0.01)
    trainer.step([tokens], 0.01)
    paths = {}
    for who, obj, adam in (('scalar', model, optimizer.state()), ('numpy', trainer, trainer.optimizer_state())):
        paths[who] = str(tmp_path / f'{who}.json')
        state = TrainState(1, A_RUN, '0' * 64)
        write_checkpoint(paths[who], Checkpoint.of(obj, optimizer=adam, train_state=state))
    files = {who: json.load(open(path)) for who, path in paths.items()}
    assert files['numpy'].keys() == files['scalar'].keys()
    assert files['numpy']['config'] == files['scalar']['config']
    assert list(files['numpy']['state_dict']) == list(files['scalar']['state_dict'])
    flat = {who: np.concatenate([np.ravel(m) for m in f['state_dict'].values()]
                                + [f['train_state']['adam']['m'], f['train_state']['adam']['v']])
            for who, f in files.items()}
    assert np.abs(flat['numpy'] - flat['scalar']).max() < STATE_TOL
    # and the port reads the numpy-written file as any other
    assert inference.load_checkpoint(paths['numpy']).config == model.config


def test_a_non_finite_step_returns_nan_and_changes_nothing():
    _, trainer, tokenizer = fresh()
    tokens = [doc_tokens(tokenizer, 'ava')]
    trainer.step(tokens, 0.01)
    weights = trainer.weights()
    weights['lm_head'][0][0] = 1e308  # the logits overflow: the loss is inf or nan
    trainer.load_weights(weights)
    state = trainer.optimizer_state()
    assert math.isnan(trainer.step(tokens, 0.01))
    assert trainer.weights() == weights
    assert trainer.optimizer_state() == state


@pytest.mark.parametrize('weight_decay', [0.0, 0.1])
def test_adam_on_arrays_is_the_scalar_adam_bit_for_bit(weight_decay):
    from microgpt.backprop.optim import AdamArrays
    from microgpt.engine import Value
    rng = np.random.default_rng(2)
    start = rng.normal(size=50)
    scalar_params = [Value(float(x)) for x in start]
    scalar, flat = Adam(scalar_params, weight_decay=weight_decay), start.copy()
    arrays = AdamArrays(50, weight_decay=weight_decay)
    for step in range(5):
        g = rng.normal(size=50) * 10.0 ** rng.integers(-6, 3, size=50)  # gradients of all scales
        for p, gi in zip(scalar_params, g):
            p.grad = float(gi)
        scalar.step(0.01 / (step + 1))
        arrays.step(flat, g, 0.01 / (step + 1))
        assert flat.tolist() == [p.data for p in scalar_params]  # exactly, not within a tolerance
    assert arrays.state() == scalar.state()
