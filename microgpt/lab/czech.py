"""
The Czech lesson's worked example, "kočka spí venku" (docs/lessons.md): its vectors and the
numbers it prints, written once. scaling.py and byhand.py draw them; the exercises check a
learner's softmax and attention against them (exercises/lessons.py).

Standard library only: the exercises' checks of the Value rung read these numbers in a Python
without numpy, where scaling.py and byhand.py cannot be imported.
"""

# The query of token 3, the keys and values of tokens 1..3 (head_dim 4)
CZECH_Q3 = [0.9, 0.8, 0.2, 0.1]
CZECH_KEYS = [[0.9, 0.1, 0.4, 0.0], [0.0, 1.0, 0.0, 0.9], [0.8, 0.9, 0.1, 0.0]]
CZECH_VALUES = [[0.2, 0.8, 0.0, 0.1], [0.7, 0.1, 0.3, 0.0], [0.1, 0.2, 0.9, 0.4]]
# The lesson gives q1 and q3 only: q2 is ours (x2's pattern, as q1 is x1's), needed only when the
# query is token 2.
CZECH_Q = [[1.0, 0.0, 0.5, 0.0], [0.0, 1.0, 0.0, 0.5], CZECH_Q3]
# What the lesson prints, with its rounding (the 0.394 is 0.394521 truncated)
CZECH_SCORES = [0.97, 0.89, 1.46]
CZECH_WEIGHTS = [0.309, 0.297, 0.394]
CZECH_OUT = [0.309, 0.356, 0.444, 0.189]
CZECH_WEIGHTS_X10 = [0.075, 0.051, 0.874]
