# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 2. The GPT, one position at a time
#
# `gpt()` in `microgpt/model.py` (the reading guide's file 6) takes ONE token and its position and
# returns vocab_size logits, scores for the next token. It never sees the earlier tokens
# themselves, only their keys and values, which earlier calls left in the KV cache: the model is
# causal because the future has not been computed yet. The numpy port (`src/inference/model.py`,
# file 14) computes every position of a sequence in one call and hands back each intermediate
# array, its captures; the two agree to 1e-10.
#
# This notebook trains `make run`'s model (in a second, with the numpy engine, which gives the
# scalar engine's losses), feeds it `anna` position by position, watches the cache grow and the
# logits of each position, and lays the port's captures beside them. It ends with the exercises 8,
# 9, 11, 13 and 14. Run it top to bottom: it needs nothing prepared. Its source is
# `notebooks/02_gpt_one_position.py` ([docs/notebooks.md](../docs/notebooks.md)).

# %%
import pathlib
import subprocess
import sys

import numpy as np

from microgpt.inference import NumpyGPT
from microgpt.inference.model import CAPTURE_NAMES
from microgpt.lab import attention, overview
from microgpt.lab.loading import load
from microgpt.lab.notebook import show, work_folder
from microgpt.lab.render import token_label
from microgpt.programs.taps import Recorder
from microgpt.sampling import probabilities
from microgpt.training import doc_loss, doc_tokens

# the checkpoint and the pictures, in a folder removed when the kernel stops
WORK_DIR = work_folder()
WORK = pathlib.Path(WORK_DIR.name)


# %% [markdown]
# ## A trained model
#
# `train.py` with its defaults (1000 steps, one name each, the bundled census names), on the numpy
# engine: the same losses as `make run`'s scalar engine, in about a second instead of twelve. The
# validation losses printed are README's.

# %%
CKPT = WORK / 'model.json'
run = subprocess.run([sys.executable, '-m', 'microgpt.train', '--engine', 'numpy', '--threads', '1',
                      '--out', str(CKPT), '--num-samples', '0'], capture_output=True, text=True)
assert run.returncode == 0, run.stderr
print(run.stdout)
assert 'step 200: val loss 2.4116' in run.stdout and 'step 1000: val loss 2.2452' in run.stdout

# %% [markdown]
# ## Position by position: the KV cache grows
#
# The lesson's own model: every weight a `Value` (`load(..., 'scalar')`). A name is read as
# `[BOS] + name`, and at each position `gpt()` appends this position's key and value to the cache,
# then scores only the keys already there: at position i, i + 1 of them. A `Recorder`
# (`microgpt/programs/taps.py`) stands in for `gpt()`'s building blocks and keeps each position's
# intermediates by name; `gpt()` itself records nothing.

# %%
ckpt, model = load(str(CKPT), 'scalar')
config, tokenizer = model.config, model.tokenizer
tokens = doc_tokens(tokenizer, 'anna')  # [BOS, a, n, n, a, BOS]: the model reads all but the last
labels = [token_label(tokenizer, t) for t in tokens]
print(config)

keys, values = model.empty_cache()  # one list per layer, empty: no position seen yet
model.blocks = recorder = Recorder(model)  # every block call passes through it to the real one
scalar_logits, scalar_weights = [], []
for pos_id, token_id in enumerate(tokens[:-1]):
    logits = model.gpt(token_id, pos_id, keys, values)  # vocab_size Values
    capture = recorder.captures[pos_id]  # this position's intermediates, by name
    scalar_logits.append([l.data for l in logits])
    scalar_weights.append([[w.data for w in head] for head in capture['layer0.attn_weights']])
    probs = probabilities(scalar_logits[-1], 1.0)  # softmax, temperature 1
    top = sorted(range(config.vocab_size), key=lambda i: -probs[i])[:3]
    print(f"pos {pos_id} reads {labels[pos_id]:<5}  cache: {len(keys[0])} keys of {len(keys[0][0])}"
          f"  head 0 weights {np.round(scalar_weights[-1][0], 3)}")
    print("      next: " + ', '.join(f"{token_label(tokenizer, i)} logit {scalar_logits[-1][i]:+.3f} p {probs[i]:.3f}"
                               for i in top) + f"   (true: {labels[pos_id + 1]})")
assert [len(w[0]) for w in scalar_weights] == [1, 2, 3, 4, 5]  # position i scores keys 0..i
assert scalar_weights[0][0] == [1.0]  # position 0 sees only itself: weight exactly 1
model.blocks = recorder.blocks  # the real blocks again

# %% [markdown]
# ## The numpy port: every position at once, with its captures
#
# `NumpyGPT.forward(token_ids, capture='all')` computes the same five positions as one matrix
# operation per step, attention looping over the query positions with the slice `:i + 1` as the
# mask. Its captures are arrays: `attention_softmax` is (n_layer, n_head, T, T), NaN where j > i.

# %%
port = NumpyGPT.from_scalar(model)
port_logits, caps = port.forward(tokens[:-1], capture='all')  # (T, vocab_size), {name: array}
for name in CAPTURE_NAMES:
    print(f"{name:<18} {caps[name].shape}")
difference = np.abs(port_logits - np.array(scalar_logits)).max()
print(f"largest difference of a logit, port against gpt(): {difference:.1e}")
assert difference < 1e-10

# %% [markdown]
# Side by side, head by head: the weights each `gpt()` call computed, and the port's rows of
# `attention_softmax` (· = masked, the future that the call never saw).

# %%
for h in range(config.n_head):
    print(f"head {h}")
    for i in range(len(tokens) - 1):
        row = caps['attention_softmax'][0, h, i]  # (T,)
        port_row = ' '.join('    · ' if np.isnan(x) else f'{x:.3f} ' for x in row)
        print(f"  pos {i} {labels[i]:<5}  gpt(): {' '.join(f'{x:.3f}' for x in scalar_weights[i][h]):<30}"
              f"  port: {port_row}")
        assert np.allclose(row[:i + 1], scalar_weights[i][h], atol=1e-12) and np.isnan(row[i + 1:]).all()

# %% [markdown]
# Causal means what a position computes does not depend on what comes after it: change the last
# letter, and every earlier row of logits stays the same.

# %%
other_logits, _ = port.forward(doc_tokens(tokenizer, 'anne')[:-1])  # (T, vocab_size)
print("rows equal to anna's:", [bool(np.allclose(other_logits[i], port_logits[i], rtol=0, atol=1e-12))
                               for i in range(len(tokens) - 1)])
assert np.allclose(other_logits[:-1], port_logits[:-1], rtol=0, atol=1e-12)
assert not np.allclose(other_logits[-1], port_logits[-1])

# %% [markdown]
# ## In pictures: the lab's attention and overview sandboxes
#
# `python -m microgpt.lab attention anna --query 3 --png heads.png` and `overview anna --png`: every
# head's weights, the masked future blank; then the next-character probabilities at each position,
# the true one in orange. The mean of −ln p(true next) over the positions is the name's loss, the
# number `training.doc_loss` computes on Values for training.

# %%
view = attention.compute(port, 'anna', head=0, query=3, ckpt=ckpt)
show(attention, view, WORK / 'heads.png', "make run's model")
bars = overview.compute(port, 'anna', ckpt=ckpt)
show(overview, bars, WORK / 'bars.png', "make run's model")
loss = doc_loss(model, tokens).data
print(f"mean loss of anna: {bars['mean_loss']:.4f} (port), {loss:.4f} (gpt() on Values); "
      f"guessing uniformly: ln {config.vocab_size} = {bars['uniform_loss']:.4f}")
assert abs(bars['mean_loss'] - loss) < 1e-10 and loss < bars['uniform_loss']

# %% [markdown]
# ## Your turn: exercises 8, 9 and 11
#
# The GPT's pieces on Values: `dot`, `linear` (w stored [n_out][n_in]) and `rmsnorm`. Softmax and
# one attention head (exercises 10 and 12) belong to the next notebook, attention by hand; `gpt()`
# itself and the loss of a name (13 and 14) call them, so they come after it. The cell writes the
# stubs once into your exercises folder and checks these in order, stopping at the first one not
# passed. From a terminal: `python -m microgpt.lab exercises check 8`.

# %%
from microgpt.lab.notebook import check_exercises

LESSON_EXERCISES = (8, 9, 11)
check_exercises(LESSON_EXERCISES)  # the stubs written once into exercises/, then checked in order
