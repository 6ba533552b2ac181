"""
The whole GPT, forward and backward, on a padded batch of names: loss and one gradient per weight.

Read layers.py first. `model_forward` runs microgpt's gpt() steps 1 to 4 (numbered as in
microgpt/model.py and the port) on B names at once, keeping every layer's cache on a list;
`model_backward` walks that list in reverse, calling each layer's backward, and returns
{name: gradient}, every gradient shaped like its weight, [n_out, n_in], under microgpt's names.
`loss_and_grads` is the two together.

A batch is a list of token lists [BOS] + ids + [BOS] (microgpt.training.doc_tokens). Name b
predicts n_b = num_predictions(tokens, block_size) tokens, cut as doc_loss cuts it; make_batch
pads the batch to T = max n_b positions, and model_forward computes only the real positions
(padding is rebuilt inside attention alone), so the loss is the sum of every real predicted
token's loss divided by their number, sum_b n_b. For B = 1 that is doc_loss exactly; for more,
it is the token-weighted mean of the names' losses (tests/test_backprop_model.py checks both
against the scalar engine).
"""

import numpy as np

from microgpt.edge.errors import UserError
from microgpt.training import num_predictions

from .layers import (attention_backward, attention_forward, cross_entropy_backward,
                     cross_entropy_forward, dropout_backward, dropout_forward, embedding_backward,
                     embedding_forward, linear_backward,
                     linear_forward, relu_backward, relu_forward, residual_backward,
                     residual_forward, rmsnorm_backward, rmsnorm_forward)

PAD = 0  # the id written into padding; any valid id works: model_forward drops padded positions


def make_batch(batch, block_size, vocab_size):
    """(idx (B, T), targets (B*T,), mask (B*T,)) for a list of B token lists, padded to T.

    idx[b, t] is the token read at position t, targets[b * T + t] the one to predict there,
    mask 1.0 where that is a real token of name b and 0.0 on padding.
    """
    lengths = [num_predictions(tokens, block_size) for tokens in batch]  # as doc_loss: past the block, cut
    B, T = len(batch), max(lengths)
    idx = np.full((B, T), PAD, dtype=np.intp)             # (B, T)
    targets = np.full((B, T), PAD, dtype=np.intp)         # (B, T)
    mask = np.zeros((B, T))                               # (B, T)
    for b, (tokens, n) in enumerate(zip(batch, lengths)):
        idx[b, :n] = tokens[:n]
        targets[b, :n] = tokens[1:n + 1]
        mask[b, :n] = 1.0
    if idx.min() < 0 or max(idx.max(), targets.max()) >= vocab_size:
        raise UserError(f"a token id is outside the vocabulary (0..{vocab_size - 1}): "
                        "encode the names with the model's tokenizer")
    return idx, targets.reshape(-1), mask.reshape(-1)    # (B, T), (B*T,), (B*T,)


def model_forward(weights, config, idx, targets, mask, n_tokens=None, dropout=None):
    """The loss (a float) and the caches model_backward needs. weights: {name: (n_out, n_in)}.

    idx, targets, mask: make_batch's padded batch. Only its real positions become rows (R of
    them, name after name); padding is made again inside attention, the one layer that needs
    the names aligned, and never reaches the loss. The loss is the sum of the tokens' losses
    over n_tokens: R by default, the mean; a part of a split batch passes the whole batch's.
    dropout: the batch's dropout.Masks, in training with --dropout; each site multiplies by
    its mask and keeps it in caches[site] for the backward (None: nothing is dropped).
    """
    sd, (B, T) = weights, idx.shape
    rows = np.flatnonzero(mask)   # (R,): where each real position sits in the (B*T) layout
    ids = idx.reshape(-1)[rows]   # (R,): the token read at each row
    pos = rows % T                # (R,): its position in its name
    caches = {}

    # 1) Token plus position, then rmsnorm (not redundant, because of the residual path).
    x, caches['embedding'] = embedding_forward(sd['wte'], sd['wpe'], ids, pos)  # (R, n_embd)
    x, caches['rms0'] = rmsnorm_forward(x)                                      # (R, n_embd)
    if dropout:
        x, caches['embedding.drop'] = dropout_forward(x, dropout.stream('embedding', rows, T))  # (R, n_embd)

    for li in range(config.n_layer):
        p = f'layer{li}.'
        # 2) Attention: each position gathers from itself and earlier positions of its own name.
        x_residual = x
        x, caches[p + 'rms_attn'] = rmsnorm_forward(x)                # (R, n_embd)
        # q, k and v are three linear maps of the same x: one product with the three matrices
        # stacked computes all three (the same sums; one large product runs faster than three)
        w_qkv = caches[p + 'w_qkv'] = stacked_qkv(sd, p)              # (3 * n_embd, n_embd): kept for the backward
        qkv, caches[p + 'attn_qkv'] = linear_forward(x, w_qkv)        # (R, 3 * n_embd)
        q, k, v = np.split(qkv, 3, axis=1)                            # (R, n_embd) each: q = x @ attn_wq.T ...
        drop = dropout and dropout.heads(p + 'attn_weights', T)      # (n_head, B, T, T) or None
        x, caches[p + 'attn'] = attention_forward(q, k, v, rows, B, T, config.n_head, drop)  # (R, n_embd)
        x, caches[p + 'attn_wo'] = linear_forward(x, sd[p + 'attn_wo'])  # (R, n_embd)
        if dropout:
            x, caches[p + 'attn_out.drop'] = dropout_forward(x, dropout.stream(p + 'attn_out', rows, T))
        x = residual_forward(x, x_residual)                           # (R, n_embd)

        # 3) MLP: each position on its own.
        x_residual = x
        x, caches[p + 'rms_mlp'] = rmsnorm_forward(x)                 # (R, n_embd)
        x, caches[p + 'mlp_fc1'] = linear_forward(x, sd[p + 'mlp_fc1'])  # (R, 4 * n_embd)
        x, caches[p + 'relu'] = relu_forward(x)                       # (R, 4 * n_embd)
        x, caches[p + 'mlp_fc2'] = linear_forward(x, sd[p + 'mlp_fc2'])  # (R, n_embd)
        if dropout:
            x, caches[p + 'mlp_out.drop'] = dropout_forward(x, dropout.stream(p + 'mlp_out', rows, T))
        x = residual_forward(x, x_residual)                           # (R, n_embd)

    # 4) Logits (no final norm, as in microgpt) and the mean cross-entropy of the real tokens.
    logits, caches['lm_head'] = linear_forward(x, sd['lm_head'])      # (R, vocab_size)
    loss, caches['loss'] = cross_entropy_forward(logits, targets[rows], n_tokens)  # real tokens only
    caches['n_tokens'] = n_tokens
    return float(loss), caches


def model_backward(weights, config, caches, stages=None, out=None):
    """{name: dL/dweight}, each (n_out, n_in): model_forward's steps in reverse, layer by layer.

    Each residual add hands its gradient whole to the block and to the stream
    (layers.residual_backward); where the forward forked the stream (x_residual = x, then x
    goes through the block), the backward adds the two gradients that come back to it.
    stages: a dict to fill with the gradient arriving at each point of the stream, under the
    names gpt()'s capture= gives those points (the lab's Step page shows their norms).
    out: {name: array (n_out, n_in)} to write each gradient into (the trainer's views into one
    flat array: no gradient is allocated, then copied there); None: new arrays.
    """
    sd, grads = weights, {}
    stages = {} if stages is None else stages
    out = {} if out is None else out

    # 4) loss -> logits -> lm_head
    dlogits = stages['logits'] = cross_entropy_backward(caches['loss'], caches['n_tokens'])  # (R, vocab_size)
    dx, grads['lm_head'] = linear_backward(dlogits, caches['lm_head'], sd['lm_head'], out.get('lm_head'))  # (R, n_embd)
    stages['lm_head_in'] = dx

    for li in reversed(range(config.n_layer)):
        p = f'layer{li}.'
        # 3) MLP, backwards: dx reaches the stream through the residual and through the MLP
        d, dx = residual_backward(dx)                                            # (R, n_embd) each
        stages[p + 'mlp_out'] = d
        if p + 'mlp_out.drop' in caches:
            d = dropout_backward(d, caches[p + 'mlp_out.drop'])                  # (R, n_embd)
        d, grads[p + 'mlp_fc2'] = linear_backward(d, caches[p + 'mlp_fc2'], sd[p + 'mlp_fc2'], out.get(p + 'mlp_fc2'))  # (R, 4 * n_embd)
        d = relu_backward(d, caches[p + 'relu'])                                 # (R, 4 * n_embd)
        d, grads[p + 'mlp_fc1'] = linear_backward(d, caches[p + 'mlp_fc1'], sd[p + 'mlp_fc1'], out.get(p + 'mlp_fc1'))  # (R, n_embd)
        dx = add_to(rmsnorm_backward(d, caches[p + 'rms_mlp']), dx)              # (R, n_embd): the fork
        stages[p + 'mlp_in'] = dx

        # 2) attention, backwards: q, k and v all came from the same normed x, so theirs add up
        d, dx = residual_backward(dx)                                            # (R, n_embd) each
        stages[p + 'attn_out'] = d
        if p + 'attn_out.drop' in caches:
            d = dropout_backward(d, caches[p + 'attn_out.drop'])                 # (R, n_embd)
        d, grads[p + 'attn_wo'] = linear_backward(d, caches[p + 'attn_wo'], sd[p + 'attn_wo'], out.get(p + 'attn_wo'))  # (R, n_embd)
        dqkv = np.empty((len(d), 3 * config.n_embd), dtype=d.dtype)              # (R, 3 * n_embd)
        attention_backward(d, caches[p + 'attn'], out=dqkv)                      # dq, dk, dv side by side
        # the stacked product's backward: dx = dq @ wq + dk @ wk + dv @ wv in one product, and
        # the stacked gradient's three blocks are dwq, dwk, dwv
        d, dw_qkv = linear_backward(dqkv, caches[p + 'attn_qkv'], caches[p + 'w_qkv'])  # (R, n_embd)
        for name, dw in zip(('attn_wq', 'attn_wk', 'attn_wv'), np.split(dw_qkv, 3)):  # (n_embd, n_embd) each
            grads[p + name] = dw if p + name not in out else copied(dw, out[p + name])
        dx = add_to(rmsnorm_backward(d, caches[p + 'rms_attn']), dx)             # (R, n_embd): the fork
        stages[p + 'attn_in'] = dx

    # 1) the first rmsnorm, then the embeddings' rows
    if 'embedding.drop' in caches:
        dx = dropout_backward(dx, caches['embedding.drop'])                      # (R, n_embd)
    dx = stages['embedding'] = rmsnorm_backward(dx, caches['rms0'])              # (R, n_embd)
    grads['wte'], grads['wpe'] = embedding_backward(dx, caches['embedding'], config.vocab_size,
                                                    config.block_size, (out.get('wte'), out.get('wpe')))
    return grads


def add_to(a, b):
    """a + b, written into a (a fresh array the caller no longer needs): one array fewer to
    allocate. b + a and a + b are the same float, so the sum is the one `b + a` gives."""
    a += b
    return a


def copied(a, into):
    """into, with a's numbers copied in."""
    into[...] = a
    return into


def stacked_qkv(weights, p):
    """attn_wq, attn_wk, attn_wv of block p one above the other: (3 * n_embd, n_embd)."""
    return np.concatenate([weights[p + 'attn_wq'], weights[p + 'attn_wk'], weights[p + 'attn_wv']])


def flat_views(flat, shapes):
    """{name: (n_out, n_in) view into the flat array}, the matrices one after the other in shapes'
    order, each row by row (GPT.params' order): writing a view writes the flat array."""
    views, start = {}, 0
    for name, (n_out, n_in) in shapes.items():
        views[name] = flat[start:start + n_out * n_in].reshape(n_out, n_in)  # (n_out, n_in)
        start += n_out * n_in
    return views


def loss_and_grads(weights, config, batch, n_tokens=None, out=None, dropout=None):
    """(loss, {name: gradient}) for a list of token lists: microgpt's names, [n_out, n_in] each.

    weights: {name: float64 or float32 array (n_out, n_in)}. The loss is the mean over every predicted
    token of the batch; for one name it is microgpt.training.doc_loss. n_tokens and out are
    model_forward's and model_backward's: a part of a split batch passes the whole batch's
    token count, and the trainer its gradient views to write into. dropout: the batch's
    dropout.Masks in training with --dropout.
    """
    idx, targets, mask = make_batch(batch, config.block_size, config.vocab_size)
    loss, caches = model_forward(weights, config, idx, targets, mask, n_tokens, dropout)
    return loss, model_backward(weights, config, caches, out=out)
