"""
Tests for learning: the loss and its gradients (microgpt/training.py), Adam (microgpt/optim.py),
and what training reads, the data (microgpt/edge/data.py) and the tokenizer (microgpt/tokenizer.py).

The oracles: central finite differences for the gradients of the whole model's loss (with a
negative control, a deliberately wrong local derivative, that the check must catch); Adam's
published update written out by hand for two steps; log(vocab_size) for a model that guesses
uniformly; and a short training run that must lower the loss.

Run: .venv/bin/python -m pytest -q tests/test_training.py
"""

import math
import random

import pytest

from helpers import TINY_NAMES
from microgpt.edge.data import bundled_names, default_val_size, load_docs, split_docs
from microgpt.engine import Value
from microgpt.edge.errors import UserError
from microgpt.model import GPT, GPTConfig, parameter_shapes
from microgpt.optim import Adam
from microgpt.tokenizer import CharTokenizer
from microgpt.training import doc_loss, doc_tokens, evaluate, learning_rate, train_step

pytestmark = pytest.mark.lesson  # the lesson's own files: `make test-lesson`

H = 1e-6           # finite-difference step: O(h^2) truncation ~1e-12, rounding ~1e-16/h ~1e-10
GRAD_TOL = 1e-6    # allowed |backprop - numeric| / max(1, |g|): far above both error sources
ADAM_TOL = 1e-12   # the same formula evaluated twice: only rounding may differ
LOSS_TOL = 1e-12
MIN_LOSS_DROP = 0.3  # 60 steps on TINY_NAMES take the mean loss from ~3.30 to ~2.72


# ---------------------------------------------------------------------------- gradients
GRAD_CFG = GPTConfig(vocab_size=6, n_layer=2, n_embd=4, n_head=2, block_size=8)
GRAD_TOKENS = [5, 0, 1, 2, 1, 3, 5]  # BOS, five letters with a repeat, BOS


def sampled_parameters(model, tokens, extra=5, seed=0):
    """~20 (name, row, col) entries: one per matrix (from rows the tokens actually use, so the
    gradient is not trivially 0), plus a few drawn from anywhere, used or not."""
    rng = random.Random(seed)
    used_rows = {'wte': sorted(set(tokens[:-1])), 'wpe': list(range(len(tokens) - 1))}
    picks = []
    for name, (n_out, n_in) in parameter_shapes(model.config).items():
        row = rng.choice(used_rows.get(name, range(n_out)))
        picks.append((name, row, rng.randrange(n_in)))
    names = list(parameter_shapes(model.config).items())
    for _ in range(extra):
        name, (n_out, n_in) = rng.choice(names)
        picks.append((name, rng.randrange(n_out), rng.randrange(n_in)))
    return picks


def finite_difference(model, tokens, name, row, col, h=H):
    """(L(w + h) - L(w - h)) / 2h for one weight, with the forward pass only."""
    p = model.state_dict[name][row][col]
    original = p.data
    p.data = original + h
    up = doc_loss(model, tokens).data
    p.data = original - h
    down = doc_loss(model, tokens).data
    p.data = original
    return (up - down) / (2 * h)


def largest_grad_error(model, tokens, picks):
    doc_loss(model, tokens).backward()
    grads = {pick: model.state_dict[pick[0]][pick[1]][pick[2]].grad for pick in picks}
    errors = []
    for pick in picks:
        numeric = finite_difference(model, tokens, *pick)
        errors.append(abs(grads[pick] - numeric) / max(1.0, abs(grads[pick]), abs(numeric)))
    return max(errors)


CUT_CFG = GPTConfig(vocab_size=6, n_layer=1, n_embd=4, n_head=2, block_size=4)


@pytest.mark.parametrize('cfg, tokens, seed', [
    (GRAD_CFG, GRAD_TOKENS, 7),
    (CUT_CFG, [5, 0, 1, 2, 3, 4, 0, 5], 3),  # a long name: 7 predictions, but only 4 positions exist
], ids=['name', 'name-cut-at-the-block'])
def test_loss_gradients_match_central_finite_differences(cfg, tokens, seed):
    model = GPT(cfg, seed=seed)
    picks = sampled_parameters(model, tokens)
    assert len(picks) == len(parameter_shapes(cfg)) + 5  # one a matrix, five anywhere
    assert largest_grad_error(model, tokens, picks) <= GRAD_TOL


def test_gradient_check_catches_a_wrong_local_derivative(monkeypatch):
    """Negative control: halve ReLU's slope in backward only; the same check must now fail."""
    def relu_with_wrong_slope(self):
        return Value(max(0.0, self.data), (self,), (0.5 * float(self.data > 0),), 'relu')
    monkeypatch.setattr(Value, 'relu', relu_with_wrong_slope)
    model = GPT(GRAD_CFG, seed=7)
    picks = sampled_parameters(model, GRAD_TOKENS)
    assert largest_grad_error(model, GRAD_TOKENS, picks) > 100 * GRAD_TOL


# ---------------------------------------------------------------------------- the loss
def test_loss_of_a_model_with_zero_weights_is_log_vocab_size():
    """All-zero weights give all-zero logits, a uniform guess: the loss is exactly log(V)."""
    model = GPT(GRAD_CFG)
    model.load_weights({name: [[0.0] * n_in for _ in range(n_out)]
                        for name, (n_out, n_in) in parameter_shapes(GRAD_CFG).items()})
    assert abs(doc_loss(model, GRAD_TOKENS).data - math.log(6)) <= LOSS_TOL


def test_loss_is_the_mean_of_the_per_position_cross_entropies():
    model = GPT(GRAD_CFG, seed=7)
    keys, values = model.empty_cache()
    terms = []
    for t in range(len(GRAD_TOKENS) - 1):
        z = [l.data for l in model.gpt(GRAD_TOKENS[t], t, keys, values)]
        log_total = math.log(sum(math.exp(v) for v in z))
        terms.append(log_total - z[GRAD_TOKENS[t + 1]])  # -log softmax(z)[next]
    assert abs(doc_loss(model, GRAD_TOKENS).data - sum(terms) / len(terms)) <= LOSS_TOL


def test_a_name_longer_than_the_block_is_cut_there():
    model = GPT(CUT_CFG, seed=3)
    long = [5, 0, 1, 2, 3, 4, 0, 5]
    assert doc_loss(model, long).data == doc_loss(model, long[:CUT_CFG.block_size + 1]).data


def test_doc_tokens_wraps_a_name_in_bos():
    tok = CharTokenizer.from_docs(['abc'])
    assert doc_tokens(tok, 'cab') == [3, 2, 0, 1, 3]


# ---------------------------------------------------------------------------- Adam
def test_adam_two_steps_match_a_hand_computation():
    p, q = Value(1.0), Value(-0.5)
    opt = Adam([p, q])  # beta1 0.85, beta2 0.99, eps 1e-8: microgpt's defaults
    assert (opt.beta1, opt.beta2, opt.eps) == (0.85, 0.99, 1e-8)

    p.grad, q.grad = 0.5, 0.0
    opt.step(0.1)
    # t=1: m = 0.15 * 0.5 = 0.075, v = 0.01 * 0.5^2 = 0.0025
    # m_hat = 0.075 / (1 - 0.85) = 0.5, v_hat = 0.0025 / (1 - 0.99) = 0.25, sqrt = 0.5
    p1 = 1.0 - 0.1 * 0.5 / (0.5 + 1e-8)
    assert abs(p.data - p1) <= ADAM_TOL
    assert q.data == -0.5  # no gradient yet, so no moment and no move

    p.grad, q.grad = -0.2, 0.3
    opt.step(0.05)
    # t=2 for p: m = 0.85 * 0.075 + 0.15 * -0.2 = 0.03375, v = 0.99 * 0.0025 + 0.01 * 0.04 = 0.002875
    # bias corrections 1 - 0.85^2 = 0.2775 and 1 - 0.99^2 = 0.0199
    p2 = p1 - 0.05 * (0.03375 / 0.2775) / (math.sqrt(0.002875 / 0.0199) + 1e-8)
    # t=2 for q (first gradient, but the corrections are t=2's): m = 0.045, v = 0.0009
    q2 = -0.5 - 0.05 * (0.045 / 0.2775) / (math.sqrt(0.0009 / 0.0199) + 1e-8)
    assert abs(p.data - p2) <= ADAM_TOL
    assert abs(q.data - q2) <= ADAM_TOL
    assert opt.t == 2


def test_adam_first_step_moves_each_weight_by_about_lr_against_its_gradient():
    """At t=1 bias correction makes m_hat / sqrt(v_hat) = g / (|g| + eps): the step is
    lr * sign(g) whatever the gradient's size, unless |g| is down near eps."""
    grads = [3.0, -0.5, 250.0, -7.0, 1e-8]
    params = [Value(0.0) for _ in grads]
    opt = Adam(params)
    for p, g in zip(params, grads):
        p.grad = g
    opt.step(0.01)
    assert [round(p.data, 9) for p in params[:4]] == [-0.01, 0.01, -0.01, 0.01]
    assert abs(params[4].data - -0.005) <= ADAM_TOL  # g = eps: half a step


def test_a_training_step_does_not_depend_on_grads_left_from_earlier_steps():
    """What --resume relies on: a model loaded from a checkpoint (every grad 0) takes the same
    step as the one that kept training. Weights the name does not use (here the rows of letters
    not in 'ab', and positions past its end) must not be moved by a previous step's grads."""
    tok = CharTokenizer.from_docs(['abc', 'cab'])
    cfg = GPTConfig(tok.vocab_size, n_embd=4, n_head=2, block_size=8)
    kept, fresh = GPT(cfg, seed=1, tokenizer=tok), GPT(cfg, seed=1, tokenizer=tok)
    kept_opt = Adam(kept.params)
    train_step(kept, kept_opt, doc_tokens(tok, 'cabcab'), 0.01)  # touches 'c' and 7 positions
    fresh.load_weights(kept.weights())
    fresh_opt = Adam(fresh.params)
    fresh_opt.load_state(kept_opt.state())
    train_step(kept, kept_opt, doc_tokens(tok, 'ab'), 0.01)
    train_step(fresh, fresh_opt, doc_tokens(tok, 'ab'), 0.01)
    assert fresh.weights() == kept.weights()


def test_learning_rate_decays_linearly_to_zero():
    assert learning_rate(0.01, 0, 100) == 0.01
    assert abs(learning_rate(0.01, 50, 100) - 0.005) <= ADAM_TOL
    assert abs(learning_rate(0.01, 99, 100) - 0.0001) <= ADAM_TOL  # the last step is not 0
    assert learning_rate(0.01, 100, 100) == 0.0


# ---------------------------------------------------------------------------- a training run
def test_a_short_training_run_lowers_the_loss():
    tok = CharTokenizer.from_docs(TINY_NAMES)
    model = GPT(GPTConfig(tok.vocab_size, n_layer=1, n_embd=8, n_head=2, block_size=12),
                seed=42, tokenizer=tok, fused=True)  # the fast blocks: the same step, quicker
    before = evaluate(model, TINY_NAMES)
    assert abs(before - math.log(tok.vocab_size)) < 0.1  # small init: close to a uniform guess
    opt = Adam(model.params)
    steps = 60
    losses = [train_step(model, opt, doc_tokens(tok, TINY_NAMES[s % len(TINY_NAMES)]),
                         learning_rate(0.01, s, steps)) for s in range(steps)]
    assert all(math.isfinite(loss) for loss in losses)
    after = evaluate(model, TINY_NAMES)
    assert after < before - MIN_LOSS_DROP
    # the per-step losses fall too, not just the final evaluation
    assert sum(losses[-10:]) / 10 < sum(losses[:10]) / 10


def test_evaluate_is_the_per_token_mean_over_documents():
    tok = CharTokenizer.from_docs(['ab', 'bca'])
    model = GPT(GPTConfig(tok.vocab_size, n_embd=4, n_head=2, block_size=8), seed=1, tokenizer=tok)
    # 'ab' predicts 3 tokens, 'bca' 4: a mean per token, not per name
    total = 3 * doc_loss(model, doc_tokens(tok, 'ab')).data + 4 * doc_loss(model, doc_tokens(tok, 'bca')).data
    assert abs(evaluate(model, ['ab', 'bca']) - total / 7) <= LOSS_TOL


# ---------------------------------------------------------------------------- data
def write(tmp_path, content, name='data.txt'):
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode('utf-8'))
    return str(path)


def test_load_docs_strips_whitespace_and_skips_blank_lines(tmp_path):
    path = write(tmp_path, '  emma \n\n\tliam\t\n   \nzoë\n')
    assert load_docs(path) == ['emma', 'liam', 'zoë']


@pytest.mark.parametrize('content, fragment', [
    (None, 'does not exist'), ('', 'no documents'), ('\n\n', 'no documents'), ('  \n\t\n \r\n', 'no documents'),
    (b'emma\nliam\nchlo\xe9\nava\n', 'line 3 is not valid UTF-8'),  # Latin-1 e-acute on line 3
], ids=['missing', 'empty', 'newlines', 'blanks', 'not-utf8'])
def test_load_docs_refuses_in_one_line_naming_the_file(tmp_path, content, fragment):
    path = str(tmp_path / 'nope.txt') if content is None else write(tmp_path, content)
    with pytest.raises(UserError, match=fragment) as e:
        load_docs(path)
    assert path in str(e.value) and '\n' not in str(e.value)
    with pytest.raises(UserError, match='is a directory'):
        load_docs(str(tmp_path))


def test_bundled_names_are_5163_lowercase_unique_names_over_26_letters():
    docs = bundled_names()
    assert len(docs) == 5163
    assert len(set(docs)) == len(docs)
    assert sorted(set(''.join(docs))) == list('abcdefghijklmnopqrstuvwxyz')
    assert load_docs() == docs  # no path means the bundled names


# ---------------------------------------------------------------------------- the split
def test_default_val_size_is_ten_percent_capped_at_1000():
    assert default_val_size(5163) == 516
    assert default_val_size(20000) == 1000
    assert default_val_size(9) == 0


def test_split_is_a_seeded_partition():
    docs = [f'n{i}' for i in range(50)]
    train, val = split_docs(docs, seed=42)
    assert (len(train), len(val)) == (45, 5)
    assert sorted(train + val) == sorted(docs)
    assert split_docs(docs, seed=42) == (train, val)       # the seed fixes the order
    assert split_docs(docs, seed=43) != (train, val)
    assert train + val != docs                              # shuffled


def test_split_without_shuffle_holds_out_the_last_documents_and_keeps_one_for_training():
    docs = [f'n{i}' for i in range(50)]
    assert split_docs(docs, val_size=3, shuffle=False) == (docs[:47], docs[47:])
    docs = ['a', 'b', 'c']
    assert split_docs(docs, val_size=0, shuffle=False) == (docs, [])
    assert split_docs(docs, val_size=2, shuffle=False) == (['a'], ['b', 'c'])
    with pytest.raises(UserError, match='leaves no training documents'):
        split_docs(docs, val_size=3)


# ---------------------------------------------------------------------------- the tokenizer
def test_tokenizer_is_the_sorted_unique_characters_plus_bos():
    tok = CharTokenizer.from_docs(['emma', 'bob'])
    assert tok.chars == ['a', 'b', 'e', 'm', 'o']
    assert (tok.bos, tok.vocab_size) == (5, 6)
    assert tok.encode('mob') == [3, 4, 1]
    assert tok.decode([5, 3, 4, 1, 5]) == 'mob'  # BOS has no character
