# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 3. Attention by hand, and where √d comes from
#
# One head of attention, worked by hand. Three tokens of "kočka spí venku", head_dim 4: every
# score, weight and output written out. Then why the scores are divided by √head_dim, measured.
# The lab computes all of it (`python -m microgpt.lab byhand`, `python -m microgpt.lab scaling`),
# and this notebook calls the same functions: the worked example step by step, three questions
# on it, the variance table, one row with and without the scaling, and what attention costs. It
# ends with exercises 10, 12, 13, 14, 17 and 19. No model is needed: the vectors are written
# down. Run it top to bottom. Its source is `notebooks/03_attention_by_hand.py`
# ([docs/notebooks.md](../docs/notebooks.md)); [docs/lessons.md](../docs/lessons.md) credits the
# texts these examples come from.

# %%
import pathlib

import numpy as np

from microgpt import inference
from microgpt.lab import byhand, scaling
from microgpt.lab.example import KEYS, OUT3, Q3, VALUES, WEIGHTS_X10
from microgpt.lab.notebook import show, work_folder
from microgpt.lab.rowstats import softmax
from microgpt.lab.render import table

# the pictures, in a folder removed when the kernel stops
WORK_DIR = work_folder()
WORK = pathlib.Path(WORK_DIR.name)


# %% [markdown]
# ## The worked example: token 3 attends to tokens 1 to 3
#
# `byhand.compute()` with no vectors given takes the worked example's: q₃ = [0.9, 0.8, 0.2, 0.1]
# against the keys of the three tokens, divided by √4 = 2, a softmax, then the weighted sum of the values.
# The printout is the lab's (`python -m microgpt.lab byhand`), step by step; its section 6 is the
# table of shapes at d_model 4096, 32 heads and 1,024 tokens.

# %%
worked = byhand.compute()  # the worked example's vectors, query = token 3
print(byhand.render(worked))
h = worked['head']
assert np.allclose(h['raw'], [0.97, 0.89, 1.46])           # q3 . k_j, the raw scores
assert np.allclose(h['scores'], [0.485, 0.445, 0.730])     # divided by sqrt(4)
assert np.round(h['weights'], 3).tolist() == [0.309, 0.297, 0.395]
assert abs(h['weights'][2] - 0.394521) < 1e-6              # 0.394 when truncated, 0.395 rounded
assert np.allclose(h['out'], OUT3, atol=5e-4)         # out3 = [0.309, 0.356, 0.444, 0.189]

# %% [markdown]
# The model computes the same with the numpy port's own `attention_head`, the function its
# `forward()` calls for every head and position:

# %%
out3, scores3, weights3 = inference.attention_head(Q3, KEYS, VALUES)
print("scores", np.round(scores3, 4), "weights", np.round(weights3, 4), "out3", np.round(out3, 4))
assert np.allclose(weights3, h['weights'], rtol=0, atol=1e-15) and np.allclose(out3, h['out'], rtol=0, atol=1e-15)

# %% [markdown]
# ## Three questions on it
#
# **1.** *Compute out₁, the output of the first token. Why is it exactly v₁?* The causal mask
# leaves token 1 one key, its own: weight 1, so out₁ = v₁.

# %%
first = byhand.compute(query=1)
print(f"weights {first['head']['weights']}, masked: tokens {[j + 1 for j in first['masked']]}, "
      f"out1 = {first['head']['out']}, v1 = {VALUES[0]}")
assert first['head']['weights'].tolist() == [1.0] and first['head']['out'].tolist() == VALUES[0]

# %% [markdown]
# **2.** *Multiply every score by ten, as if √d were missing: how far does the weakest weight
# fall?* From 0.297 to 0.051, about six times, and token 3 takes 0.874: the softmax saturates.
# (`scale=False` drops only the factor √head_dim, 2 here; ×10 is the stronger case.)

# %%
tenfold = softmax(h['raw'] / 2 * 10)  # (3,): the scores times ten
unscaled = byhand.compute(scale=False)['head']['weights']
print(f"scores x 10: {np.round(tenfold, 3)}   without sqrt(d): {np.round(unscaled, 3)}   "
      f"the weakest weight falls {h['weights'][1] / tenfold[1]:.1f} times")
assert np.round(tenfold, 3).tolist() == WEIGHTS_X10  # [0.075, 0.051, 0.874]
assert round(h['weights'][1] / tenfold[1], 1) == 5.9

# %% [markdown]
# **3.** *d_model = 4096, 32 heads: how many numbers are in one layer's score matrix for 1,024
# tokens, and how many bytes in fp16?* 32 × 1024 × 1024: head_dim and d_model do not appear. At the
# "2 billion" of 8,192 tokens, FlashAttention's reason for never building it.

# %%
for T in (1024, 8192):
    numbers, size = scaling.score_matrix_size(32, T)
    print(f"T = {T:>5}: {numbers:,} numbers, {size / 2 ** 20:,.0f} MiB in fp16")
assert scaling.score_matrix_size(32, 1024) == (33_554_432, 64 * 2 ** 20)
assert scaling.score_matrix_size(32, 8192)[0] == 2_147_483_648

# %% [markdown]
# A saturated softmax: of the scores [10, 2, 1] the first takes e¹⁰ / (e¹⁰ + e² + e¹) = 0.999541 of
# the weight. The other two keys are all but silent.

# %%
saturated = softmax(np.array([10.0, 2.0, 1.0]))
print(np.round(saturated, 4))
assert np.round(saturated, 4).tolist() == [0.9995, 0.0003, 0.0001]

# %% [markdown]
# ## Where √d comes from: Var(q·k) = d
#
# For q and k with d independent components of mean 0 and variance 1, q·k is a sum of d products
# of variance 1: its variance is d, its spread √d. Divided by √d, the scores keep unit spread
# whatever the head size. `scaling.compute()` is the lab's whole printout (50,000 dot products per
# d, seed 42: `python -m microgpt.lab scaling`, section 1). Each measurement comes with its
# standard error.

# %%
numbers = scaling.compute()  # every section of `lab scaling`, with its defaults
print(table(('d', 'measured Var(q.k)', 'std. error', 'sd'),
            [(r['d'], f"{r['var']:.2f}", f"± {r['se']:.2f}", f"{r['sd']:.2f}") for r in numbers['variance']]))
for r in numbers['variance']:
    assert abs(r['var'] - r['d']) < 4 * r['se']  # Var = d, within four standard errors

# %% [markdown]
# ## One row of eight keys at d = 64, without and with the scaling
#
# Three numbers say how peaked a row of weights is: its entropy (3 bits for a uniform row of
# eight), its largest weight, and its gradient scale (how far the weights move when the scores
# change). One draw can be lucky, so the lab prints a fixed-seed draw and the median over 2,000.
# Unscaled, the median row has collapsed onto one key before any training.

# %%
print("entropy in bits, max weight, gradient scale:")
for label in scaling.LABELS:
    ours = numbers['row'][label]['median']
    print(f"  {label:<15}  median of {numbers['draws']:,} draws: {ours['entropy']:.3f} bits, "
          f"max {ours['max_weight']:.3f}, gradient scale {ours['gradient_scale']:.3f}")
unscaled, scaled = (numbers['row'][label]['median'] for label in scaling.LABELS)
assert unscaled['max_weight'] > 0.9 and unscaled['entropy'] < 0.5  # collapsed onto one key
assert scaled['max_weight'] < 0.5 and scaled['entropy'] > 2         # spread over several

# %% [markdown]
# ## What attention costs
#
# Per layer, the projections Q, K, V, O take 4 n D² multiply-adds and attention's two contractions
# 2 n² D: the ratio is n / (2D). At GPT-2 small's D = 768 it is 0.08, 0.67 and 5.3 for 128, 1,024
# and 8,192 tokens: attention only outweighs the projections past n = 2D = 1,536 tokens.

# %%
for r in numbers['cost']:
    print(f"n = {r['n']:>5}: attention / projections = {r['ratio']:.4g}")
    assert r['ratio'] == r['n'] / (2 * 768)

# %% [markdown]
# ## In pictures: the lab's Scaling panels
#
# Var(q·k)/d, one random row without and with 1/√d, the median max
# weight and gradient scale as d grows, and the cost ratio: the picture of
# `python -m microgpt.lab scaling --draws 500 --png scaling.png`, its medians over 500 random rows
# to keep this cell quick (the printout above took 2,000).

# %%
show(scaling, {**numbers, 'draws': 500}, WORK / 'scaling.png', 'lab scaling')

# %% [markdown]
# ## Your turn: exercises 10, 12, 13, 14, 17 and 19
#
# `softmax` with the max subtracted (checked on the worked example's 0.309, 0.297, 0.395), one head
# of attention over the KV cache (its out₃, and out₁ = v₁); with them and the previous
# notebook's pieces, `gpt()` itself, one position over the KV cache, and the loss of a name;
# then the same head over a whole
# sequence with the mask before the softmax (numpy), and the softmax's backward (the gradient that
# vanishes once a row saturates). The cell writes the stubs once into your exercises folder and
# checks these in order, stopping at the first not passed. Questions on these examples are
# `python -m microgpt.lab exercises quiz` in a terminal (it asks and waits for your answers).

# %%
from microgpt.lab.notebook import check_exercises

LESSON_EXERCISES = (10, 12, 13, 14, 17, 19)
check_exercises(LESSON_EXERCISES)  # the stubs written once into exercises/, then checked in order
