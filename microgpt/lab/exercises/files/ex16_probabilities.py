"""
Exercise 16: temperature, the logits of the next character as probabilities to draw from (the
real one: microgpt/sampling.py, probabilities).

Reading: docs/reading-guide.md, section 1, file 9, and section 6 (temperature and top-k).
See it live: `python -m microgpt.lab sampling`, the web lab's Sampling page.
Then run `python -m microgpt.lab exercises check 16`.
"""

import math


def probabilities(logits, temperature):
    """softmax(logits / temperature) as plain floats: a list that sums to 1.

    logits: plain floats (the .data of gpt()'s output). temperature: a float >= 0. Below 1
    it sharpens the distribution (safer names), above 1 it flattens it (bolder ones).
    temperature == 0 means greedy: probability 1.0 on the largest logit (the first one if
    several tie) and 0.0 on every other; no division by 0.
    Subtract the largest logit BEFORE dividing by the temperature: every difference is then
    <= 0, and dividing it by a tiny temperature (1e-300) gives a very negative number whose
    exp() is 0, never an overflow; dividing first would turn a logit of 2 into 2e300.
    """
    # solution
    n = len(logits)
    if temperature == 0:
        best = max(range(n), key=lambda i: logits[i])
        return [1.0 if i == best else 0.0 for i in range(n)]
    top = max(logits)
    e = [math.exp((l - top) / temperature) for l in logits]
    total = sum(e)
    return [ei / total for ei in e]
    # end solution
