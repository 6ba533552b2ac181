"""
gpt()'s attention weights, read from outside: a test helper.

gpt() takes no trace argument (the numpy port's captures are how the lab looks inside). Tests
that check those captures against the scalar model instead swap in building blocks that record
every softmax: in gpt(), softmax is applied only to attention scores, once per layer and head,
in that order. The logits are untouched: the recorder returns the blocks' own softmax nodes.
"""


class _RecordingOps:
    """The model's building blocks, with every softmax output's numbers kept in `weights`."""

    def __init__(self, blocks):
        self.blocks, self.weights = blocks, []

    def __getattr__(self, name):
        return getattr(self.blocks, name)

    def softmax(self, logits):
        p = self.blocks.softmax(logits)
        self.weights.append([w.data for w in p])
        return p


def gpt_with_trace(model, token_id, pos_id, keys, values):
    """(logits, {'layer{li}.head{h}': attention weights over positions 0..pos_id})."""
    recorder, saved = _RecordingOps(model.blocks), model.blocks
    model.blocks = recorder
    try:
        logits = model.gpt(token_id, pos_id, keys, values)
    finally:
        model.blocks = saved
    names = [f'layer{li}.head{h}' for li in range(model.config.n_layer) for h in range(model.config.n_head)]
    assert len(recorder.weights) == len(names), "gpt() called softmax other than once per head"
    return logits, dict(zip(names, recorder.weights))
