"""
Generating names: microgpt's sampling loop, shared by both engines.

Feed BOS (and the prompt, if any), turn the logits for the next position into probabilities
with softmax(logits / temperature), draw one token with a seeded random generator, feed it
back, and stop at BOS or when the block is full. Temperature below 1 sharpens the
distribution (safer, more common names), above 1 flattens it (more inventive, more typos).

The sampler only needs a function next_logits(token_ids) -> vocab_size floats: the scalar
model provides one that keeps a KV cache, the numpy port one that recomputes the prefix.
Both then draw with the same generator, so the same seed gives the same names.
"""

import math
import random

from .engine import NonFiniteError
from .errors import UserError


def probabilities(logits, temperature):
    """softmax(logits / temperature) as plain floats (max subtracted: no overflow)."""
    if not all(map(math.isfinite, logits)):
        # the scalar engine stops at the op that overflowed; the numpy port only gets here
        raise NonFiniteError("the next-token logits are not all finite numbers")
    z = [l / temperature for l in logits]
    zmax = max(z)
    e = [math.exp(zi - zmax) for zi in z]
    total = sum(e)
    return [ei / total for ei in e]


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


def sample_name(make_next_logits, tokenizer, block_size, rng, temperature=0.5, prompt_ids=()):
    """One name: the prompt plus what the model draws after it, until BOS or a full block."""
    if not temperature > 0:
        raise UserError(f"--temperature must be > 0, got {temperature}")
    next_logits = make_next_logits()
    token_ids = [tokenizer.bos] + list(prompt_ids)
    while len(token_ids) <= block_size:  # a full block cannot be fed another position
        probs = probabilities(next_logits(token_ids), temperature)
        token_id = rng.choices(range(len(probs)), weights=probs)[0]
        if token_id == tokenizer.bos:
            break
        token_ids.append(token_id)
    return tokenizer.decode(token_ids[1:])


def sample_names(make_next_logits, tokenizer, block_size, num=20, temperature=0.5, seed=42, prompt=''):
    """`num` names from one seeded generator: the same arguments give the same names."""
    prompt_ids = check_prompt(tokenizer, block_size, prompt)
    rng = random.Random(seed)
    try:
        return [sample_name(make_next_logits, tokenizer, block_size, rng, temperature, prompt_ids)
                for _ in range(num)]
    except NonFiniteError:
        raise UserError("the model's logits are not finite numbers: its weights are too large "
                        "(its training diverged); retrain it with a lower --lr") from None
