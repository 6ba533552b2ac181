"""
Exercise 15: one Adam update with bias correction (the real one: microgpt/optim.py, Adam.step).

Reading: docs/reading-guide.md, section 1, file 8 (optim.py), and section 5 (one training
step). See it live: `python -m microgpt.lab step anna`, section 4; the web lab's Step page.
Then run `python -m microgpt.lab exercises check 15`.
"""

import math


def adam_step(params, m, v, t, lr, beta1=0.85, beta2=0.99, eps=1e-8):
    """One Adam update of every parameter, in place. Returns nothing.

    params: Values whose .grad holds this step's gradient. m, v: lists of floats, one per
    parameter, the running mean of the gradient and of its square (0.0 before the first
    step); update them in place (m[i] = ...). t: this step's number, 1 for the first.
    The math, for each parameter with gradient g at step t:
      m_t = beta1 m_(t-1) + (1 - beta1) g        the running mean of g
      v_t = beta2 v_(t-1) + (1 - beta2) g^2      and of g squared
      m^ = m_t / (1 - beta1^t),  v^ = v_t / (1 - beta2^t)
                                                 the bias correction: m and v start at 0, so
                                                 early on they are too small; this undoes it
      the weight moves by -lr m^ / (sqrt(v^) + eps)
    and its gradient is used up: it is 0 after the step (see optim.py's note).
    On the first step m^ = g and v^ = g^2, so every weight with a gradient moves by
    lr * |g| / (|g| + eps): almost exactly lr, whatever the size of its gradient.
    `python -m microgpt.lab exercises hint 15` gives the way there, one level at a time.
    """
    # solution
    bias1 = 1 - beta1 ** t
    bias2 = 1 - beta2 ** t
    for i, p in enumerate(params):
        g = p.grad
        m[i] = beta1 * m[i] + (1 - beta1) * g
        v[i] = beta2 * v[i] + (1 - beta2) * g * g
        m_hat = m[i] / bias1
        v_hat = v[i] / bias2
        p.data -= lr * m_hat / (math.sqrt(v_hat) + eps)
        p.grad = 0.0
    # end solution
