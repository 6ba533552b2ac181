# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 5. When the model memorizes
#
# Every evaluation logs two losses measured alike, without dropout: the validation loss on names
# the model never trained on, and the training loss on as many tokens of names it did. When the
# second keeps falling and the first turns up, the model is learning its training names by heart.
# Two regularizers answer it: decoupled weight decay (`--weight-decay`, `microgpt/optim.py`) and
# inverted dropout (`--dropout`, `src/backprop/dropout.py`); and a run keeps the weights of its best
# validation beside its checkpoint. The lesson is `docs/lessons.md`, "When the model memorizes"
# ([lessons.md](../docs/lessons.md#when-the-model-memorizes)); the reading guide's section 13 lists
# the code.
#
# To see it in seconds, this notebook trains on only 400 names (600 of the bundled census names,
# 200 held out), three runs of 800 steps: plain, with dropout, with dropout and weight decay. It
# ends with exercises 21 and 22. Its source is `notebooks/05_when_the_model_memorizes.py`
# ([docs/notebooks.md](../docs/notebooks.md)).

# %%
import json
import pathlib
import random
import subprocess
import sys

from microgpt import inference
from microgpt.edge.checkpoint import read_checkpoint
from microgpt.edge.data import bundled_names, load_docs, split_docs
from microgpt.lab import loss
from microgpt.lab.notebook import show, work_folder

# the data, the checkpoints, their logs and the pictures, in a folder removed when the kernel stops
WORK_DIR = work_folder()
WORK = pathlib.Path(WORK_DIR.name)

names = bundled_names()
random.Random(0).shuffle(names)
DATA = WORK / 'few.txt'
DATA.write_text('\n'.join(names[:600]) + '\n', encoding='utf-8')
print(f"{len(names):,} names; the first 600 shuffled ones in {DATA.name}: 400 to train on, 200 held out")

# %% [markdown]
# ## Three runs on few names
#
# The same model (2 layers of 32, batch 8, lr 0.01, 800 steps: 16 passes over the 400 training
# names) three times, side by side, an evaluation every 100 steps. `--engine numpy --threads 1`
# computes in float64 on one thread, so the numbers are the code's, the same on every machine.

# %%
RUNS = {'plain': [], 'dropout 0.3': ['--dropout', '0.3'],
        'dropout 0.3, decay 0.5': ['--dropout', '0.3', '--weight-decay', '0.5']}


def start(label, flags):
    """A train.py run of its own, started: (its checkpoint's path, the process)."""
    out = WORK / (label.replace(' ', '_').replace(',', '') + '.json')
    return out, subprocess.Popen([sys.executable, '-m', 'microgpt.train', '--data', str(DATA), '--val-size', '200',
                                  '--engine', 'numpy', '--threads', '1', '--n-layer', '2', '--n-embd', '32',
                                  '--batch-size', '8', '--lr', '0.01', '--steps', '800', '--eval-every', '100',
                                  '--save-every', '0', '--num-samples', '0', '--out', str(out), *flags],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


runs = {label: start(label, flags) for label, flags in RUNS.items()}  # the three side by side, a thread each
ckpts = {}
for label, (out, run) in runs.items():
    stdout, stderr = run.communicate()
    assert run.returncode == 0, stderr
    print(f"{label}: {stdout.strip().splitlines()[-1]}")
    ckpts[label] = out


def evaluations(ckpt):
    """{step: (validation loss, training loss)} from a run's log."""
    log = ckpt.with_suffix('.log.jsonl')
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    return {e['step']: (e['val_loss'], e['train_loss']) for e in entries if 'val_loss' in e}


for label, ckpt in ckpts.items():
    print(f"\n{label}:")
    for step, (val, trained) in evaluations(ckpt).items():
        print(f"  step {step:3}: validation {val:.4f}, training {trained:.4f}, gap {val - trained:.3f}")

# %% [markdown]
# The plain run is the picture of memorizing: its training loss falls to about 1.3 while its
# validation loss, after its low near step 200, climbs back past where it started. Dropout keeps
# the two close; its validation loss goes on falling to the end. The curves, as
# `python -m microgpt.lab loss A.log.jsonl B.log.jsonl --png both.png` draws them:

# %%
curves = loss.compute([str(ckpt.with_suffix('.log.jsonl')) for ckpt in ckpts.values()])
print(loss.render(curves))
show(loss, curves, WORK / 'loss.png', "400 names: plain, dropout 0.3, dropout 0.3 with decay 0.5")

plain, dropped = evaluations(ckpts['plain']), evaluations(ckpts['dropout 0.3'])
assert plain[800][0] > min(v for v, _ in plain.values()) + 0.2     # validation turned back up
assert plain[800][0] - plain[800][1] > 1.0                        # a gap of over a nat a token
assert dropped[800][0] < plain[800][0] - 0.3                      # dropout's validation: far lower
assert dropped[800][0] - dropped[800][1] < 0.3                    # and its gap small

# %% [markdown]
# ## The best step kept
#
# Each run wrote `NAME.best.json` beside its checkpoint: the weights of its best validation, as
# its last line said. For the plain run that is an early step, far better than where it ended.
# Evaluation never drops, so those weights, evaluated again with no mask anywhere, give exactly
# the loss the run logged (`python sample.py --best` samples them).

# %%
best_path = str(ckpts['plain'].with_name('plain.best.json'))
best = read_checkpoint(best_path)
step = best.train_state.step
print(f"plain run: best validation {best.train_state.val_loss:.4f} at step {step}, "
      f"against {plain[800][0]:.4f} at step 800")
_, val_docs = split_docs(load_docs(str(DATA)), val_size=200, seed=42)
again = inference.evaluate(inference.load_checkpoint(best_path), val_docs)  # the numpy port
print(f"those weights, evaluated again: {again:.4f}")
assert step < 800 and abs(again - plain[step][0]) < 1e-10

# %% [markdown]
# ## What dropout draws, and what decay does
#
# A step's masks (`src/backprop/dropout.py`) are drawn from the run's seed and the step alone, for
# every name of the batch at every dropout site: each factor is 0 (dropped, with probability P) or
# 1/(1 − P), so a number keeps its expected value. Weight decay, decoupled, shrinks a weight by the
# fraction lr·WD each step before Adam's move: a weight with no gradient at all just shrinks, by
# exactly (1 − lr·WD) a step, and Adam's moments never see the decay.

# %%

from microgpt.backprop.dropout import draw
from microgpt.engine import Value
from microgpt.model import GPTConfig
from microgpt.optim import Adam

masks = draw(0.3, 42, 1, 8, GPTConfig(vocab_size=27, n_layer=2, n_embd=32, n_head=4, block_size=16))
for site, m in list(masks.arrays.items())[:4]:
    print(f"{site:22} shape {m.shape}: dropped {(m == 0).mean():.3f}, kept as {m.max():.4f} (1/0.7 = {1 / 0.7:.4f})")
assert all(abs((m == 0).mean() - 0.3) < 0.02 for m in masks.arrays.values())

w = [Value(2.0)]
adam = Adam(w, weight_decay=0.5)
for lr in (0.01, 0.01, 0.01):
    w[0].grad = 0.0  # no gradient: only the decay acts
    adam.step(lr)
print(f"\na weight of 2.0 after three steps of decay alone: {w[0].data:.10f} = 2 * (1 - 0.01 * 0.5)^3 "
      f"= {2 * (1 - 0.005) ** 3:.10f}; its m is still {adam.m[0]}")
assert abs(w[0].data - 2 * 0.995 ** 3) < 1e-15 and adam.m[0] == 0.0

# %% [markdown]
# ## Your turn: exercises 21 and 22
#
# The decoupled weight-decay step, written beside your Adam of exercise 15 (checked against
# microgpt's `Adam(weight_decay=...)`, the closed form of decay alone, and a plain Adam's moments),
# then inverted dropout's forward and backward on arrays (checked against `src/backprop/layers.py`
# and central differences). The cell writes the stubs once into your exercises folder and checks
# these in order, stopping at the first not passed.

# %%
from microgpt.lab.notebook import check_exercises

LESSON_EXERCISES = (21, 22)
check_exercises(LESSON_EXERCISES)  # the stubs written once into exercises/, then checked in order
