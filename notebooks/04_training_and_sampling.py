# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 4. Training and sampling
#
# The loss of a name is the mean of −ln p(true next) over its positions (`microgpt/training.py`,
# file 7 of the reading order); one step takes its gradient with `backward()` and moves every weight
# with Adam (`microgpt/optim.py`, file 8); `train.py` repeats that a thousand times. Sampling feeds
# the model its own draws, softmax(logits / T) at a temperature T (`microgpt/sampling.py`, file 9).
#
# This notebook trains `make run`'s model and draws its curve, samples names at several
# temperatures, then takes one step of learning on `anna` with every number shown (lesson 04,
# `python -m microgpt.lab step anna`). It ends with the exercises 15, 16, 18 and 20. Run it top to
# bottom: it needs nothing prepared. Its source is `notebooks/04_training_and_sampling.py`
# ([docs/notebooks.md](../docs/notebooks.md)).

# %%
import pathlib
import subprocess
import sys

from microgpt.lab import loss, sampling, step
from microgpt.lab.loading import load
from microgpt.lab.notebook import show, work_folder
from microgpt.sampling import sample_names

# the checkpoint, its log and the pictures, in a folder removed when the kernel stops
WORK_DIR = work_folder()
WORK = pathlib.Path(WORK_DIR.name)


# %% [markdown]
# ## A run and its curve
#
# `train.py` with its defaults: 1000 steps of one name each, a learning rate of 0.01 decaying
# linearly to 0, a validation loss on 516 held-out names every 200 steps. `--engine numpy` computes
# every step with hand-derived backwards on arrays and gives the scalar engine's losses
# (`tests/test_backprop_trainer.py` holds them to 1e-9) in about a second, where `make run`'s scalar
# engine takes twelve: the validation losses are README's, 2.4116 at step 200 and 2.2452 at step
# 1000. A uniform guess over the 27 tokens scores ln 27 = 3.30, about where step 1 starts.

# %%
CKPT = WORK / 'model.json'
run = subprocess.run([sys.executable, '-m', 'microgpt.train', '--engine', 'numpy', '--threads', '1',
                      '--out', str(CKPT), '--num-samples', '0'], capture_output=True, text=True)
assert run.returncode == 0, run.stderr
print(run.stdout)

# %% [markdown]
# The log train.py writes beside the checkpoint (one JSON line per step, one per evaluation), as
# `python -m microgpt.lab loss out/model.log.jsonl` reads it and `--png` draws it:

# %%
curves = loss.compute([str(WORK / 'model.log.jsonl')])
print(loss.render(curves))
show(loss, curves, WORK / 'loss.png', "train.py's defaults, --engine numpy")
val = {s: v for s, v, _ in curves['runs'][0]['val']}
assert round(val[200], 4) == 2.4116 and round(val[1000], 4) == 2.2452

# %% [markdown]
# ## Names at several temperatures
#
# `python -m microgpt.lab sampling`: the first character's distribution at T = 0, 0.5, 1 and 2, and
# names drawn at each (`*` marks a name of the training data). T = 0 is greedy, the same name every
# time; T = 2 flattens the distribution into unreadable strings; top-k cuts the tail away.
# `sample.py`'s default is T = 0.5, seed 42: the names README shows after `make run`.

# %%
ckpt, port = load(str(CKPT))  # the numpy port: the same names as the scalar GPT, faster
print(sampling.render(sampling.compute(port, ckpt=ckpt)))
names = sample_names(port, num=20, temperature=0.5, seed=42)
print("\nsample.py --num 20:", ', '.join(names))
assert names[:3] == ['marere', 'cegera', 'marita']

# %% [markdown]
# ## One step of learning, made visible
#
# Lesson 04 (the reading guide's section 5): the step train.py takes a thousand times, once, on
# `anna`, with every number printed: the loss at each position, the gradient at the top
# (p − one_hot(true next)) / n, its norm on the way back through the block, Adam's first step on
# one weight (almost exactly lr, whatever the gradient's size), and p(true next) before and after.
# It runs on the lesson's own engine, Values and `backward()`; the checkpoint file is not changed.

# %%
_, model = load(str(CKPT), 'scalar')
taken = step.compute(model, 'anna', ckpt=ckpt)
print(step.render(taken))
show(step, taken, WORK / 'step.png', "make run's model")
census = taken['without_grad']
print(f"\nweights without a gradient: {census['zeros']:,} of {taken['n_params']:,}")
# the lab's figures for `lab step anna` on the default model (docs/lab.md)
assert (census['zeros'], taken['n_params'], sum(census['unused_rows'].values())) == (1552, 4192, 560)
assert taken['loss_after'] < taken['loss_before']

# %% [markdown]
# ## Your turn: exercises 15, 16, 18 and 20
#
# Adam's update with its bias correction (checked against the closed form of its first step),
# temperature (`probabilities`, greedy at 0), then two backwards by hand on the numpy rung: a linear
# layer's and one attention head's (which uses your masked attention and softmax backward, 17 and
# 19, from the attention notebook). With 1 to 16 written, `python -m microgpt.lab exercises train`
# in a terminal trains microgpt with your engine beside its own, loss for loss. The cell writes the
# stubs once into your exercises folder and checks these in order, stopping at the first not
# passed.

# %%
from microgpt.lab.notebook import check_exercises

LESSON_EXERCISES = (15, 16, 18, 20)
check_exercises(LESSON_EXERCISES)  # the stubs written once into exercises/, then checked in order
