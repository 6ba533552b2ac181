"""
Generating past the block: a stream of text of any length, from a prompt of any length.

microgpt's sampling loop (microgpt/sampling.py) stops when the block is full: the model has
block_size position embeddings, wpe[0 .. block_size - 1], and no vector for a position beyond.
To go on, the model is shown only the last block_size tokens, as positions 0 .. block_size - 1
again: a sliding window. Each new token is drawn exactly as sampling.py draws it
(probabilities(), then draw(), from one seeded generator), so with a window at least as long
as the text so far this IS ordinary sampling; past the block, the oldest token falls out of
view at every step (docs/reading-guide.md, "Why the model cannot see further back").

    for ch in generate(model, length=500, rng=random.Random(42), prompt_ids=ids):
        print(ch, end='', flush=True)

The model is the scalar GPT or the numpy port. The scalar GPT's KV cache grows while the window
does and is rebuilt once the window slides, since every cached key was computed at a position
that has now shifted (window_next_logits); the port recomputes the window's forward each time.
The same seed gives the same text with either engine.
"""

from ..model import GPT
from ..sampling import draw, probabilities


def window_next_logits(model):
    """next_logits(window) for the scalar GPT: gpt() calls for what the cache lacks.

    While the window only grows (it starts at the prompt and gains one token per step), the
    cache holds its first positions and only the new token is fed. Once it slides, every token
    sits one position earlier than when its key and value were computed, so the cache is
    emptied and the whole window fed again, positions 0 .. len(window) - 1.
    """
    fed = []  # the tokens whose keys and values the cache holds, position by position
    cache = model.empty_cache()
    last = None  # the logits after `fed`

    def next_logits(window):
        nonlocal fed, cache, last
        if window[:len(fed)] != fed:  # the window slid: no cached position is where it was
            fed, cache = [], model.empty_cache()
        # note: a window that slid onto the very same tokens (a run of one character) is the
        # window already fed, position for position: its logits are the last ones
        for pos_id in range(len(fed), len(window)):
            last = [l.data for l in model.gpt(window[pos_id], pos_id, *cache)]
            fed.append(window[pos_id])
        return last
    return next_logits


def window_logits_fn(model):
    """A fresh next_logits(window) for either engine: the scalar GPT's rebuilds its cache when
    the window slides; the numpy port's (next_logits_fn) recomputes whatever window it gets."""
    return window_next_logits(model) if isinstance(model, GPT) else model.next_logits_fn()


def generate(model, length, rng, temperature=0.5, prompt_ids=(), top_k=None, stop_at_bos=False):
    """Yield up to `length` characters drawn after prompt_ids, one at a time, as each is made.

    The model sees the last block_size tokens of prompt + text so far (prompt_ids: at least
    one). stop_at_bos: end early when the model draws BOS (a names model's end of a name);
    otherwise BOS is left out of the draw: running text never contains it, and BOS is the last
    id, so the draw is over the characters' logits alone.
    """
    tokenizer, block_size = model.tokenizer, model.config.block_size
    next_logits = window_logits_fn(model)
    context = list(prompt_ids)
    n_draw = tokenizer.vocab_size if stop_at_bos else tokenizer.bos  # ids 0 .. n_draw - 1
    for _ in range(length):
        window = context[-block_size:]  # the sliding window: positions 0 .. block_size - 1
        probs = probabilities(next_logits(window)[:n_draw], temperature, top_k)
        token_id = draw(probs, rng, temperature)
        if token_id == tokenizer.bos:
            return
        context.append(token_id)
        yield tokenizer.chars[token_id]
