"""
The numpy training path's loss and gradients against the scalar engine, name by name and batched.

The scalar engine (microgpt.training.doc_loss, Value.backward) is the oracle: for one name, every
parameter's gradient must match to 1e-10; for a batch, the gradient must be the token-weighted
mean of the names' scalar gradients. Padding a batch with an unusually long name must leave the
other names' per-token losses as they were.
"""

import numpy as np
import pytest

from microgpt.backprop import Trainer, make_batch
from microgpt.backprop.model import model_forward
from microgpt.inference.model import cross_entropy
from microgpt.edge.errors import UserError
from microgpt.model import GPT, GPTConfig
from microgpt.tokenizer import CharTokenizer
from microgpt.training import doc_tokens, num_predictions
from helpers import GRAD_TOL, NAMES, assert_names_as_the_scalar_engine, scalar_loss_and_grads

CONFIGS = {'default': dict(n_layer=1, n_embd=16, n_head=4),
           '2x32': dict(n_layer=2, n_embd=32, n_head=4)}


def setup(config_name, block_size=12, seed=3):
    tokenizer = CharTokenizer.from_docs(NAMES)
    config = GPTConfig(tokenizer.vocab_size, block_size=block_size, **CONFIGS[config_name])
    model = GPT(config, seed=seed, tokenizer=tokenizer, fused=True)  # the fast blocks
    return model, Trainer(config, model.weights(), tokenizer), tokenizer


@pytest.mark.parametrize('config_name', sorted(CONFIGS))
def test_one_name_gradients_equal_the_scalar_engines(config_name):
    assert_names_as_the_scalar_engine(*setup(config_name))


@pytest.mark.parametrize('config_name', sorted(CONFIGS))
def test_batch_gradient_is_the_token_weighted_mean_of_the_names(config_name):
    model, trainer, tokenizer = setup(config_name)
    batch = [doc_tokens(tokenizer, name) for name in NAMES]
    total = 0
    want_loss, want = 0.0, None
    for tokens in batch:
        n = num_predictions(tokens, model.config.block_size)
        loss, grads = scalar_loss_and_grads(model, tokens)
        want_loss += loss * n
        want = {k: g * n for k, g in grads.items()} if want is None else {k: want[k] + grads[k] * n for k in grads}
        total += n
    np_loss, np_grads = trainer.loss_and_grads(batch)
    assert abs(np_loss - want_loss / total) < GRAD_TOL
    for pname in want:
        assert np.abs(np_grads[pname] - want[pname] / total).max() < GRAD_TOL, pname


def test_a_long_name_in_the_batch_changes_no_other_tokens_loss():
    model, trainer, tokenizer = setup('default', block_size=16)
    short = [doc_tokens(tokenizer, name) for name in ('ava', 'emma', 'bob')]
    long_name = doc_tokens(tokenizer, 'christopherson' * 2)  # cut at block_size, pads the rest to 16
    per_token = {}
    for batch in (short, short + [long_name]):
        idx, targets, mask = make_batch(batch, trainer.config.block_size, trainer.config.vocab_size)
        _, caches = model_forward(trainer.params, trainer.config, idx, targets, mask)
        logits, real_targets = caches['loss']  # (R, vocab_size), (R,): the real positions only
        losses = np.full(idx.size, np.nan)  # (B*T,): NaN on padding
        losses[np.flatnonzero(mask)] = cross_entropy(logits, real_targets)  # each position's own loss
        losses = losses.reshape(idx.shape)  # (B, T)
        per_token[len(batch)] = [losses[b, :len(t) - 1] for b, t in enumerate(short)]
        assert idx.shape[1] == max(num_predictions(t, 16) for t in batch)
    for a, b in zip(per_token[3], per_token[4]):
        assert np.abs(a - b).max() < GRAD_TOL


def test_ids_outside_the_vocabulary_are_one_line_naming_the_fix():
    _, trainer, tokenizer = setup('default')
    with pytest.raises(UserError, match='outside the vocabulary'):
        trainer.loss_and_grads([[tokenizer.bos, 99, tokenizer.bos]])
