"""
The lab on models with the modern rungs (docs/modern.md): a checkpoint trained with every rung on
(RoPE, SwiGLU, norm gains, QK-norm, n_kv_head 2, tied embeddings) and one with GELU. Every
command the registry lists runs on each; its numbers are the model's own (each head reads its
group's keys, the step's engines agree, every weight without a gradient is accounted for);
RoPE's score at every distance holds the model's own scores; the Training page starts train.py
with the rungs' flags and refuses a bad combination in one line.
"""

import re

import numpy as np
import pytest

from helpers import DRAWN, data_values, live_server, open_page, post, request, run_lab, wait_for_run
from microgpt.lab import attention, embeddings, phases, registry, step
from microgpt.lab.loading import load, rungs_text
from microgpt.lab.runs import RunManager

RUNG_FLAGS = {'every rung': ['--rope', '--mlp', 'swiglu', '--norm-gains', '--qk-norm', '--n-kv-head', '2',
                             '--tie-embeddings'],
              'gelu': ['--mlp', 'gelu']}
TINY = ['--n-embd', '8', '--n-head', '4', '--block-size', '12']  # 4 heads of 2: RoPE turns one pair each
TEXT = 'emma'
EXACT_TOL = 1e-12  # the same float64 arithmetic in another order
ENGINE_TOL = 1e-9  # the scalar engine against the numpy training path


@pytest.fixture(scope='module')
def ckpts(names_file, tmp_path_factory):
    """{name: checkpoint} of a 10-step numpy run with each of RUNG_FLAGS."""
    from microgpt.programs import train
    folder, out = tmp_path_factory.mktemp('rungs'), {}
    for name, flags in RUNG_FLAGS.items():
        out[name] = str(folder / f'{len(out)}.json')
        assert train.main(['--data', names_file, '--out', out[name], '--engine', 'numpy', '--steps', '10', *TINY,
                           '--eval-every', '0', '--num-samples', '0', *flags]) == 0
    return out


@pytest.fixture(params=list(RUNG_FLAGS))
def rung_ckpt(request, ckpts):
    return ckpts[request.param]


def test_every_command_runs_on_the_model_and_names_its_rungs(rung_ckpt, capsys):
    model = load(rung_ckpt).model
    assert rungs_text(model.config)  # ' rope=True mlp=swiglu ...': said after the sizes
    for s in registry.SANDBOXES:
        if s.reads_a_checkpoint:
            text = [TEXT] if any(p.name == 'text' for p in s.params) else []
            status, out, err = run_lab([s.name, *text, '--ckpt', rung_ckpt], capsys)
            assert status == 0 and err == '', (s.name, err)
            assert f"vocab_size={model.config.vocab_size}{rungs_text(model.config)}" in ' '.join(out.split())


def test_each_head_reads_its_groups_keys_as_the_model_does(rung_ckpt):
    model = load(rung_ckpt).model
    ids = [model.tokenizer.bos] + model.tokenizer.encode(TEXT)
    _, caps = model.forward(ids, capture=('attention_softmax', 'head_output'))
    for query in range(len(ids)):
        for head in range(model.config.n_head):
            v = attention.compute(model, TEXT, 0, head, query)
            assert np.abs(v['weights'] - caps['attention_softmax'][0, head, query, :query + 1]).max() < EXACT_TOL
            assert np.abs(v['out'] - caps['head_output'][0, head, query]).max() < EXACT_TOL
        assert np.abs(np.nan_to_num(v['all_heads']) - np.nan_to_num(caps['attention_softmax'][0])).max() < EXACT_TOL
        p = phases.compute(model, TEXT, 0, model.config.n_head - 1, query)
        assert np.abs(p['concat'] - p['model_concat']).max() < EXACT_TOL


def test_ropes_score_at_every_distance_holds_the_models_own_scores(rung_ckpt, capsys):
    model = load(rung_ckpt).model
    query = len(TEXT)  # the last position: keys 0..4
    if not model.config.rope:
        assert attention.compute(model, TEXT, query=query)['rope'] is None
        return
    for head in range(model.config.n_head):
        for key in range(query + 1):
            v = attention.compute(model, TEXT, 0, head, query, key=key)
            scores = v['rope']['scores']  # (block_size,): one per distance
            assert len(scores) == model.config.block_size and v['rope']['distance'] == query - key
            # the model's own score of this query and this key sits at their distance, i - j
            assert abs(scores[query - key] - v['scaled'][key]) < EXACT_TOL
            assert np.ptp(scores) > 1e-3  # a control: at other distances the same pair scores otherwise
    status, out, _ = run_lab(['attention', TEXT, '--key', '1', '--ckpt', rung_ckpt], capsys)
    assert status == 0 and f"6) RoPE: the score of q_{query} and k_1" in out and f"{query - 1}*" in out
    status, _, err = run_lab(['attention', TEXT, '--query', '2', '--key', '3', '--ckpt', rung_ckpt], capsys)
    assert status == 2 and err.strip().splitlines() == ['error: --key 3 is a future key of query 2: give 0..2']


def test_the_step_on_either_engine_and_every_zero_gradient_accounted_for(rung_ckpt):
    scalar, port = load(rung_ckpt, 'scalar').model, load(rung_ckpt).model
    by = {engine: step.step_report(scalar, TEXT, lr=0.01, engine=engine) for engine in ('scalar', 'numpy')}
    for name, norm in by['scalar']['stages']:
        assert abs(norm - dict(by['numpy']['stages'])[name]) < ENGINE_TOL, name
    assert by['scalar']['numpy']['max_diff'] < ENGINE_TOL  # the step's own check of the engines, per rung
    assert by['scalar']['torch'] is None or by['scalar']['torch']['max_diff'] < ENGINE_TOL
    c, tied = by['scalar']['without_grad'], scalar.config.tie_embeddings
    assert c['other'] == 0 and c['zeros'] == sum(c['unused_rows'].values()) + c['dead_unit_weights']
    assert by['scalar']['wte_rows'] == (list(range(scalar.config.vocab_size)) if tied else sorted(set(by['scalar']['tokens'][:-1])))
    assert (by['scalar']['wpe_rows'] is None) == scalar.config.rope == ('wpe' not in port.weights)
    assert ('no wpe' in by['scalar']['rows_text']) == scalar.config.rope
    e = embeddings.compute(port)
    assert (e['wpe_cosine'] is None) == scalar.config.rope
    assert ('wpe: this model has none' in embeddings.render(e)) == scalar.config.rope


def test_the_training_page_passes_the_rungs_to_train_py_and_refuses_a_bad_one():
    from microgpt.programs.settings import parse_args
    runs = RunManager('unused', None)
    assert [f['name'] for f in runs.options()['rungs']] == ['rope', 'mlp', 'norm_gains', 'qk_norm', 'n_kv_head',
                                                            'tie_embeddings']
    body = {'n_embd': 8, 'rope': True, 'mlp': 'swiglu', 'norm_gains': False, 'qk_norm': True, 'n_kv_head': 2}
    params, flags = runs.params(body)
    args, _ = parse_args(flags)
    assert (args.rope, args.mlp, args.norm_gains, args.qk_norm, args.n_kv_head, args.tie_embeddings) == \
        (True, 'swiglu', False, True, 2, False)
    assert runs.params({})[1] == runs.params({'rope': False, 'n_kv_head': None})[1]  # microgpt: no rung flag
    for bad, said in [({'n_kv_head': 3}, 'must divide n_head (4)'), ({'rope': True, 'n_embd': 12}, 'even head_dim'),
                      ({'mlp': 'tanh'}, 'relu, gelu or swiglu')]:
        with pytest.raises(Exception, match=re.escape(said)) as refused:
            runs.params(bad)
        assert refused.value.status == 400 and '\n' not in str(refused.value)


@pytest.mark.browser
def test_the_pages_draw_the_rungs_and_the_training_page_trains_with_them(ckpts, names_file, tmp_path, window):
    """The JavaScript a rung changed, on the model with every rung (the pages without one are
    test_lab_*'s): the Embeddings page without wpe, the Attention page's RoPE table and kv
    heads, the Step page's embedding rows, the Training page's rung controls."""
    page = window(1280, 900)
    with live_server(ckpts['every rung'], tmp_path / 'runs', names_file) as server:
        open_page(page, server, 'embeddings')
        want = post(server, '/api/embeddings', {'neighbours': 3})
        assert page.inner_text('#wpe-note') == want['wpe_note']
        open_page(page, server, 'attention')
        want = post(server, '/api/attention', {'text': page.input_value('#text')})
        assert page.locator('#rope').is_visible() and 'kv head 0' in page.inner_text('#row h3')
        assert data_values(page, '#rope-table .num') == want['rope']['scores']
        assert float(page.get_attribute('#rope-table td.own', 'data-value')) == \
            want['rope']['scores'][want['rope']['distance']]
        open_page(page, server, 'step')
        want = post(server, '/api/step', {'text': page.input_value('#text'), 'lr': float(page.input_value('#lr'))})
        assert page.inner_text('#embedding-rows') == want['rows_text']
        page.goto(server.url + 'training')
        page.wait_for_selector(DRAWN, state='attached')
        for name, value in {'steps': 5, 'n_embd': 8, 'n_head': 4, 'block_size': 12, 'n_kv_head': 2}.items():
            page.fill(f'#{name}', str(value))
        for name in ('rope', 'norm_gains', 'qk_norm', 'tie_embeddings'):
            page.check(f'#{name}')
        page.select_option('#mlp', 'swiglu')
        page.click('#start')
        status, _, _ = wait_for_run(server)
        assert status['state'] == 'finished', status
        run = load(server.lab.runs.run.out).model.config
        assert (run.rope, run.mlp, run.norm_gains, run.qk_norm, run.n_kv_head, run.tie_embeddings) == \
            (True, 'swiglu', True, True, 2, True)
        assert request(server, 'POST', '/api/train/start', {'n_kv_head': 3})[0] == 400
        assert page.errors == []
