"""
Exercise 22 (on arrays, as the numpy rung): inverted dropout, its forward and its backward (the
real ones: src/backprop/layers.py, dropout_forward and dropout_backward; the masks are drawn by
src/backprop/dropout.py, which `python train.py --dropout P` turns on).

In training with dropout, each number at a dropout site (the stream after the embedding, each
head's attention weights, each branch before it joins the stream) is zeroed with probability p,
so that no weight can count on any one number being there: a model that memorizes leans on
exactly such numbers. The kept ones are divided by 1 - p ("inverted" dropout), so that the
expected value of every number is the number itself: evaluation and sampling, which never drop,
then see the scale training saw, and need no correction of their own.

Reading: docs/lessons.md, When the model memorizes; docs/reading-guide.md, section 9, file 1
(src/backprop/layers.py). See what memorizing looks like: `python -m microgpt.lab loss
out/model.log.jsonl`, the training loss against the validation loss; the web lab's Loss page.
Then run `python -m microgpt.lab exercises check 22`.
"""

import numpy as np


def dropout(x, kept, p, dy):
    """(y, dx): inverted dropout of x with the mask `kept`, and the gradient it hands back.

    x: a float array of any shape (T, n_embd) for the stream, (n_head, T, T) for attention
    weights. kept: a bool array of x's shape, True where the number is kept (each was kept with
    probability 1 - p when it was drawn). p: the dropout probability, 0 <= p < 1. dy: dL/dy, x's
    shape, the gradient handed back from the layer above.
    With the mask's factor f = 1 / (1 - p) where kept and 0 where dropped:
      y = f * x, entry by entry        E[y] = (1 - p) * x / (1 - p) + p * 0 = x
    f is drawn, not learned: a constant of the step. The idea for dx: what is the slope of y_i
    in x_i, and what does a dropped number get back?
    Returns y and dx, each of x's shape. Leave the input arrays unchanged.
    `python -m microgpt.lab exercises hint 22` gives the way there, one level at a time.
    """
    # solution
    factor = kept / (1.0 - p)  # (x's shape): 1/(1-p) where kept, 0 where dropped
    return x * factor, dy * factor
    # end solution
