"""
Generating names: microgpt's sampling loop, shared by both engines.

Feed BOS (and the prompt, if any), turn the logits for the next position into probabilities
with softmax(logits / temperature), draw one token with a seeded random generator, feed it
back, and stop at BOS or when the block is full. Temperature below 1 sharpens the
distribution (safer, more common names), above 1 flattens it (more inventive, more typos).
Temperature 0 is the limit of that sharpening: greedy decoding, always the most likely
token (argmax), with no random draw at all, so every seed gives the same names. top_k keeps
only the k most likely tokens and renormalises over them before drawing.

The sampler only needs a function next_logits(token_ids) -> vocab_size floats: the scalar
model provides one that keeps a KV cache, the numpy port one that recomputes the prefix.
Both then draw with the same generator, so the same seed gives the same names.
`iter_names` hands each name over as soon as it is made (sample.py prints it at once, so
Ctrl-C keeps what was made); `sample_names` collects them in a list.
"""

import math
import random

from .engine import NonFiniteError
from .errors import UserError


# What every reader of a model says when its numbers overflow (the numpy port says it too).
DIVERGED = ("the model's logits are not finite numbers: its weights are too large (its "
            "training diverged); retrain it with a lower --lr")


def probabilities(logits, temperature, top_k=None):
    """softmax(logits / temperature) as plain floats, optionally cut to the top_k tokens.

    temperature 0 means greedy: probability 1 on the most likely token (the first one if
    several tie), 0 elsewhere. top_k: keep the k largest logits (ties broken by token id),
    give every other token probability 0 and renormalise.
    """
    if not all(map(math.isfinite, logits)):
        # the scalar engine stops at the op that overflowed; the numpy port only gets here
        raise NonFiniteError("the next-token logits are not all finite numbers")
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


def scalar_next_logits(model):
    """A next_logits function for the scalar GPT: one gpt() call per new token, KV cache kept."""
    keys, values = model.empty_cache()

    def next_logits(token_ids):
        # the cache holds the positions fed so far: feed the rest (after a prompt, several)
        for pos_id in range(len(keys[0]), len(token_ids)):
            logits = model.gpt(token_ids[pos_id], pos_id, keys, values)
        return [l.data for l in logits]
    return next_logits


def check_prompt(tokenizer, block_size, prompt):
    """The prompt's ids; its characters must be known and it must leave room in the block."""
    ids = tokenizer.encode(prompt)
    if len(ids) >= block_size:
        raise UserError(f"--prompt has {len(ids)} characters but the block holds {block_size} "
                        f"positions, one of them BOS: use at most {block_size - 1} characters")
    return ids


def check_settings(temperature, top_k):
    """Temperature >= 0 (0 = greedy) and top_k >= 1 (or None, for no cut)."""
    if not (isinstance(temperature, (int, float)) and math.isfinite(temperature) and temperature >= 0):
        raise UserError(f"--temperature must be a finite number >= 0 (0 = greedy), got {temperature}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise UserError(f"--top-k must be a positive integer (1 = greedy), got {top_k!r}")


def sample_name(make_next_logits, tokenizer, block_size, rng, temperature=0.5, prompt_ids=(), top_k=None):
    """One name: the prompt plus what the model draws after it, until BOS or a full block."""
    check_settings(temperature, top_k)
    next_logits = make_next_logits()
    token_ids = [tokenizer.bos] + list(prompt_ids)
    while len(token_ids) <= block_size:  # a full block cannot be fed another position
        probs = probabilities(next_logits(token_ids), temperature, top_k)
        token_id = draw(probs, rng, temperature)
        if token_id == tokenizer.bos:
            break
        token_ids.append(token_id)
    return tokenizer.decode(token_ids[1:])


def iter_names(make_next_logits, tokenizer, block_size, num=20, temperature=0.5, seed=42, prompt='',
               top_k=None, rng=None):
    """Yield `num` names, each as soon as it is made, from one seeded generator.

    rng: an existing random.Random to draw from instead of a fresh one seeded with `seed`
    (the original microgpt samples from the generator where training left it).
    """
    check_settings(temperature, top_k)
    prompt_ids = check_prompt(tokenizer, block_size, prompt)
    rng = random.Random(seed) if rng is None else rng
    try:
        for _ in range(num):
            yield sample_name(make_next_logits, tokenizer, block_size, rng, temperature, prompt_ids, top_k)
    except NonFiniteError:
        raise UserError(DIVERGED) from None


def sample_names(make_next_logits, tokenizer, block_size, num=20, temperature=0.5, seed=42, prompt='',
                 top_k=None, rng=None):
    """`num` names from one seeded generator: the same arguments give the same names."""
    return list(iter_names(make_next_logits, tokenizer, block_size, num, temperature, seed, prompt,
                           top_k, rng))
