"""
The overview sandbox: forward, loss, sample, on one name, with a trained checkpoint.

    python -m microgpt.lab overview anna
    python -m microgpt.lab overview anna --top 8 --temperature 1 --png anna.png

The model reads [BOS] + TEXT and at every position predicts the character that comes next;
after the last character the right answer is BOS, "the name ends here". For each position
this prints the model's most likely next characters as bars, the true next character, the
probability the model gave it and its loss -ln p (microgpt's cross-entropy), with a mark
where the model's favourite was something else. These are the model's own probabilities,
softmax(logits) at temperature 1, the ones the loss is computed from. The mean of those
losses is exactly the training loss of this name (training.doc_loss). Last comes one
continuation of TEXT, drawn with the same sampler as sample.py: --temperature changes only
that continuation.
"""

import math

import numpy as np

from inference.model import cross_entropy

from ..sampling import sample_names
from .loading import text_tokens
from .render import bar, token_label
from .rowstats import softmax

MISS, HIT = '✗', '✓'


def predictions(model, text, top=5):
    """One dict per position: what it reads, the true next token, p, loss, top-k, hit or miss."""
    tok = model.tokenizer
    token_ids = text_tokens(model, text)       # [BOS] + text: what the model reads
    targets = token_ids[1:] + [tok.bos]        # the character after each position, then the end
    logits, _ = model.forward(token_ids)       # (T, vocab_size)
    probs = softmax(logits)                    # (T, vocab_size): each row sums to 1
    losses = cross_entropy(logits, np.array(targets))  # (T,): -ln p, found without p underflowing
    rows = []
    for i, (reads, target) in enumerate(zip(token_ids, targets)):
        order = np.argsort(-probs[i], kind='stable')  # (vocab_size,): most likely first
        p = float(probs[i, target])
        rows.append({
            'position': i,
            'reads': token_label(tok, reads),
            'target': token_label(tok, target),
            'p': p,
            'loss': float(losses[i]),
            'rank': int(np.where(order == target)[0][0]) + 1,
            'top': [(token_label(tok, int(c)), float(probs[i, c])) for c in order[:top]],
            'hit': int(order[0]) == target,
        })
    return rows


def continuation(model, text, temperature=0.5, seed=42):
    """TEXT and what the model draws after it, with sample.py's sampler: one whole name."""
    return sample_names(model, num=1, temperature=temperature, seed=seed, prompt=text)[0]


def compute(model, text, top=5, temperature=0.5, seed=42, ckpt=None):
    """The sandbox's numbers: predictions at every position, their mean loss, one continuation."""
    rows = predictions(model, text, top)
    vocab_size = model.config.vocab_size
    return {'text': text, 'positions': rows, 'mean_loss': sum(r['loss'] for r in rows) / len(rows),
            'uniform_loss': math.log(vocab_size), 'vocab_size': vocab_size,
            'continuation': continuation(model, text, temperature, seed),
            'temperature': temperature, 'seed': seed}


def render(d):
    rows, text = d['positions'], d['text']
    lines = [f"text {text!r}: the model reads {' '.join(r['reads'] for r in rows)} and, at every "
             "position, predicts the next character (<BOS> after the last one = the name ends);",
             "the bars are its probabilities softmax(logits), at temperature 1 whatever --temperature is",
             '']
    for r in rows:
        mark = HIT if r['hit'] else f"{MISS} its favourite was {r['top'][0][0]!r}"
        lines.append(f"pos {r['position']:>2} reads {r['reads']!r:<7} next is {r['target']!r}: "
                     f"p = {r['p']:.4f}, loss = -ln p = {r['loss']:.3f}   {mark}")
        for char, p in r['top']:
            arrow = '<- true' if char == r['target'] else ''
            lines.append(f"      {char:>5} {bar(p, 30)} {p:.4f} {arrow}".rstrip())
        if r['rank'] > len(r['top']):
            lines.append(f"      {r['target']:>5} {bar(r['p'], 30)} {r['p']:.4f} <- true "
                         f"(rank {r['rank']})")
    vocab_size = d['vocab_size']
    misses = [str(r['position']) for r in rows if not r['hit']]
    lines += ['',
              f"mean loss over {len(rows)} position{'s' * (len(rows) != 1)}: {d['mean_loss']:.4f}   (guessing "
              f"uniformly over {vocab_size} tokens: ln {vocab_size} = {d['uniform_loss']:.4f})",
              f"mis-predicted ({MISS}) at positions: {', '.join(misses) or 'none'}"]
    rest = d['continuation'][len(text):]
    lines += ['', f"one continuation sampled after {text!r} (temperature {d['temperature']:g}, seed "
              f"{d['seed']}): {text}|{rest}" + ('   (the model ends the name right there)' if not rest else '')]
    return '\n'.join(lines)


def picture(path, d, source):
    from .plot import probability_bars
    probability_bars(path, d['positions'], f"{source}: next-character probabilities for {d['text']!r}")
