"""
inference: the numpy port of microgpt, computing every position of a sequence in one call.

    from microgpt import inference
    model = inference.load_checkpoint('out/model.json')        # a NumpyGPT
    logits, caps = model.forward([model.tokenizer.bos, 4, 12], capture=['attention_softmax'])
    logits.shape                       # (T, vocab_size) = (3, 27)
    caps['attention_softmax'].shape    # (n_layer, n_head, T, T), NaN where j > i

It lives in src/inference/ and is installed under the name `inference` (see pyproject.toml):
after `pip install -e .` (what `make run` and `make test` do) it imports from anywhere; the test
suite also puts src/ on sys.path. Read microgpt/model.py first: this port computes the same
thing, step for step, and tests/test_inference*.py check that the two agree.

Files: attention.py (one head's attention as an explicit loop over j <= i, and the masked
vectorised variant), model.py (NumpyGPT: forward with captures, loss; evaluate),
checkpoint.py (load_checkpoint). Only this package needs numpy; microgpt/ does not.
"""

from .attention import attention_head
from .checkpoint import load_checkpoint
from .model import CAPTURE_NAMES, NumpyGPT, evaluate, evaluate_windows

__all__ = ['load_checkpoint', 'NumpyGPT', 'attention_head', 'evaluate', 'evaluate_windows', 'CAPTURE_NAMES']
