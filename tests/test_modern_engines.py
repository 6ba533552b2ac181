"""
The modern rungs in every engine: the scalar gpt(), the numpy port and trainer, and torch agree.

For each rung alone and all at once (helpers.RUNGS, the small config, float64) the scalar engine
gives the oracle once: a name's logits, the gradients of a padded batch, five Adam steps with
weight decay. The numpy port (each of its paths) and trainer give the same numbers to 1e-10,
without PyTorch too; torch gives them where it is installed.
"""

import numpy as np
import pytest

from microgpt import backprop, inference
from microgpt.inference.model import KVCache, sigmoid
from microgpt.engine import Tape
from microgpt.model import GPT, parameter_shapes
from microgpt.optim import Adam
from microgpt.training import batch_loss, doc_tokens
from helpers import RUNG_DOCS, RUNGS, max_diff, rung_setup

TOL = 1e-10  # float64 everywhere: the same math, summed in other orders
DECAY = 0.1  # weight decay too: a gain is pulled towards 1, its 0


def batches(tokenizer):  # five steps: the name past the block padded beside another, then one each
    docs = [doc_tokens(tokenizer, d) for d in RUNG_DOCS]
    return [[docs[4], docs[1]], *([d] for d in docs[:4])]


@pytest.fixture(scope='module', params=sorted(RUNGS))
def oracle(request):
    """The scalar engine's numbers at one rung: (config, weights, tokenizer, the longest name's
    tokens and logits (T, vocab_size), the first batch's loss and gradients, five steps' losses,
    the weights after them)."""
    config, weights, tokenizer = rung_setup(request.param)
    model = GPT(config, tokenizer=tokenizer, fused=True)
    model.load_weights(weights)
    tokens = doc_tokens(tokenizer, RUNG_DOCS[-1])[:config.block_size]
    keys, values = model.empty_cache()
    logits = np.array([[v.data for v in model.gpt(t, pos, keys, values)] for pos, t in enumerate(tokens)])
    optimizer, losses = Adam(model.params, weight_decay=DECAY), []
    for step, batch in enumerate(batches(tokenizer)):
        with Tape() as tape:
            loss = batch_loss(model, batch)
        loss.backward(tape)
        if step == 0:
            grads = {name: np.array([[p.grad for p in row] for row in m]) for name, m in model.state_dict.items()}
        optimizer.step(0.01 * (1 - step / 5))  # and zeroes the gradients
        losses.append(loss.data)
    return config, weights, tokenizer, tokens, logits, (losses[0], grads), losses, model.weights()


def assert_trains_as_the_oracle(trainer, oracle):
    """The trainer's loss and gradients on the first batch, then five steps and the weights after."""
    config, _, tokenizer, _, _, (loss0, grads), losses, after = oracle
    loss, their_grads = trainer.loss_and_grads(batches(tokenizer)[0])
    assert abs(loss - loss0) < TOL and sorted(their_grads) == sorted(grads)  # every parameter, no other
    assert max(max_diff(their_grads[name], g) for name, g in grads.items()) < TOL
    for step, batch in enumerate(batches(tokenizer)):
        assert abs(trainer.step(batch, 0.01 * (1 - step / 5)) - losses[step]) < TOL, step
    assert max(max_diff(np.array(trainer.weights()[name]), np.array(w)) for name, w in after.items()) < TOL


def test_numpy_gives_the_scalar_engines_logits_gradients_and_steps(oracle):
    """Every path of the port (loops, one batch, its cache a prompt then one by one, sampling's
    next_logits) and the trainer: no PyTorch needed."""
    config, weights, tokenizer, tokens, logits, *_ = oracle
    port = inference.NumpyGPT(config, weights)
    cache = KVCache(config.n_layer, config.block_size)
    cached = [port.forward_batch([tokens[:3]], cache)[0]] + [port.forward_batch([[t]], cache)[0] for t in tokens[3:]]
    next_logits = port.next_logits_fn()
    for got in (port.forward(tokens)[0], port.forward_batch([tokens])[0], np.concatenate(cached),
                np.array([next_logits(tokens[:t]) for t in range(1, len(tokens) + 1)])):  # (T, vocab_size) each
        assert max_diff(got, logits) < TOL
    assert_trains_as_the_oracle(backprop.Trainer(config, weights, tokenizer, weight_decay=DECAY), oracle)


def test_the_ports_sigmoid_never_overflows():
    with np.errstate(all='raise'):  # the port's setting, where an overflow means a diverged model
        assert sigmoid(np.array([-1000.0, 1000.0])).tolist() == [0.0, 1.0]


@pytest.mark.torch
def test_torch_gives_the_scalar_engines_logits_gradients_and_steps(oracle):
    import torch
    from microgpt import torchgpt
    torch.set_num_threads(1)  # tiny tensors: more threads only contend on a shared machine
    config, weights, tokenizer, tokens, logits, *_ = oracle
    trainer = torchgpt.Trainer(config, weights, tokenizer, weight_decay=DECAY)
    assert list(trainer.model.state_dict()) == list(parameter_shapes(config))  # Adam's flat order, every engine's
    assert trainer.weights() == weights  # the checkpoint's own lists, bit for bit
    assert max_diff(trainer.model(torch.tensor([tokens]))[0].detach().numpy(), logits) < TOL
    assert_trains_as_the_oracle(trainer, oracle)
