"""
Lesson 04 and its sandboxes (lab step, sampling, embeddings) against a second, independent run
of what train.py does (doc_loss, backward(), optim.Adam) and against closed forms.
"""

import json
import random
import warnings

import numpy as np
import pytest

from helpers import assert_one_line, run_lab
from microgpt.edge.errors import UserError
from microgpt.edge.checkpoint import load_checkpoint as load_scalar
from microgpt.lab import embeddings, sampling, step
from microgpt.lab.__main__ import main
from microgpt.lab.loading import load
from microgpt.model import GPT, GPTConfig
from microgpt.optim import Adam
from microgpt.sampling import probabilities, sample_names
from microgpt.training import doc_loss, doc_tokens

EXACT_TOL = 1e-12     # the same float64 arithmetic, maybe in another order
ENGINE_TOL = 1e-9     # scalar engine against numpy port
ADAM_TOL = 1e-9       # relative: the step taken against lr |g| / (|g| + eps)
LR_TOL = 1e-6         # relative: the step against lr, where eps / |g| < 1e-6
TEXT = 'emma'


@pytest.fixture
def scalar(tiny_ckpt):
    return load_scalar(tiny_ckpt)  # a fresh copy each time: step_report changes the weights


@pytest.fixture(scope='module')
def report(tiny_ckpt):
    """One step of TEXT at lr 0.01, on a fresh copy: what most tests below read."""
    return step.step_report(load_scalar(tiny_ckpt), TEXT, lr=0.01)


# ---------------------------------------------------------------------------- the step
def test_the_labs_gradients_are_backwards(tiny_ckpt, report):
    reference = load_scalar(tiny_ckpt)
    loss = doc_loss(reference, doc_tokens(reference.tokenizer, TEXT))
    loss.backward()
    assert abs(report['loss_before'] - loss.data) < EXACT_TOL
    for name, matrix in reference.state_dict.items():
        for row, lab_row in zip(matrix, report['grads'][name]):
            assert max(abs(p.grad - g) for p, g in zip(row, lab_row)) < EXACT_TOL, name
    assert report['closed_form_diff'] < EXACT_TOL           # dL/dlogits = (p - one_hot) / n
    assert any(g != 0 for rows in report['grads'].values() for row in rows for g in row)


def test_the_stage_walk_finds_the_stream_entering_lm_head(scalar):
    tokens = doc_tokens(scalar.tokenizer, TEXT)
    s = step.scalar_pass(scalar, tokens)
    n_embd = scalar.config.n_embd
    lm_head = np.array([[p.data for p in row] for row in scalar.state_dict['lm_head']])  # (vocab_size, n_embd)
    x = s['stages']['stream into lm_head'].reshape(-1, n_embd)         # (n, n_embd)
    assert np.abs(x - s['dlogits'] @ lm_head).max() < EXACT_TOL       # the transpose of linear
    # the embeddings stage is wte[token] + wpe[pos]: its grad is exactly wpe's row grad (one use each)
    emb = s['stages']['embeddings wte[token] + wpe[pos]'].reshape(-1, n_embd)  # (n, n_embd)
    assert (emb == step.matrices(scalar, s['grads'])['wpe'][:len(tokens) - 1]).all()


def test_a_small_step_lowers_the_names_loss(scalar):
    before = scalar.weights()
    r = step.step_report(scalar, TEXT, lr=1e-3)
    assert scalar.weights() == before                  # the model it was given is left as it was
    assert r['loss_after'] < r['loss_before']
    scalar.load_weights(r['weights_after'])            # the scalar engine at the weights after the step
    assert abs(r['loss_after'] - doc_loss(scalar, doc_tokens(scalar.tokenizer, TEXT)).data) < EXACT_TOL


def test_the_weights_without_a_gradient_are_unused_rows_and_dead_relu_units(scalar, report):
    """Every weight whose gradient is exactly 0 is explained: an embedding row the name does not
    use, or the fc1 row and fc2 column of an MLP unit whose ReLU is 0 at every position."""
    c = report['without_grad']
    assert c['zeros'] == report['n_params'] - report['n_with_grad']
    assert c['other'] == 0 and c['confirmed'] is True
    n = scalar.config.n_embd
    assert c['unused_rows']['wte'] == (scalar.config.vocab_size - len(report['wte_rows'])) * n
    for li, units in enumerate(c['dead_units']):
        for h in units:
            assert not any(report['grads'][f'layer{li}.mlp_fc1'][h])
            assert not any(row[h] for row in report['grads'][f'layer{li}.mlp_fc2'])


def test_a_unit_made_dead_is_counted_dead(tiny_ckpt, report):
    # negative control: a live unit whose fc1 row is zeroed
    alive = report['without_grad']['dead_units'][0]
    h = next(u for u in range(4 * 8) if u not in alive)
    model = load_scalar(tiny_ckpt)
    for p in model.state_dict['layer0.mlp_fc1'][h]:
        p.data = 0.0
    c = step.step_report(model, TEXT, lr=0.01)['without_grad']
    assert h in c['dead_units'][0] and c['confirmed'] is True and c['other'] == 0


def close(mine, theirs, path='r'):
    """Every number of two reports within EXACT_TOL, every other value equal, recursively."""
    if isinstance(mine, dict):
        assert mine.keys() == theirs.keys(), path
        for key in mine:
            close(mine[key], theirs[key], f'{path}[{key!r}]')
    elif isinstance(mine, (list, tuple, np.ndarray)):
        assert len(mine) == len(theirs), path
        for i, (a, b) in enumerate(zip(mine, theirs)):
            close(a, b, f'{path}[{i}]')
    elif isinstance(mine, (float, np.floating)) and not isinstance(mine, bool):
        assert abs(mine - theirs) <= EXACT_TOL * max(1.0, abs(theirs)), (path, mine, theirs)
    else:
        assert mine == theirs, (path, mine, theirs)


def test_the_numpy_engines_step_is_the_scalar_engines(tiny_ckpt, report):
    by_numpy = step.step_report(load_scalar(tiny_ckpt), TEXT, lr=0.01, engine='numpy')
    assert report['engine'] == 'scalar' and by_numpy['engine'] == 'numpy'
    assert report['graph_nodes'] > 0 and report['numpy']['max_diff'] < EXACT_TOL
    assert by_numpy['graph_nodes'] is None and by_numpy['numpy'] is None and by_numpy['torch'] is None
    assert by_numpy['without_grad']['confirmed'] is True
    mine = {k: v for k, v in by_numpy.items() if k not in ('engine', 'graph_nodes', 'numpy', 'torch')}
    close(mine, {k: report[k] for k in mine})
    with pytest.raises(UserError, match="--engine 'torch': choose one of scalar, numpy"):
        step.step_report(load_scalar(tiny_ckpt), TEXT, engine='torch')


def test_the_steps_adam_is_optim_adam_bit_for_bit(tiny_ckpt, report):
    reference = load_scalar(tiny_ckpt)
    for name, matrix in reference.state_dict.items():
        for row, grads in zip(matrix, report['grads'][name]):
            for p, g in zip(row, grads.tolist()):
                p.grad = g
    Adam(reference.params).step(0.01)
    assert reference.weights() == {name: w.tolist() for name, w in report['weights_after'].items()}


def test_the_first_adam_step_is_lr(report):
    lr, r = 0.01, report  # the report's learning rate
    assert r['formula_diff'] < ADAM_TOL                # |step| = lr |g| / (|g| + eps) for every weight
    assert r['untouched_moved'] == 0.0                 # no gradient, no step
    a = r['adam']
    assert abs(a['m_hat'] - a['g']) < EXACT_TOL * abs(a['g']) + 1e-300
    assert abs(a['v_hat'] - a['g'] ** 2) < EXACT_TOL * a['g'] ** 2 + 1e-300
    assert abs(a['moved'] - a['update']) < EXACT_TOL and abs(abs(a['moved']) - lr) < LR_TOL * lr


def test_unused_rows_of_wte_have_exactly_zero_gradient(tiny_ckpt, report):
    r, model = report, load_scalar(tiny_ckpt)
    tok = model.tokenizer
    used = {tok.bos} | set(tok.encode(TEXT))
    assert set(r['wte_rows']) == used
    assert r['wpe_rows'] == list(range(len(TEXT) + 1))
    # oracle: nudging an unused row leaves the loss bit for bit unchanged; a used row moves it
    tokens = doc_tokens(tok, TEXT)
    base = doc_loss(model, tokens).data
    unused = next(i for i in range(tok.vocab_size) if i not in used)
    for p in model.state_dict['wte'][unused]:
        p.data += 0.5
    assert doc_loss(model, tokens).data == base
    for p in model.state_dict['wte'][tok.encode('m')[0]]:
        p.data += 0.5
    assert doc_loss(model, tokens).data != base        # negative control


def test_param_flag_chooses_the_weight(scalar):
    r = step.step_report(scalar, TEXT, lr=0.01, param='layer0.attn_wq[3][5]')
    assert r['adam']['param'] == 'layer0.attn_wq[3][5]'
    assert r['adam']['g'] == r['grads']['layer0.attn_wq'][3][5]


def test_step_command(tiny_ckpt, capsys):
    assert main(['step', TEXT, '--ckpt', tiny_ckpt, '--lr', '0.001']) == 0
    out = capsys.readouterr().out
    for section in ('1) forward', '2) the gradient at the top', '3) the gradient on its way back',
                    '4) Adam on one weight', '5) after the update', '6) the graph'):
        assert section in out
    assert 'wte rows with a gradient' in out and 'nodes recorded on the tape' in out
    assert out.count('(true)') == len(TEXT) + 1


# ---------------------------------------------------------------------------- sampling
def test_greedy_draws_no_random_numbers(scalar):
    # its seeds, top-k 1 and a tiny temperature giving the same names: test_sample_py_greedy_...
    rng = random.Random(5)
    state = rng.getstate()
    assert len(set(sample_names(scalar, num=4, temperature=0, rng=rng))) == 1  # the same name every time
    assert rng.getstate() == state
    # negative control: with randomness, two seeds differ
    assert sample_names(scalar, num=4, temperature=1.0, seed=1) != sample_names(scalar, num=4, temperature=1.0, seed=2)


def test_both_engines_give_the_same_greedy_and_top_k_names(tiny_ckpt, scalar):
    port = load(tiny_ckpt).model
    for temperature, top_k in ((0, None), (1.0, 3), (1e-308, None)):
        a = sample_names(scalar, num=5, temperature=temperature, top_k=top_k, seed=7)
        b = sample_names(port, num=5, temperature=temperature, top_k=top_k, seed=7)
        assert a == b


def test_top_k_keeps_k_tokens_renormalised():
    logits = [0.5, 2.0, -1.0, 1.0, 2.0]
    full = probabilities(logits, 1.0)
    cut = probabilities(logits, 1.0, top_k=3)
    kept = [i for i, p in enumerate(cut) if p > 0]
    assert kept == [1, 3, 4]                           # the three largest logits
    mass = sum(full[i] for i in kept)
    assert all(abs(cut[i] - full[i] / mass) < EXACT_TOL for i in kept)
    assert probabilities(logits, 1.0, top_k=99) == full


def test_iter_names_hands_over_each_name_as_it_is_made(scalar):
    from microgpt.sampling import iter_names
    calls = []

    class Counting:  # the scalar model, counting the names begun (one next_logits_fn each)
        tokenizer, config = scalar.tokenizer, scalar.config

        def next_logits_fn(self):
            calls.append(1)
            return scalar.next_logits_fn()
    names = iter_names(Counting(), num=5, temperature=0.5)
    first = next(names)
    assert len(calls) == 1 and isinstance(first, str)  # one name made, four still to come
    assert len([first] + list(names)) == 5 and len(calls) == 5


def test_sample_distribution(tiny_ckpt):
    model = load(tiny_ckpt).model
    d = sampling.distribution(model, 'e', [0.0, 0.5, 1.0, 2.0], top_k=3)
    for t, p in d['probs'].items():
        assert abs(sum(p) - 1) < EXACT_TOL
    assert d['entropy'][0.0] == 0.0
    assert d['entropy'][0.5] < d['entropy'][1.0] < d['entropy'][2.0]
    assert len(d['top_k_kept']) == 3 and abs(sum(d['top_k_probs']) - 1) < EXACT_TOL


def test_sample_command(tiny_ckpt, capsys, names_file):
    assert main(['sampling', 'e', '--ckpt', tiny_ckpt, '--num', '3', '--data', names_file,
                 '--temperatures', '0', '1e-308', '1']) == 0
    out = capsys.readouterr().out
    assert 'T=0 (greedy)' in out and 'top-k = 5' in out and 'are new names' in out


def test_sample_command_top_k_of_the_whole_vocabulary_is_no_cut(tiny_ckpt, capsys):
    vocab_size = load(tiny_ckpt).model.config.vocab_size
    for k, cut in ((vocab_size, False), (vocab_size - 1, True)):
        assert main(['sampling', '--ckpt', tiny_ckpt, '--num', '2', '--top-k', str(k)]) == 0
        out = capsys.readouterr().out
        assert (f'keeps all {vocab_size} tokens: no cut' not in out) == cut
        assert (f'T=1 top-k {k} ' in out) == cut   # no second row of names for a cut that cuts nothing


def tutorial_export(model, path):
    """The 3D tutorial's flat export of `model` (see tests/test_checkpoint.py), written to path."""
    obj = dict(model.weights(), _vocab=list(model.tokenizer.chars), _bos_id=model.tokenizer.bos,
               _vocab_size=model.tokenizer.vocab_size)
    path.write_text(json.dumps(obj), encoding='utf-8')
    return str(path)


def test_sample_command_reads_a_tutorial_export_with_its_n_head(scalar, tmp_path, capsys):
    # n_embd 6 does not split into the export's default 4 heads: every read must get --n-head 3
    model = GPT(GPTConfig(scalar.config.vocab_size, n_embd=6, n_head=3), tokenizer=scalar.tokenizer)
    path = tutorial_export(model, tmp_path / 'tutorial.json')
    assert main(['sampling', '--ckpt', path, '--n-head', '3', '--num', '1']) == 0
    assert 'does not say what it was trained on' in capsys.readouterr().out


# ---------------------------------------------------------------------------- embeddings
def test_embedding_view(tiny_ckpt):
    model = load(tiny_ckpt).model
    v = embeddings.compute(model, neighbours=2)
    wte = model.weights['wte']
    assert np.abs(np.diag(v['wte_cosine']) - 1).max() < EXACT_TOL
    assert np.abs(np.diag(v['wpe_cosine']) - 1).max() < EXACT_TOL
    # the projection: centred rows times the top right-singular vectors, up to sign
    centred = wte - wte.mean(axis=0)                   # (vocab_size, n_embd)
    eigvals, eigvecs = np.linalg.eigh(np.cov(centred.T))  # ascending
    pc1 = centred @ eigvecs[:, -1]                     # (vocab_size,)
    assert min(np.abs(v['coords'][:, 0] - pc1).max(), np.abs(v['coords'][:, 0] + pc1).max()) < 1e-9
    assert abs(v['share'][0] - eigvals[-1] / eigvals.sum()) < 1e-9
    for i, near in enumerate(v['neighbours']):
        sims = [s for _, s in near]
        assert sims == sorted(sims, reverse=True) and v['labels'][i] not in [n for n, _ in near]


def test_embeddings_of_a_degenerate_model_are_numbers_not_warnings(scalar, tmp_path, capsys):
    # n_embd 1 (one principal component), a block of one position (no pairs), a row of zeros
    model = GPT(GPTConfig(scalar.config.vocab_size, n_embd=1, n_head=1, block_size=1), tokenizer=scalar.tokenizer)
    model.state_dict['wte'][2][0].data = 0.0
    path = tutorial_export(model, tmp_path / 'tutorial.json')
    with warnings.catch_warnings():
        warnings.simplefilter('error')                 # numpy's 0/0 warning fails the test
        v = embeddings.compute(load(path, n_head=1).model, neighbours=2)
        assert main(['embeddings', '--ckpt', path, '--n-head', '1']) == 0
    assert v['coords'].shape == (scalar.config.vocab_size, 2) and not v['coords'][:, 1].any()
    assert v['share'][0] == 1.0 and v['share'][1] == 0.0
    assert not v['wte_cosine'][2].any()                # no direction: similarity 0, even to itself
    assert np.isfinite(v['wte_cosine']).all() and abs(v['wte_cosine'][0, 0] - 1) < EXACT_TOL
    out = capsys.readouterr().out
    assert 'principal components' in out and 'nearest neighbours' in out and 'wpe: cosine' in out


def test_embeddings_print_a_similarity_that_rounds_to_zero_without_a_minus(tiny_ckpt):
    model = load(tiny_ckpt).model
    v = embeddings.compute(model, neighbours=2)
    v['wpe_cosine'][0, 1] = -0.001
    row = embeddings.render(v).split('position i (rows) by position j\n')[1].splitlines()[1]
    assert row.split()[:3] == ['0', '+1.00', '+0.00']  # format() alone gives -0.00


# ---------------------------------------------------------------------------- bad input
def test_bad_input_is_one_line_error(tiny_ckpt, capsys):
    long_text = 'a' * 12
    cases = [
        (['step', 'EMMA', '--ckpt', tiny_ckpt], "character 'E' is not in the vocabulary"),
        (['step', long_text, '--ckpt', tiny_ckpt], 'at most 11'),
        (['step', TEXT, '--ckpt', tiny_ckpt, '--param', 'layer7.attn_wq[0][0]'], "no matrix named 'layer7.attn_wq'"),
        (['step', TEXT, '--ckpt', tiny_ckpt, '--param', 'wte[99][0]'], 'use a row 0..'),
        (['step', TEXT, '--ckpt', tiny_ckpt, '--param', 'wte[0]'], 'is not NAME[ROW][COL]'),
        (['step', TEXT, '--ckpt', tiny_ckpt, '--lr', '0'], 'greater than 0'),
        (['step', TEXT, '--ckpt', tiny_ckpt, '--lr', '-1'], 'greater than 0'),
        (['sampling', '--ckpt', tiny_ckpt, '--top-k', '0'], 'give an integer from 1 to'),
        (['sampling', '--ckpt', tiny_ckpt, '--top-k', '-2'], 'give an integer from 1 to'),
        (['sampling', '--ckpt', tiny_ckpt, '--temperatures', '-1'], 'give a number from 0 to 1000'),
        (['sampling', 'EM', '--ckpt', tiny_ckpt], "character 'E' is not in the vocabulary"),
        (['embeddings', '--ckpt', tiny_ckpt + '.none'], 'train one first'),
    ]
    for argv, message in cases:
        status, _, err = run_lab(argv, capsys)
        assert_one_line(status, err, message)


def test_sample_py_greedy_and_tiny_temperature(tiny_ckpt, capsys):
    from microgpt.programs import sample
    outs = []
    for argv in (['--temperature', '0', '--seed', '1'], ['--temperature', '0', '--seed', '2'],
                 ['--temperature', '1e-308', '--engine', 'numpy'], ['--top-k', '1', '--temperature', '1']):
        assert sample.main(['--ckpt', tiny_ckpt, '--num', '3'] + argv) == 0
        outs.append(capsys.readouterr().out)
    assert len(set(outs)) == 1 and len(outs[0].split()) == 3


# ---------------------------------------------------------------------------- unusual weights
def weights_like(tiny_ckpt, tmp_path, kind):
    """The tiny checkpoint with every weight 0, every weight the smallest subnormal, or one
    lm_head weight of 1e308: valid models, only unusual."""
    obj = json.loads(open(tiny_ckpt, encoding='utf-8').read())
    sd = obj['state_dict']
    if kind == 'huge':
        sd['lm_head'][0][0] = 1e308
    else:
        for name, rows in sd.items():
            sd[name] = [[0.0 if kind == 'zero' else 5e-324] * len(row) for row in rows]
    path = tmp_path / f'{kind}.json'
    path.write_text(json.dumps(obj), encoding='utf-8')
    return str(path)


@pytest.mark.parametrize('kind', ['zero', 'subnormal', 'huge'])
def test_lab_step_on_unusual_weights_prints_or_says_it_diverged(tiny_ckpt, tmp_path, kind, capsys):
    # all-zero and subnormal weights once crashed the printout, a huge lm_head weight its bars
    path = weights_like(tiny_ckpt, tmp_path, kind)
    try:
        main(['step', TEXT, '--ckpt', path])
        out, refused = capsys.readouterr().out, None
    except UserError as e:  # a forward pass that overflows: the one-line divergence message
        out, refused = '', str(e)
    if refused is None:
        assert 'weights have no gradient' in out and 'nan' not in out
    else:
        assert kind == 'huge' and 'its training diverged' in refused
    if kind != 'huge':
        assert 'wpe rows: none (0 of' in out and 'unchanged: no weight had a gradient' in out
