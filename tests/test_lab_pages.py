"""
The numbers behind the Scaling, By hand, Phases, Embeddings and Loss pages against the
lessons' own (docs/lessons.md), the numpy port, numpy's einsum and closed forms.
"""

import math
import os

import numpy as np
import pytest

from microgpt.edge.errors import UserError
from microgpt.lab import byhand, example, phases, scaling
from microgpt.lab.rowstats import row_statistics, softmax

EXACT_TOL = 1e-12
LESSON_ROUNDING = 1.5e-3  # the Czech lesson rounds to 3 decimals and sums rounded products


# ---------------------------------------------------------------------------- by hand
def preset(**changes):
    p = dict(byhand.PRESET, **changes)
    return byhand.by_hand(p['q'], p['k'], p['v'], p['query'], p['n_head'], p['w_o'])


def test_the_czech_preset_gives_the_lessons_numbers():
    r = preset()
    h = r['head']
    assert np.abs(h['raw'] - example.RAW_SCORES).max() < EXACT_TOL
    assert h['divisor'] == 2
    assert np.abs(h['exps'] - [1.624, 1.561, 2.075]).max() < LESSON_ROUNDING
    assert abs(h['sum'] - 5.260) < LESSON_ROUNDING
    assert np.abs(h['weights'] - example.WEIGHTS).max() < LESSON_ROUNDING
    # every w_j * v_j component, as the lesson's step 6 writes them
    lesson_terms = [[0.062, 0.247, 0, 0.031], [0.208, 0.030, 0.089, 0], [0.039, 0.079, 0.355, 0.158]]
    assert np.abs(h['weighted'] - lesson_terms).max() < LESSON_ROUNDING
    assert r['masked'] == []


def test_by_hand_is_the_ports_attention_head():
    from microgpt import inference
    rng = np.random.default_rng(0)
    q, k, v = (rng.uniform(-2, 2, (5, 6)).round(2).tolist() for _ in range(3))
    for query in range(5):
        for scale in (True, False):
            r = byhand.by_hand(q, k, v, query, scale=scale)
            out, logits, weights = inference.attention_head(q[query], k[:query + 1], v[:query + 1], scale=scale)
            assert np.abs(r['head']['out'] - out).max() < EXACT_TOL
            assert np.abs(r['head']['scores'] - logits).max() < EXACT_TOL
            assert np.abs(r['head']['weights'] - weights).max() < EXACT_TOL
            assert r['masked'] == list(range(query + 1, 5))


def test_heads_split_the_vector_and_w_o_mixes_them():
    from microgpt import inference
    rng = np.random.default_rng(1)
    w_o = rng.uniform(-1, 1, (4, 4))
    r = preset(n_head=2, w_o=w_o.tolist())
    p = byhand.PRESET
    for h, head in enumerate(r['heads']):
        cols = slice(2 * h, 2 * h + 2)
        out, _, weights = inference.attention_head(np.array(p['q'][2])[cols], np.array(p['k'])[:, cols],
                                                   np.array(p['v'])[:, cols])
        assert head['slice'] == [2 * h, 2 * h + 2]
        assert np.abs(head['out'] - out).max() < EXACT_TOL
        assert np.abs(head['weights'] - weights).max() < EXACT_TOL
    assert np.abs(r['concat'] - np.concatenate([h['out'] for h in r['heads']])).max() == 0
    assert np.abs(r['final'] - w_o @ r['concat']).max() < EXACT_TOL
    # one head over the whole vector, W_O the identity: the lesson's single head, unchanged
    one = preset()
    assert np.abs(one['final'] - one['head']['out']).max() == 0
    # negative control: the two heads' weights differ from the one head's
    assert np.abs(r['heads'][0]['weights'] - one['head']['weights']).max() > 0.01


@pytest.mark.parametrize('text, words', [('1, 2, x', "'x' is not a number"), ('', 'empty'),
                                         ('1 nan', 'outside'), ('6', 'outside')])
def test_typed_vectors_are_checked(text, words):
    with pytest.raises(UserError, match=words):
        byhand.parse_vector(text, 'q1')


@pytest.mark.parametrize('change, words', [
    ({'k': [[1, 2], [1, 2, 3], [1, 2]]}, 'k2 has 3 numbers'),
    ({'n_head': 3}, 'cannot split 4'),
    ({'query': 3}, 'there are 3 tokens'),
    ({'w_o': [[1, 0], [0, 1]]}, 'W_O must be 4 x 4'),
])
def test_shapes_that_do_not_fit_are_one_line(change, words):
    p = dict(byhand.PRESET, **change)
    if 'k' in change:
        p['q'] = p['v'] = [[1, 2]] * 3
    with pytest.raises(UserError, match=words):
        byhand.by_hand(p['q'], p['k'], p['v'], p['query'], p['n_head'], p['w_o'])


def test_the_sandbox_reads_typed_text_and_defaults_to_the_lesson():
    d = byhand.compute()
    assert d['query'] == 2 and d['tokens'] == ['kočka', 'spí', 'venku'] and d['q_given'] == [True, False, True]
    assert np.abs(d['head']['out'] - example.OUT3).max() < LESSON_ROUNDING
    assert d['inputs']['q'][2] == '0.9, 0.8, 0.2, 0.1'
    typed = byhand.compute(q=['1 0', '0 1'], k=['1, 0', '0,1'], v=['2 0', '0 2'], query=2, tokens=['a'])
    assert typed['tokens'] == ['a', 'token 2'] and typed['q_given'] == [True, True]
    w = math.exp(1 / math.sqrt(2))
    assert np.abs(typed['head']['weights'] - [1 / (1 + w), w / (1 + w)]).max() < EXACT_TOL
    text = byhand.render(d)
    assert 'e^0.485 = 1.624' in text and 'sum = 5.260' in text and 'out3 = [0.309, 0.356, 0.444, 0.189]' in text
    assert '33,554,432' in text and '64 MiB' in text and 'the worked example needs no q2' in text
    with pytest.raises(UserError, match='give 1..3'):
        byhand.compute(query=4)


def test_the_shapes_table_and_the_score_matrix_memory():
    s = byhand.shapes(1, 1024, 4096, 32)
    assert s['head_dim'] == 128
    assert s['score_numbers'] == 33_554_432 and s['score_bytes'] == 64 * 2 ** 20  # exercise 3
    scores = next(r for r in s['rows'] if r['name'] == 'scores')
    assert scores['shape'] == [1, 32, 1024, 1024] and scores['numbers'] == 33_554_432
    assert byhand.shapes(1, 8192, 4096, 32)['score_numbers'] == 2_147_483_648  # "2 billion"
    assert byhand.shapes(2, 1024, 4096, 32, 4)['score_bytes'] == 4 * 64 * 2 ** 20  # fp32, B = 2


# ---------------------------------------------------------------------------- the sqrt(d) widget
def test_the_row_widget_is_rowstats_of_the_scaled_scores():
    raw = scaling.random_rows(1, np.random.default_rng(4), 64)[0]
    for scale, temperature in ((True, 1.0), (False, 1.0), (True, 0.5), (False, 3.0)):
        w = scaling.row_widget(raw, 64, scale, temperature)
        want = raw / (8 if scale else 1) / temperature
        assert np.abs(w['scores'] - want).max() < EXACT_TOL
        assert np.abs(w['weights'] - softmax(want)).max() < EXACT_TOL
        s = row_statistics(want)
        assert all(w['stats'][k] == s[k] for k in s)
        assert w['stats']['max_minus_min'] == want.max() - want.min()


def test_at_d_64_unscaled_is_sharper_than_scaled():
    off = scaling.random_row_widget(64, scale=False)
    on = scaling.random_row_widget(64, scale=True)
    assert off['stats']['max_weight'] > on['stats']['max_weight']
    assert off['stats']['entropy'] < on['stats']['entropy']
    assert abs(off['stats']['spread'] / on['stats']['spread'] - 8) < EXACT_TOL


def test_the_gradient_warning_appears_at_large_d_only_without_scaling():
    assert scaling.random_row_widget(256, scale=False)['vanishing']
    assert scaling.random_row_widget(1024, scale=False)['vanishing']
    assert not scaling.random_row_widget(64, scale=False)['vanishing']
    for d in (4, 64, 256, 1024):
        assert not scaling.random_row_widget(d, scale=True)['vanishing'], d
    # a temperature of 0.1 sharpens even the scaled rows past the threshold
    assert scaling.random_row_widget(64, scale=True, temperature=0.05)['vanishing']


# ---------------------------------------------------------------------------- cost and index notation
def test_the_index_widget_at_gpt2_smalls_sizes():
    c = scaling.contraction('bhqd,bhkd->bhqk', scaling.EXAMPLE_SIZES)
    assert c['shape'] == [1, 12, 64, 64]
    assert c['elements'] == 49_152 and c['multiply_adds'] == 3_145_728 and c['per_element'] == 64
    assert [(i['index'], i['size'], i['role']) for i in c['indices']] == [
        ('b', 1, 'kept'), ('h', 12, 'kept'), ('q', 64, 'kept'), ('d', 64, 'summed'), ('k', 64, 'kept')]
    out = scaling.contraction('bhqk,bhkd->bhqd', scaling.EXAMPLE_SIZES)
    assert out['multiply_adds'] == c['multiply_adds']  # "two equally expensive multiplications"


@pytest.mark.parametrize('tab', list(scaling.CONTRACTIONS))
def test_each_tab_agrees_with_numpy_einsum(tab):
    spec = scaling.CONTRACTIONS[tab][0]
    sizes = {'b': 2, 'h': 3, 'q': 4, 'k': 5, 'd': 6, 't': 4, 'c': 7, 'e': 3}
    c = scaling.contraction(spec, sizes)
    operands = [np.ones([sizes[x] for x in op]) for op in spec.split('->')[0].split(',')]
    result = np.einsum(spec, *operands)
    assert list(result.shape) == c['shape'] and result.size == c['elements']
    # of ones, every element is the count of its multiply-adds
    assert (result == c['per_element']).all()
    # numpy's own count: a naive einsum does one multiply and one add per term
    report = np.einsum_path(spec, *operands, optimize=False)[1]
    naive = float(next(line for line in report.split('\n') if 'Naive FLOP count' in line).split(':')[1])
    assert naive == 2 * c['multiply_adds']


def test_the_cost_widget_is_the_index_widgets_contractions_counted():
    for n in (128, 1024, 8192):
        cost = scaling.cost_table(n, 768)
        sizes = dict(scaling.EXAMPLE_SIZES, q=n, k=n, t=n)
        attention = sum(scaling.contraction(scaling.CONTRACTIONS[t][0], sizes)['multiply_adds']
                        for t in ('scores', 'output'))
        projections = 4 * scaling.contraction(scaling.CONTRACTIONS['projection'][0], sizes)['multiply_adds']
        assert (cost['attention'], cost['projections']) == (attention, projections)
        assert cost['ratio'] == attention / projections == scaling.cost_ratio(n, 768)


def test_each_part_is_the_widgets_function():
    row = scaling.compute(part='row', row_d=256, scale=False, seed=3)
    assert row['vanishing'] and row['part'] == 'row' and row['draws'] == scaling.WIDGET_DRAWS
    want = scaling.random_row_widget(256, False, 1.0, 8, 3)
    assert row['stats'] == want['stats'] and row['median'] == want['median']
    given = scaling.compute(part='row', row_d=4, scores=[1.0, 2.0, 3.0])
    assert np.abs(given['scores'] - [0.5, 1.0, 1.5]).max() < EXACT_TOL and 'median' not in given
    big = scaling.compute(part='row', row_d=4096, keys=16)   # the medians' draws shrink to fit
    assert big['draws'] == max(50, scaling.WIDGET_NUMBERS // (16 * 4096))
    var = scaling.compute(part='variance', samples=1000, seed=5)
    assert var['rows'] == scaling.variance_widget(1000, 5)
    assert scaling.compute(part='cost', n=128)['ratio'] == scaling.cost_ratio(128, 768)
    index = scaling.compute(part='index', tab='output', sizes={'h': 8.0})
    assert index['shape'] == [1, 8, 64, 64] and index['multiply_adds'] == 8 * 64 ** 3
    assert set(index['tabs']) == {'scores', 'output', 'projection'}
    for text in (scaling.render(p) for p in (row, given, var, index)):
        assert text
    assert 'warning: the gradient vanishes' in scaling.render(row)


@pytest.mark.parametrize('params, words', [({'part': 'rows'}, 'not one of all, row'),
                                           ({'part': 'index', 'tab': 'x'}, 'not one of scores'),
                                           ({'part': 'index', 'sizes': {'z': 2.0}}, 'give whole sizes'),
                                           ({'part': 'index', 'sizes': {'h': 2.5}}, 'give whole sizes')])
def test_a_part_or_size_the_page_does_not_have_is_one_line(params, words):
    with pytest.raises(UserError, match=words):
        scaling.compute(**params)


# ---------------------------------------------------------------------------- phases
@pytest.mark.parametrize('head, query', [(0, None), (1, 2), (0, 0)])
def test_phase_view_is_the_models_own_attention(model, head, query):
    v = phases.phase_view(model, 'emma', 0, head, query)
    _, caps = model.forward([model.tokenizer.bos] + model.tokenizer.encode('emma'), capture='all')
    i = v['query']
    assert i == (4 if query is None else query)
    t = i + 1
    assert np.abs(v['weights'] - caps['attention_softmax'][0, head, i, :t]).max() < EXACT_TOL
    assert np.abs(v['scores'] - caps['attention_logits'][0, head, i, :t]).max() < EXACT_TOL
    assert np.abs(v['scores'] - v['raw'] / math.sqrt(v['head_dim'])).max() < EXACT_TOL
    assert np.abs(v['all_weights'] - caps['attention_softmax'][0, :, i, :t]).max() < EXACT_TOL
    assert np.abs(v['weighted'].sum(axis=0) - v['out']).max() < EXACT_TOL
    assert np.abs(v['out'] - caps['head_output'][0, head, i]).max() < EXACT_TOL
    assert np.abs(v['concat'] - v['model_concat']).max() < EXACT_TOL
    assert v['q'].shape == (5, v['head_dim']) and v['weighted'].shape == (t, v['head_dim'])


def test_every_phase_finds_its_lines_in_model_py():
    code = phases.gpt_source()
    lines = code['lines']
    assert lines[0].lstrip().startswith('def gpt(')
    text = {p: '\n'.join(lines[n - code['first']] for n in ns) for p, ns in code['phases'].items()}
    assert set(text) == {p for p, _, _ in phases.PHASES}
    must = {'tokens': ["sd['wte']", "sd['wpe']"], 'qkv': ['attn_wq', 'attn_wk', 'attn_wv'],
            'scores': ['attn_logits =', 'q_h ='], 'mask': ['keys[li].append(k)'],
            'softmax': ['attn_weights =', 'softmax(attn_logits)'], 'weighted': ['head_out ='],
            'heads': ['for h in range', 'attn_wo']}
    for phase, needles in must.items():
        for needle in needles:
            assert needle in text[phase], (phase, needle)
    assert 'attn_wo' not in text['softmax'] and 'softmax' not in text['qkv']  # each its own lines


def test_the_code_is_read_from_the_file_as_it_is_now(model, tmp_path, monkeypatch):
    """An edit elsewhere moves the lines and they are still found; a building block renamed
    away leaves its phase empty instead of pointing at a wrong line."""
    with open(phases.MODEL_FILE, encoding='utf-8') as f:
        source = f.read()
    before = phases.gpt_source()
    edited = tmp_path / 'model.py'
    edited.write_text(source.replace('        # 1) The token', '        # a new comment\n\n        # 1) The token'),
                      encoding='utf-8')
    after = phases.gpt_source(str(edited))
    for phase, numbers in before['phases'].items():
        shift = [n - before['first'] for n in numbers]
        assert [n - after['first'] - 2 for n in after['phases'][phase]] == shift, phase
    renamed = tmp_path / 'renamed.py'
    assert 'attn_weights = blocks.softmax(' in source  # the call the negative control renames
    renamed.write_text(source.replace('attn_weights = blocks.softmax(', 'attn_weights = blocks.normalise('),
                       encoding='utf-8')
    assert phases.gpt_source(str(renamed))['phases']['softmax'] == []
    # a model.py the learner broke: the numbers stand, the code's place says what failed
    renamed.write_text('def gpt(self:\n', encoding='utf-8')
    monkeypatch.setattr(phases, 'MODEL_FILE', str(renamed))
    code = phases.compute(model, 'emma', 0, 1, 2)['code']
    assert code['error'].startswith('microgpt/model.py does not parse: ') and "gpt()'s lines are not shown" in code['error']


def test_the_phases_are_found_whatever_gpts_variables_are_called(tmp_path):
    """The lines are found by what they compute (the state_dict's names, the softmax
    block, the KV cache among gpt()'s arguments), not by regular expressions on variable names:
    every local variable of gpt() renamed, every phase finds the same lines."""
    import re
    with open(phases.MODEL_FILE, encoding='utf-8') as f:
        source = f.read()
    func = source[source.index('    def gpt('):source.index('    def empty_cache(')]
    names = ['keys', 'values', 'tok_emb', 'pos_emb', 'x_residual', 'x_attn',
             'hs', 'q_h', 'k_h', 'v_h', 'attn_logits', 'attn_weights', 'head_out']
    renamed = func
    for n, name in enumerate(names):
        assert re.search(rf'\b{name}\b', func), name  # the test renames what gpt() really has
        renamed = re.sub(rf'\b{name}\b', f'v{n}', renamed)
    edited = tmp_path / 'model.py'
    edited.write_text(source.replace(func, renamed), encoding='utf-8')
    assert phases.gpt_source(str(edited))['phases'] == phases.gpt_source()['phases']


def test_the_phases_printout_names_the_lines(model):
    text = phases.render(phases.compute(model, 'emma', 0, 1, 2))
    assert text.count('microgpt/model.py:') >= len(phases.PHASES)
    assert 'softmax(attn_logits)' in text and 'keys 3..4 lie in the future' in text
    assert os.path.basename(phases.MODEL_FILE) == 'model.py'


# ---------------------------------------------------------------------------- the routes
def test_each_new_route_answers_its_modules_compute(server, model, tiny_ckpt):
    from helpers import post, request
    from microgpt.lab import embeddings, loss
    from microgpt.lab.api import jsonable
    from microgpt.programs.run import log_path_for
    assert post(server, '/api/byhand', {'n_head': 2}) == jsonable(byhand.compute(n_head=2))
    assert post(server, '/api/scaling', {'part': 'index', 'sizes': {'h': 8}}) == \
        jsonable(scaling.compute(part='index', sizes={'h': 8.0}))
    assert post(server, '/api/scaling', {'part': 'row', 'row_d': 16, 'scale': False}) == \
        jsonable(scaling.compute(part='row', row_d=16, scale=False))
    got = post(server, '/api/phases', {'text': 'emma', 'head': 1, 'query': 2})
    assert got == jsonable(phases.compute(model, 'emma', 0, 1, 2))
    assert got['code']['lines'][0].lstrip().startswith('def gpt(')
    assert post(server, '/api/embeddings', {'neighbours': 2}) == jsonable(embeddings.compute(model, 2))
    want = jsonable(loss.compute(log_path_for(tiny_ckpt)))
    assert post(server, '/api/loss', {}) == want and len(want['runs'][0]['train']) == 60
    # the Loss page's other checkpoints, by id, drawn beside the chosen one: their logs, in order
    assert post(server, '/api/loss', {'also': ['start']})['runs'] == want['runs'] * 2
    status, answer, _ = request(server, 'POST', '/api/loss', {'also': ['run99']})
    assert status == 404 and 'no checkpoint' in answer['error']


@pytest.mark.parametrize('route, body, words', [
    ('/api/byhand', {'q': ['1 2', 'x']}, "q2: 'x' is not a number"),
    ('/api/byhand', {'q': '1 2'}, "'q' must be a list"),
    ('/api/byhand', {'q': ['1'] * 17}, "give q, k and v for each of 1..6 tokens"),
    ('/api/byhand', {'q': ['1 ' * 150]}, 'characters long'),
    ('/api/byhand', {'query': 7}, "'query' is 7"),
    ('/api/byhand', {'w_o': ['1 0', '0 1']}, 'W_O must be 4 x 4'),
    ('/api/byhand', {'w_o': ['1 0 0 0', '0 1 0 0', '0 0 1 0', '0 0 0']}, "W_O row 4 has 3 numbers but k1 has 4"),
    ('/api/sampling', {'temperature': 1.0}, "unknown field 'temperature': this route takes prompt, temperatures"),
    ('/api/scaling', {'part': 'index', 'sizes': {'h': 2.5}}, 'give whole sizes'),
    ('/api/scaling', {'part': 'index', 'sizes': {'h': 0}}, 'must be a number in 1..'),
    ('/api/scaling', {'part': 'row', 'scores': [1e400]}, 'finite'),
    ('/api/scaling', {'part': 'cost', 'n': 10 ** 8}, "'n' is 100000000: give an integer from 1 to 10,000,000"),
    ('/api/phases', {'text': 'emma', 'head': 9}, '--head 9 is out of range'),
])
def test_a_bad_request_to_a_new_route_is_a_400_with_one_line(server, route, body, words):
    from helpers import request
    status, answer, _ = request(server, 'POST', route, body)
    assert status == 400 and words in answer['error'], answer
