"""
`exercises train` (microgpt/lab/exercises/trainer.py): microgpt trained with the learner's code
beside its own engine. The reference solutions give microgpt's own losses to 1e-12 (an oracle run
in this process), and a slip is named where the two runs first part.
"""

from microgpt import training
from microgpt.edge.data import load_docs, split_docs
from microgpt.lab.exercises import catalog, checker
from microgpt.model import GPT, GPTConfig
from microgpt.optim import Adam
from microgpt.sampling import sample_names
from microgpt.tokenizer import CharTokenizer
from helpers import SLIPS, lab, make_workspace, replaced, with_body

STEPS = 4
SAME = 1e-12


def events_of(ws, steps=STEPS, num_samples=0):
    events = []
    checker.train(ws, steps=steps, seed=42, lr=0.01, num_samples=num_samples, temperature=0.5,
                  on_event=events.append)
    return events


def project_run(steps, seed=42, num_samples=0):
    """microgpt's own run, in this process: the losses of training.train_step, and its names."""
    docs = load_docs(None)
    train_docs, _ = split_docs(docs, seed=seed)
    tokenizer = CharTokenizer.from_docs(docs)
    model = GPT(GPTConfig(tokenizer.vocab_size), seed=seed, tokenizer=tokenizer, fused=True)  # train.py's
    adam = Adam(model.params)
    losses = [training.train_step(model, adam, training.doc_tokens(tokenizer, train_docs[s % len(train_docs)]),
                                  training.learning_rate(0.01, s, steps)) for s in range(steps)]
    return losses, sample_names(model, num_samples, 0.5, seed)


def test_the_reference_solutions_train_exactly_as_microgpt(tmp_path):
    events = events_of(make_workspace(tmp_path / 'w'), num_samples=3)
    steps = [e for e in events if e['event'] == 'step']
    losses, names = project_run(STEPS, num_samples=3)
    assert [e['step'] for e in steps] == list(range(1, STEPS + 1))
    assert max(abs(e['loss'] - want) for e, want in zip(steps, losses)) <= SAME
    assert max(abs(e['project'] - want) for e, want in zip(steps, losses)) <= SAME
    assert not [e for e in events if e['event'] in ('parted', 'failed')]
    sampled = next(e for e in events if e['event'] == 'names')
    assert sampled['yours'] == sampled['project'] == names


def test_learner_code_that_fails_mid_run_is_one_line(tmp_path):
    body = "raise ZeroDivisionError('my mistake')"
    events = events_of(make_workspace(tmp_path / 'w', files={14: with_body(14, body)}), steps=2)
    failed = [e for e in events if e['event'] == 'failed']
    assert len(failed) == 1 and failed[0]['line'].startswith(
        'step 1: your name_loss() raised ZeroDivisionError: my mistake (ex14_name_loss.py line')


def test_a_wrong_log_derivative_parts_at_step_1_in_a_gradient_and_the_command_says_so(tmp_path, capsys):
    """The forward is right, so the losses agree at step 1 (the difference column's 0) and the
    first quantity that differs is a gradient; the weights then differ, and so does step 2."""
    ws = make_workspace(tmp_path / 'w', files={4: SLIPS[4][0]})
    status, out, err = lab(['train', '--dir', ws, '--steps', '2', '--num-samples', '2'], capsys)
    assert status == 0 and err == ''
    assert 'not passing: exercise 4 (log)' in out and 'training anyway' in out
    assert out.count('where they part') == 1 and 'where they part: step 1, the gradient of ' in out
    assert 'the backward pass' in out and 'names from your model' in out
    rows = [line.split() for line in out.split('\n') if line.strip()[:1] in ('1', '2') and len(line.split()) == 5]
    assert [row[0] for row in rows] == ['1', '2'] and float(rows[0][4]) <= SAME < 1e-6 < float(rows[1][4]), rows


def test_train_needs_every_exercise_it_uses_written(tmp_path, capsys):
    ws = make_workspace(tmp_path / 'w', solved=[n for n in range(1, 21) if n != 9])
    status, out, err = lab(['train', '--dir', ws, '--steps', '1'], capsys)
    assert status == 2 and err.startswith('error: train needs your exercises 1 to 16, and exercise 9 (linear) '
                                          'is not written yet')
    assert catalog.TRAIN_USES[-1] == 16


def test_a_wrong_adam_that_shows_only_after_some_steps_parts_there_in_the_weights(tmp_path):
    # a second moment's bias correction that goes wrong from step 3 on: every step is compared whole
    wrong_late = replaced(15, 'bias2 = 1 - beta2 ** t', 'bias2 = (1 - beta2 ** t) * (1.001 if t > 2 else 1.0)')
    events = events_of(make_workspace(tmp_path / 'w', files={15: wrong_late}), steps=4)
    parted = [e for e in events if e['event'] == 'parted']
    assert len(parted) == 1 and parted[0]['step'] == 3 and parted[0]['quantity'].endswith('after the update')
    assert 'adam_step' in parted[0]['where']


def test_a_process_that_ends_mid_run_is_one_line(tmp_path, capsys):
    ws = make_workspace(tmp_path / 'w', files={14: with_body(14, 'import os\nos._exit(3)')})
    status, out, err = lab(['train', '--dir', ws, '--steps', '2'], capsys)
    assert status == 1 and 'Traceback' not in out + err
    assert 'stopped: the training process ended (exit status 3)' in out
