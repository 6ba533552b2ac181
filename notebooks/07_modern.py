# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 7. From microgpt to a modern GPT
#
# microgpt's model is GPT-2's skeleton. The models you read about next change six things in it:
# RoPE, GELU and SwiGLU, norm gains with a final norm, QK-norm, grouped-query attention and tied
# embeddings. Each is a flag of `train.py`, off by default, and a few lines in every engine. The
# lesson is [docs/modern.md](../docs/modern.md); the reading guide's section 15 lists the code.
#
# This notebook draws two of the rungs from the project's own functions: RoPE's score against the
# distance between two positions, and the KV cache with and without grouped heads. Then it trains
# a small names model with each rung alone. It ends with exercises 26 to 28. Its source is
# `notebooks/07_modern.py` ([docs/notebooks.md](../docs/notebooks.md)).

# %%
import pathlib
import random
import subprocess
import sys

import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Image, display

from microgpt.edge.checkpoint import read_checkpoint
from microgpt.edge.limits import parameter_count
from microgpt.inference.model import KVCache, NumpyGPT
from microgpt.model import GPTConfig, parameter_shapes, rotate
from microgpt.lab.notebook import work_folder

# the checkpoints and their logs, in a folder removed when the kernel stops
WORK_DIR = work_folder()
WORK = pathlib.Path(WORK_DIR.name)


def draw(fig, name):  # a figure shown from its PNG file, whatever matplotlib's backend (the lab's is Agg)
    fig.savefig(WORK / name, dpi=100, bbox_inches='tight')
    plt.close(fig)
    display(Image(filename=str(WORK / name)))

# %% [markdown]
# ## RoPE: the score sees only the distance
#
# `rotate(x, pos)` in `microgpt/model.py` turns pair m of a head's numbers by
# pos × 10000^(−2m/head_dim) radians. Take one query q and one key k, head_dim 16 as in the names
# recipe. Turn q to position i and k to position j, and score them as attention does:
# q · k / √16. Start the key at 0, 8 or 24: the curve is the same. The score sees i − j alone.
# With `wpe` it would not, since the same two tokens at other places are other vectors.

# %%
D = 16
rng = random.Random(0)
q, k = [rng.gauss(0, 1) for _ in range(D)], [rng.gauss(0, 1) for _ in range(D)]


def score(i, j):  # query at position i, key at position j
    return sum(a * b for a, b in zip(rotate(q, i), rotate(k, j))) / D ** 0.5


distances = range(32)
fig, ax = plt.subplots(figsize=(6, 3))
for start, style in ((0, '-o'), (8, 'x'), (24, '+')):  # marks on marks: the three curves are one
    ax.plot(distances, [score(start + d, start) for d in distances], style, ms=7, label=f"key at {start}")
ax.set_xlabel("distance i − j"); ax.set_ylabel("q · k / √16")
ax.legend(loc='upper left', bbox_to_anchor=(1, 1)); ax.set_title("RoPE: one q and one k, turned to their positions")
draw(fig, 'rope.png')

scores = {(i, j): score(i, j) for i in range(56) for j in range(i + 1)}
assert all(abs(s - scores[i - j, 0]) < 1e-12 for (i, j), s in scores.items())  # a function of i - j
assert max(scores[d, 0] for d in distances) - min(scores[d, 0] for d in distances) > 1  # and it does vary
print(f"{len(scores)} pairs (i, j), j <= i < 56: each score equals the one at (i − j, 0) to 1e-12")

# %% [markdown]
# ## The KV cache, with and without grouped heads
#
# While it generates, the model keeps every earlier position's keys and values, layer by layer.
# That is 2 × n_kv_head × head_dim numbers per position per layer. With `--n-kv-head 2`, two query
# heads read each kv head, and the cache halves. With 1 (multi-query), it is n_head times smaller.
# Here are README's two recipe sizes. Each size is counted by the formula, then measured in the
# numpy port's `KVCache` after generating a whole block, one token a call. The weights are random:
# the sizes do not depend on training.

# %%
RECIPES = {'names': dict(vocab_size=27, n_layer=4, n_embd=64, n_head=4, block_size=16),
           'shakespeare': dict(vocab_size=65, n_layer=4, n_embd=128, n_head=4, block_size=64)}


def cache_after_generating(config):
    """The numbers the KVCache holds after a greedy generation of a whole block, one token a call."""
    rng = np.random.default_rng(0)
    model = NumpyGPT(config, {name: rng.normal(0, 0.08, shape) for name, shape in parameter_shapes(config).items()})
    cache, token = KVCache(config.n_layer, config.block_size), 0  # any first token: the weights are random
    for _ in range(config.block_size):
        token = int(model.forward_batch([[token]], cache)[0, -1].argmax())
    return sum(keys[:, :, :cache.length].size + values[:, :, :cache.length].size  # (1, n_kv_head, T, D) each
               for keys, values in zip(cache.keys, cache.values))


sizes = {}
for name, fields in RECIPES.items():
    for n_kv_head in (4, 2, 1):
        held = cache_after_generating(GPTConfig(**fields, n_kv_head=n_kv_head))
        sizes[name, n_kv_head] = held / (fields['n_layer'] * fields['block_size'])  # per position per layer
        assert sizes[name, n_kv_head] == 2 * n_kv_head * (fields['n_embd'] // fields['n_head'])  # the formula
        print(f"{name:12} n_kv_head {n_kv_head}: {sizes[name, n_kv_head]:4.0f} numbers per position per layer, "
              f"{held:6,} for the whole block")
    assert sizes[name, 4] == 2 * sizes[name, 2] == 4 * sizes[name, 1]  # n_head / n_kv_head times smaller

fig, ax = plt.subplots(figsize=(6, 2.8))
for offset, name in ((-0.2, 'names'), (0.2, 'shakespeare')):
    ax.bar([x + offset for x in range(3)], [sizes[name, n] for n in (4, 2, 1)], width=0.4, label=name)
ax.set_xticks(range(3), ["4 (microgpt)", "2", "1 (multi-query)"]); ax.set_xlabel("n_kv_head, of n_head 4")
ax.set_ylabel("numbers per position\nper layer"); ax.legend(); ax.set_title("the KV cache, measured")
draw(fig, 'kv_cache.png')

# %% [markdown]
# ## Each rung alone, on a small names model
#
# The same small model (1 layer of 32, 4 heads, batch 16, lr 0.02, 150 steps) eight times, side
# by side: microgpt's architecture, then each rung alone. `--engine numpy --threads 1` computes in
# float64 on one thread, so the numbers are the code's, the same on every machine. This short and
# this small, the losses differ by little more than noise. The parameters are exact. RoPE drops
# `wpe`, and tied embeddings `lm_head`. Two kv heads halve `attn_wk` and `attn_wv`. SwiGLU's three
# matrices of 85 × 32 hold 32 numbers fewer than ReLU's two of 128 × 32. Norm gains add four rows
# of 32. The real measurement is `python bench/modern.py`, at the settings of README's two recipes
# and their full length; docs/modern.md quotes it.

# %%
RUNGS = {'microgpt': [], 'rope': ['--rope'], 'gelu': ['--mlp', 'gelu'], 'swiglu': ['--mlp', 'swiglu'],
         'norm-gains': ['--norm-gains'], 'qk-norm': ['--qk-norm'], 'n-kv-head-2': ['--n-kv-head', '2'],
         'tied': ['--tie-embeddings']}
runs = {label: subprocess.Popen(  # the eight side by side, a thread each
    [sys.executable, '-m', 'microgpt.train', '--engine', 'numpy', '--threads', '1', '--n-layer', '1',
     '--n-embd', '32', '--batch-size', '16', '--lr', '0.02', '--steps', '150', '--eval-every', '150',
     '--save-every', '0', '--num-samples', '0', '--out', str(WORK / f'{label}.json'), *flags],
    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for label, flags in RUNGS.items()}
results = {}
for label, run in runs.items():
    assert run.wait() == 0, run.stderr.read()
    ckpt = read_checkpoint(str(WORK / f'{label}.json'))  # its last validation loss, its architecture
    results[label] = ckpt.train_state.val_loss, parameter_count(ckpt.config)

base_loss, base_params = results['microgpt']
added = {label: params - base_params for label, (_, params) in results.items()}
for label, (val, params) in results.items():
    print(f"{label:12} validation {val:.4f}, {params:6,} parameters ({added[label]:+,})")
assert added['rope'] == -16 * 32 and added['tied'] == -27 * 32       # wpe, lm_head: gone
assert added['n-kv-head-2'] == -2 * 16 * 32                          # half of attn_wk and attn_wv
assert added['swiglu'] == 3 * 85 * 32 - 2 * 128 * 32 and added['norm-gains'] == 4 * 32
assert added['gelu'] == added['qk-norm'] == 0                        # no matrix added
assert all(abs(val - base_loss) < 0.1 for val, _ in results.values())  # this short, all about alike

# %% [markdown]
# ## Your turn: exercises 26, 27 and 28
#
# RoPE's turn on Values (`rotate`, checked against `microgpt/model.py`'s and each pair as a complex
# number times e^(iθ)). Its backward on arrays, the turn back by −θ (checked against
# `src/backprop/layers.py` and central differences). Grouped-query attention: query heads in groups,
# each reading one kv head (checked against `gpt()`'s head loop and the numpy port's heads). The
# cell writes the stubs once into your exercises folder and checks these in order, stopping at the
# first not passed.

# %%
from microgpt.lab.notebook import check_exercises

LESSON_EXERCISES = (26, 27, 28)
check_exercises(LESSON_EXERCISES)  # the stubs written once into exercises/, then checked in order
