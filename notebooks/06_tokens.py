# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 6. Tokens: what the model sees
#
# The model never reads text: it reads ids, one row of `wte` each, and predicts the next id. Which
# piece of text an id stands for is the tokenizer's choice. `microgpt/tokenizer.py` gives every
# character its own id; `microgpt/bpe.py` starts from the 256 bytes and learns merges, the most
# frequent adjacent pair becoming a new token, again and again. The reading guide's section 14
# walks through it ([reading-guide.md](../docs/reading-guide.md)); `docs/lessons.md` has its
# numbers.
#
# This notebook replays the Wikipedia example by hand and with `bpe.py`, round-trips text the
# tokenizer never saw, trains a byte-pair names model and a character one side by side and
# compares them in bits per character, and cuts a name with the lab's Tokens sandbox. It ends
# with exercises 23 to 25. Its source is `notebooks/06_tokens.py`
# ([docs/notebooks.md](../docs/notebooks.md)).

# %%
import json
import pathlib
import subprocess
import sys

from microgpt.bpe import BPETokenizer, learn_merges
from microgpt.lab import loss, tokens
from microgpt.lab.loading import load
from microgpt.lab.notebook import show, work_folder

# the checkpoints and their logs, in a folder removed when the kernel stops
WORK_DIR = work_folder()
WORK = pathlib.Path(WORK_DIR.name)

# %% [markdown]
# ## The Wikipedia example, merge by merge
#
# `aaabdaaabac`: the most frequent adjacent pair is `aa`, so it becomes a new token, Z = 256
# (`ZabdZabac`); then `ab` (tied with `Za`: the smaller pair wins) becomes Y = 257 (`ZYdZYac`),
# and `ZY` becomes X = 258. Eleven bytes, five tokens: `XdXac`.

# %%
text = 'aaabdaaabac'
merges = learn_merges([text], 3)
tok = BPETokenizer(merges)
for k, (a, b) in enumerate(merges):
    print(f"merge {k}: {tok.vocab[a]!r} + {tok.vocab[b]!r} -> id {256 + k} = {tok.vocab[256 + k]!r}")
ids = tok.encode(text)
letters = {258: 'X', 257: 'Y', 256: 'Z'}
print(ids, '=', ''.join(letters.get(i, chr(i)) for i in ids))
assert merges == [(97, 97), (97, 98), (256, 257)] and ids == [258, 100, 258, 97, 99]  # XdXac

# %% [markdown]
# ## Nothing is unknown
#
# The base tokens are bytes, so any text encodes, even characters the merges never saw: an
# emoji, a Czech letter, a line end. Each becomes its UTF-8 bytes, and decoding joins them back.

# %%
for sample in ['aaab', 'Příliš žluťoučký kůň', 'a 🙂\r\nb', '']:
    ids = tok.encode(sample)
    assert tok.decode(ids) == sample
    print(f"{sample!r}: {len(sample)} characters, {len(ids)} tokens, round trip exact")

# %% [markdown]
# ## Two names models, compared fairly
#
# The same model (1 layer of 32, batch 8, 600 steps) on the bundled census names, once on
# characters and once on 320 byte-pair tokens (256 bytes, 63 merges learned from the training
# names, and BOS). Cross-entropy per token cannot compare them: a byte-pair token holds more text
# than a character, so it is harder to guess. Bits per character can: loss × predicted tokens ÷
# the characters they cover ÷ ln 2, which `train.py` logs at every evaluation as `val_bpc`, and
# `python -m microgpt.lab loss A.log.jsonl B.log.jsonl --unit bits` draws.

# %%
def train(name, flags):
    out = WORK / f'{name}.json'
    run = subprocess.run([sys.executable, '-m', 'microgpt.train', '--engine', 'numpy', '--threads', '1',
                          '--n-layer', '1', '--n-embd', '32', '--batch-size', '8', '--lr', '0.01',
                          '--steps', '600', '--eval-every', '200', '--save-every', '0', '--num-samples', '0',
                          '--out', str(out), *flags], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    last = [json.loads(line) for line in out.with_suffix('.log.jsonl').read_text().splitlines()][-1]
    print(f"{name}: validation {last['val_loss']:.4f} nats a token, {last['val_bpc']:.4f} bits a character")
    return out, last


char_ckpt, char_last = train('characters', [])
bpe_ckpt, bpe_last = train('byte_pairs', ['--tokenizer', 'bpe', '--vocab-size', '320'])
# on characters, bits per character are exactly the loss over ln 2
assert abs(char_last['val_bpc'] - char_last['val_loss'] / 0.6931471805599453) < 1e-9
assert bpe_last['val_loss'] > char_last['val_loss']  # a byte-pair token is harder to guess

curves = loss.compute([str(ckpt.with_suffix('.log.jsonl')) for ckpt in (char_ckpt, bpe_ckpt)], unit='bits')
show(loss, curves, WORK / 'bits.png', "bundled names: characters against 320 byte-pair tokens, in bits per character")

# %% [markdown]
# ## A name, as each model reads it
#
# `python -m microgpt.lab tokens TEXT --ckpt ...`: each token with its id and bytes, the first
# merges of the table in the order learned, and the ids as the model is fed them (a name after
# BOS). The character model reads `christopher` in 11 tokens; the byte-pair one in fewer, with
# common letter pairs merged.

# %%
answers = {}
for name, ckpt in (('characters', char_ckpt), ('byte pairs', bpe_ckpt)):
    loaded, port = load(str(ckpt))
    answers[name] = tokens.compute(port, 'christopher', merges=8, ckpt=loaded)
    print(f"--- {name}\n{tokens.render(answers[name])}\n")
assert len(answers['characters']['tokens']) == 11
assert len(answers['byte pairs']['tokens']) < 11

# %% [markdown]
# ## Your turn: exercises 23, 24 and 25
#
# Count the adjacent pairs (`get_stats`), do one merge (`merge`), then encode with a learned merge
# table (`encode`, which uses your 23 and 24), each checked against `microgpt/bpe.py` and a slow
# oracle written in the checker, the Wikipedia example among the fixed cases. The cell writes the
# stubs once into your exercises folder and checks these in order, stopping at the first not
# passed.

# %%
from microgpt.lab.notebook import check_exercises

LESSON_EXERCISES = (23, 24, 25)
check_exercises(LESSON_EXERCISES)  # the stubs written once into exercises/, then checked in order
