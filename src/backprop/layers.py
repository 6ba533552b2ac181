"""
Every layer of microgpt's GPT as a forward / backward pair on numpy arrays, gradients by hand.

Read this after microgpt/engine.py and src/inference/model.py. The scalar engine finds each
gradient by walking a graph of Values; here every layer's gradient is derived once, on paper,
in its backward's docstring, and written as a few array operations. The forward pieces are the
port's own (inference.model.linear, rms_scale, split_heads, cross_entropy and
inference.attention.softmax, causal_mask), or its arithmetic operation for operation where an
array is written in place: the math is the same, float for float, only the batch is new.

Speed. Most of a step is its matrix products; what is left is passes over arrays, each bounded by
memory: so the large arrays are changed in place where nothing else reads them (the attention
scores, relu's gradient, rmsnorm's backward), and each head's output is written straight into
its columns of the merged array instead of being merged by a copy afterwards.

The convention, as in llm.c: a layer's `*_forward(...)` returns (output, cache), the cache
holding what its backward needs, and `*_backward` takes first dL/d(output), the gradient of the
loss with respect to the forward's output, then that cache (rmsnorm, attention, the embedding),
or, for a layer of one line that keeps no cache, the forward's own inputs (linear: x and w; relu:
its input; a residual add needs none). cross_entropy_backward takes only the cache: the loss is
the end, its gradient 1. Each returns the gradients with respect to its inputs (and its
weights), written into `out=` arrays where given; a gradient always has the shape of the thing
it is the gradient of.

Shapes. A batch of B names is processed as R rows, one per real position of every name, the
names one after the other: every layer but attention works on (R, n_embd) arrays exactly as
the port works on (T, n_embd), and never computes anything for padding. Attention alone needs
the names apart and aligned: it places the rows into a padded (B * T) layout, T the longest
name, and sees (n_head, B, T, head_dim), heads first as in the port, the batch as one more
leading axis. (The linear, rmsnorm and MLP work is two thirds of a step; names.txt batches of
32 are about one third padding, which these layers thus skip.)

The modern rungs (docs/modern.md: RoPE, GELU, SwiGLU, norm gains, QK-norm, grouped-query attention)
add their pairs in the same way, each where the algorithm meets it; tied embeddings need none,
only the sum of wte's two gradients (model.py).

tests/test_backprop_layers.py checks every backward against central finite differences, and
tests/test_modern_backprop.py the rungs'.
"""

import functools

import numpy as np

from ..inference.attention import causal_mask, softmax
from ..inference.model import GELU_C, cross_entropy, gelu, linear, rms_scale, sigmoid, split_heads
from microgpt.model import rope_frequencies
from microgpt.ops import RMS_EPS  # microgpt's rmsnorm epsilon, as every engine's



# ---------------------------------------------------------------------------- embedding
def embedding_forward(wte, wpe, ids, pos):
    """x[r] = wte[ids[r]] + wpe[pos[r]] for every row r: its token's vector plus its position's.

    ids, pos: (R,) token id and position of each row. Returns (x (R, n_embd), cache).
    wpe None (RoPE: the position turns q and k instead): x[r] = wte[ids[r]], and no dwpe.
    """
    if wpe is None:
        return wte[ids], (ids, None)  # (R, n_embd)
    return wte[ids] + wpe[pos], (ids, pos)  # (R, n_embd)


def embedding_backward(dx, cache, vocab_size, block_size, out=(None, None)):
    """Gradients of wte and wpe: each row used gets back the gradient of every place it was used.

    Forward: x[r, :] = wte[ids[r], :] + wpe[pos[r], :]. Row v of wte appears in x at every row
    r with ids[r] = v, each time with derivative 1, so
        dwte[v, :] = sum over r with ids[r] = v of dx[r, :]          (vocab_size, n_embd)
    (a letter used three times gets three gradients added up; an unused row gets 0), and in
    the same way
        dwpe[t, :] = sum over r with pos[r] = t of dx[r, :]          (block_size, n_embd)
    (Both sums are one matrix product with a one-hot matrix, onehot[r, v] = 1 if ids[r] = v:
    dwte = onehot^T @ dx, which BLAS does far quicker than adding row by row.)
    ids, pos: (R,) as in the forward; dx: (R, n_embd). out: two arrays to write dwte, dwpe into.
    """
    ids, pos = cache
    # rows of tokens never read, and of positions past the sequence, stay 0
    return (np.matmul(one_hot(ids, vocab_size, dx.dtype).T, dx, out=out[0]),   # (vocab_size, n_embd)
            None if pos is None else
            np.matmul(one_hot(pos, block_size, dx.dtype).T, dx, out=out[1]))   # (block_size, n_embd)


def one_hot(ids, n, dtype):
    """(R, n) with a 1 in column ids[r] of row r and 0 elsewhere."""
    out = np.zeros((len(ids), n), dtype=dtype)  # (R, n)
    out[np.arange(len(ids)), ids] = 1
    return out


# ---------------------------------------------------------------------------- rmsnorm
def rmsnorm_forward(x):
    """y = x * s row by row, s = (mean(x^2) + eps)^(-1/2): the port's rmsnorm (so the same
    floats), keeping y and s for the backward."""
    s = rms_scale(x, RMS_EPS)  # (R, 1)
    y = x * s                  # (R, n) with n = n_embd
    return y, (y, s)


def rmsnorm_backward(dy, cache):
    """dx for y = x * s, s = (mean_k x_k^2 + eps)^(-1/2), one row at a time (n = row length).

    With ms = mean_k x_k^2: ds/dx_j = -1/2 (ms + eps)^(-3/2) * 2 x_j / n = -s^3 x_j / n, so
        y_i = x_i s  gives  d y_i / d x_j = s delta_ij - x_i s^3 x_j / n
    and, with dy_i = dL/dy_i the gradient handed in,
        dx_j = sum_i dy_i (d y_i / d x_j) = s dy_j - s^3 x_j (sum_i dy_i x_i) / n
             = s (dy_j - y_j * mean_i(dy_i y_i))             using y = x s
    dy, y: (R, n); s: (R, 1). Computed in one (R, n) array, each step written over the last.
    """
    y, s = cache
    dx = dy * y                                      # (R, n): dy_i y_i
    mean = dx.mean(axis=-1, keepdims=True)           # (R, 1): mean_i(dy_i y_i)
    np.multiply(y, mean, out=dx)                     # y_j * mean_i(dy_i y_i)
    np.subtract(dy, dx, out=dx)                      # dy_j - y_j * mean_i(dy_i y_i)
    dx *= s
    return dx                                        # (R, n)


# ---------------------------------------------------------------------------- norm gains
def gain_forward(x, g):
    """y = x * (1 + g): a norm's learned gain, stored as its difference g from 1 (a (1, n) row,
    the same for every row of x), keeping x and g."""
    return x * (1 + g), (x, g)  # (R, n)


def gain_backward(dy, cache, dg=None):
    """dx and dg for y[r, i] = x[r, i] * (1 + g[0, i]).

    d y[r, i] / d x[r, i] = 1 + g[0, i], so      dx = dy * (1 + g)                    (R, n)
    d y[r, i] / d g[0, i] = x[r, i]; every row uses the same g, so, as for a weight in
    linear_backward, the rows' shares add up:    dg = sum_r dy[r, :] * x[r, :]       (1, n)
    dg: an array to write dg into (the trainer's flat gradient), or None for a new one.
    """
    x, g = cache
    return dy * (1 + g), np.sum(dy * x, axis=0, keepdims=True, out=dg)  # (R, n), (1, n)


# ---------------------------------------------------------------------------- QK-norm
def head_rmsnorm_forward(x, head_dim):
    """QK-norm: rmsnorm (no gain) over each head's head_dim numbers, row by row.
    x: (R, n_heads * head_dim), q's or k's heads side by side."""
    y, cache = rmsnorm_forward(x.reshape(len(x), -1, head_dim))  # (R, n_heads, head_dim)
    return y.reshape(x.shape), cache                              # (R, n_heads * head_dim)


def head_rmsnorm_backward(dy, cache):
    """dx for QK-norm: each head's head_dim numbers are normed apart, as if each were a row of
    its own, so rmsnorm_backward's derivation holds head by head with n = head_dim:
        dx_j = s (dy_j - y_j * mean_i(dy_i y_i)),   i, j over one head's numbers
    with y, dy: (R, n_heads, head_dim) and s: (R, n_heads, 1). Returns dx shaped as dy."""
    y, _ = cache
    return rmsnorm_backward(dy.reshape(y.shape), cache).reshape(dy.shape)  # (R, n_heads * head_dim)


# ---------------------------------------------------------------------------- linear
def linear_forward(x, w):
    """y = x @ w.T for w stored [n_out, n_in], as everywhere: the port's linear, keeping x."""
    return linear(x, w), x  # (R, n_out)


def linear_backward(dy, x, w, dw=None):
    """dx and dw for y = x @ w.T, i.e. y[r, o] = sum_i x[r, i] w[o, i].

    d y[r, o] / d x[r, i] = w[o, i], so    dx = dy @ w      (R, n_out) @ (n_out, n_in) = (R, n_in)
    d y[r, o] / d w[o, i] = x[r, i], summed over rows r:
                                          dw = dy.T @ x    (n_out, R) @ (R, n_in) = (n_out, n_in)
    The transpose in dw is what stores it [n_out, n_in] like w; every row r (every position
    of every name) adds its share to the same weight. dw: an array to write dw into (the
    trainer's flat gradient), or None for a new one.
    """
    return dy @ w, np.matmul(dy.T, x, out=dw)  # (R, n_in), (n_out, n_in)


# ---------------------------------------------------------------------------- relu
def relu_forward(x):
    """max(x, 0), keeping x. The 0 is a row of zeros, broadcast down the rows: numpy's maximum of
    two arrays runs in vector instructions, of an array and a scalar one number at a time (the
    same result, measured 2.3x slower on the MLP's (R, 4 * n_embd) array)."""
    return np.maximum(x, np.zeros(x.shape[-1], dtype=x.dtype)), x  # same shape as x


def relu_backward(dy, x):
    """d max(x, 0) / dx = 1 where x > 0, else 0 (0 at x = 0, as Value.relu): dx = dy * (x > 0).

    Written into dy itself (model.py hands in a fresh array it does not use again): one pass
    over the widest array of the step instead of two.
    """
    np.multiply(dy, x > 0, out=dy)
    return dy  # same shape as x


# ---------------------------------------------------------------------------- GELU

def gelu_forward(u):
    """GPT-2's GELU in its tanh form, 0.5 u (1 + tanh(c (u + 0.044715 u^3))): the port's gelu,
    keeping u."""
    return gelu(u), u  # same shape as u


def gelu_backward(dy, u):
    """du for y = 0.5 u (1 + t), t = tanh(z), z = c (u + 0.044715 u^3), entry by entry.

    dt/du = (1 - t^2) dz/du = (1 - t^2) c (1 + 3 * 0.044715 u^2), so by the product rule
        dy/du = 0.5 (1 + t) + 0.5 u (1 - t^2) c (1 + 3 * 0.044715 u^2)
    and du = dy * dy/du, shaped as u.
    """
    t = np.tanh(GELU_C * (u + 0.044715 * u * u * u))  # same shape as u, as the port's gelu
    return dy * (0.5 * (1 + t) + 0.5 * u * (1 - t * t) * GELU_C * (1 + 3 * 0.044715 * u * u))


# ---------------------------------------------------------------------------- SwiGLU
def swiglu_forward(a, b):
    """h = silu(a) * b, silu(a) = a * sigmoid(a): the gate a (x @ mlp_gate.T) sets how much of
    b (x @ mlp_fc1.T) passes, entry by entry (the port's sigmoid); keeping a, b and sigmoid(a),
    which the backward needs again: kept, its tanh over every entry runs once a step, not twice."""
    s = sigmoid(a)                # (R, mlp_hidden)
    return a * s * b, (a, b, s)   # (R, mlp_hidden)


def swiglu_backward(dh, cache):
    """da and db for h = silu(a) * b, entry by entry, with s = sigmoid(a), ds/da = s (1 - s):
        dh/db = silu(a) = a s                                   db = dh * a s
        dh/da = b silu'(a), silu'(a) = s + a s (1 - s)          da = dh * b * s (1 + a (1 - s))
    a, b, dh: (R, mlp_hidden).
    """
    a, b, s = cache                                     # (R, mlp_hidden) each
    return dh * b * s * (1 + a * (1 - s)), dh * a * s   # da, db


# ---------------------------------------------------------------------------- residual
def residual_forward(x, x_residual):
    """x + x_residual: the block adds its output to the stream."""
    return x + x_residual  # same shape


def residual_backward(dy):
    """d(x + x_residual)/dx = d(x + x_residual)/dx_residual = 1: both get dy whole (the
    gradient highway). Returns (dx, dx_residual), the same array twice.

    The caller adds the branch's gradient to this one where the stream forked.
    """
    return dy, dy


# ---------------------------------------------------------------------------- dropout
def dropout_forward(x, m):
    """x * m: inverted dropout with the mask m (0 where a number is dropped, 1 / (1 - P) where
    it is kept; dropout.py draws it), keeping m. Only training calls it."""
    return x * m, m  # same shape as x


def dropout_backward(dy, m):
    """y = x * m, entry by entry, with m fixed (drawn, not learned): dy/dx = m, so dx = dy * m.
    A dropped number passed nothing forward and gets no gradient back; a kept one gets its
    gradient scaled by the same 1 / (1 - P) its value was."""
    return dy * m  # same shape as dy


# ---------------------------------------------------------------------------- RoPE
def rope_angles(pos, head_dim, dtype):
    """cos and sin of the angles theta[r, m] = pos[r] * rope_frequencies(head_dim)[m] by which
    row r's pair m turns: (R, 1, head_dim // 2) each, the 1 because every head turns alike."""
    theta = pos[:, None, None] * np.array(rope_frequencies(head_dim))  # (R, 1, head_dim // 2)
    return np.cos(theta).astype(dtype), np.sin(theta).astype(dtype)


def rope_forward(x, cos, sin):
    """RoPE: in every head of row r, pair m = (a, b) = (x[2m], x[2m + 1]) turned by theta[r, m]:
    (a, b) -> (a cos - b sin, a sin + b cos). x: (R, n_heads * head_dim); returns the same shape.
    Keeps nothing: the backward needs only the angles."""
    a, b = np.moveaxis(x.reshape(len(x), -1, cos.shape[-1], 2), -1, 0)  # (R, n_heads, head_dim // 2) each
    y = np.empty(a.shape + (2,), dtype=x.dtype)                          # (R, n_heads, head_dim // 2, 2)
    y[..., 0] = a * cos - b * sin
    y[..., 1] = a * sin + b * cos
    return y.reshape(x.shape)                                            # (R, n_heads * head_dim)


def rope_backward(dy, cos, sin):
    """dx for y = rope(x). Each pair is y = M x with M = [[cos, -sin], [sin, cos]], the turn by
    theta, so dx = M^T dy, and M^T = [[cos, sin], [-sin, cos]] is the turn by -theta: the same
    forward with sin negated (cos(-t) = cos t, sin(-t) = -sin t). dy: (R, n_heads * head_dim)."""
    return rope_forward(dy, cos, -sin)


# ---------------------------------------------------------------------------- attention
def softmax_(z):
    """The port's softmax (inference.attention.softmax), computed in z's own memory: on the
    (n_head, B, T, T) scores of running text it is the largest array of the step. The row's
    largest entry comes from fmax, which is max wherever no entry is NaN (a NaN row stays NaN
    either way) and skips max's check for NaN at every entry: a third quicker here."""
    z -= np.fmax.reduce(z, axis=-1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=-1, keepdims=True)
    return z


@functools.lru_cache(maxsize=None)
def future_scores(T, dtype):
    """(T, T): -inf where key j lies in the future of query i (j > i), 0 elsewhere. Added to
    the scores, it sets the future to -inf and leaves the rest as it was (x + 0 = x), in one
    pass that is quicker than writing -inf through a boolean mask. Read-only: it is shared."""
    scores = np.where(causal_mask(T), -np.inf, 0.0).astype(dtype)  # (T, T)
    scores.flags.writeable = False
    return scores


def rows_to_heads(x, rows, B, T, n_head):
    """(R, n_embd) -> (n_head, B, T, head_dim): the rows placed into the padded (B * T) layout
    (padding rows 0), split into heads as the port does it, the B * T rows parted into names.
    A batch without padding (running-text windows, all T long) is already in that layout."""
    if len(rows) == B * T:
        padded = x  # (B*T, n_embd): rows is 0..B*T-1, nothing to place
    else:
        padded = np.zeros((B * T, x.shape[1]), dtype=x.dtype)  # (B*T, n_embd)
        padded[rows] = x
    return split_heads(padded, n_head).reshape(n_head, B, T, -1)  # (n_head, B, T, head_dim)


def heads_of(merged, n_head, B, T):
    """The (n_head, B, T, head_dim) VIEW of a (B * T, n_embd) array: writing a head's output
    into it writes that head's columns of `merged`, so the heads need no merging afterwards.
    (A reshape that only splits axes, of a contiguous array or of a block of its columns, and a
    transpose are always views, never copies.)"""
    return merged.reshape(B, T, n_head, -1).transpose(2, 0, 1, 3)  # (n_head, B, T, head_dim)


def attention_forward(q, k, v, rows, B, T, n_head, drop=None):
    """Causal multi-head attention over a batch: every head, name and position at once.

    q, k, v: (R, n_embd), one row per real position of the batch; rows: (R,) where each sits
    in the padded (B * T) layout, row b * T + t for name b's position t. rows_to_heads places
    them there and splits the heads, (n_head, B, T, head_dim). Query i of a name scores every
    key j of the same name, scaled by 1/sqrt(head_dim); the future (j > i) is set to -inf, so
    the softmax gives it weight exactly 0; the output is the weighted average of the values,
    each head's written straight into its columns of the (B * T, n_embd) result (heads_of).
    Padding sits after each name's tokens, so no real position ever sees it; the padded rows'
    outputs are dropped. drop: in training with dropout, a (n_head, B, T, T) mask
    (dropout.Masks.heads) the weights are multiplied by before they average the values.
    Grouped-query attention: k and v narrower than q, (R, n_kv_head * head_dim), each kv head
    read by n_head // n_kv_head query heads (shared_heads). Returns (out (R, n_embd), cache).
    """
    head_dim = q.shape[1] // n_head
    qh, kh, vh = (rows_to_heads(x, rows, B, T, x.shape[1] // head_dim) for x in (q, k, v))  # (heads, B, T, head_dim) each
    n_kv_head = len(kh)
    kh, vh = shared_heads(kh, n_head), shared_heads(vh, n_head)  # (n_head, B, T, head_dim) each
    scale = qh.shape[-1] ** -0.5  # 1/sqrt(head_dim), as gpt()
    logits = qh @ kh.swapaxes(-1, -2)                     # (n_head, B, T, T): logits[.., i, j]
    logits *= scale
    logits += future_scores(T, logits.dtype)              # (n_head, B, T, T): exp(-inf) = 0
    att = softmax_(logits)                                # (n_head, B, T, T), rows sum to 1
    kept = att if drop is None else att * drop            # (n_head, B, T, T): the weights the values see
    merged = np.empty((B * T, q.shape[1]), dtype=q.dtype)  # (B*T, n_embd)
    oh = heads_of(merged, n_head, B, T)                   # (n_head, B, T, head_dim): a view
    np.matmul(kept, vh, out=oh)                           # each head's output, in its columns
    out = merged if len(rows) == B * T else merged[rows]  # (R, n_embd)
    return out, (qh, kh, vh, att, rows, oh, drop, kept, n_kv_head)


def shared_heads(h, n_head):
    """Grouped-query attention's sharing: (n_kv_head, B, T, head_dim) -> (n_head, B, T, head_dim),
    kv head j copied for each query head h with h // (n_head // n_kv_head) = j (as it is when
    n_kv_head = n_head)."""
    return h if len(h) == n_head else np.repeat(h, n_head // len(h), axis=0)  # (n_head, B, T, head_dim)


def matmul_shared(a, b, out):
    """a @ b, (n_head, B, T, head_dim), written into out, (n_kv_head, B, T, head_dim): the
    gradient of shared_heads' input from the gradient of its output. The copy of kv head j read by
    query head h is one more use of the same numbers, so, as for a weight read by many rows,
        dk[j] = sum over h with h // (n_head // n_kv_head) = j of dk'[h]
    the sum over each group of n_head // n_kv_head consecutive query heads."""
    if len(out) == len(a):
        return np.matmul(a, b, out=out)  # no sharing: written straight in
    return np.sum((a @ b).reshape(len(out), -1, *out.shape[1:]), axis=1, out=out)  # (n_kv_head, group, B, T, head_dim) summed


def attention_backward(dout, cache, out=None):
    """dq, dk, dv for out = softmax(mask(q k^T * scale)) v, per head and name.

    With a = att (T, T), z = the scaled logits, i the query position and j, j' key positions,
    every line per head and name:
      out = a @ v            dv = a^T @ dout                       (T, T)^T @ (T, head_dim)
                             da = dout @ v^T                       (T, head_dim) @ (head_dim, T)
      a_i = softmax(z_i)     d a_ij' / d z_ij = a_ij' (delta_jj' - a_ij), so, row by row,
                             dz_ij = sum_j' da_ij' a_ij' (delta_jj' - a_ij)
                                   = a_ij (da_ij - sum_j' da_ij' a_ij')                 (T, T)
                             a masked entry has a_ij = 0, so it passes no gradient on;
                             and sum_j' da_ij' a_ij' = sum_j' (dout_i . v_j') a_ij' = dout_i . out_i,
                             a sum over head_dim numbers instead of T (FlashAttention's trick)
      z = q @ k^T * scale    dq = dz @ k * scale                   (T, T) @ (T, head_dim)
                             dk = dz^T @ q * scale                 (T, T)^T @ (T, head_dim)
    With dropout the values see b = a * m instead of a (m the fixed mask): then dv = b^T @ dout,
    the gradient reaching a is db * m = (dout @ v^T) * m, and the sum above is still
    sum_j' da_ij' a_ij' = sum_j' (dout_i . v_j') m_ij' a_ij' = dout_i . out_i, out being b @ v.
    The scatter into the padded layout and the gather of the real rows are undone the other
    way round: dout is scattered (padding gets 0), the input gradients are gathered.
    With shared kv heads (grouped-query attention), dk and dv come per query head, then each
    group's are added up (matmul_shared).
    dout: (R, n_embd). out: where to write dq, dk and dv side by side, (R, n_embd + 2 * kv) with
    kv = n_kv_head * head_dim (model.py's stacked q, k, v product takes them as one array); a new
    array if None. Returns dq (R, n_embd), dk and dv (R, kv): the three column blocks of out.
    """
    qh, kh, vh, att, rows, oh, drop, kept, n_kv_head = cache
    n_head, B, T, head_dim = qh.shape
    n_embd, kv = n_head * head_dim, n_kv_head * head_dim
    if out is None:
        out = np.empty((len(rows), n_embd + 2 * kv), dtype=qh.dtype)       # (R, n_embd + 2 * kv)
    padded = out if len(rows) == B * T else np.empty((B * T, n_embd + 2 * kv), dtype=qh.dtype)  # (B*T, n_embd + 2 * kv)
    # dq, dk, dv as views into padded's three column blocks, each split into heads
    dqh = heads_of(padded[:, :n_embd], n_head, B, T)                  # (n_head, B, T, head_dim)
    dkh, dvh = (heads_of(padded[:, i:i + kv], n_kv_head, B, T) for i in (n_embd, n_embd + kv))  # (n_kv_head, B, T, head_dim) each
    dout = rows_to_heads(dout, rows, B, T, n_head)                    # (n_head, B, T, head_dim)
    matmul_shared(kept.swapaxes(-1, -2), dout, dvh)                   # dv = a^T @ dout (b^T with dropout)
    dz = dout @ vh.swapaxes(-1, -2)                                   # (n_head, B, T, T): da, in place below
    if drop is not None:
        dz *= drop                                                    # through the mask: da = db * m
    dz -= (dout * oh).sum(axis=-1, keepdims=True)                     # da_ij - sum_j' da_ij' a_ij'
    dz *= att                                                         # times a_ij
    dz *= head_dim ** -0.5  # now the gradient of q k^T, before the scale
    np.matmul(dz, kh, out=dqh)                                        # dq = dz @ k
    matmul_shared(dz.swapaxes(-1, -2), qh, dkh)                       # dk = dz^T @ q
    if padded is not out:
        out[...] = padded[rows]                                       # the real rows only
    return np.split(out, [n_embd, n_embd + kv], axis=1)               # (R, n_embd), (R, kv), (R, kv)


# ---------------------------------------------------------------------------- the loss
def cross_entropy_forward(logits, targets, n=None):
    """The sum of -log softmax(logits[r])[targets[r]] over the rows r, divided by n.

    logits: (R, vocab_size); targets: (R,) ints. Every row is a real predicted token (model.py
    computes nothing for padding), so with n = R (the default) this is the mean over the batch:
    the sum of every name's token losses over their number. When the batch is split into
    parts that run at once (parallel.py), each part passes the whole batch's count as n, so
    the parts' losses, and their gradients (pass the backward the same n), add up to the whole
    batch's. The port's cross_entropy gives each row's loss.
    """
    loss = cross_entropy(logits, targets).sum() / (len(targets) if n is None else n)  # cross_entropy: (R,)
    return loss, (logits, targets)


def cross_entropy_backward(cache, n=None):
    """dL/dlogits for L = sum_r (logsumexp(logits_r) - logits_r[t_r]) / n, n = R by default.

    d logsumexp(z)/dz_k = softmax(z)_k = p_k and d z_t / dz_k = delta_kt, so
        dlogits[r, k] = (p[r, k] - delta(k, t_r)) / n                       (R, vocab_size)
    """
    logits, targets = cache
    p = softmax(logits)                        # (R, vocab_size)
    p[np.arange(len(targets)), targets] -= 1.0
    p *= 1.0 / (len(targets) if n is None else n)  # as doc_loss's mean: times 1/n
    return p                                   # (R, vocab_size)
