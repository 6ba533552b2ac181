"""
The overview sandbox: forward, loss, sample, on one name (or a window of running text).

    python -m microgpt.lab overview anna --top 8 --temperature 1 --png anna.png
    python -m microgpt.lab overview "ROMEO:" --ckpt out/shakespeare.safetensors

The mean loss is exactly train.py's on this name (training.doc_loss) or window
(inference.evaluate_windows); --temperature changes only the continuation.
"""

import math
import random

import numpy as np

from microgpt.inference.model import cross_entropy

from ..sampling import TEMPERATURE, generate, sample_names
from .loading import data_mode, read_text
from .render import bar, fold_note, fold_text, token_label, unit
from .rowstats import softmax

MISS, HIT = '✗', '✓'
CONTINUATION = 120  # characters of running text drawn after TEXT: two lines or so of a play


def predictions(model, text, top=5, mode='lines'):
    """One dict per position: what it reads, the true next token, p, loss, top-k, hit or miss
    (target, p, loss, rank and hit None where the text ends before the next character)."""
    tok = model.tokenizer
    token_ids, targets = read_text(model, text, mode)  # what the model reads, what comes next
    logits, _ = model.forward(token_ids)       # (T, vocab_size)
    probs = softmax(logits)                    # (T, vocab_size): each row sums to 1
    scored = [i for i, t in enumerate(targets) if t is not None]
    losses = np.full(len(token_ids), np.nan)   # (T,): NaN where nothing is scored
    if scored:  # -ln p at the positions with a target (none in one character of running text), without underflow
        losses[scored] = cross_entropy(logits[scored], np.array([targets[i] for i in scored]))
    rows = []
    for i, (reads, target) in enumerate(zip(token_ids, targets)):
        order = np.argsort(-probs[i], kind='stable')  # (vocab_size,): most likely first
        if mode == 'text':  # running text never holds BOS: the candidates are the characters (its
            order = order[order != tok.bos]  # probability stays in the softmax the loss is taken over)
        row = {'position': i, 'reads': token_label(tok, reads),
               'top': [(token_label(tok, int(c)), float(probs[i, c])) for c in order[:top]],
               'target': None, 'p': None, 'loss': None, 'rank': None, 'hit': None}
        if target is not None:
            row.update(target=token_label(tok, target), p=float(probs[i, target]), loss=float(losses[i]),
                       rank=int(np.where(order == target)[0][0]) + 1, hit=int(order[0]) == target)
        rows.append(row)
    return rows


def continuation(model, text, temperature=TEMPERATURE, seed=42, mode='lines'):
    """TEXT and what the model draws after it, with sample.py's sampler: one whole name, or
    CONTINUATION characters of running text through sampling.generate's window (sample.py --length)."""
    if mode == 'text':
        ids = model.tokenizer.encode(text)
        return text + ''.join(generate(model, CONTINUATION, random.Random(seed), temperature, ids))
    return sample_names(model, num=1, temperature=temperature, seed=seed, prompt=text)[0]


def compute(model, text, top=5, temperature=TEMPERATURE, seed=42, ckpt=None):
    """The sandbox's numbers: predictions at every position, the mean loss of those with a
    target (None: none has), one continuation."""
    mode = data_mode(ckpt)
    rows = predictions(model, text, top, mode)
    losses = [r['loss'] for r in rows if r['loss'] is not None]
    vocab_size = model.config.vocab_size
    return {'text': text, 'data_mode': mode, 'positions': rows, 'scored': len(losses),
            'mean_loss': sum(losses) / len(losses) if losses else None,
            'uniform_loss': math.log(vocab_size), 'vocab_size': vocab_size,
            'continuation': continuation(model, text, temperature, seed, mode),
            'temperature': temperature, 'seed': seed, 'unit': unit(model.tokenizer)}


def render(d):
    rows, text, u = d['positions'], d['text'], d['unit']
    reads = ' '.join(r['reads'] for r in rows)
    if d['data_mode'] == 'text':
        lines = [f"text {text!r}: running text, read as train.py reads a window of it (no BOS): the model "
                 f"reads {reads} and, at every position, predicts the next {u}"
                 + ("; the last one's next is not in the text: shown, not scored" if rows[-1]['target'] is None else ''),
                 "the bars are its probabilities softmax(logits), at temperature 1 whatever --temperature is", '']
    else:
        lines = [f"text {text!r}: the model reads {reads} and, at every "
                 f"position, predicts the next {u} (<BOS> after the last one = the name ends);",
                 "the bars are its probabilities softmax(logits), at temperature 1 whatever --temperature is",
                 '']
    for r in rows:
        if r['target'] is None:
            lines.append(f"pos {r['position']:>2} reads {r['reads']!r:<7} next is not in the text: the model expects")
        else:
            mark = HIT if r['hit'] else f"{MISS} its favourite was {r['top'][0][0]!r}"
            lines.append(f"pos {r['position']:>2} reads {r['reads']!r:<7} next is {r['target']!r}: "
                         f"p = {r['p']:.4f}, loss = -ln p = {r['loss']:.3f}   {mark}")
        for char, p in r['top']:
            arrow = '<- true' if char == r['target'] else ''
            lines.append(f"      {char:>5} {bar(p, 30)} {p:.4f} {arrow}".rstrip())
        if r['rank'] is not None and r['rank'] > len(r['top']):
            lines.append(f"      {r['target']:>5} {bar(r['p'], 30)} {r['p']:.4f} <- true "
                         f"(rank {r['rank']})")
    vocab_size, n = d['vocab_size'], d['scored']
    what = f'predicted {u}' if d['data_mode'] == 'text' else 'position'
    misses = [str(r['position']) for r in rows if r['hit'] is False]
    if d['mean_loss'] is None:
        lines += ['', f"no position has its next {u} in the text: give two {u}s or more for a loss"]
    else:
        lines += ['',
                  f"mean loss over {n} {what}{'s' * (n != 1)}: {d['mean_loss']:.4f}   (guessing "
                  f"uniformly over {vocab_size} tokens: ln {vocab_size} = {d['uniform_loss']:.4f})",
                  f"mis-predicted ({MISS}) at positions: {', '.join(misses) or 'none'}"]
    rest = d['continuation'][len(text):]
    if d['data_mode'] == 'text':
        lines += ['', f"a continuation of {len(rest)} characters sampled after the text (temperature "
                  f"{d['temperature']:g}, seed {d['seed']}; newlines kept; | marks where it starts):"]
        drawn = fold_text(f"{text}|{rest}")
        lines += fold_note(drawn) + drawn
    else:
        lines += ['', f"one continuation sampled after {text!r} (temperature {d['temperature']:g}, seed "
                  f"{d['seed']}): {text}|{rest}" + ('   (the model ends the name right there)' if not rest else '')]
    return '\n'.join(lines)


def picture(path, d, source):
    from .plot import probability_bars
    probability_bars(path, d['positions'], f"{source}: next-character probabilities for {d['text']!r}")
