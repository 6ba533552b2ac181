"""
`--reproduce-original` against a port of the original single-file microgpt.py, written here with
basic Value ops and one random.Random(42) drawn in the script's order (shuffle, weights, samples):
our side (prepare, train.py's data order, the fused GPT, batch_step, sample_original) must give
the same loss at every step (LOSS_TOL) and the same names, in order.
"""

import math
import os
import random

import pytest

from helpers import REPO_DIR, TINY_NAMES
from microgpt.engine import Value
from microgpt.model import GPT
from microgpt.optim import Adam
from microgpt.edge.data import split_docs
from microgpt.programs.original import ORIGINAL, prepare, sample_original
from microgpt.training import batch_step, doc_tokens, learning_rate

LOSS_TOL = 1e-9     # what the reproduction promises for each step's loss
# makemore's names.txt, where README's download puts it or in ../shared/data (else these skip)
NAMES_TXT = next((p for p in (os.path.join(REPO_DIR, 'names.txt'), os.path.join(REPO_DIR, '..', 'shared', 'data', 'names.txt'))
                  if os.path.isfile(p)), 'names.txt (not found)')

# The original's recipe on a smaller model, so that the slow unfused port runs in a second.
SMALL = dict(ORIGINAL, n_embd=8, n_head=2, block_size=8, steps=8, num_samples=10)


# ---------------------------------------------------------------------------- the port
def original_run(docs, steps, n_layer=1, n_embd=16, n_head=4, block_size=16, num_samples=20, num_steps=None):
    """The original script's run: (per-step losses, sampled names), basic Value ops only; num_steps
    is the schedule's length (default `steps`): a smaller `steps` runs its first steps."""
    num_steps = num_steps or steps
    rng = random.Random(42)
    docs = list(docs)
    rng.shuffle(docs)
    uchars = sorted(set(''.join(docs)))
    BOS = len(uchars)
    vocab_size = len(uchars) + 1
    head_dim = n_embd // n_head

    def matrix(nout, nin, std=0.08):
        return [[Value(rng.gauss(0, std)) for _ in range(nin)] for _ in range(nout)]
    sd = {'wte': matrix(vocab_size, n_embd), 'wpe': matrix(block_size, n_embd),
          'lm_head': matrix(vocab_size, n_embd)}
    for i in range(n_layer):
        sd[f'layer{i}.attn_wq'] = matrix(n_embd, n_embd)
        sd[f'layer{i}.attn_wk'] = matrix(n_embd, n_embd)
        sd[f'layer{i}.attn_wv'] = matrix(n_embd, n_embd)
        sd[f'layer{i}.attn_wo'] = matrix(n_embd, n_embd)
        sd[f'layer{i}.mlp_fc1'] = matrix(4 * n_embd, n_embd)
        sd[f'layer{i}.mlp_fc2'] = matrix(n_embd, 4 * n_embd)
    params = [p for mat in sd.values() for row in mat for p in row]

    def linear(x, w):
        return [sum(wi * xi for wi, xi in zip(wo, x)) for wo in w]

    def softmax(logits):
        max_val = max(v.data for v in logits)
        exps = [(v - max_val).exp() for v in logits]
        total = sum(exps)
        return [e / total for e in exps]

    def rmsnorm(x):
        ms = sum(xi * xi for xi in x) / len(x)
        scale = (ms + 1e-5) ** -0.5
        return [xi * scale for xi in x]

    def gpt(token_id, pos_id, keys, values):
        x = [t + p for t, p in zip(sd['wte'][token_id], sd['wpe'][pos_id])]
        x = rmsnorm(x)
        for li in range(n_layer):
            x_residual = x
            x = rmsnorm(x)
            q = linear(x, sd[f'layer{li}.attn_wq'])
            k = linear(x, sd[f'layer{li}.attn_wk'])
            v = linear(x, sd[f'layer{li}.attn_wv'])
            keys[li].append(k)
            values[li].append(v)
            x_attn = []
            for h in range(n_head):
                hs = h * head_dim
                q_h = q[hs:hs + head_dim]
                k_h = [ki[hs:hs + head_dim] for ki in keys[li]]
                v_h = [vi[hs:hs + head_dim] for vi in values[li]]
                scores = [sum(q_h[j] * k_h[t][j] for j in range(head_dim)) / head_dim ** 0.5
                          for t in range(len(k_h))]
                w = softmax(scores)
                x_attn.extend(sum(w[t] * v_h[t][j] for t in range(len(v_h))) for j in range(head_dim))
            x = [a + b for a, b in zip(linear(x_attn, sd[f'layer{li}.attn_wo']), x_residual)]
            x_residual = x
            x = [xi.relu() for xi in linear(rmsnorm(x), sd[f'layer{li}.mlp_fc1'])]
            x = [a + b for a, b in zip(linear(x, sd[f'layer{li}.mlp_fc2']), x_residual)]
        return linear(x, sd['lm_head'])

    lr, beta1, beta2, eps = 0.01, 0.85, 0.99, 1e-8
    m = [0.0] * len(params)
    v = [0.0] * len(params)
    losses = []
    for step in range(steps):
        doc = docs[step % len(docs)]
        tokens = [BOS] + [uchars.index(ch) for ch in doc] + [BOS]
        n = min(block_size, len(tokens) - 1)
        keys, values = [[] for _ in range(n_layer)], [[] for _ in range(n_layer)]
        pos_losses = []
        for pos_id in range(n):
            probs = softmax(gpt(tokens[pos_id], pos_id, keys, values))
            pos_losses.append(-probs[tokens[pos_id + 1]].log())
        loss = (1 / n) * sum(pos_losses)
        loss.backward()
        lr_t = lr * (1 - step / num_steps)
        for i, p in enumerate(params):
            m[i] = beta1 * m[i] + (1 - beta1) * p.grad
            v[i] = beta2 * v[i] + (1 - beta2) * p.grad ** 2
            m_hat = m[i] / (1 - beta1 ** (step + 1))
            v_hat = v[i] / (1 - beta2 ** (step + 1))
            p.data -= lr_t * m_hat / (v_hat ** 0.5 + eps)
            p.grad = 0
        losses.append(loss.data)

    names = []
    for _ in range(num_samples):
        keys, values = [[] for _ in range(n_layer)], [[] for _ in range(n_layer)]
        token_id, sample = BOS, []
        for pos_id in range(block_size):
            logits = gpt(token_id, pos_id, keys, values)
            probs = softmax([l / 0.5 for l in logits])
            token_id = rng.choices(range(vocab_size), weights=[p.data for p in probs])[0]
            if token_id == BOS:
                break
            sample.append(uchars[token_id])
        names.append(''.join(sample))
    return losses, names


# ---------------------------------------------------------------------------- our side
def our_run(docs, steps, settings=ORIGINAL):
    """What train.py --reproduce-original does: prepare's weights, train.py's split and batches
    (shuffled with the seed, none held out, one name per step), our GPT and Adam, then sample."""
    from microgpt.programs.train import batch_at
    rng, _, tokenizer, config, weights = prepare(docs, settings)
    train_docs, _ = split_docs(docs, val_size=0, seed=settings['seed'])
    train_tokens = [doc_tokens(tokenizer, doc) for doc in train_docs]
    model = GPT(config, tokenizer=tokenizer, fused=True)  # train.py's blocks
    model.load_weights(weights)
    optimizer = Adam(model.params, beta1=settings['beta1'],
                     beta2=settings['beta2'], eps=settings['eps'])
    losses = []
    for step in range(1, steps + 1):  # counted from 1, as train.py counts
        lr_t = learning_rate(settings['lr'], step - 1, steps)
        losses.append(batch_step(model, optimizer, batch_at(train_tokens, step, settings['batch_size']), lr_t))
    return losses, list(sample_original(model, rng, settings))


def test_the_original_settings_are_the_scripts():
    assert (ORIGINAL['n_layer'], ORIGINAL['n_embd'], ORIGINAL['n_head'], ORIGINAL['block_size']) == (1, 16, 4, 16)
    assert (ORIGINAL['steps'], ORIGINAL['lr'], ORIGINAL['init_std'], ORIGINAL['seed']) == (1000, 0.01, 0.08, 42)
    assert (ORIGINAL['temperature'], ORIGINAL['num_samples']) == (0.5, 20)


def test_prepare_draws_shuffle_then_weights_from_one_generator():
    rng, docs, tokenizer, config, weights = prepare(TINY_NAMES)
    reference = random.Random(42)
    expected_docs = list(TINY_NAMES)
    reference.shuffle(expected_docs)
    assert docs == expected_docs and docs != TINY_NAMES
    assert split_docs(TINY_NAMES, val_size=0, seed=42)[0] == docs  # the order train.py trains in
    assert list(weights) == ['wte', 'wpe', 'lm_head', 'layer0.attn_wq', 'layer0.attn_wk',
                             'layer0.attn_wv', 'layer0.attn_wo', 'layer0.mlp_fc1', 'layer0.mlp_fc2']
    assert weights['wte'][0][0] == reference.gauss(0, 0.08)      # the first draw after the shuffle
    assert tokenizer.chars == sorted(set(''.join(TINY_NAMES))) and tokenizer.bos == len(tokenizer.chars)


def test_losses_and_names_equal_the_original_loop():
    expected_losses, expected_names = original_run(TINY_NAMES, *(SMALL[k] for k in (
        'steps', 'n_layer', 'n_embd', 'n_head', 'block_size', 'num_samples')))
    losses, names = our_run(TINY_NAMES, SMALL['steps'], SMALL)
    assert len(losses) == SMALL['steps'] and len(set(losses)) == SMALL['steps']
    assert max(abs(a - b) for a, b in zip(losses, expected_losses)) < LOSS_TOL
    assert names == expected_names and len(names) == SMALL['num_samples']
    # negative control: the names depend on drawing from where the weights left the generator
    assert our_run(TINY_NAMES, SMALL['steps'], dict(SMALL, seed=43))[1] != expected_names


@pytest.mark.skipif(not os.path.exists(NAMES_TXT), reason="makemore's names.txt is neither in the checkout (README's download) nor in ../shared/data")
def test_first_steps_on_makemores_names():
    from microgpt.edge.data import load_docs
    docs = load_docs(NAMES_TXT)
    steps = 3
    expected_losses, _ = original_run(docs, steps, num_samples=0)
    losses, _ = our_run(docs, steps, dict(ORIGINAL, steps=steps, num_samples=0))
    assert max(abs(a - b) for a, b in zip(losses, expected_losses)) < LOSS_TOL
    assert abs(losses[0] - math.log(27)) < 0.3  # a fresh model guesses about uniformly over 27 tokens


def test_flags_that_change_the_run_are_refused():
    from microgpt.edge.errors import UserError
    from microgpt.programs.original import check_flags
    check_flags(n_embd=16, val_size=0, batch_size=1, steps=None, shuffle=True)  # the original's own values
    for given, fragment in (({'n_embd': 32}, '--n-embd 32'), ({'val_size': 100}, '--val-size 100'),
                            ({'batch_size': 4}, '--batch-size 4'), ({'n_layer': 2}, '--n-layer 2'),
                            ({'steps': 10}, '--steps 10'), ({'shuffle': False}, '--no-shuffle'),
                            ({'init': 'x.json'}, '--init x.json')):
        with pytest.raises(UserError) as info:
            check_flags(**given)
        assert fragment in str(info.value) and 'drop' in str(info.value) and '\n' not in str(info.value)


# The original script's published output on makemore's names.txt (its last three steps' losses,
# as it prints them, and its 20 names, in order).
PUBLISHED_LAST_LOSSES = ('2.4764', '2.4730', '2.6497')  # steps 998, 999, 1000
PUBLISHED_NAMES = ('kamon ann karai jaire vialan karia yeran anna areli kaina konna keylen liole '
                   'alerin earan lenne kana lara alela anton').split()


# ---------------------------------------------------------------------------- train.py --reproduce-original
@pytest.mark.skipif(not os.path.exists(NAMES_TXT), reason="makemore's names.txt is neither in the checkout (README's download) nor in ../shared/data")
def test_train_py_reproduce_original_gives_the_originals_numbers(tmp_path, capsys, monkeypatch):
    """The flag itself, through train.py, on makemore's names.txt: its first 6 steps (cut by a
    real SIGINT) are the port's first 6 of a 1000-step schedule, loss for loss; resumed on the
    numpy engine, still reproducing, it ends on the original's published last losses and 20
    names, in order."""
    from microgpt.programs import train
    from microgpt.edge.data import load_docs
    from helpers import interrupt_after, log_of, losses, run
    out = tmp_path / 'model.json'
    interrupt_after(monkeypatch, 6)
    code, stdout, _ = run(train.main, ['--reproduce-original', '--data', NAMES_TXT, '--out', str(out)], capsys)
    monkeypatch.undo()
    assert code == 130
    assert 'n_layer=1 n_embd=16 n_head=4 head_dim=4 block_size=16' in stdout
    assert '32033 train / 0 val' in stdout  # no held-out split
    expected, _ = original_run(load_docs(NAMES_TXT), 6, num_samples=0, num_steps=1000)
    got = [e['loss'] for e in losses(log_of(out))]
    assert len(got) == 6 and max(abs(a - b) for a, b in zip(got, expected)) < LOSS_TOL

    # resumed on the numpy engine (a resumed run may change engines): the same numbers, faster
    code, stdout, _ = run(train.main, ['--out', str(out), '--resume', '--engine', 'numpy'], capsys)
    assert code == 0 and 'engine=numpy' in stdout
    assert tuple(f"{e['loss']:.4f}" for e in losses(log_of(out))[-3:]) == PUBLISHED_LAST_LOSSES
    assert stdout.split('samples:\n')[1].split() == PUBLISHED_NAMES

