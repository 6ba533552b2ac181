"""
The best step kept: a run writes the weights of its lowest validation loss beside --out
(out/model.best.json for out/model.json, programs/run.py's keep_if_best), through the same
atomic writes, says `best val X at step S` at the end, and sample.py --best reads it.

The oracle for "the best checkpoint is the weights of the logged best step" is the scalar
engine's own validation (training.evaluate) of the file's weights, on the held-out names
split as train.py splits them: it must give the lowest val_loss the log holds, at its step.
"""

import json
import os

from microgpt.edge.checkpoint import read_checkpoint
from microgpt.edge.data import load_docs, split_docs
from microgpt.programs import sample, train
from microgpt.training import evaluate
from helpers import TINY, assert_one_line_error, log_of, run

COMMON = ['--num-samples', '0', '--eval-every', '5', '--val-size', '8', '--lr', '0.03', *TINY]


def vals(out):
    return [(e['step'], e['val_loss']) for e in log_of(out) if 'val_loss' in e]


def test_the_best_checkpoint_is_the_logged_best_steps_weights_sampled_never_resumed(tmp_path, names_file, capsys):
    out = tmp_path / 'm.json'
    code, printed, _ = run(train.main, ['--data', names_file, '--out', str(out), '--steps', '30', *COMMON], capsys)
    assert code == 0
    step, best = min(vals(out), key=lambda e: e[1])
    assert f"best val {best:.4f} at step {step}: {tmp_path / 'm.best.json'}" in printed
    kept = read_checkpoint(str(tmp_path / 'm.best.json'))
    assert (kept.train_state.step, kept.train_state.val_loss) == (step, best)
    _, val_docs = split_docs(load_docs(names_file), val_size=8, seed=42)
    assert abs(evaluate(kept.model(), val_docs) - best) < 1e-10  # its weights give the logged loss
    assert read_checkpoint(str(out), training=True).train_state.best_step == step
    # sample.py --best reads it; it is a model, not a run: no Adam, and --resume at it is refused
    code, best_names, _ = run(sample.main, ['--ckpt', str(out), '--best', '--num', '3'], capsys)
    assert code == 0 and best_names == run(sample.main, ['--ckpt', str(tmp_path / 'm.best.json'), '--num', '3'],
                                           capsys)[1]
    with open(tmp_path / 'm.best.json', encoding='utf-8') as f:
        assert json.load(f)['train_state']['adam'] is None
    code, _, err = run(train.main, ['--out', str(tmp_path / 'm.best.json'), '--resume', '--steps', '40'], capsys)
    assert_one_line_error(code, err, 'it cannot be resumed; start a new run from it with --init')
    assert os.path.exists(tmp_path / 'm.best.json')
    code, _, err = run(sample.main, ['--ckpt', str(tmp_path / 'none.json'), '--best'], capsys)
    assert_one_line_error(code, err, 'none.best.json does not exist')


def test_a_resumed_run_keeps_its_best_and_an_older_one_stays_out(tmp_path, names_file, capsys):
    out, best = tmp_path / 'm.json', tmp_path / 'm.best.json'
    assert run(train.main, ['--data', names_file, '--out', str(out), '--steps', '10', *COMMON], capsys)[0] == 0
    before = read_checkpoint(str(best)).train_state.step
    assert run(train.main, ['--out', str(out), '--resume', '--steps', '25'], capsys)[0] == 0
    step, low = min(vals(out), key=lambda e: e[1])
    assert read_checkpoint(str(best)).train_state.step == step and step >= before
    # --force starts another run: the old run's best is not its own, and goes once the run starts
    assert run(train.main, ['--data', names_file, '--out', str(out), '--force', '--steps', '3', '--num-samples', '0',
                            '--eval-every', '0', '--val-size', '0', *TINY], capsys)[0] == 0
    assert not best.exists()


def test_the_place_of_the_best_is_checked_before_anything_is_written(tmp_path, names_file, capsys):
    out, best = tmp_path / 'm.json', tmp_path / 'm.best.json'
    best.write_text('my notes\n')
    code, _, err = run(train.main, ['--data', names_file, '--out', str(out), '--steps', '3', *COMMON], capsys)
    assert_one_line_error(code, err, 'm.best.json, where this run keeps its best validation')
    assert best.read_text() == 'my notes\n' and not out.exists()
