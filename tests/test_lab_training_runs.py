"""
A Training page run is the command line's run: the page's fields reach train.py as its flags,
and the oracle is train.py itself, given the same flags (one BLAS thread for both).
"""

import os
import re
from types import SimpleNamespace

import pytest

from helpers import REPO_DIR, bench_script, live_server, post, wait_for_run
from microgpt.edge.checkpoint import read_checkpoint
from microgpt.lab import loss
from microgpt.lab.runs import time_left
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


def test_the_time_left_is_the_steps_left_at_the_runs_pace():
    run = SimpleNamespace(params={'steps': 1000}, first=None, latest=None)
    assert time_left(run) is None  # nothing read: nothing to say
    run.first = run.latest = (1.0, 11)
    assert time_left(run) is None  # one read: no pace yet
    run.latest = (6.0, 511)  # 500 steps in 5 s: 10 ms a step
    assert time_left(run) == {'left': 5, 'text': "about 5 s left, at this run's 10.0 ms a step"}
    run.first, run.latest, run.params['steps'] = (0.0, 1), (1.0, 2), 182  # 1 s a step, 180 left
    assert time_left(run)['text'].startswith("about 3 min 00 s left")


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
