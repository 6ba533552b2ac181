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
                     embedding_forward, gain_backward, gain_forward, gelu_backward, gelu_forward,
                     head_rmsnorm_backward, head_rmsnorm_forward, linear_backward,
                     linear_forward, relu_backward, relu_forward, residual_backward,
                     residual_forward, rmsnorm_backward, rmsnorm_forward, rope_angles,
                     rope_backward, rope_forward, swiglu_backward, swiglu_forward)

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
    The rungs (config.rope, mlp, norm_gains, qk_norm, n_kv_head, tie_embeddings) each add
    their layers where gpt() has them (microgpt/model.py), in its order.
    """
    sd, (B, T), c = weights, idx.shape, config
    rows = np.flatnonzero(mask)   # (R,): where each real position sits in the (B*T) layout
    ids = idx.reshape(-1)[rows]   # (R,): the token read at each row
    pos = rows % T                # (R,): its position in its name
    kv = c.n_kv_head * c.head_dim  # the keys' and values' width: n_embd unless heads share them
    caches = {'rope': c.rope and rope_angles(pos, c.head_dim, sd['wte'].dtype)}  # RoPE's (cos, sin)

    # 1) Token plus position (RoPE: the token alone), then rmsnorm (not redundant: the residual path).
    x, caches['embedding'] = embedding_forward(sd['wte'], None if c.rope else sd['wpe'], ids, pos)  # (R, n_embd)
    x, caches['rms0'] = rmsnorm_forward(x)                                      # (R, n_embd)
    if c.norm_gains:
        x, caches['norm_in'] = gain_forward(x, sd['norm_in'])                   # (R, n_embd)
    if dropout:
        x, caches['embedding.drop'] = dropout_forward(x, dropout.stream('embedding', rows, T))  # (R, n_embd)

    for li in range(config.n_layer):
        p = f'layer{li}.'
        # 2) Attention: each position gathers from itself and earlier positions of its own name.
        x_residual = x
        x, caches[p + 'rms_attn'] = rmsnorm_forward(x)                # (R, n_embd)
        if c.norm_gains:
            x, caches[p + 'attn_norm'] = gain_forward(x, sd[p + 'attn_norm'])  # (R, n_embd)
        # q, k and v are three linear maps of the same x: one product with the three matrices
        # stacked computes all three (the same sums; one large product runs faster than three)
        w_qkv = caches[p + 'w_qkv'] = stacked_qkv(sd, p)              # (n_embd + 2 * kv, n_embd): kept for the backward
        qkv, caches[p + 'attn_qkv'] = linear_forward(x, w_qkv)        # (R, n_embd + 2 * kv)
        q, k, v = np.split(qkv, [c.n_embd, c.n_embd + kv], axis=1)    # (R, n_embd), (R, kv), (R, kv): q = x @ attn_wq.T ...
        if c.qk_norm:  # each head's q and k to unit rms, then RoPE turns them (the spec's order)
            q, caches[p + 'q_norm'] = head_rmsnorm_forward(q, c.head_dim)  # (R, n_embd)
            k, caches[p + 'k_norm'] = head_rmsnorm_forward(k, c.head_dim)  # (R, kv)
        if c.rope:
            q, k = rope_forward(q, *caches['rope']), rope_forward(k, *caches['rope'])  # shapes kept
        drop = dropout and dropout.heads(p + 'attn_weights', T)      # (n_head, B, T, T) or None
        x, caches[p + 'attn'] = attention_forward(q, k, v, rows, B, T, config.n_head, drop)  # (R, n_embd)
        x, caches[p + 'attn_wo'] = linear_forward(x, sd[p + 'attn_wo'])  # (R, n_embd)
        if dropout:
            x, caches[p + 'attn_out.drop'] = dropout_forward(x, dropout.stream(p + 'attn_out', rows, T))
        x = residual_forward(x, x_residual)                           # (R, n_embd)

        # 3) MLP: each position on its own.
        x_residual = x
        x, caches[p + 'rms_mlp'] = rmsnorm_forward(x)                 # (R, n_embd)
        if c.norm_gains:
            x, caches[p + 'mlp_norm'] = gain_forward(x, sd[p + 'mlp_norm'])  # (R, n_embd)
        x_in = x
        x, caches[p + 'mlp_fc1'] = linear_forward(x, sd[p + 'mlp_fc1'])  # (R, mlp_hidden): 4 * n_embd but for SwiGLU
        if c.mlp == 'swiglu':
            gate, caches[p + 'mlp_gate'] = linear_forward(x_in, sd[p + 'mlp_gate'])  # (R, mlp_hidden)
            x, caches[p + 'swiglu'] = swiglu_forward(gate, x)         # (R, mlp_hidden)
        elif c.mlp == 'gelu':
            x, caches[p + 'gelu'] = gelu_forward(x)                   # (R, mlp_hidden)
        else:
            x, caches[p + 'relu'] = relu_forward(x)                   # (R, mlp_hidden)
        x, caches[p + 'mlp_fc2'] = linear_forward(x, sd[p + 'mlp_fc2'])  # (R, n_embd)
        if dropout:
            x, caches[p + 'mlp_out.drop'] = dropout_forward(x, dropout.stream(p + 'mlp_out', rows, T))
        x = residual_forward(x, x_residual)                           # (R, n_embd)

    # 4) Logits (a final norm with norm gains; none in microgpt) and the mean cross-entropy of
    # the real tokens. Tied embeddings score the tokens with wte itself.
    if c.norm_gains:
        x, caches['rms_f'] = rmsnorm_forward(x)                       # (R, n_embd)
        x, caches['norm_f'] = gain_forward(x, sd['norm_f'])           # (R, n_embd)
    logits, caches['lm_head'] = linear_forward(x, sd['wte' if c.tie_embeddings else 'lm_head'])  # (R, vocab_size)
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
    Tied embeddings: the loss reaches wte by two paths, the rows the embedding read and the
    output matrix, L = L(wte[ids], x @ wte.T); by the chain rule the two gradients add up:
        dwte = (embedding_backward's row sums) + (linear_backward's dw of the logits)
    """
    sd, grads, c = weights, {}, config
    stages = {} if stages is None else stages
    out = {} if out is None else out
    kv = c.n_kv_head * c.head_dim

    # 4) loss -> logits -> lm_head (wte when tied: its gradient is added at the end) -> final norm
    dlogits = stages['logits'] = cross_entropy_backward(caches['loss'], caches['n_tokens'])  # (R, vocab_size)
    head = 'wte' if c.tie_embeddings else 'lm_head'
    dx, dhead = linear_backward(dlogits, caches['lm_head'], sd[head], out.get('lm_head'))  # (R, n_embd), (vocab_size, n_embd)
    if not c.tie_embeddings:
        grads['lm_head'] = dhead
    stages['lm_head_in'] = dx
    if c.norm_gains:
        dx, grads['norm_f'] = gain_backward(dx, caches['norm_f'], out.get('norm_f'))  # (R, n_embd), (1, n_embd)
        dx = rmsnorm_backward(dx, caches['rms_f'])                               # (R, n_embd)

    for li in reversed(range(config.n_layer)):
        p = f'layer{li}.'
        # 3) MLP, backwards: dx reaches the stream through the residual and through the MLP
        d, dx = residual_backward(dx)                                            # (R, n_embd) each
        stages[p + 'mlp_out'] = d
        if p + 'mlp_out.drop' in caches:
            d = dropout_backward(d, caches[p + 'mlp_out.drop'])                  # (R, n_embd)
        d, grads[p + 'mlp_fc2'] = linear_backward(d, caches[p + 'mlp_fc2'], sd[p + 'mlp_fc2'], out.get(p + 'mlp_fc2'))  # (R, mlp_hidden)
        if c.mlp == 'swiglu':
            dgate, d = swiglu_backward(d, caches[p + 'swiglu'])                  # (R, mlp_hidden) each
        elif c.mlp == 'gelu':
            d = gelu_backward(d, caches[p + 'gelu'])                             # (R, mlp_hidden)
        else:
            d = relu_backward(d, caches[p + 'relu'])                             # (R, mlp_hidden)
        d, grads[p + 'mlp_fc1'] = linear_backward(d, caches[p + 'mlp_fc1'], sd[p + 'mlp_fc1'], out.get(p + 'mlp_fc1'))  # (R, n_embd)
        if c.mlp == 'swiglu':  # x fed the gate's product too: its gradient adds up with fc1's
            d_gate, grads[p + 'mlp_gate'] = linear_backward(dgate, caches[p + 'mlp_gate'], sd[p + 'mlp_gate'], out.get(p + 'mlp_gate'))
            d = add_to(d, d_gate)                                                # (R, n_embd)
        if c.norm_gains:
            d, grads[p + 'mlp_norm'] = gain_backward(d, caches[p + 'mlp_norm'], out.get(p + 'mlp_norm'))  # (R, n_embd), (1, n_embd)
        dx = add_to(rmsnorm_backward(d, caches[p + 'rms_mlp']), dx)              # (R, n_embd): the fork
        stages[p + 'mlp_in'] = dx

        # 2) attention, backwards: q, k and v all came from the same normed x, so theirs add up
        d, dx = residual_backward(dx)                                            # (R, n_embd) each
        stages[p + 'attn_out'] = d
        if p + 'attn_out.drop' in caches:
            d = dropout_backward(d, caches[p + 'attn_out.drop'])                 # (R, n_embd)
        d, grads[p + 'attn_wo'] = linear_backward(d, caches[p + 'attn_wo'], sd[p + 'attn_wo'], out.get(p + 'attn_wo'))  # (R, n_embd)
        dqkv = np.empty((len(d), c.n_embd + 2 * kv), dtype=d.dtype)              # (R, n_embd + 2 * kv)
        dq, dk, _ = attention_backward(d, caches[p + 'attn'], out=dqkv)          # dq, dk, dv side by side
        if c.rope:  # turned back by -theta, each in its place in dqkv
            dq[...], dk[...] = rope_backward(dq, *caches['rope']), rope_backward(dk, *caches['rope'])
        if c.qk_norm:
            dq[...] = head_rmsnorm_backward(dq, caches[p + 'q_norm'])            # (R, n_embd)
            dk[...] = head_rmsnorm_backward(dk, caches[p + 'k_norm'])            # (R, kv)
        # the stacked product's backward: dx = dq @ wq + dk @ wk + dv @ wv in one product, and
        # the stacked gradient's three blocks are dwq, dwk, dwv
        d, dw_qkv = linear_backward(dqkv, caches[p + 'attn_qkv'], caches[p + 'w_qkv'])  # (R, n_embd)
        blocks = np.split(dw_qkv, [c.n_embd, c.n_embd + kv])                    # (n_embd, n_embd), (kv, n_embd) twice
        for name, dw in zip(('attn_wq', 'attn_wk', 'attn_wv'), blocks):
            grads[p + name] = dw if p + name not in out else copied(dw, out[p + name])
        if c.norm_gains:
            d, grads[p + 'attn_norm'] = gain_backward(d, caches[p + 'attn_norm'], out.get(p + 'attn_norm'))  # (R, n_embd), (1, n_embd)
        dx = add_to(rmsnorm_backward(d, caches[p + 'rms_attn']), dx)             # (R, n_embd): the fork
        stages[p + 'attn_in'] = dx

    # 1) the first rmsnorm, then the embeddings' rows
    if 'embedding.drop' in caches:
        dx = dropout_backward(dx, caches['embedding.drop'])                      # (R, n_embd)
    if c.norm_gains:
        dx, grads['norm_in'] = gain_backward(dx, caches['norm_in'], out.get('norm_in'))  # (R, n_embd), (1, n_embd)
    dx = stages['embedding'] = rmsnorm_backward(dx, caches['rms0'])              # (R, n_embd)
    grads['wte'], dwpe = embedding_backward(dx, caches['embedding'], c.vocab_size,
                                            c.block_size, (out.get('wte'), out.get('wpe')))
    if not c.rope:
        grads['wpe'] = dwpe
    if c.tie_embeddings:
        grads['wte'] += dhead  # wte's second use, as the output matrix
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
    """attn_wq, attn_wk, attn_wv of block p one above the other: (n_embd + 2 * kv, n_embd),
    kv = n_kv_head * head_dim (n_embd: 3 * n_embd, unless heads share keys and values)."""
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
