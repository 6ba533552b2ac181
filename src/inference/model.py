"""
The numpy port of microgpt's GPT: every position of a sequence in one call.

Read it side by side with microgpt/model.py. The scalar `gpt()` sees ONE position per call
and keeps the earlier positions' keys and values in a KV cache. `NumpyGPT.forward` takes the
whole sequence of T token ids and computes all T positions together: each step of gpt()
(numbered 1 to 4 in both files) becomes one matrix operation on a (T, n_embd) array, except
attention, which loops over query positions i and lets each see only keys j <= i. Nothing
here is cached: position i's keys are simply rows 0..i of each head's (T, head_dim) keys. The
two compute the same logits (tests/test_inference.py and test_modern_engines.py check to 1e-10).

forward(token_ids, capture=...) also hands back intermediate arrays, by name, for the lab and
for lessons. With L = n_layer, H = n_head, K = n_kv_head (H unless heads share keys), D = head_dim:

    attention_logits   (L, H, T, T)   q.k / sqrt(head_dim) for query i, key j; NaN where j > i
    attention_softmax  (L, H, T, T)   the attention weights; each row sums to 1; NaN where j > i
    q                  (L, H, T, D)   each head's query at every position, as scored
    k, v               (L, K, T, D)   each kv head's key (as scored) and value: what the KV cache holds
    head_output        (L, H, T, D)   each head's weighted average of values, before attn_wo
    mlp_pre_relu       (L, T, mlp_hidden)  the MLP's hidden layer before its nonlinearity; for
                                           SwiGLU the gate, linear(x, mlp_gate), that silu is applied to
    logits             (T, vocab_size)     the output, scores for the token after each position

"As scored": after QK-norm and RoPE, where those rungs are on.

The modern rungs (GPTConfig's rope, mlp, norm_gains, qk_norm, n_kv_head, tie_embeddings) are a
few lines each in both forwards, marked with their names, computed as gpt() computes them. With
every one off (the default) this is microgpt's model exactly.

forward() is the reference, written for reading; forward_batch() computes the same logits for
a batch of sequences with attention as one masked softmax per head, about 15x quicker for one
sequence, and is what loss(), evaluate() and sampling use.

Both forwards stop at the first overflow with DivergedModelError, a one-line UserError: a
checkpoint of a diverged run (huge or non-finite weights) fails the same way for every reader.

Weights are float64 arrays stored [n_out, n_in] under microgpt's names (wte, wpe, lm_head,
layer{i}.attn_wq, ...), exactly as in a checkpoint, so applying one to the rows of x is
x @ w.T (see `linear`).
"""

import functools
import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from microgpt.edge.errors import DIVERGED, UserError
from microgpt.model import parameter_shapes
from microgpt.ops import RMS_EPS
from microgpt.training import doc_tokens, num_predictions

from .attention import attention_head, causal_mask, rope, softmax

# Everything forward() can hand back; capture='all' means all of them.
CAPTURE_NAMES = ('attention_logits', 'attention_softmax', 'q', 'k', 'v', 'head_output',
                 'mlp_pre_relu', 'logits')


# ---------------------------------------------------------------------------- building blocks
def linear(x, w):
    """Apply w, stored [n_out, n_in], to every row of x (T, n_in): x @ w.T is (T, n_out).

    The transpose is there because a checkpoint stores one row per OUTPUT, as microgpt does;
    row i of the result is what the scalar `linear(x_i, w)` returns for position i. A batch
    (B, T, n_in) is flattened to its rows first: one matrix product, where x @ w.T on a 3-d x
    is B small ones (for 64 windows of 64 positions through the MLP's 128 -> 512 in float32,
    3.2 ms against 4.5, measured on an AMD EPYC at one thread).
    """
    rows = x.reshape(-1, x.shape[-1])                      # (B*T, n_in), or (T, n_in) as it is
    return (rows @ w.T).reshape(*x.shape[:-1], w.shape[0])  # (..., n_out)


def rmsnorm(x, eps=RMS_EPS):
    """Scale each row of x to root-mean-square 1, as ops.rmsnorm (and fused.rmsnorm) does for one vector."""
    return x * rms_scale(x, eps)  # (T, n_embd)


def rms_scale(x, eps=RMS_EPS):
    """What rmsnorm multiplies each row of x by, (mean(x^2) + eps)^(-1/2): (T, 1). (backprop's
    rmsnorm keeps it for its backward.)"""
    ms = (x * x).sum(axis=-1, keepdims=True) / x.shape[-1]  # (T, 1): each position's mean square
    return (ms + eps) ** -0.5                                # (T, 1)


def norm(x, sd, gain):
    """rmsnorm(x), times (1 + sd[gain]) where the model has that gain (the norm gains rung: a
    gain is stored as its difference from 1, so 0 leaves the plain rmsnorm; see is_gain)."""
    x = rmsnorm(x)                                     # (..., n_embd)
    return x * (1 + sd[gain][0]) if gain in sd else x  # (..., n_embd)


def sigmoid(u):
    """1 / (1 + e^-u), written as (1 + tanh(u / 2)) / 2: the same number, with no exp to overflow."""
    return 0.5 * (1.0 + np.tanh(0.5 * u))  # same shape as u


# GELU's tanh-form constant sqrt(2/pi), a Python float: numpy's float64 np.sqrt would turn a
# float32 u into float64
GELU_C = math.sqrt(2 / math.pi)


def gelu(u):
    """GELU in GPT-2's tanh form, 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3))): a smooth ReLU
    that lets a little of a negative input through (PyTorch's F.gelu(u, approximate='tanh')).
    u * u * u, not u ** 3, which numpy computes by pow() at every entry, ten times slower."""
    return 0.5 * u * (1.0 + np.tanh(GELU_C * (u + 0.044715 * u * u * u)))  # same shape as u


def mlp_hidden_layer(x, sd, li, kind):
    """Layer li's MLP hidden layer for the normed rows x, and what its nonlinearity was applied to
    (the capture 'mlp_pre_relu'): two (..., mlp_hidden) arrays. kind is config.mlp:
    relu and gelu apply to linear(x, mlp_fc1); SwiGLU's silu to the gate, linear(x, mlp_gate),
    whose output then scales linear(x, mlp_fc1) number by number."""
    pre = linear(x, sd[f'layer{li}.mlp_gate' if kind == 'swiglu' else f'layer{li}.mlp_fc1'])  # (..., mlp_hidden)
    if kind == 'swiglu':
        return pre, pre * sigmoid(pre) * linear(x, sd[f'layer{li}.mlp_fc1'])  # (..., mlp_hidden)
    return pre, gelu(pre) if kind == 'gelu' else np.maximum(pre, 0.0)        # (..., mlp_hidden)


def split_heads(x, n_head):
    """(T, n_head * head_dim) -> (n_head, T, head_dim): each head's slice of every position, heads first."""
    T, n_embd = x.shape
    return x.reshape(T, n_head, n_embd // n_head).transpose(1, 0, 2)  # (n_head, T, head_dim)


def merge_heads(x):
    """(n_head, T, head_dim) -> (T, n_embd): the heads side by side again, as gpt()'s x_attn."""
    n_head, T, head_dim = x.shape
    return x.transpose(1, 0, 2).reshape(T, n_head * head_dim)  # (T, n_embd)


def cross_entropy(logits, targets):
    """-log softmax(logits[i])[targets[i]] for every row i: logsumexp minus the target's logit."""
    zmax = logits.max(axis=-1, keepdims=True)                                # (T, 1)
    logsumexp = zmax[:, 0] + np.log(np.exp(logits - zmax).sum(axis=-1))     # (T,)
    return logsumexp - logits[np.arange(len(targets)), targets]             # (T,)


# ---------------------------------------------------------------------------- a diverged model
class DivergedModelError(UserError, FloatingPointError):
    """The forward pass overflowed: the weights are those of a run that diverged.

    A UserError, so every command prints it as one line; also a FloatingPointError, so a
    caller that already watches numpy's overflow (train.py's validation loss) still sees one.
    """


def finite_forward(method):
    """Run a forward method so that an overflow anywhere in it is a DivergedModelError.

    numpy alone would carry on: a weight of 1e300 squares to inf inside rmsnorm, and
    x * inf ** -0.5 is a plausible-looking 0, so the logits can look fine. Raising at the
    first overflow (and checking the logits, which a matrix product may overflow without
    numpy noticing) gives every reader of a model, in the lab and elsewhere, one check.
    """
    @functools.wraps(method)
    def checked(self, *args, **kwargs):
        try:
            with np.errstate(over='raise', invalid='raise'):
                result = method(self, *args, **kwargs)
        except FloatingPointError:
            raise DivergedModelError(DIVERGED) from None
        logits = result[0] if isinstance(result, tuple) else result  # (T, vocab_size)
        if not np.isfinite(logits).all():
            raise DivergedModelError(DIVERGED)
        return result
    return checked


# ---------------------------------------------------------------------------- the KV cache
class KVCache:
    """What gpt()'s keys and values lists hold, as arrays: each layer's keys and values of the
    positions fed so far, (B, n_kv_head, length, head_dim). forward_batch(idx, cache) reads them
    and appends idx's, so a generated token costs one position's work, not the window's. Each
    layer's arrays are made once, a block long, and filled in place: nothing is copied.

    The keys are kept as they are scored (after QK-norm and RoPE), so a cached key is never
    computed again. With grouped-query attention the cache holds n_kv_head heads, not n_head:
    n_head // n_kv_head query heads read each, so it is that many times smaller (n_head times
    for multi-query, n_kv_head = 1). That memory, at long contexts, is why large models share."""

    def __init__(self, n_layer, block_size):
        self.keys, self.values = [None] * n_layer, [None] * n_layer
        self.block_size = block_size
        self.length = 0  # positions held: the next one fed is at this position

    def extend(self, li, k, v):
        """Layer li's keys and values with k, v (B, H, T, D) appended: views (B, H, length + T,
        D) of the block-long arrays. The last layer's call moves `length` on."""
        B, H, T, D = k.shape
        if self.keys[li] is None:
            self.keys[li] = np.empty((B, H, self.block_size, D), dtype=k.dtype)    # (B, H, block_size, D)
            self.values[li] = np.empty((B, H, self.block_size, D), dtype=v.dtype)  # (B, H, block_size, D)
        end = self.length + T
        self.keys[li][:, :, self.length:end] = k
        self.values[li][:, :, self.length:end] = v
        if li == len(self.keys) - 1:
            self.length = end
        return self.keys[li][:, :, :end], self.values[li][:, :, :end]  # (B, H, length + T, D) each


# ---------------------------------------------------------------------------- the model
class NumpyGPT:
    """microgpt's GPT over float64 arrays, for whole sequences. No gradients: inference only.

    config: a microgpt GPTConfig. weights: {name: [[float]] or array}, each [n_out, n_in], as a
    checkpoint's reader (which checks every name and shape) or a model hands them over.
    tokenizer: the CharTokenizer, needed only for sampling and evaluate().
    dtype: float64 (the default, the path checked against the scalar engine) or float32 (what
    a float32 training run validates with: half the memory traffic, the same windows).
    """

    def __init__(self, config, weights, tokenizer=None, dtype='float64'):
        self.config = config
        self.tokenizer = tokenizer
        self.weights = {name: np.array(weights[name], dtype=dtype)  # (n_out, n_in), a copy of the input
                        for name in parameter_shapes(config)}

    @classmethod
    def from_scalar(cls, model):
        """The port of a microgpt GPT: same config, same weights (copied), same tokenizer."""
        return cls(model.config, model.weights(), tokenizer=model.tokenizer)

    @finite_forward
    def forward(self, token_ids, capture=()):
        """Logits (T, vocab_size) for every position of token_ids, and the captured arrays.

        Row i of the logits is what gpt(token_ids[i], i, ...) returns after the calls for
        positions 0..i-1. capture: names from CAPTURE_NAMES (or 'all'); the second return
        value is {name: array} for those, with the shapes listed in this module's docstring.
        """
        cfg, sd = self.config, self.weights
        ids = np.asarray(token_ids)  # (T,)
        wanted = _capture_names(capture)
        T, D, H, K = len(ids), cfg.head_dim, cfg.n_head, cfg.n_kv_head
        captures = _empty_captures(wanted, cfg, T)

        # 1) Each token's meaning plus its position's: row i is position i's vector.
        x = sd['wte'][ids]         # (T, n_embd): row i is wte's row for token ids[i]
        if not cfg.rope:           # RoPE: no wpe; the positions turn q and k in step 2 instead
            x = x + sd['wpe'][:T]  # (T, n_embd): plus positions 0..T-1
        x = norm(x, sd, 'norm_in')  # (T, n_embd); note: not redundant, because of the residual path

        for li in range(cfg.n_layer):
            # 2) Attention: position i gathers information from itself and positions j < i.
            x_residual = x
            x = norm(x, sd, f'layer{li}.attn_norm')                  # (T, n_embd)
            q = split_heads(linear(x, sd[f'layer{li}.attn_wq']), H)  # (H, T, D): what each position looks for
            k = split_heads(linear(x, sd[f'layer{li}.attn_wk']), K)  # (K, T, D): what each offers to later ones
            v = split_heads(linear(x, sd[f'layer{li}.attn_wv']), K)  # (K, T, D): what each hands over
            if cfg.qk_norm:  # QK-norm: every head's query and key at rms 1, so no score can blow up
                q, k = rmsnorm(q), rmsnorm(k)  # (H, T, D), (K, T, D)
            if cfg.rope:     # RoPE: each query and key turned by its own position
                q, k = rope(q), rope(k)        # (H, T, D), (K, T, D)
            x_attn = np.empty((T, cfg.n_embd))  # (T, n_embd): the heads' outputs side by side
            for i in range(T):  # what gpt() does in its call for pos_id = i
                for h in range(H):
                    kv = h // (H // K)  # grouped-query attention: the kv head query head h reads
                    # rows i+1.. of k and v exist already, but position i is never shown them:
                    # this slice is the causal mask (gpt()'s cache simply does not hold them yet)
                    head_out, attn_logits, attn_weights = attention_head(q[h, i], k[kv, :i + 1], v[kv, :i + 1])
                    x_attn[i, h * D:(h + 1) * D] = head_out
                    if 'attention_logits' in captures:
                        captures['attention_logits'][li, h, i, :i + 1] = attn_logits
                    if 'attention_softmax' in captures:
                        captures['attention_softmax'][li, h, i, :i + 1] = attn_weights
            for name, arr in (('q', q), ('k', k), ('v', v), ('head_output', split_heads(x_attn, H))):
                if name in captures:
                    captures[name][li] = arr  # (H or K, T, D)
            x = linear(x_attn, sd[f'layer{li}.attn_wo'])  # (T, n_embd): mixes the heads
            x = x + x_residual  # (T, n_embd); residual: attention adds to the stream

            # 3) MLP: each position, on its own, thinks about what it gathered.
            x_residual = x
            x = norm(x, sd, f'layer{li}.mlp_norm')                  # (T, n_embd)
            pre, x = mlp_hidden_layer(x, sd, li, cfg.mlp)           # (T, mlp_hidden) each
            if 'mlp_pre_relu' in captures:
                captures['mlp_pre_relu'][li] = pre
            x = linear(x, sd[f'layer{li}.mlp_fc2'])   # (T, n_embd)
            x = x + x_residual                        # (T, n_embd)

        # 4) One score per token id for what comes next, at every position.
        if cfg.norm_gains:  # norm gains: a final norm (microgpt has none)
            x = norm(x, sd, 'norm_f')  # (T, n_embd)
        logits = linear(x, sd['wte' if cfg.tie_embeddings else 'lm_head'])  # (T, vocab_size); tied: wte reads out too
        if 'logits' in captures:
            captures['logits'] = logits
        return logits, captures

    @finite_forward
    def forward_batch(self, idx, cache=None):
        """The same logits as forward(), for B sequences of one length T at once, with attention
        as one masked softmax per head: logits (B, T, vocab_size).

        idx: (B, T) token ids. Steps 1, 3 and 4 are forward()'s with a leading batch axis; step 2
        scores every (i, j) pair and masks the future ones to -inf instead of looping over query
        positions, and each sequence attends to its own positions only.
        cache: a KVCache of the positions fed before these (generation), or None (positions start
        at 0). With a cache, idx's positions follow the cached ones: each attends to every cached
        key and to its own earlier ones, and the cache keeps idx's keys and values for next time.
        Either way the positions must fit the block (the callers keep them there: the core
        trusts its arguments).
        """
        cfg, sd = self.config, self.weights
        start = 0 if cache is None else cache.length  # the position of idx's first column
        idx = np.asarray(idx)  # (B, T)
        B, T = idx.shape
        H, K, D = cfg.n_head, cfg.n_kv_head, cfg.head_dim

        def heads(x, n):  # (B, T, n * D) -> (B, n, T, D)
            return x.reshape(B, T, n, D).transpose(0, 2, 1, 3)

        # 1) token plus position (RoPE: the position turns q and k in step 2 instead)
        x = sd['wte'][idx]                          # (B, T, n_embd)
        if not cfg.rope:
            x = x + sd['wpe'][start:start + T]      # (B, T, n_embd)
        x = norm(x, sd, 'norm_in')                  # (B, T, n_embd)
        future = causal_mask(T, start)              # (T, start + T): True where j > i
        for li in range(cfg.n_layer):
            # 2) attention, every sequence, head and position at once
            x_residual = x
            x = norm(x, sd, f'layer{li}.attn_norm')                                 # (B, T, n_embd)
            q = heads(linear(x, sd[f'layer{li}.attn_wq']), H)                       # (B, H, T, D)
            k, v = (heads(linear(x, sd[f'layer{li}.attn_w{n}']), K) for n in 'kv')  # (B, K, T, D) each
            if cfg.qk_norm:
                q, k = rmsnorm(q), rmsnorm(k)                # (B, H, T, D), (B, K, T, D)
            if cfg.rope:
                q, k = rope(q, start), rope(k, start)        # (B, H, T, D), (B, K, T, D)
            if cache is not None:
                k, v = cache.extend(li, k, v)                # (B, K, start + T, D) each
            # grouped-query attention: query head h reads kv head h // (H // K). The query heads
            # are grouped by the kv head they read, each group scored against its kv head's keys
            # broadcast over an axis of length 1: no key is copied (microgpt: groups of one)
            q = q.reshape(B, K, H // K, T, D)                                # (B, K, H // K, T, D)
            att = (q @ k[:, :, None].swapaxes(-1, -2)) * D ** -0.5           # (B, K, H // K, T, start + T)
            if T > 1:  # one new position sees every key: nothing of its row lies in the future
                att = np.where(future, -np.inf, att)                         # (B, K, H // K, T, start + T)
            att = softmax(att)                                               # (B, K, H // K, T, start + T)
            x_attn = (att @ v[:, :, None]).reshape(B, H, T, D)               # (B, H, T, D)
            x_attn = x_attn.transpose(0, 2, 1, 3).reshape(B, T, H * D)       # (B, T, n_embd)
            x = linear(x_attn, sd[f'layer{li}.attn_wo']) + x_residual        # (B, T, n_embd)
            # 3) MLP
            x_residual = x
            _, x = mlp_hidden_layer(norm(x, sd, f'layer{li}.mlp_norm'), sd, li, cfg.mlp)  # (B, T, mlp_hidden)
            x = linear(x, sd[f'layer{li}.mlp_fc2']) + x_residual              # (B, T, n_embd)
        # 4) logits (norm gains: after a final norm; tied embeddings: wte reads out)
        if cfg.norm_gains:
            x = norm(x, sd, 'norm_f')                                         # (B, T, n_embd)
        return linear(x, sd['wte' if cfg.tie_embeddings else 'lm_head'])  # (B, T, vocab_size)

    def loss(self, token_ids):
        """Mean cross-entropy of predicting token_ids[1:], as microgpt.training.doc_loss.

        Like the scalar path, only the first min(block_size, len - 1) positions are scored:
        positions past the block have no position embedding. Computed with the vectorised
        forward (quicker than the loops: bench/inference_speed.py measures it) and checked
        against them to 1e-10.
        """
        n = num_predictions(token_ids, self.config.block_size)
        logits = self.forward_batch([token_ids[:n]])[0]  # (n, vocab_size)
        targets = np.asarray(token_ids[1:n + 1])         # (n,): the token after each position
        return float(cross_entropy(logits, targets).mean())

    def next_logits_fn(self, cached=True):
        """A fresh next_logits(token_ids) for microgpt/sampling.py: the last position's logits as
        floats, the same as the scalar GPT's.

        Cached (the default): it keeps a KVCache of the ids it was fed, and computes only the
        positions it has not seen, one per generated token (a prompt's several at once), as
        gpt() does. Ids that no longer start with what it was fed (the sampler's window jumped
        on) start a fresh cache. cached=False recomputes all of token_ids every call: the
        reference the cache is checked against (tests/test_generate.py), and what
        bench/sampling_speed.py compares it with.
        """
        fed, cache, last = [], KVCache(self.config.n_layer, self.config.block_size), None

        def next_logits(token_ids):
            nonlocal fed, cache, last
            if not cached:
                return self.forward_batch([token_ids])[0, -1].tolist()  # (vocab_size,) as floats
            if list(token_ids[:len(fed)]) != fed:  # not a continuation: no cached key is where it was
                fed, cache = [], KVCache(self.config.n_layer, self.config.block_size)
            new = list(token_ids[len(fed):])
            if new:  # ids already fed (the same ids again) keep their logits
                last = self.forward_batch([new], cache)[0, -1].tolist()  # (vocab_size,) as floats
                fed += new
            return last
        return next_logits


def _capture_names(capture):
    """The requested capture names as a set; 'all' means every name in CAPTURE_NAMES."""
    if isinstance(capture, str):
        capture = CAPTURE_NAMES if capture == 'all' else (capture,)
    return set(capture)


def _empty_captures(names, cfg, T):
    """Arrays for the requested captures. The attention ones start as NaN: the loop fills
    only j <= i, so a future position never carries a number."""
    L, H, K, D = cfg.n_layer, cfg.n_head, cfg.n_kv_head, cfg.head_dim
    shapes = {
        'attention_logits': (L, H, T, T),
        'attention_softmax': (L, H, T, T),
        'q': (L, H, T, D), 'k': (L, K, T, D), 'v': (L, K, T, D), 'head_output': (L, H, T, D),
        'mlp_pre_relu': (L, T, cfg.mlp_hidden),
        'logits': (T, cfg.vocab_size),
    }
    return {name: np.full(shapes[name], np.nan) for name in names}  # shapes[name], all NaN


# ---------------------------------------------------------------------------- evaluation
def evaluate(model, docs):
    """Mean loss per predicted token over `docs`: microgpt.training.evaluate, with the port.

    Each name counts num_predictions(tokens, block_size) times, so long names weigh more,
    exactly as in the scalar version; train.py can use either and get the same number.
    """
    total, count = 0.0, 0
    for doc in docs:
        tokens = doc_tokens(model.tokenizer, doc)
        n = num_predictions(tokens, model.config.block_size)
        total += model.loss(tokens) * n
        count += n
    return total / count


def evaluate_windows(model, windows, batch_size=64, workers=1):
    """Mean loss per predicted token over running-text windows (microgpt/edge/text.py's), exactly.

    Window w predicts w[1:] from w[:-1], every one of its len(w) - 1 positions; the sum of
    every window's token losses over their number is the mean over every predicted character.
    Windows of one length go through forward_batch together, batch_size at a time; the sum is
    kept in float64 whatever the model's dtype, so the result is the same number every run.
    workers > 1 computes that many smaller batches at once (batch_size // workers windows, so
    memory stays one batch's), a Python thread each: numpy lets go of the interpreter lock inside
    its work, as backprop/parallel.py's split relies on. The sum is the same number as one
    worker's to the last bit: each window's losses are summed alone, then in the windows' order.
    """
    by_length = {}
    for w in windows:
        by_length.setdefault(len(w), []).append(w)
    size = max(1, batch_size // workers)
    chunks = [group[s:s + size] for _, group in sorted(by_length.items()) for s in range(0, len(group), size)]

    def window_losses(chunk):
        """Each window's summed token losses (float64), and how many tokens they are."""
        chunk = np.asarray(chunk)                                         # (B, length)
        logits = model.forward_batch(chunk[:, :-1])                       # (B, length - 1, vocab_size)
        V = logits.shape[-1]
        losses = cross_entropy(logits.reshape(-1, V), chunk[:, 1:].reshape(-1))  # (B * (length - 1),)
        return losses.reshape(len(chunk), -1).sum(axis=1, dtype=np.float64), losses.size  # (B,)

    if workers > 1:
        with ThreadPoolExecutor(workers) as pool:
            results = list(pool.map(window_losses, chunks))  # in the chunks' order, whichever ends first
    else:
        results = [window_losses(chunk) for chunk in chunks]
    total, count = 0.0, 0
    for sums, n in results:
        for window_sum in sums.tolist():  # one window after another, however they were batched
            total += window_sum
        count += n
    return total / count
