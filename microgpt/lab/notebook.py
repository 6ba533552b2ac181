"""
What the lessons' notebooks (notebooks/NN_*.py, docs/notebooks.md) share, so that each notebook
holds only its lesson: a folder for its files that is gone when the kernel stops, a lab answer
drawn inline by its sandbox's own picture, and the exercises a lesson leads to, checked in the
learner's folder from a cell. Only the notebooks import it (IPython comes with their extra).
"""

import os
import tempfile

from .__main__ import main

# the folder microgpt/ is in: the checkout, where `exercises start` writes by default
CHECKOUT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def work_folder():
    """A temporary folder for a notebook's checkpoints, logs and pictures; keep the returned
    object in a variable: the folder is removed when it is collected, at the kernel's end."""
    return tempfile.TemporaryDirectory(prefix='microgpt-notebook-')


def show(sandbox, answer, path, source):
    """Draw a lab answer with its sandbox's own picture (what `--png` writes) into `path` and show
    it in the notebook; source: what the picture's title says it shows."""
    from IPython.display import Image, display
    sandbox.picture(str(path), answer, source)
    display(Image(filename=str(path)))


def check_exercises(numbers):
    """Check the learner's exercises `numbers` in order, stopping at the first not passed (its case
    and hint printed), as `python -m microgpt.lab exercises check N` does. The folder is the
    checkout's `exercises/` (or $MICROGPT_EXERCISES), its stubs written once if it is not there:
    a file of the learner's is never overwritten."""
    folder = os.environ.get('MICROGPT_EXERCISES') or os.path.join(CHECKOUT, 'exercises')
    if not os.path.isdir(folder):
        main(['exercises', 'start', folder])
    for number in numbers:
        if main(['exercises', 'check', str(number), '--dir', folder]) != 0:
            break  # fix this one first
