"""
Dropout's masks: which numbers a training step zeroes, drawn once per step for the whole batch.

Inverted dropout (train.py --dropout P): in training, each number at a dropout site is kept
with probability 1 - P and then multiplied by 1 / (1 - P), or zeroed; its expected value is
the number itself, so evaluation and sampling, which never drop, see the scale training saw.
A mask is those factors, 0 or 1 / (1 - P), one per number: the layer multiplies by it.

The sites are nanoGPT's, named by the capture point of gpt() each one follows:
  embedding                 the stream as it starts: rmsnorm(wte[token] + wpe[pos]). (nanoGPT
                            drops tok_emb + pos_emb; here the rmsnorm after it would undo the
                            1 / (1 - P), so the drop comes after the norm.)
  layer{i}.attn_weights     each head's attention weights, after the softmax: a position
                            sometimes does not hear from an earlier one
  layer{i}.attn_out         the attention branch, after attn_wo, before it joins the stream
  layer{i}.mlp_out          the MLP branch, after mlp_fc2, before it joins the stream

The masks of step s come from a generator seeded with (the run's --seed, s) alone, so a run is
the same every time and a resumed run draws, at step s, the masks an unbroken run draws there:
no generator state needs saving. They are drawn for the whole batch, name by name, at every
position up to block_size, and every engine reads its part of them: the numpy engine here
(model.py), the torch engine (torchgpt/model.py) and the scalar engine (gpt()'s `dropout=`,
through Masks.positions); the three thus compute the same function on the same masks, and
tests/test_dropout.py proves their losses equal step for step. Slicing a Masks by names
(masks[a:b]) gives the masks of that part of the batch, as parallel.py and torchrun's ranks
part the batch.
"""

import numpy as np

STREAM = 0xD70  # a tag mixed into the seed: the masks' generator is not the one of any other draw


def sites(config):
    """{site: the shape of one name's mask there}, in the order gpt() reaches them."""
    T, n_embd = config.block_size, config.n_embd
    shapes = {'embedding': (T, n_embd)}
    for i in range(config.n_layer):
        shapes[f'layer{i}.attn_weights'] = (config.n_head, T, T)  # query i's weight on key j, per head
        shapes[f'layer{i}.attn_out'] = (T, n_embd)
        shapes[f'layer{i}.mlp_out'] = (T, n_embd)
    return shapes


def draw(p, seed, step, n_docs, config):
    """The Masks of training step `step` of a run seeded `seed`, for a batch of n_docs names.

    A number is dropped where a random 16-bit integer, 0 to 65535, falls below P * 65536
    (rounded): with probability P to within 1/65536. Drawing 16 bits is about half the time of
    a uniform float32 (four to a 64-bit random word), and the masks of a names batch of the
    recipe's are 425,984 numbers a step.
    """
    rng = np.random.default_rng([STREAM, seed, step])
    below, scale = round(p * 65536), 1.0 / (1.0 - p)
    return Masks({site: (rng.integers(0, 65536, (n_docs,) + shape, dtype=np.uint16) >= below) * scale
                  for site, shape in sites(config).items()})  # (n_docs, *shape) each


class Masks:
    """One step's masks, {site: (B, ...) array of 0 and 1 / (1 - P)}, name b's along axis 0."""

    def __init__(self, arrays):
        self.arrays = arrays

    def __len__(self):  # the names it holds masks for (torchrun's World.shard parts by it)
        return len(next(iter(self.arrays.values())))

    def astype(self, dtype):
        """The same masks in dtype (a float32 run's: multiplied by float64 masks, its arrays would
        turn float64 from the first dropout on)."""
        return self if dtype == np.float64 else Masks({site: a.astype(dtype) for site, a in self.arrays.items()})

    def __getitem__(self, names):
        """The masks of names[a:b] of the batch (a slice): a part's own masks."""
        return Masks({site: a[names] for site, a in self.arrays.items()})

    def stream(self, site, rows, T):
        """(R, n_embd): the mask of an (R, n_embd) site at model.py's rows of a batch padded to T."""
        m = self.arrays[site][:, :T]                       # (B, T, n_embd)
        return m.reshape(-1, m.shape[-1])[rows]            # (R, n_embd)

    def heads(self, site, T):
        """(n_head, B, T, T): an attention-weights mask in the layout of layers.attention_forward."""
        return self.arrays[site][:, :, :T, :T].transpose(1, 0, 2, 3)  # (n_head, B, T, T)

    def positions(self, b, n):
        """Name b's masks for the scalar gpt(), position by position: a list of n dicts
        {site: list of floats}, an attention site's being one list per head over keys 0..t."""
        out = [{} for _ in range(n)]
        for site, a in self.arrays.items():
            for t in range(n):
                out[t][site] = (a[b, :, t, :t + 1] if site.endswith('attn_weights') else a[b, t]).tolist()
        return out
