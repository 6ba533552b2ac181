"""
A Training page run is the command line's run: the page's fields reach train.py as its flags.

The oracle is train.py itself: a run started over the page's API, with a dtype, a weight decay
and an evaluation and save schedule, must log exactly the losses of `train.py` given the same
flags (one BLAS thread for both, so the arithmetic is the same), write the checkpoint the
command line's running-text recipe writes (.safetensors) and record those settings in it. A
refused field is one line naming it, from the start route and the estimate route alike. The
time a run should take comes from a probe of the run's own steps before it starts (its parts
add up to its total) and from the run's pace while it goes (Pace, checked on a log read at
made-up times against the sum done by hand).

Run: .venv/bin/python -m pytest -q tests/test_lab_training_runs.py
"""

import os
import re

import pytest

from conftest import REPO_DIR, bench_script
from labserver import live_server, post, request, wait_for_run
from microgpt.edge.checkpoint import read_checkpoint
from microgpt.lab import loss
from microgpt.lab.runtime import Pace, count_due
from microgpt.programs import train

PAGE_RUN = {'data_mode': 'text', 'engine': 'numpy', 'dtype': 'float32', 'weight_decay': 0.1, 'dropout': 0.2,
            'steps': 12, 'n_embd': 8, 'n_head': 2, 'n_layer': 1, 'block_size': 16, 'batch_size': 4, 'lr': 0.01,
            'eval_every': 5, 'save_every': 4}


@pytest.fixture(scope='module')
def text_server(tiny_ckpt, names_file, play_file, tmp_path_factory):
    with live_server(tiny_ckpt, tmp_path_factory.mktemp('lab-runs'), names_file, text=play_file) as s:
        yield s


def test_a_page_run_logs_the_losses_train_py_logs_for_the_same_flags(text_server, play_file, tmp_path, monkeypatch):
    monkeypatch.setenv('OPENBLAS_NUM_THREADS', '1')  # the page's run inherits it: one way of computing for both
    post(text_server, '/api/train/start', PAGE_RUN)
    final, records, _ = wait_for_run(text_server)
    assert final['state'] == 'finished', final
    path = text_server.lab.checkpoints.path(final['ckpt'])
    assert path.endswith('model.safetensors')  # as the command line's recipe saves running text
    run = read_checkpoint(path, training=True).train_state.run
    assert (run.dtype, run.weight_decay, run.dropout, run.eval_every, run.save_every) == \
        ('float32', 0.1, 0.2, 5, 4)
    assert [r['step'] for r in records if 'val_loss' in r] == [5, 10, 12]  # every eval_every steps, and the last
    out = tmp_path / 'cli.safetensors'
    flags = ['--data-mode', 'text', '--data', play_file, '--num-samples', '0', '--out', str(out)]
    flags += [a for k, v in PAGE_RUN.items() if k != 'data_mode' for a in (f"--{k.replace('_', '-')}", str(v))]
    assert train.main(flags) == 0
    cli_train, cli_val = loss.read_log(str(out) + '.log.jsonl')
    assert [(r['step'], r['loss'], r['lr']) for r in records if 'loss' in r] == cli_train
    assert [(r['step'], r['val_loss'], r['train_loss']) for r in records if 'val_loss' in r] == cli_val


def test_a_names_run_keeps_its_json_checkpoint_and_train_pys_default_schedule(server):
    started = post(server, '/api/train/start', {'steps': 8, 'n_embd': 8, 'n_head': 2, 'block_size': 12,
                                                'weight_decay': 0.5})
    assert (started['params']['eval_every'], started['params']['save_every']) == (200, 100)  # train.py's
    final, records, _ = wait_for_run(server)
    path = server.lab.checkpoints.path(final['ckpt'])
    run = read_checkpoint(path, training=True).train_state.run
    assert path.endswith('model.json') and (run.dtype, run.weight_decay) == ('float64', 0.5)
    assert [r['step'] for r in records if 'val_loss' in r] == [8]  # only at the end, as train.py evaluates


@pytest.mark.parametrize('body, words', [
    ({'dtype': 'float32'}, "dtype 'float32' is not one the scalar engine computes in: choose float64"),
    ({'dtype': 'bfloat16', 'engine': 'numpy'}, "choose float64 or float32"),
    ({'weight_decay': -0.1}, "'weight_decay'"), ({'weight_decay': 11}, "'weight_decay'"),
    ({'weight_decay': 'some'}, "'weight_decay'"), ({'eval_every': -1}, "'eval_every'"),
    ({'save_every': 2.5}, "'save_every'"), ({'dropout': 0.95}, "'dropout'"), ({'dropout': -0.1}, "'dropout'"),
    ({'momentum': 0.9}, "unknown field 'momentum'")])
@pytest.mark.parametrize('route', ['/api/train/start', '/api/train/estimate'])
def test_a_refused_training_field_is_one_line_naming_it(server, route, body, words):
    status, answer, _ = request(server, 'POST', route, body)
    assert status == 400 and words in answer['error'] and '\n' not in answer['error']


def test_the_estimate_is_the_sum_of_its_measured_parts_and_the_run_keeps_it(server):
    body = {'steps': 30, 'n_embd': 8, 'n_head': 2, 'block_size': 12, 'eval_every': 10, 'save_every': 15}
    probed = post(server, '/api/train/estimate', body)
    # steps 10, 20, 30; saves at 15 and 30 (each sampled by the page), and a best beside each evaluation
    assert (probed['evals'], probed['saves'], probed['samples']) == (3, 2 + 3, 2)
    parts = (probed['start_s'] + probed['build_s'] + 30 * probed['step_s'] + 3 * probed['eval_s']
             + 5 * probed['save_s'] + 2 * probed['sample_s'])
    assert probed['seconds'] == pytest.approx(parts, rel=1e-12) and probed['step_s'] > 0
    assert probed['text'].startswith('about ') and 'probe' in probed['text']
    started = post(server, '/api/train/start', body)
    assert started['probed'] == probed  # what was said before it started stays with it
    final, _, _ = wait_for_run(server)
    assert final['probed'] == probed['text'] and final['estimate'] is None  # ended: nothing left


def test_pace_is_the_steps_left_at_the_runs_step_time_and_the_evaluations_left_at_its_own():
    pace = Pace({'steps': 100, 'eval_every': 50})
    assert pace.estimate() is None  # nothing read, no probe: nothing to say
    pace.see(10.0, [{'step': 1, 'loss': 3.0}])
    pace.see(10.4, [{'step': s, 'loss': 3.0} for s in range(2, 50)])
    pace.see(10.5, [{'step': 50, 'loss': 3.0}])
    pace.see(11.0, [])                                          # the evaluation of step 50 runs...
    pace.see(11.3, [{'step': 50, 'val_loss': 2.9, 'train_loss': 2.8}, {'step': 51, 'loss': 2.9}])
    left = pace.estimate()
    # 50 steps in 1.3 s less its 0.8 s evaluation: 10 ms a step; 49 steps and 1 evaluation left
    assert left['left'] == pytest.approx(49 * 0.01 + 0.8)
    assert "10.0 ms a step" in left['text'] and "0.80 s an evaluation" in left['text']
    pace.see(11.3, [{'step': 51, 'loss': 2.9}])  # another page reading the same lines: counted once
    assert pace.estimate()['left'] == pytest.approx(left['left'])
    probed = Pace({'steps': 100, 'eval_every': 50}, {'step_s': 0.02, 'eval_s': 1.5})
    assert probed.estimate()['left'] == pytest.approx(100 * 0.02 + 2 * 1.5)  # before any step: the probe's
    assert "the probe's 20.0 ms a step" in probed.estimate()['text']
    assert count_due(100, 50) == 2 and count_due(101, 50) == 3 and count_due(7, 0) == 1


def test_pace_follows_the_runs_latest_steps_not_its_slow_first_ones():
    """train.py's first 27 numpy steps try slower ways to use the cores: the time left is
    measured on the last WINDOW seconds, so it follows the speed the run settles on."""
    pace = Pace({'steps': 1000, 'eval_every': 0})
    pace.see(0.0, [{'step': 1, 'loss': 3.0}])
    for t in range(1, 9):  # 100 ms a step for the first second, then 10 ms
        pace.see(float(t), [{'step': 11 + 100 * (t - 1), 'loss': 3.0}])
    left = pace.estimate()  # the window: t = 3 (step 211) to t = 8 (step 711)
    assert left['left'] == pytest.approx((1000 - 711) * 0.01)
    assert "its evaluations not yet timed" in left['text']  # the one at the end: no time to count it


def test_pace_takes_the_probes_step_time_while_the_numpy_engine_tries_its_ways():
    from microgpt.backprop.threads import Trial
    trial = Trial.RUN * Trial.ROUNDS * 3
    pace = Pace({'steps': 100, 'eval_every': 0, 'engine': 'numpy'}, {'step_s': 0.02, 'eval_s': None})
    pace.see(0.0, [{'step': 1, 'loss': 3.0}])
    pace.see(5.0, [{'step': trial, 'loss': 3.0}])  # slow: they include a way it will not keep
    assert pace.estimate()['left'] == pytest.approx((100 - trial) * 0.02)
    pace.see(5.5, [{'step': trial + 10, 'loss': 3.0}])
    pace.see(6.0, [{'step': trial + 20, 'loss': 3.0}])
    assert pace.estimate()["left"] == pytest.approx((100 - trial - 20) * 0.05)  # its own from there: 0.5 s, 10 steps


def test_the_page_bench_sends_what_the_pages_running_text_preset_sends():
    """bench/training_page.py compares the page with the command line as a user meets them: its
    default fields beside the model are those training.js's running-text preset adds."""
    web = os.path.join(REPO_DIR, 'microgpt', 'lab', 'web', 'training.js')
    with open(web, encoding='utf-8') as f:
        js = f.read()
    preset = re.search(r'const TEXT_START = \{(.*?)\};', js, flags=re.S).group(1)
    fields = dict(re.findall(r'(\w+): ([\d.]+)', preset))
    dtype = re.search(r"const TEXT_DTYPE = '(\w+)';", js).group(1)
    assert bench_script('training_page').PRESET == {'dtype': dtype, 'eval_every': int(fields['eval_every'])}
