"""
Exercise 21: decoupled weight decay, AdamW's, beside your Adam (the real one: microgpt/optim.py,
Adam.step with weight_decay, which `python train.py --weight-decay WD` turns on).

A model that memorizes its training names keeps lowering their loss while the loss of names it
has never seen stops falling. Weight decay pulls every weight a little towards 0 at each step,
so a weight stays large only as long as the gradients keep asking for it.

It uses your adam_step (15), unchanged: "decoupled" means that the decay stands outside Adam.

Reading: docs/lessons.md, When the model memorizes; docs/reading-guide.md, section 1, file 8
(optim.py, whose docstring says why decoupled decay is not L2). See Adam's step live:
`python -m microgpt.lab step anna`, section 4; the web lab's Lesson 04 step page.
Then run `python -m microgpt.lab exercises check 21`.
"""

from ex15_adam import adam_step


def adamw_step(params, m, v, t, lr, weight_decay, beta1=0.85, beta2=0.99, eps=1e-8):
    """One AdamW update of every parameter, in place: the decay, then Adam's step. Returns nothing.

    params, m, v, t, lr, beta1, beta2, eps: as your adam_step's (exercise 15). weight_decay: the
    fraction of itself a weight loses per unit of learning rate (train.py's --weight-decay; 0 is
    Adam exactly). For each weight w, with s = lr m^ / (sqrt(v^) + eps), Adam's step from its
    gradient g at step t:
      w_t = w_(t-1) - lr weight_decay w_(t-1) - s  =  (1 - lr weight_decay) w_(t-1) - s
    The decay is decoupled from the gradient: g is left as it is, so m and v are Adam's running
    means of g alone, exactly what they would be without any decay. A weight whose gradient is 0
    has s = 0 and only shrinks: after T steps it is w_0 times the product of (1 - lr_t weight_decay).
    Order matters: shrink first, then move. Shrinking after the move would shrink s too, by
    lr weight_decay s: a small change, but not the update AdamW (and microgpt) take.
    `python -m microgpt.lab exercises hint 21` gives the way there, one level at a time.
    """
    # solution
    for p in params:
        p.data *= 1 - lr * weight_decay  # decoupled: the weight shrinks, Adam's m and v never see it
    adam_step(params, m, v, t, lr, beta1, beta2, eps)
    # end solution
