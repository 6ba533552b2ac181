"""
The worked example of attention by hand: three tokens, "kočka spí venku", one head of
head_dim 4, query = token 3. Its vectors and its numbers to three decimals, written once.
byhand.py and scaling.py compute with them; the exercises check a learner's softmax and
attention against them.

Standard library only: the exercises' checks of the Value rung read these numbers in a Python
without numpy, where scaling.py and byhand.py cannot be imported.
"""

TOKENS = ['kočka', 'spí', 'venku']
# The query of token 3, the keys and values of tokens 1..3 (head_dim 4)
Q3 = [0.9, 0.8, 0.2, 0.1]
KEYS = [[0.9, 0.1, 0.4, 0.0], [0.0, 1.0, 0.0, 0.9], [0.8, 0.9, 0.1, 0.0]]
VALUES = [[0.2, 0.8, 0.0, 0.1], [0.7, 0.1, 0.3, 0.0], [0.1, 0.2, 0.9, 0.4]]
# Every token's query: q2 matters only when token 2 is the query
Q = [[1.0, 0.0, 0.5, 0.0], [0.0, 1.0, 0.0, 0.5], Q3]
# The numbers, to three decimals
RAW_SCORES = [0.97, 0.89, 1.46]           # q3 . k_j
SCORES = [s / 2 for s in RAW_SCORES]      # divided by sqrt(4): [0.485, 0.445, 0.730]
WEIGHTS = [0.309, 0.297, 0.395]           # their softmax (the last is 0.394521)
OUT3 = [0.309, 0.356, 0.444, 0.189]       # sum_j w_j v_j
WEIGHTS_X10 = [0.075, 0.051, 0.874]       # the softmax of the raw scores x 10 / 2: no sqrt(d), saturated
ROUNDING = 1.5e-3                         # three decimals, and sums of rounded products
