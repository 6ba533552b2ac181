"""
What the Training page shows of each save of a run: a few names, or a line or two of running
text, sampled from the checkpoint just written with sample.py's sampler (microgpt/sampling.py).

    draw_sample('out/lab-runs/1/model.json')   # {'step': 100, 'names': [...]} or {'step', 'text'}

runs.py draws one whenever a run's checkpoint has been saved anew, so the page can watch the
samples improve.
"""

import random

from ..sampling import TEMPERATURE, generate, sample_names
from .loading import load
from .sampling import context

NUM_SAMPLES = 5                  # names shown after each save
TEXT_SAMPLE = 120                # characters of running text sampled after each save


def draw_sample(path):
    """What the page shows of each save: {'step' it was saved at, and a few 'names', or a line
    or two of running 'text' (after a newline, as sample.py starts)}, sampled by the numpy port
    on one BLAS thread: the run computes on the same cores, and OpenBLAS's default of a thread
    per core there left threads spinning (120 characters of the Shakespeare recipe's model took
    9.7 to 16.5 s so beside other work on the 2-core machine, 0.7 s on one thread: draw_sample
    timed both ways on a checkpoint of that shape, load average 5.6)."""
    from microgpt.backprop.threads import blas_threads
    ckpt, model = load(path)
    step = ckpt.train_state and ckpt.train_state.step
    with blas_threads(1):
        if ckpt.data_mode == 'text':
            start = context(model, '', 'text')
            return {'step': step, 'text': ''.join(generate(model, TEXT_SAMPLE, random.Random(42), TEMPERATURE, start))}
        return {'step': step, 'names': sample_names(model, num=NUM_SAMPLES, temperature=TEMPERATURE, seed=42)}
