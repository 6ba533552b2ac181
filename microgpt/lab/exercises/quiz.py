"""
Questions on the attention examples as a quiz: `python -m microgpt.lab exercises quiz`.

The worked examples of the reading guide's section 3, asked as questions. An answer is right
within the rounding of three decimals, written any usual way (a decimal comma, spaced or
comma-grouped thousands). An answer not of the kind asked is `unreadable`: it says what form to
give, and the question stays open. Each answer is followed by the reasoning and the lab command
and page that show it. This file imports only the standard library.
"""

import math
import re
import textwrap
from dataclasses import dataclass

BY_HAND = "attention by hand (reading guide, section 3)"
SQRT_D = "where sqrt(d) comes from (reading guide, section 3)"
SANDBOX = "the attention sandbox (reading guide, section 3)"
TOPICS = (BY_HAND, SQRT_D, SANDBOX)
WIDTH = 100  # characters of a printed line


@dataclass(frozen=True)
class Question:
    id: str
    topic: str       # which worked example, and where in it
    text: str        # the question, in English
    kind: str        # 'number', 'numbers' or 'choice'
    answer: object   # a number, a list of numbers, or the right letter
    tol: float       # how far a number may be from it: the rounding of the numbers given
    why: str         # the reasoning, in short
    see: str         # the lab command and page that show it
    choices: tuple = ()


QUESTIONS = [
    Question('byhand-1', f"{BY_HAND}, question 1",
             "Compute out1, the attention output of the first token (k1 = [0.9, 0.1, 0.4, 0], v1 = [0.2, 0.8, 0, "
             "0.1]), after the causal mask. Give its four numbers.",
             'numbers', [0.2, 0.8, 0.0, 0.1], 5e-4,
             "Token 1 may see one key, its own: a softmax over one score is 1, and a weighted sum with one "
             "weight of 1 is that value itself, so out1 = v1 exactly. Attention does nothing for the first "
             "token; it pays as context grows to its left.",
             "python -m microgpt.lab attention anna --query 0 (BOS sees only itself); web lab: By hand, query 1"),
    Question('byhand-weights', f"{BY_HAND}, the softmax",
             "q3 = [0.9, 0.8, 0.2, 0.1] scores the keys 0.97, 0.89 and 1.46; divided by sqrt(4) and put through "
             "a softmax, what are token 3's three attention weights (3 decimals)?",
             'numbers', [0.30879344, 0.29668548, 0.39452108], 1.5e-3,
             "The scores / 2 are [0.485, 0.445, 0.730], their exponentials [1.624, 1.561, 2.075], sum 5.260: the "
             "weights are [0.309, 0.297, 0.395]. (The last is 0.394521: 0.394 truncated.)",
             "python -m microgpt.lab scaling, section 3; web lab: By hand"),
    Question('byhand-out3', f"{BY_HAND}, the output",
             "With those weights, what is out3 = 0.309 v1 + 0.297 v2 + 0.395 v3 (v1 = [0.2, 0.8, 0, 0.1], v2 = "
             "[0.7, 0.1, 0.3, 0], v3 = [0.1, 0.2, 0.9, 0.4])?",
             'numbers', [0.30889063, 0.35560752, 0.44407462, 0.18868778], 1.5e-3,
             "Each dimension is a weighted average of the values' same dimension: out3 = [0.309, 0.356, 0.444, "
             "0.189]. That is all of attention: dot products, sqrt(d), softmax, a weighted average.",
             "python -m microgpt.lab scaling, section 3; web lab: By hand"),
    Question('byhand-2', f"{BY_HAND}, question 2",
             "Multiply token 3's three scores by ten, as if the division by sqrt(d) were missing, and take the "
             "softmax again. What does the weakest weight, 0.297, fall to?",
             'number', 0.05055712296744972, 1.5e-3,
             "The scores become [4.85, 4.45, 7.30] and the weights [0.075, 0.051, 0.874]: the weakest falls "
             "about six times. Without sqrt(d) the softmax saturates, picks one token, and its gradient vanishes.",
             "python -m microgpt.lab scaling, section 3; web lab: By hand, without 'divide by sqrt(d)'"),
    Question('byhand-2b', f"{BY_HAND}, question 2",
             "And what does the strongest weight (0.395, token 3 itself) rise to?",
             'number', 0.874020512348022, 1.5e-3,
             "From 0.395 to 0.874: the largest score takes almost everything once the scores are ten times apart.",
             "python -m microgpt.lab scaling, section 3"),
    Question('byhand-3', f"{BY_HAND}, question 3",
             "d_model = 4096 with 32 heads: how many numbers does one layer's score matrix hold for a sequence "
             "of 1,024 tokens?",
             'number', 33554432, 0.0,
             "n_heads x T x T = 32 x 1024 x 1024 = 33,554,432. d_model is not in it: the score matrix grows with "
             "the heads and with the square of the context, which is why FlashAttention never builds it whole.",
             "python -m microgpt.lab scaling, section 6; web lab: By hand, the shapes table"),
    Question('byhand-3b', f"{BY_HAND}, question 3",
             "And how many MiB is that in fp16, 2 bytes a number (1 MiB = 1,048,576 bytes)?",
             'number', 64, 0.0,
             "33,554,432 x 2 bytes = 67,108,864 bytes = 64 MiB, for one layer.",
             "python -m microgpt.lab scaling, section 6; web lab: By hand, the shapes table"),
    Question('byhand-why-sqrt', f"{BY_HAND}, why sqrt(d)",
             "Why are the scores divided by the square root of head_dim?",
             'choice', 'b', 0.0,
             "A dot product adds head_dim products, so the scores grow with the head; large scores saturate the "
             "softmax (one token takes all the weight) and its gradient goes to 0. Dividing by sqrt(head_dim) "
             "keeps their spread the same for any head size.",
             "python -m microgpt.lab scaling; attention anna --no-scale; web lab: Scaling",
             choices=("so that the weights sum to 1",
                      "to keep the scores' spread the same whatever head_dim is, so the softmax does not "
                      "saturate and the gradient does not vanish",
                      "to normalise the value vectors",
                      "to save memory")),
    Question('byhand-mask', f"{BY_HAND}, the mask",
             "How is a token kept from seeing the tokens after it?",
             'choice', 'b', 0.0,
             "The scores of the later tokens are set to minus infinity before the softmax: e^-inf = 0, so they "
             "get weight exactly 0 and the weights are normalised over the visible tokens only, in one step.",
             "python -m microgpt.lab attention anna --query 2; web lab: Attention",
             choices=("their weights are set to 0 after the softmax",
                      "their scores are set to minus infinity before the softmax",
                      "their values are set to 0",
                      "the keys are sorted by position")),
    Question('byhand-wo', f"{BY_HAND}, W_O",
             "What is W_O for, once every head's output is computed?",
             'choice', 'c', 0.0,
             "The heads' outputs side by side are projected by W_O back to the model's dimension: it mixes "
             "information between the heads and decides what goes into the residual stream. It is about a "
             "quarter of the attention's parameters: not a formality.",
             "python -m microgpt.lab attention anna, section 4; web lab: By hand, two heads",
             choices=("nothing: it is the identity",
                      "it computes the queries",
                      "it mixes the heads' outputs and writes the result into the residual stream",
                      "it scales the scores")),
    Question('sqrtd-variance', f"{SQRT_D}, where sqrt(d) comes from",
             "The d = 64 components of q and k are independent, with mean 0 and variance 1. What is Var(q . k)?",
             'number', 64, 0.0,
             "q . k is a sum of d products, each of variance 1, and variances of independent terms add: Var = d. "
             "So the scores spread like sqrt(d), and dividing by sqrt(d) brings the variance back to 1.",
             "python -m microgpt.lab scaling, section 1 (measured for d = 4, 64, 1024); web lab: Scaling"),
    Question('sqrtd-spread', f"{SQRT_D}, where sqrt(d) comes from",
             "Without the division, what is the standard deviation of the scores at d = 1024?",
             'number', 32, 0.0,
             "sqrt(1024) = 32: the logits spread over +-32, where the softmax is long saturated.",
             "python -m microgpt.lab scaling, section 1"),
    Question('sqrtd-entropy', f"{SQRT_D}, the row widget",
             "How many bits of entropy has a uniform distribution over 8 keys?",
             'number', 3, 0.0,
             "log2(8) = 3 bits. A typical unscaled row at d = 64 has under one bit: attention has almost decided before "
             "seeing a single training example, from the geometry of random weights alone.",
             "python -m microgpt.lab scaling, section 4; web lab: Scaling, the row widget"),
    Question('sqrtd-widget', f"{SQRT_D}, the row widget",
             "Switch the scaling off at d = 64: what happens to the row's entropy and its largest weight?",
             'choice', 'a', 0.0,
             "The scores spread 8 times wider, the softmax sharpens: entropy falls and the max weight rises; "
             "raise d to 256 and the gradient vanishes; scaling back on makes the row sensible at any d.",
             "python -m microgpt.lab scaling --row-d 64, and --row-d 256; web lab: Scaling",
             choices=("the entropy falls and the max weight rises", "both rise",
                      "the entropy rises and the max weight falls", "nothing changes")),
    Question('sqrtd-cost', f"{SQRT_D}, the cost",
             "Attention's two contractions cost 2 n^2 D, the projections 4 n D^2. What is the ratio attention / "
             "projections at D = 768 for n = 1,024 tokens?",
             'number', 1024 / 1536, 5e-3,
             "The ratio is n / (2D) = 1024 / 1536 = 0.67: at this length the projections still cost more.",
             "python -m microgpt.lab scaling, section 5"),
    Question('sqrtd-crossover', f"{SQRT_D}, the cost",
             "Beyond how many tokens n does attention cost more than the projections, at D = 768?",
             'number', 1536, 0.0,
             "n / (2D) > 1 when n > 2D = 1,536. Below it, optimising attention is pointless; beyond a thousand "
             "or so tokens the quadratic term takes over, and FlashAttention and the rest pay.",
             "python -m microgpt.lab scaling, section 5"),
    Question('sqrtd-einsum', f"{SQRT_D}, the index notation",
             "'bhqd,bhkd->bhqk' with b = 1, h = 12 and q = k = d = 64: how many elements has the result?",
             'number', 49152, 0.0,
             "Its shape is [1, 12, 64, 64]: 49,152 elements, each a sum over d = 64 products, 3,145,728 "
             "multiply-adds in all. The free letters q and k, two instead of one, are the quadratic cost.",
             "web lab: Scaling, the index notation widget"),
    Question('sqrtd-einsum-macs', f"{SQRT_D}, the index notation",
             "And how many multiply-adds does it take?",
             'number', 3145728, 0.0,
             "49,152 elements x 64 products each = 3,145,728.",
             "web lab: Scaling, the index notation widget"),
    Question('phases-first', f"{SANDBOX}, question 2",
             "Put the query on the first symbol. What must its attention weight be, before you even look?",
             'number', 1, 0.0,
             "Its softmax row has exactly one visible key, itself, and a softmax over one score is 1.",
             "python -m microgpt.lab attention anna --query 0; web lab: Attention, In phases"),
    Question('phases-heads', f"{SANDBOX}, question 1",
             "Load anna and take the last a as the query. Do the heads all attend to the same earlier character?",
             'choice', 'b', 0.0,
             "They need not: each head learned its own projections, so its own habit, on its own slice of the "
             "vector; that is what makes several heads worth having.",
             "python -m microgpt.lab attention anna --head 1 (and 2, 3), section 4; web lab: Attention",
             choices=("yes, always: they share their weights",
                      "not necessarily: each head learned its own habit")),
    Question('phases-mask', f"{SANDBOX}, question 4",
             "The future keys are masked. What do the weights over the visible past sum to?",
             'number', 1, 0.0,
             "1: the mask comes before the softmax, which normalises over the visible keys only.",
             "python -m microgpt.lab attention anna --query 2; web lab: Attention"),
]


def get(qid):
    return next((q for q in QUESTIONS if q.id == qid), None)


# ---------------------------------------------------------------------------- reading an answer
def readings(text):
    """Every number `text` may mean, the usual ways of writing included: '0,051' -> [0.051, 51.0],
    '33 554 432' -> [33554432.0], '64 MiB' -> [64.0]. [] if it is not a number."""
    s = text.strip().lower().replace('\u2009', ' ').replace('\u00a0', ' ').replace('\u2212', '-')
    s = re.sub(r'\s*(mib|gib|bits?|tokens?|numbers?|elements?|%)$', '', s).strip()
    s = re.sub(r'(?<=\d) (?=\d{3}\b)', '', s)  # 33 554 432: spaced thousands
    out = []
    for candidate in (s.replace(',', ''), s.replace(',', '.')):  # thousands separators, or a decimal comma
        try:
            value = float(candidate)
        except ValueError:
            continue
        if math.isfinite(value) and value not in out:
            out.append(value)
    return out


def split_numbers(text):
    """'0.2, 0.8, 0, 0.1', '[0,2; 0,8; 0; 0,1]' or '0.2 0.8 0 0.1' -> the items, as text."""
    s = text.strip().strip('[]()')
    if ';' in s:
        return [p for p in s.split(';') if p.strip()]
    if '.' in s or ', ' in s:
        return [p for p in re.split(r'[,\s]+', s) if p]
    return [p for p in s.split() if p]


def choice_of(question, text):
    """The letter an answer to a choice question names: 'b', 'B', 'b)', '(b)', 'b. ...', or a
    choice's own words typed out; '' if none."""
    letters = 'abcd'[:len(question.choices)]
    s = text.strip().lower()
    m = re.fullmatch(r'[(\[]?([a-d])(?:[).\]].*)?', s)  # the letter alone, or followed by ) or . and anything
    if m and m.group(1) in letters:
        return m.group(1)
    words = re.sub(r'[^a-z0-9]+', ' ', s).strip()
    typed = [l for l, c in zip(letters, question.choices) if re.sub(r'[^a-z0-9]+', ' ', c.lower()).strip() == words]
    return typed[0] if typed else ''


def unreadable(question, text):
    """Why `text` is not an answer of the kind the question asks ('' when it is one): the form to
    give instead, so that an answer in other words is never graded wrong for its words."""
    if question.kind == 'choice':
        letters = 'abcd'[:len(question.choices)]
        return '' if choice_of(question, text) else \
            f"answer with the letter of a choice, {letters[0]} to {letters[-1]} (the choices are listed with the question)"
    if question.kind == 'number':
        return '' if readings(text) else "answer with one number (0.051, 0,051 or 33 554 432 are read as meant)"
    n, parts = len(question.answer), split_numbers(text)
    if len(parts) == n and all(readings(p) for p in parts):
        return ''
    got = (f"{len(parts)} number{'s' * (len(parts) != 1)}" if all(readings(p) for p in parts) else
           f"{next(p for p in parts if not readings(p)).strip()!r}, which is not a number")
    return f"answer with {n} numbers, separated by commas or spaces (that answer has {got})"


def grade(question, text):
    """(right?, what was understood): an answer as the learner typed it (never right when
    unreadable() finds it is not of the kind asked)."""
    if question.kind == 'choice':
        letter = choice_of(question, text)
        return letter == question.answer, letter
    if question.kind == 'number':
        values = readings(text)
        return any(abs(v - question.answer) <= question.tol for v in values), ' or '.join(f"{v:g}" for v in values)
    parts = split_numbers(text)
    if len(parts) != len(question.answer):
        return False, f"{len(parts)} number{'s' * (len(parts) != 1)}"
    ok = all(any(abs(v - a) <= question.tol for v in readings(p)) for p, a in zip(parts, question.answer))
    return ok, ', '.join(parts)


def right_answer(question):
    if question.kind == 'choice':
        return f"{question.answer}) {question.choices['abcd'.index(question.answer)]}"
    if question.kind == 'numbers':
        return ', '.join(f"{a:g}" for a in question.answer)
    return f"{question.answer:,.3f}".rstrip('0').rstrip('.') if isinstance(question.answer, float) else f"{question.answer:,}"


def wrapped(text, indent, first=''):
    return textwrap.fill(text, WIDTH, initial_indent=indent + first, subsequent_indent=indent + ' ' * len(first))


def ask_text(question, number=None):
    head = f"[{number}/{len(QUESTIONS)}] " if number else ''
    lines = [f"{head}{question.topic} ({question.id})", wrapped(question.text, '  ')]
    for letter, choice in zip('abcd', question.choices):
        lines.append(wrapped(choice, '    ', f"{letter}) "))
    return '\n'.join(lines)


def verdict_text(question, right, understood):
    first = "right." if right else f"not quite (read as {understood or 'no answer'}): the answer is {right_answer(question)}."
    return '\n'.join([wrapped(first, '  '), wrapped(question.why, '  ', 'why: '), wrapped(question.see, '  ', 'see it: ')])
