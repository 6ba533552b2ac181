"""
The modern rungs in every engine: the scalar gpt(), the numpy port and trainer, and torch agree.

For each rung alone and all at once (helpers.RUNGS, the small config, float64): the same logits
for a name from the scalar engine position by position (microgpt/model.py), the numpy port
(src/inference) and torch (src/torchgpt); the same loss and every gradient, name by name, from
the scalar engine, src/backprop's hand-derived backward and PyTorch's autograd, and the two
batched engines the same on the padded batch; then five Adam steps, with weight decay, giving
the same losses and weights in all three. PyTorch is optional: without it these tests skip.
"""

import numpy as np
import pytest

pytestmark = pytest.mark.torch

torch = pytest.importorskip("torch", reason="needs PyTorch: pip install -e '.[torch]'")
torch.set_num_threads(1)  # tiny tensors: more threads only contend on a shared machine

from microgpt import backprop, inference, torchgpt  # noqa: E402
from microgpt.model import GPT  # noqa: E402
from microgpt.optim import Adam  # noqa: E402
from microgpt.training import batch_step, doc_tokens  # noqa: E402
from helpers import RUNG_DOCS, RUNGS, max_diff, rung_setup, scalar_loss_and_grads  # noqa: E402

TOL = 1e-10  # float64 everywhere: the same math, summed in other orders


def engines(rung):
    """(scalar GPT, backprop.Trainer, torchgpt.Trainer, the names' tokens), all at one rung's weights."""
    config, weights, tokenizer = rung_setup(rung)
    model = GPT(config, tokenizer=tokenizer, fused=True)
    model.load_weights(weights)
    return (model, backprop.Trainer(config, weights, tokenizer, weight_decay=0.1),
            torchgpt.Trainer(config, weights, tokenizer, weight_decay=0.1),
            [doc_tokens(tokenizer, d) for d in RUNG_DOCS])


@pytest.mark.parametrize('rung', sorted(RUNGS))
def test_logits_loss_and_every_gradient_are_the_same_in_every_engine(rung):
    model, numpy_trainer, torch_trainer, batch = engines(rung)
    config = model.config
    tokens = batch[-1][:config.block_size]  # the longest name, a whole block of positions
    keys, values = model.empty_cache()
    scalar = np.array([[v.data for v in model.gpt(t, pos, keys, values)]  # (T, vocab_size)
                       for pos, t in enumerate(tokens)])
    port, _ = inference.NumpyGPT(config, model.weights()).forward(tokens)         # (T, vocab_size)
    ours = torch_trainer.model(torch.tensor([tokens]))[0].detach().numpy()        # (T, vocab_size)
    assert max_diff(port, scalar) < TOL and max_diff(ours, scalar) < TOL

    for tokens in batch:  # each name alone: the scalar engine's loss and gradients are the oracle
        loss, grads = scalar_loss_and_grads(model, tokens)
        for trainer in (numpy_trainer, torch_trainer):
            their_loss, their_grads = trainer.loss_and_grads([tokens])
            assert abs(their_loss - loss) < TOL
            assert sorted(their_grads) == sorted(grads)  # every parameter, and no other
            assert max(max_diff(their_grads[name], grads[name]) for name in grads) < TOL
    # the two batched engines on the padded batch of every name (the steps below check batches
    # against the scalar engine)
    loss, grads = numpy_trainer.loss_and_grads(batch)
    their_loss, their_grads = torch_trainer.loss_and_grads(batch)
    assert abs(their_loss - loss) < TOL
    assert max(max_diff(their_grads[name], grads[name]) for name in grads) < TOL


@pytest.mark.parametrize('rung', sorted(RUNGS))
def test_five_steps_are_the_same_in_every_engine(rung):
    model, numpy_trainer, torch_trainer, batch = engines(rung)
    optimizer = Adam(model.params, weight_decay=0.1)  # decay too: a gain is pulled towards 1, its 0
    for step in range(5):
        names, lr = [batch[step], batch[(step + 2) % len(batch)]], 0.01 * (1 - step / 5)
        loss = batch_step(model, optimizer, names, lr)
        assert abs(numpy_trainer.step(names, lr) - loss) < TOL, step
        assert abs(torch_trainer.step(names, lr) - loss) < TOL, step
    for trainer in (numpy_trainer, torch_trainer):
        weights = trainer.weights()
        assert max(max_diff(np.array(weights[name]), np.array(w)) for name, w in model.weights().items()) < TOL
