"""
Taps on gpt()'s building blocks: see what passes through them, or drop some of it.

gpt() calls its building blocks through one object, `model.blocks` (ops.py or fused.py). A Tap
stands in for that object: every call goes on to the real block, and the Tap sees its input
and output on the way. So the lesson's gpt() carries neither the lab's readings nor training's
dropout. Each call is known by where it is: the matrix a linear layer applies (wte..lm_head),
which rmsnorm of the position (the embedding's, then each layer's attention's and MLP's; with
the rungs, QK-norm's heads and the final norm too), and which attention head a softmax belongs
to. The rmsnorm of the embedding starts a position.

    Recorder: each position's intermediates by name, for the lab's step (microgpt/lab/step.py)
    Dropout:  --dropout's masks applied where src/backprop/dropout.py says, for the Value engine

Both are checked against what they replace: the recorded Values against the numpy port's
captures (tests/test_model.py), the dropped losses against the numpy engine's
(tests/test_dropout.py).
"""

from ..training import doc_losses, mean_loss


class Tap:
    """Stands in for a blocks module: calls pass through, and `seen(site, x)` / `out(site, y)`
    hear each site's input and output (out may hand back another output): 'embedding',
    'layer{i}.attn_in' (an rmsnorm's input), 'layer{i}.attn_wq' (a linear's output; its input
    is 'layer{i}.attn_wq.in'), 'layer{i}.attn_weights', ..."""

    def __init__(self, model, blocks=None):
        self.blocks, cfg = blocks or model.blocks, model.config  # the real blocks: ops or fused
        # a linear's w -> its name; wte reaches a linear only as tied embeddings' output matrix
        self.matrix = {id(w): 'lm_head' if name == 'wte' else name for name, w in model.state_dict.items()}
        qk = ['qk_norm'] * (cfg.n_head + cfg.n_kv_head) * cfg.qk_norm  # QK-norm: each q head's, then each k head's
        self.norms = (['embedding'] + [f'layer{li}.{part}' for li in range(cfg.n_layer)
                                       for part in ('attn_in', *qk, 'mlp_in')] + ['final_norm'] * cfg.norm_gains)
        self.heads = [(li, h) for li in range(cfg.n_layer) for h in range(cfg.n_head)]
        self.n_norms = self.n_softmaxes = 0
        self.position = -1  # the position being computed: the embedding's rmsnorm moves it on

    def __getattr__(self, name):  # dot, vsum, cross_entropy: straight to the block
        return getattr(self.blocks, name)

    def rmsnorm(self, x):
        site = self.norms[self.n_norms % len(self.norms)]
        self.n_norms += 1
        if site == 'embedding':
            self.position += 1
        self.seen(site, x)
        return self.out(f'{site}.normed', self.blocks.rmsnorm(x))

    def linear(self, x, w):
        name = self.matrix.get(id(w), '')
        self.seen(f'{name}.in', x)
        return self.out(name, self.blocks.linear(x, w))

    def softmax(self, logits):
        li, h = self.heads[self.n_softmaxes % len(self.heads)]
        self.n_softmaxes += 1
        self.seen(f'layer{li}.attn_logits', logits, h)
        return self.out(f'layer{li}.attn_weights', self.blocks.softmax(logits), h)

    def seen(self, site, x, head=None):
        pass

    def out(self, site, y, head=None):
        return y


# The Recorder's names for the sites it keeps (the Tap's own names where they say it already).
RENAMED = {'attn_wq': 'q', 'attn_wk': 'k', 'attn_wv': 'v', 'attn_wo': 'attn_out', 'mlp_fc2.in': 'mlp_hidden',
           'mlp_fc2': 'mlp_out', 'lm_head.in': 'lm_head_in', 'lm_head': 'logits'}
KEPT = {'embedding', 'attn_in', 'mlp_in', 'attn_logits', 'attn_weights', *RENAMED.values()}


def recorded_name(site):
    """A site's name as recorded ('layer0.attn_wq' -> 'layer0.q'), or None for a site not kept."""
    layer, _, part = site.partition('.') if site.startswith('layer') else ('', '', site)
    part = RENAMED.get(part, part)
    if part not in KEPT:
        return None
    return f'{layer}.{part}' if layer else part


class Recorder(Tap):
    """Each position's intermediates, {name: Values}, in `captures` (one dict a position): the
    embedding and the stream into each layer's attention and MLP, q, k, v, every head's scores
    and weights (a list over heads), what attention and the MLP add, the MLP's hidden layer
    after the ReLU, the stream into lm_head, and the logits. The Values are gpt()'s own."""

    def __init__(self, model):
        super().__init__(model)
        self.captures = []

    def seen(self, site, x, head=None):
        self.out(site, x, head)

    def out(self, site, y, head=None):
        name = recorded_name(site)
        if name == 'embedding':
            self.captures.append({})
        if name is not None and head is None:
            self.captures[-1][name] = y
        elif name is not None:
            self.captures[-1].setdefault(name, []).append(y)
        return y


class Dropout(Tap):
    """Inverted dropout on the Value engine: each output a mask covers, times the mask's factor
    (0 where dropped, 1/(1-P) where kept). masks: one dict a position, {site: factors}, as
    backprop's dropout.Masks.positions gives them: the embedding after its rmsnorm, each head's
    attention weights (a list over heads), and what attention and the MLP add to the stream."""

    def __init__(self, model, masks, blocks=None):
        super().__init__(model, blocks)
        self.masks = masks

    def out(self, site, y, head=None):
        mask = self.masks[self.position].get('embedding' if site == 'embedding.normed' else recorded_name(site))
        if mask is not None and head is not None:
            mask = mask[head]
        return y if mask is None else [yi * m for yi, m in zip(y, mask)]


def dropout_batch_loss(model, batch, dropout):
    """training.batch_loss with each name's dropout masks (dropout: one list of position masks a
    name): the mean cross-entropy over every predicted token, each name through its own Tap."""
    blocks, losses = model.blocks, []
    try:
        for tokens, masks in zip(batch, dropout):
            model.blocks = Dropout(model, masks, blocks)
            losses += doc_losses(model, tokens)
    finally:
        model.blocks = blocks
    return mean_loss(model, losses)
