"""
Generating: microgpt's sampling loop, shared by every engine, and text past the block.

Feed BOS (and the prompt, if any), turn the logits for the next position into probabilities
with softmax(logits / temperature), draw one token with a seeded random generator, feed it
back, and stop at BOS or when the block is full. Temperature below 1 sharpens the distribution
(safer, more common names), above 1 flattens it (more inventive, more typos); 0 is the limit,
greedy decoding: always the most likely token, no random draw, the same names for every seed.
top_k keeps only the k most likely tokens and renormalises over them before drawing.

The model is the scalar GPT or the numpy port, anything with .tokenizer, .config and
.next_logits_fn() (a fresh next_logits(token_ids) -> vocab_size floats); both draw with the
same generator, so the same seed gives the same names: `sample_names(model, num=5)`.
`iter_names` hands over each name as soon as it is made (sample.py prints it at once). The
arguments are trusted: sample.py and the lab check the prompt and the settings first.

Past the block (`generate`, running text of any length): the model has block_size position
embeddings and no vector beyond, so it is shown a window of at most block_size tokens, as
positions 0 .. block_size - 1. The window grows while the cache keeps its keys and values; once
full, it jumps on by half a block and is fed again. With a window as long as the text so far,
this IS ordinary sampling (docs/reading-guide.md, "Why the model cannot see further back").
"""

import math
import random

TEMPERATURE = 0.5  # microgpt's: typical names with a little invention (train.py's samples, sample.py's default)


def probabilities(logits, temperature, top_k=None):
    """softmax(logits / temperature) as plain floats, optionally cut to the top_k tokens.

    temperature 0 means greedy: probability 1 on the most likely token (the first one if
    several tie), 0 elsewhere. top_k: keep the k largest logits (ties broken by token id),
    give every other token probability 0 and renormalise.
    """
    if not all(map(math.isfinite, logits)):  # a diverged model: sample.py and the lab say so
        raise FloatingPointError("the next-token logits are not all finite numbers")
    n = len(logits)
    if temperature == 0:
        best = max(range(n), key=logits.__getitem__)  # max() keeps the first of equal logits
        return [1.0 if i == best else 0.0 for i in range(n)]
    # note: the max is subtracted BEFORE dividing by the temperature. Every difference is then
    # <= 0, so dividing by a tiny temperature (1e-308) gives a large negative number or -inf,
    # never +inf: exp() of it is 0, the most likely token keeps exp(0) = 1, and the result is
    # greedy in the limit, as it should be. Dividing first would turn logits above ~1.8 into
    # inf, and inf - inf into nan.
    lmax = max(logits)
    z = [(l - lmax) / temperature for l in logits]
    if top_k is not None and top_k < n:
        keep = set(sorted(range(n), key=lambda i: (-logits[i], i))[:top_k])
        z = [zi if i in keep else -math.inf for i, zi in enumerate(z)]
    e = [math.exp(zi) for zi in z]
    total = sum(e)  # >= 1: the most likely token always contributes exp(0)
    return [ei / total for ei in e]


def draw(probs, rng, temperature):
    """One token id from probs: argmax when greedy (no random number used), else a draw."""
    if temperature == 0:
        return max(range(len(probs)), key=probs.__getitem__)
    return rng.choices(range(len(probs)), weights=probs)[0]


def sample_name(model, rng, temperature=TEMPERATURE, prompt_ids=(), top_k=None):
    """One name: the prompt plus what the model draws after it, until BOS or a full block."""
    bos, block_size = model.tokenizer.bos, model.config.block_size
    next_logits = model.next_logits_fn()
    token_ids = [bos] + list(prompt_ids)
    while len(token_ids) <= block_size:  # a full block cannot be fed another position
        probs = probabilities(next_logits(token_ids), temperature, top_k)
        token_id = draw(probs, rng, temperature)
        if token_id == bos:
            break
        token_ids.append(token_id)
    return model.tokenizer.decode(token_ids[1:])


def iter_names(model, num=20, temperature=TEMPERATURE, seed=42, prompt='', top_k=None, rng=None):
    """Yield `num` names, each as soon as it is made, from one seeded generator.

    rng: an existing random.Random to draw from instead of a fresh one seeded with `seed`
    (the original microgpt samples from the generator where training left it).
    """
    prompt_ids = model.tokenizer.encode(prompt)
    rng = random.Random(seed) if rng is None else rng
    for _ in range(num):
        yield sample_name(model, rng, temperature, prompt_ids, top_k)


def sample_names(model, num=20, temperature=TEMPERATURE, seed=42, prompt='', top_k=None, rng=None):
    """`num` names from one seeded generator: the same arguments give the same names."""
    return list(iter_names(model, num, temperature, seed, prompt, top_k, rng))


# ---------------------------------------------------------------------------- past the block
def generate(model, length, rng, temperature=TEMPERATURE, prompt_ids=(), top_k=None, stop_at_bos=False):
    """Yield the text of up to `length` tokens drawn after prompt_ids (a character each with the
    character tokenizer, a byte pair's text with bpe.py's), one token at a time, as each is made.

    The model sees a window of at most block_size tokens: the prompt's last ones and what was
    drawn since. When the window is full it jumps: it keeps its last half and grows again.
    stop_at_bos: end early when the model draws BOS (a names model's end of a name); otherwise
    BOS is left out of the draw: running text never contains it, and BOS is the last id, so the
    draw is over the other tokens' logits alone.
    """
    tokenizer, block_size = model.tokenizer, model.config.block_size
    next_logits = model.next_logits_fn()
    window, piece = list(prompt_ids)[-block_size:], tokenizer.decoder()  # piece: a token's text, when complete
    n_draw = tokenizer.vocab_size if stop_at_bos else tokenizer.bos  # ids 0 .. n_draw - 1
    for _ in range(length):
        probs = probabilities(next_logits(window)[:n_draw], temperature, top_k)
        token_id = draw(probs, rng, temperature)
        if token_id == tokenizer.bos:
            return
        window.append(token_id)
        if len(window) > block_size:
            # note: sliding one token would move every token to a new position, so every key and
            # value in the cache would go stale and each token would cost a whole window. The
            # jump costs one window every half block, and the model always sees half a block.
            window = window[block_size // 2 + 1:]  # the last (block_size + 1) // 2 tokens
        yield piece(token_id)
