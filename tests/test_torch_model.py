"""
torchgpt's module and trainer against the scalar engine and the numpy path, in float64.

PyTorch is optional: `pip install -e '.[torch]'` enables these tests, otherwise they skip.
Layered as the house style asks: the module's names and shapes, then logits (against the
numpy port and the scalar gpt()), then the loss and every gradient (against the scalar engine
one name at a time, and src/backprop on a padded batch), then 100 training steps against
backprop.Trainer. Same math in float64: only the order of sums differs (observed ~1e-16).
"""

import numpy as np
import pytest

pytestmark = pytest.mark.torch

torch = pytest.importorskip("torch", reason="needs PyTorch: pip install -e '.[torch]'")
torch.set_num_threads(1)  # tiny matrices: more threads only contend on a shared machine

from microgpt import backprop  # noqa: E402
from microgpt import inference  # noqa: E402
from microgpt import torchgpt  # noqa: E402
from microgpt.model import GPT, GPTConfig, parameter_shapes  # noqa: E402
from microgpt.tokenizer import CharTokenizer  # noqa: E402
from microgpt.training import doc_tokens, learning_rate  # noqa: E402
from helpers import NAMES, assert_names_as_the_scalar_engine  # noqa: E402

TOL = 1e-10        # float64 both sides: the torch engine's logits, loss and gradients all but equal
STEPS_TOL = 1e-9   # 100 Adam steps: rounding compounds a little
CONFIGS = {'default': dict(n_layer=1, n_embd=16, n_head=4, block_size=16),
           '2x32': dict(n_layer=2, n_embd=32, n_head=4, block_size=12)}


def setup(config_name, seed=3):
    tokenizer = CharTokenizer.from_docs(NAMES)
    config = GPTConfig(tokenizer.vocab_size, **CONFIGS[config_name])
    model = GPT(config, seed=seed, tokenizer=tokenizer, fused=True)  # the fast blocks
    return model, torchgpt.Trainer(config, model.weights(), tokenizer), tokenizer


def test_state_dict_is_microgpts_names_shapes_and_order():
    model, trainer, _ = setup('2x32')
    sd = trainer.model.state_dict()
    assert list(sd) == list(parameter_shapes(model.config))  # GPT.params order: Adam's flat order
    for name, shape in parameter_shapes(model.config).items():
        assert list(sd[name].shape) == shape
    assert trainer.weights() == model.weights()  # the checkpoint's own lists, bit for bit


@pytest.mark.parametrize('config_name', sorted(CONFIGS))
def test_logits_equal_the_numpy_port_and_the_scalar_gpt(config_name):
    model, trainer, tokenizer = setup(config_name)
    port = inference.NumpyGPT(model.config, model.weights(), tokenizer=tokenizer)
    tokens = doc_tokens(tokenizer, 'isabella')[:model.config.block_size]
    logits = trainer.model(torch.tensor([tokens]))[0].detach().numpy()   # (T, vocab_size)
    np_logits, _ = port.forward(tokens)
    assert np.abs(logits - np_logits).max() < TOL
    keys, values = model.empty_cache()
    scalar = [[v.data for v in model.gpt(tok, pos, keys, values)] for pos, tok in enumerate(tokens)]
    assert np.abs(logits - np.array(scalar)).max() < TOL


@pytest.mark.parametrize('config_name', sorted(CONFIGS))
def test_loss_and_every_gradient_equal_the_scalar_engines(config_name):
    assert_names_as_the_scalar_engine(*setup(config_name), tol=TOL)


@pytest.mark.parametrize('config_name', sorted(CONFIGS))
def test_batch_loss_and_gradients_equal_backprops(config_name):
    model, trainer, tokenizer = setup(config_name)
    batch = [doc_tokens(tokenizer, name) for name in NAMES]  # padded: lengths 4 to past the block
    loss, grads = backprop.loss_and_grads({k: np.array(v) for k, v in model.weights().items()},
                                          model.config, batch)
    t_loss, t_grads = trainer.loss_and_grads(batch)
    assert abs(loss - t_loss) < TOL
    for pname in grads:
        assert np.abs(t_grads[pname] - grads[pname]).max() < TOL, pname
    # the negative control: a gradient of another weight would not pass the same bound
    assert np.abs(t_grads['layer0.attn_wq'] - grads['layer0.attn_wk']).max() > TOL


def test_100_steps_equal_the_numpy_engines():
    model, trainer, tokenizer = setup('default', seed=42)
    np_trainer = backprop.Trainer(model.config, model.weights(), tokenizer)
    batches = [[doc_tokens(tokenizer, NAMES[(3 * s + b) % len(NAMES)]) for b in range(1 + s % 3)]
               for s in range(100)]
    worst = 0.0
    for s, batch in enumerate(batches):
        lr = learning_rate(0.01, s, len(batches))
        worst = max(worst, abs(trainer.step(batch, lr) - np_trainer.step(batch, lr)))
    assert worst < STEPS_TOL
    state, np_state = trainer.optimizer_state(), np_trainer.optimizer_state()
    assert state['t'] == np_state['t'] == 100
    assert np.abs(np.array(state['m']) - np_state['m']).max() < STEPS_TOL
    w, np_w = trainer.weights(), np_trainer.weights()
    assert max(np.abs(np.array(w[k]) - np_w[k]).max() for k in w) < STEPS_TOL


def test_adam_state_moves_between_engines_exactly():
    """numpy's Adam state loaded into torch (and back) continues as numpy would have."""
    model, trainer, tokenizer = setup('default', seed=42)
    a = backprop.Trainer(model.config, model.weights(), tokenizer)
    batch = [doc_tokens(tokenizer, n) for n in NAMES[:3]]
    for s in range(5):
        a.step(batch, 0.01)
    trainer.load_weights(a.weights())
    trainer.load_optimizer_state(a.optimizer_state())
    assert trainer.optimizer_state() == a.optimizer_state()   # through torch tensors, bit for bit
    assert abs(trainer.step(batch, 0.01) - a.step(batch, 0.01)) < TOL
    b = backprop.Trainer(model.config, trainer.weights(), tokenizer)
    b.load_optimizer_state(trainer.optimizer_state())
    assert abs(b.step(batch, 0.01) - a.step(batch, 0.01)) < TOL
