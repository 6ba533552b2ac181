"""
The lessons' own numbers that the checks and the quiz use (docs/lessons.md describes the lessons;
their text is not shipped). Each is what the lesson prints, with its rounding.

Standard library only (the numbers come from lab/czech.py, not from the numpy pages that draw
them): the Value rung's checks run in a Python without numpy.
"""

# The Czech lesson, "attention by hand": three tokens, one head, head_dim 4, as the lab's Scaling
# and By hand pages hold them (q2 is the lab's: x2's pattern, as q1 is x1's). The checks want the
# scores scaled by 1/sqrt(4), step 3's, where the lesson's are unscaled.
from ..czech import CZECH_KEYS, CZECH_Q, CZECH_VALUES, CZECH_WEIGHTS  # noqa: F401 (imported from here)
from ..czech import CZECH_OUT as CZECH_OUT3  # noqa: F401 (step 6)
from ..czech import CZECH_SCORES as UNSCALED_SCORES

CZECH_SCORES = [s / 2 for s in UNSCALED_SCORES]  # step 3: q3 . k_j / sqrt(4), [0.485, 0.445, 0.730]

# The lesson prints 3 decimals and once truncates instead of rounding (0.394521 as 0.394).
LESSON_ROUNDING = 1.5e-3
