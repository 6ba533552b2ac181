"""
The lessons' own numbers that the checks and the quiz use (docs/lessons.md describes the lessons;
their text is not shipped). Each is what the lesson prints, with its rounding.
"""

# The Czech lesson, "attention by hand": three tokens, one head, head_dim 4. It gives q1 and q3;
# q2 is the lab's (microgpt/lab/byhand.py: x2's pattern, as q1 is x1's).
CZECH_Q = [[1.0, 0.0, 0.5, 0.0], [0.0, 1.0, 0.0, 0.5], [0.9, 0.8, 0.2, 0.1]]
CZECH_KEYS = [[0.9, 0.1, 0.4, 0.0], [0.0, 1.0, 0.0, 0.9], [0.8, 0.9, 0.1, 0.0]]
CZECH_VALUES = [[0.2, 0.8, 0.0, 0.1], [0.7, 0.1, 0.3, 0.0], [0.1, 0.2, 0.9, 0.4]]
CZECH_SCORES = [0.485, 0.445, 0.730]          # step 3: q3 . k_j / sqrt(4)
CZECH_WEIGHTS = [0.309, 0.297, 0.394]         # step 4 (0.394521: the lesson truncates the last)
CZECH_OUT3 = [0.309, 0.356, 0.444, 0.189]     # step 6
CZECH_WEIGHTS_X10 = [0.075, 0.051, 0.874]     # exercise 2: every score times ten
# The lesson prints 3 decimals and once truncates instead of rounding (0.394521 as 0.394).
LESSON_ROUNDING = 1.5e-3
