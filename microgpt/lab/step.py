"""
The training-step sandbox (lesson 04): one step of learning on one name, every number shown.

    python -m microgpt.lab step anna
    python -m microgpt.lab step anna --lr 0.001 --param 'layer0.attn_wq[3][5]' --png step.png
    python -m microgpt.lab step christopher --engine numpy   # the same numbers, in milliseconds
    python -m microgpt.lab step "ROMEO:" --ckpt out/shakespeare.safetensors --engine numpy

It does to a trained checkpoint what train.py does once per name, with the same code
(training.doc_loss on a Tape, backward(), the first step of a fresh Adam), and writes nothing
back. On a model of running text TEXT is one training window, no BOS.
"""

import importlib.util
import math
import re

import numpy as np
from microgpt.backprop.model import flat_views
from microgpt.backprop.optim import AdamArrays

from ..engine import Tape, zero_grad
from ..edge.checks import short
from ..edge.errors import DIVERGED, OVERFLOWS, UserError
from ..edge.limits import parameter_count
from ..programs.settings import CORE_ENGINES as ENGINES, flag_default
from ..sampling import probabilities
from ..programs.taps import Recorder
from ..programs.train import collector_paused
from ..training import doc_losses, mean_loss
from .loading import data_mode, read_text, trained_lr
from .registry import scalar_step_positions
from .render import bar, number, table, token_label

DEFAULT_LR = flag_default('lr')  # train.py's peak learning rate
# who computes the forward and backward (scalar_pass, numpy_pass): train.py's CORE_ENGINES, not
# PyTorch, an optional extra, which section 6 asks for a third opinion where it is installed
# (an index of more than 9 digits is no row of any model: it is left unmatched, never converted)
PARAM_PATTERN = re.compile(r'^\s*([A-Za-z0-9_.]+)\s*\[\s*(-?\d{1,9})\s*\]\s*\[\s*(-?\d{1,9})\s*\]\s*$')


# ---------------------------------------------------------------------------- the forward pass
class StepRecorder(Recorder):
    """The Recorder; on a RoPE model each position's embedding is wte's own row of Values,
    whose gradient sums every use of the row, so a copy of it (x + 0, one node a number) stands
    in before the first rmsnorm: the copy's gradient is this position's alone, as with wpe."""

    def __init__(self, model):
        super().__init__(model)
        self.rope = model.config.rope

    def rmsnorm(self, x):
        if self.rope and self.norms[self.n_norms % len(self.norms)] == 'embedding':
            x = [xi + 0.0 for xi in x]
        return super().rmsnorm(x)


def forward(model, tokens):
    """(loss, per-position losses, per-position captures): training.doc_loss from its own
    pieces, so the graph is the one train_step backpropagates; a Recorder on gpt()'s blocks
    (programs/taps.py) hands over each position's intermediates by name."""
    blocks = model.blocks
    model.blocks = recorder = StepRecorder(model)
    try:
        losses = doc_losses(model, tokens)
        loss = mean_loss(model, losses)
    except OVERFLOWS:  # an exp() too large: the weights diverged
        raise UserError(DIVERGED) from None
    finally:
        model.blocks = blocks
    captures = recorder.captures
    if not math.isfinite(loss.data):
        raise UserError(DIVERGED)
    return loss, losses, captures


# ---------------------------------------------------------------------------- the way back
def stage_names(config):
    """[(stage, gpt()'s capture name)] from the top of the model down to the embeddings: the
    logits, the stream entering lm_head, then per layer (last first) what the MLP and the
    attention added and the stream each one read, and the embeddings wte[token] + wpe[pos].
    (Tied embeddings: wte is the output matrix; RoPE: no wpe.)"""
    out = 'wte (tied)' if config.tie_embeddings else 'lm_head'
    stages = [('logits', 'logits'), (f'stream into {out}', 'lm_head_in')]
    for li in reversed(range(config.n_layer)):
        stages += [(f'layer{li} MLP output (mlp_fc2)', f'layer{li}.mlp_out'),
                   (f'layer{li} stream into MLP', f'layer{li}.mlp_in'),
                   (f'layer{li} attention output (attn_wo)', f'layer{li}.attn_out'),
                   (f'layer{li} stream into attention', f'layer{li}.attn_in')]
    return stages + [('embeddings wte[token]' + ('' if config.rope else ' + wpe[pos]'), 'embedding')]


def norm(xs):
    """The Euclidean norm, without squaring past the largest float (a weight of 1e308)."""
    return math.hypot(*np.ravel(xs).tolist())


def parse_param(text, model):
    """'layer0.attn_wq[3][5]' -> ('layer0.attn_wq', 3, 5), checked against the model."""
    m = PARAM_PATTERN.match(text)
    names = list(model.state_dict)
    if not m:
        raise UserError(f"--param {short(text)} is not NAME[ROW][COL]: write e.g. 'layer0.attn_wq[3][5]' "
                        f"(quote it for the shell)")
    name, row, col = m.group(1), int(m.group(2)), int(m.group(3))
    if name not in model.state_dict:
        raise UserError(f"--param: no matrix named {short(name)}: choose one of {', '.join(names)}")
    n_out, n_in = len(model.state_dict[name]), len(model.state_dict[name][0])
    if not (0 <= row < n_out and 0 <= col < n_in):
        raise UserError(f"--param {short(text)}: {name} is {n_out}x{n_in}, so use a row 0..{n_out - 1} "
                        f"and a column 0..{n_in - 1}")
    return name, row, col


# ---------------------------------------------------------------------------- forward and backward, by either engine
def scalar_pass(model, tokens):
    """The step's forward and backward on the scalar engine, as train_step runs them, read out
    as arrays (numpy_pass gives the same)."""
    with Tape() as tape:
        loss, losses, captures = forward(model, tokens)
    loss.backward(tape)
    logits = [capture['logits'] for capture in captures]
    grads = np.array([p.grad for p in model.params])  # (n_params,): in GPT.params order
    zero_grad(model.params)  # used up, as Adam.step uses them up: the next step starts afresh
    return {
        'loss': loss.data,
        'losses': np.array([l.data for l in losses]),               # (n,): -ln p(true next)
        'probs': np.array([probabilities([v.data for v in l], 1.0) for l in logits]),  # (n, vocab_size)
        'dlogits': np.array([[l.grad for l in ls] for ls in logits]),  # (n, vocab_size): dL/dlogits
        'stages': {stage: np.array([v.grad for c in captures for v in c[name]])  # (n * width,) each
                   for stage, name in stage_names(model.config)},
        'grads': grads,
        'hidden': [np.array([[h.data for h in c[f'layer{li}.mlp_hidden']] for c in captures])
                   for li in range(model.config.n_layer)],          # per layer (n, 4 n_embd): after ReLU
        'graph_nodes': len(tape.nodes),
    }


def numpy_pass(model, weights, tokens):
    """The same forward and backward by the numpy training path (src/backprop, equal to the
    scalar engine's to 1e-12): milliseconds where the scalar engine takes a second on a 4x64
    model, and no graph."""
    from microgpt.backprop.model import make_batch, model_backward, model_forward
    from microgpt.inference.model import cross_entropy, softmax
    cfg = model.config
    idx, targets, mask = make_batch([tokens], cfg.block_size, cfg.vocab_size)
    try:
        with np.errstate(over='raise', invalid='raise'):
            loss, caches = model_forward(weights, cfg, idx, targets, mask)
            stages = {}
            grads = model_backward(weights, cfg, caches, stages)
    except FloatingPointError:  # the weights diverged
        raise UserError(DIVERGED) from None
    logits = caches['loss'][0]                     # (n, vocab_size)
    return {
        'loss': loss,
        'losses': cross_entropy(logits, targets),  # (n,)
        'probs': softmax(logits),                  # (n, vocab_size)
        'dlogits': stages['logits'],               # (n, vocab_size)
        'stages': {stage: stages[name] for stage, name in stage_names(cfg)},
        'grads': np.concatenate([grads[name].ravel() for name in model.state_dict]),  # (n_params,)
        # per layer (n, 4 n_embd): the ReLU's output, for the census of its dead units (GELU, SwiGLU: none)
        'hidden': [np.maximum(caches[f'layer{li}.relu'], 0.0) if cfg.mlp == 'relu' else None
                   for li in range(cfg.n_layer)],
        'graph_nodes': None,
    }


def offsets(model):
    """{name: the index in GPT.params of its matrix's first weight}."""
    out, at = {}, 0
    for name, matrix in model.state_dict.items():
        out[name] = at
        at += len(matrix) * len(matrix[0])
    return out


def matrices(model, flat):
    """A flat array in GPT.params order as {name: (n_out, n_in) view}, under the model's names."""
    return flat_views(flat, {name: (len(m), len(m[0])) for name, m in model.state_dict.items()})


# ---------------------------------------------------------------------------- one step
def step_report(model, text, lr=DEFAULT_LR, param=None, top=3, engine=None, mode='lines'):
    """Everything the printout shows, for one training step on TEXT (a name, or in mode 'text' a
    window), computed by `engine` ('scalar', 'numpy'; None: the scalar engine where its graph
    fits, registry.scalar_step_positions). The model is left as it was ('weights_after')."""
    if engine not in (None, *ENGINES):
        raise UserError(f"--engine {short(engine)}: choose one of {', '.join(ENGINES)}")
    tok = model.tokenizer
    ids, targets = read_text(model, text, mode)     # [BOS] + a name, or a window: checked against the block
    tokens = ids + targets[-1:] if targets[-1] is not None else ids  # + the last target: what training reads
    n = len(tokens) - 1
    if n < 1:
        raise UserError("a step needs two characters of running text at least: one to read, one to predict")
    chose = engine is None  # said in the printout: the numpy path took a step too large for the graph
    if chose:
        engine = 'scalar' if n <= scalar_step_positions(model.config) else 'numpy'
    if engine == 'scalar' and n > scalar_step_positions(model.config):
        raise UserError(f"the scalar engine's step on {n} positions of this {parameter_count(model.config):,}-weight "
                        f"model is a graph of too many Values: take it with --engine numpy (the same numbers "
                        f"in milliseconds), or give a text of at most {scalar_step_positions(model.config)} "
                        "positions")
    chosen = parse_param(param, model) if param else None
    before = np.array([p.data for p in model.params])  # (n_params,): every weight, in GPT.params order
    weights = matrices(model, before)                  # {name: (n_out, n_in)}

    # 1) forward and 2) backward, as train_step records and runs them (or their numpy twins)
    s = scalar_pass(model, tokens) if engine == 'scalar' else numpy_pass(model, weights, tokens)
    probs, dlogits = s['probs'], s['dlogits']       # (n, vocab_size) each
    targets = np.array(tokens[1:])                  # (n,): the true next token at each position
    positions = [{'position': i, 'reads': token_label(tok, tokens[i]), 'target': token_label(tok, tokens[i + 1]),
                  'loss': float(s['losses'][i]), 'p_before': float(probs[i, targets[i]])} for i in range(n)]
    one_hot = np.eye(model.config.vocab_size)[targets]  # (n, vocab_size)
    closed_form_diff = float(np.abs(dlogits - (probs - one_hot) / n).max())
    top_grads = []
    for i in range(n):
        order = sorted(range(dlogits.shape[1]), key=lambda c: -abs(dlogits[i, c]))[:top]
        if tokens[i + 1] not in order:
            order.append(tokens[i + 1])
        top_grads.append([(token_label(tok, c), float(dlogits[i, c]), float(probs[i, c]), c == tokens[i + 1])
                          for c in order])

    # 3) the way back: stage norms, matrix norms, touched embedding rows
    stages = [(name, norm(g)) for name, g in s['stages'].items()]
    g_flat = s['grads']                              # (n_params,): every weight's gradient
    grads = matrices(model, g_flat)                  # {name: (n_out, n_in)}
    matrix_norms = [(name, norm(g)) for name, g in grads.items()]
    wte_rows = np.flatnonzero(grads['wte'].any(axis=1)).tolist()
    wpe_rows = None if model.config.rope else np.flatnonzero(grads['wpe'].any(axis=1)).tolist()  # RoPE: no wpe
    # the other engines' opinion of the scalar engine's gradients, at the weights before the update
    engines = engine_gradients(model, weights, tokens, grads) if engine == 'scalar' else {'numpy': None, 'torch': None}
    census = zero_gradient_census(model, weights, tokens, grads, s['hidden'], 'text' if mode == 'text' else 'name')
    rows_text, rows_why = embedding_rows(model, wte_rows, wpe_rows, mode)

    # 4) Adam: a fresh optimizer, one step, as train.py's first step. On the arrays: AdamArrays
    # is optim.Adam's arithmetic in its order, the same floats bit for bit
    # (tests/test_backprop_trainer.py), and takes 2 ms where the loop over 200,000 Values takes 200
    starts = offsets(model)                          # {name: where its matrix starts in GPT.params}
    if chosen is None:  # the weight with the largest |g|
        k = int(np.abs(g_flat).argmax())
        name = [name for name, at in starts.items() if at <= k][-1]
        chosen = (name, *divmod(k - starts[name], grads[name].shape[1]))
    k = starts[chosen[0]] + chosen[1] * grads[chosen[0]].shape[1] + chosen[2]
    optimizer = AdamArrays(len(before))
    after = before.copy()
    optimizer.step(after, g_flat, lr)
    moved = before - after                           # (n_params,): each weight's step, as taken
    with_grad = g_flat != 0                          # (n_params,): the weights in the graph
    eps = optimizer.eps
    ratio = np.abs(moved[with_grad]) / lr
    # the exact prediction lr |g| / (|g| + eps), against what the optimizer did
    predicted = lr * (np.abs(g_flat) / (np.abs(g_flat) + eps))  # (n_params,)
    formula_diff = float((np.abs(np.abs(moved) - predicted)[with_grad] / lr).max(initial=0.0))
    g = float(g_flat[k])
    m, v = float(optimizer.m[k]), float(optimizer.v[k])
    bias1, bias2 = 1 - optimizer.beta1 ** optimizer.t, 1 - optimizer.beta2 ** optimizer.t
    adam = {'param': f'{chosen[0]}[{chosen[1]}][{chosen[2]}]', 'g': g, 'm': m, 'v': v,
            'm_hat': m / bias1, 'v_hat': v / bias2, 'beta1': optimizer.beta1, 'beta2': optimizer.beta2,
            'eps': eps, 'lr': lr, 'update': -lr * (m / bias1) / (math.sqrt(v / bias2) + eps),
            'moved': -float(moved[k]), 'before': float(before[k]), 'after': float(after[k])}
    untouched_moved = float(np.abs(moved[~with_grad]).max(initial=0.0))
    n_with_grad = int(with_grad.sum())

    # 5) after the update: the same name again, through the numpy port (src/inference), which
    # computes gpt()'s numbers for a whole sequence at once (tests/test_inference.py: equal to
    # within 1e-10); a second pass of the scalar engine would cost as much as the first
    weights_after = matrices(model, after)
    loss_after, p_after = (forward_after(model, weights_after, tokens) if n_with_grad else  # no weight moved:
                           (s['loss'], [pos['p_before'] for pos in positions]))          # the same numbers
    for pos, p in zip(positions, p_after):
        pos['p_after'] = p

    return {
        'text': text, 'data_mode': mode, 'tokens': tokens, 'labels': [token_label(tok, t) for t in tokens], 'n': n, 'lr': lr,
        'engine': engine, 'engine_chosen': chose and engine == 'numpy', 'vocab_size': model.config.vocab_size, 'block_size': model.config.block_size,
        'loss_before': s['loss'], 'loss_after': loss_after, 'positions': positions,
        'top_grads': top_grads, 'closed_form_diff': closed_form_diff,
        'stages': stages, 'matrix_norms': matrix_norms, 'grads': grads, 'weights_after': weights_after,
        'wte_rows': wte_rows, 'wpe_rows': wpe_rows, 'rows_text': rows_text, 'rows_why': rows_why,
        'adam': adam, 'n_with_grad': n_with_grad, 'n_params': len(model.params),
        'step_ratio_min': float(ratio.min(initial=1.0)), 'step_ratio_max': float(ratio.max(initial=1.0)),
        'formula_diff': formula_diff, 'untouched_moved': untouched_moved,
        'small_grads': int((np.abs(g_flat[with_grad]) < eps * 1e6).sum()),
        'graph_nodes': s['graph_nodes'],
        'numpy': engines['numpy'], 'torch': engines['torch'],
        'without_grad': census,
    }


def forward_after(model, weights, tokens):
    """(the loss, each position's p(true next)) of TOKENS at `weights`, by the numpy port."""
    from microgpt.inference.model import NumpyGPT, cross_entropy  # `step` needs numpy (registry.py)
    port = NumpyGPT(model.config, weights, tokenizer=model.tokenizer)
    logits = port.forward(tokens[:-1])[0]        # (n, vocab_size)
    losses = cross_entropy(logits, tokens[1:])   # (n,): -ln p(true next) at each position
    return float(losses.mean()), [math.exp(-x) for x in losses]


# ---------------------------------------------------------------------------- weights without a gradient
def embedding_rows(model, wte_rows, wpe_rows, mode):
    """Two sentences, for the printout and the page: the embedding rows with a gradient, and why
    the others have none."""
    cfg = model.config
    if cfg.tie_embeddings:  # wte is the output matrix too: every row scores its token
        text = f"wte rows with a gradient: all {cfg.vocab_size}, as the tied output matrix scores every token"
    else:
        text = (f"wte rows with a gradient: {', '.join(token_label(model.tokenizer, i) for i in wte_rows) or 'none'} "
                f"({len(wte_rows)} of {cfg.vocab_size})")
    if wpe_rows is None:
        text += "; no wpe (RoPE turns q and k by the position instead)"
    else:
        wpe = f"{wpe_rows[0]}..{wpe_rows[-1]}" if wpe_rows else 'none'
        text += f"; wpe rows: {wpe} ({len(wpe_rows)} of {cfg.block_size})"
    read = ("the window's characters but its last, which is only a target" if mode == 'text'
            else "BOS and the name's letters; the final BOS is only a target")
    why = (f"why: an embedding row enters the graph only when its token is READ ({read})"
           + ("" if wpe_rows is None else " or its position is used")
           + (", or, tied, as the output matrix" if cfg.tie_embeddings else "")
           + "; every other row is not in the graph, so backward() never reaches it: its gradient is exactly 0")
    return text, why


def zero_gradient_census(model, weights, tokens, grads, hidden, word='name'):
    """Why each weight with a gradient of exactly 0 has none, counted.

    Two reasons: an embedding row the name never uses (wte: a token not read; wpe: a position
    past the name) is not in the graph; and a hidden unit of an MLP whose ReLU is 0 at every
    position of the name (a "dead" unit for this name, read from the engine's layer{i}
    mlp_hidden, `hidden`) passes no gradient back, so its row of mlp_fc1 and its column of
    mlp_fc2 get none. 'other' counts the zeros that neither explains (a zero weight on the
    path, terms that cancel), and 'confirmed' whether the numpy port's own forward pass finds
    the same dead units (its mlp_pre_relu <= 0 at every position). The rungs: tied, every row of
    wte scores a token, so none is unused; RoPE has no wpe; GELU and SwiGLU have no flat half,
    so no dead unit (and 'confirmed' is None).
    """
    from microgpt.inference.model import NumpyGPT  # `step` needs numpy (registry.py)
    cfg = model.config
    n = cfg.n_embd
    read = set(tokens[:-1])  # the tokens the name reads; the final BOS is only a target
    # tied embeddings: every row of wte also scores its token, so each has a gradient; RoPE: no wpe
    unused = {'wte': 0 if cfg.tie_embeddings else (cfg.vocab_size - len(read)) * n}
    if not cfg.rope:
        unused['wpe'] = (cfg.block_size - (len(tokens) - 1)) * n
    # per layer: the units whose ReLU is 0 at every position (GELU's and SwiGLU's never are)
    relu = cfg.mlp == 'relu'
    dead = [np.flatnonzero((h == 0).all(axis=0)).tolist() if relu else [] for h in hidden]
    dead_weights = sum(2 * n * len(units) for units in dead)  # a row of fc1 and a column of fc2 each
    zeros = int(sum((g == 0).sum() for g in grads.values()))
    confirmed = None
    if relu:
        port = NumpyGPT(cfg, weights, tokenizer=model.tokenizer)
        _, caps = port.forward(tokens[:-1], capture=('mlp_pre_relu',))  # (n_layer, T, 4 n_embd)
        confirmed = all(np.flatnonzero((caps['mlp_pre_relu'][li] <= 0).all(axis=0)).tolist() == dead[li]
                        for li in range(cfg.n_layer))
    c = {'zeros': zeros, 'unused_rows': unused, 'dead_units': dead, 'dead_unit_weights': dead_weights,
         'other': zeros - sum(unused.values()) - dead_weights, 'confirmed': confirmed, 'mlp': cfg.mlp}
    c['text'] = without_grad_text(c, word)
    return c


# ---------------------------------------------------------------------------- the other engines
def engine_gradients(model, weights, tokens, grads):
    """The same name's gradients, at the same weights, from the numpy training path (derived by
    hand) and from PyTorch's autograd: for each, {'max_diff', 'matrices': {name: largest
    difference from backward()'s in that matrix}}; torch's None where it is not installed."""
    from microgpt import backprop
    theirs = {'numpy': backprop.Trainer(model.config, weights, model.tokenizer).loss_and_grads([tokens])[1],
              'torch': None}
    if importlib.util.find_spec('torch') is not None:
        from microgpt import torchgpt
        theirs['torch'] = torchgpt.loss_and_grads(model.config, weights, [tokens])[1]
    out = {'torch': None}
    for engine, g in theirs.items():
        if g is not None:
            matrices = {name: float(np.abs(np.asarray(g[name], dtype=np.float64) - mine).max(initial=0.0))
                        for name, mine in grads.items()}
            out[engine] = {'max_diff': max(matrices.values()), 'matrices': matrices}
    return out


def compute(model, text, lr=None, param=None, engine=None, ckpt=None):
    """step_report at `lr` (default: the one the checkpoint was trained with, else train.py's);
    the full matrices are the terminal's only ('_grads', '_weights_after')."""
    lr_source = 'given'
    if lr is None:
        lr = trained_lr(ckpt)
        lr_source = "the checkpoint's" if lr is not None else "train.py's default"
        lr = DEFAULT_LR if lr is None else lr
    # paused as train_step pauses it: at n_layer 4, n_embd 64 the collector would walk the
    # 200,000 weights' Values again at every collection of the graph's fresh objects
    with collector_paused():
        r = step_report(model, text, lr=lr, param=param, engine=engine, mode=data_mode(ckpt))
    r['_grads'], r['_weights_after'] = r.pop('grads'), r.pop('weights_after')
    r['lr_source'] = lr_source
    return r


# ---------------------------------------------------------------------------- printing
def render(r):
    by = " by the numpy training path" if r['engine'] == 'numpy' else ""
    lines = [f"one training step{by} on {r['text']!r}: tokens {' '.join(r['labels'])}, "
             f"{r['n']} position{'s' * (r['n'] != 1)}, lr {r['lr']:g}"
             + (f" ({r['lr_source']})" if r.get('lr_source', 'given') != 'given' else '')
             + ", a fresh Adam (its first step); "
             "the checkpoint file is not changed", '']

    lines.append("1) forward: the loss at each position, -ln p(true next)")
    lines.append(table(['pos', 'reads', 'next', 'p(next)', 'loss'],
                       [[p['position'], p['reads'], p['target'], f"{p['p_before']:.4f}", f"{p['loss']:.4f}"]
                        for p in r['positions']]))
    lines.append(f"  mean = the step's loss L = {fixed(r['loss_before'])}")
    lines.append('')

    lines.append(f"2) the gradient at the top: dL/dlogits = (p - one_hot(true next)) / n, n = {r['n']}")
    lines.append("   negative = this logit is pulled UP (the true character), positive = pushed DOWN")
    for p, row in zip(r['positions'], r['top_grads']):
        parts = [f"{c!r} {number(g, '+.4f')}" + (' (true)' if true else '') for c, g, _, true in row]
        lines.append(f"  pos {p['position']:>2} -> {p['target']!r:<7} " + ', '.join(parts))
    lines.append(f"  check: the logits' .grad from backward() equal (p - one_hot) / n "
                 f"(largest difference {r['closed_form_diff']:.1e})")
    lines.append('')

    lines.append("3) the gradient on its way back: its norm where it arrives at each stage (all positions)")
    lines.append(table(['stage', '|dL/d stage|'], [[name, f"{v:.5f}"] for name, v in r['stages']]))
    lines.append("  a residual add x + block(x) hands its gradient unchanged to both inputs, so a block's "
                 "output gets what the stream after it gets; the stream before it gets that plus what "
                 "comes back through the block; rmsnorm rescales it (small embeddings: a larger gradient)")
    lines.append('')
    biggest = max(v for _, v in r['matrix_norms']) or 1.0
    lines.append("   each weight matrix's gradient norm |dL/dW|")
    for name, v in r['matrix_norms']:
        lines.append(f"  {name:<16} {bar(v / biggest, 24)} {v:.5f}")
    lines += ['  ' + r['rows_text'], '  ' + r['rows_why']]
    lines.append('')

    a = r['adam']
    lines.append(f"4) Adam on one weight, {a['param']} (--param to choose; default: the largest |g|)")
    lines.append(f"  g     = {a['g']:+.6e}                 the gradient dL/dw")
    lines.append(f"  m     = (1 - beta1) g = {a['m']:+.6e}     first moment, beta1 = {a['beta1']}")
    lines.append(f"  v     = (1 - beta2) g^2 = {a['v']:.6e}     second moment, beta2 = {a['beta2']}")
    lines.append(f"  m_hat = m / (1 - beta1^1) = {a['m_hat']:+.6e}   = g: bias correction undoes the zero start")
    lines.append(f"  v_hat = v / (1 - beta2^1) = {a['v_hat']:.6e}    = g^2")
    lines.append(f"  step  = -lr m_hat / (sqrt(v_hat) + eps) = {a['update']:+.6e}   "
                 f"(taken: {number(a['before'], '+.6f')} -> {number(a['after'], '+.6f')}, {a['moved']:+.6e})")
    lines.append(f"  so a fresh Adam moves each weight by lr g / (|g| + eps): lr = {a['lr']:g} whatever |g| is")
    lines.append(f"  check over all {r['n_with_grad']} of {r['n_params']} weights with a gradient: "
                 f"|step| / lr from {r['step_ratio_min']:.9f} to {r['step_ratio_max']:.9f}; "
                 f"equal to |g| / (|g| + eps) within {r['formula_diff']:.1e}")
    lines.append(f"  ({r['small_grads']} have |g| < 1e-2, where eps = 1e-8 shows past the 6th digit; "
                 f"the {r['n_params'] - r['n_with_grad']} weights without a gradient moved by "
                 f"{r['untouched_moved']:g})")
    lines.append("  " + r['without_grad']['text'])
    lines.append('')

    lines.append(f"5) after the update: the same {'window' if r.get('data_mode') == 'text' else 'name'} again")
    lines.append(table(['pos', 'next', 'p before', 'p after', 'change'],
                       [[p['position'], p['target'], f"{p['p_before']:.4f}", f"{p['p_after']:.4f}",
                         number(p['p_after'] - p['p_before'], '+.4f')] for p in r['positions']]))
    lines.append(f"  loss {fixed(r['loss_before'])} -> {fixed(r['loss_after'])} "
                 f"({fixed(r['loss_after'] - r['loss_before'], '+')})"
                 + ("" if r['loss_after'] < r['loss_before'] else
                    "   unchanged: no weight had a gradient that moved it" if r['loss_after'] == r['loss_before'] else
                    "   it went UP: this lr overshoots; try a smaller --lr"))
    lines.append('')

    if r['engine'] == 'numpy':
        lines.append(f"6) computed by the numpy training path: the scalar engine's graph of {r['n']} positions "
                     f"of this {r['n_params']:,}-weight model would hold too many Values (a shorter TEXT "
                     "takes it on the scalar engine, whose gradients the other engines then check)"
                     if r.get('engine_chosen') else
                     "6) computed by the numpy training path (--engine numpy): no graph was built; "
                     "without --engine numpy the scalar engine takes the step, and the other engines "
                     "check its gradients")
        return '\n'.join(lines)
    lines.append(f"6) the graph of this step on the scalar engine: {r['graph_nodes']} nodes recorded on the "
                 f"tape (plus the {r['n_params']} weights, its leaves)")
    names = {'numpy': "the numpy training path (package `backprop`)", 'torch': "PyTorch's autograd (package `torchgpt`)"}
    for engine, what in names.items():
        if r.get(engine) is None:
            lines.append(f"  {what} is not installed: no opinion from it: pip install -e '.[torch]'")
        else:
            lines.append(f"  {what}: the same gradients, largest difference {r[engine]['max_diff']:.1e}")
    shown = [e for e in names if r.get(e) is not None]
    if shown:
        norms = dict(r['matrix_norms'])
        lines.append(table(['matrix', '|grad| (scalar)', *(f'{e} - scalar' for e in shown)],
                           [[name, f"{norms[name]:.4e}", *(f"{r[e]['matrices'][name]:.1e}" for e in shown)]
                            for name in norms]))
    return '\n'.join(lines)


def fixed(x, sign=''):
    """x to 6 decimals, or in exponent form once that would print hundreds of digits (a loss of 1e300)."""
    return number(x, f'{sign}.6f' if abs(x) < 1e9 else f'{sign}.6g')


def without_grad_text(c, word='name'):
    """One sentence: the weights with no gradient, by reason (word: a 'name' or 'text')."""
    dead = sum(len(u) for u in c['dead_units'])
    per_layer = ', '.join(f"layer{li}: {len(u)}" for li, u in enumerate(c['dead_units']))
    unused = c['unused_rows']
    text = (f"why {c['zeros']} weights have no gradient: {sum(unused.values())} are embedding rows this {word} "
            f"never uses ({', '.join(f'{name} {count}' for name, count in unused.items())})")
    if c.get('mlp', 'relu') == 'relu':
        text += (f"; {c['dead_unit_weights']} belong to {dead} MLP hidden units whose ReLU is 0 at every "
                 f"position of this {word} ({per_layer}), so no gradient passes them: their row of mlp_fc1 "
                 "and column of mlp_fc2")
    else:
        text += f"; no MLP unit is dead: {c['mlp']} has no flat half, as ReLU has, so every hidden unit passes a gradient"
    if c['other']:
        text += f"; {c['other']} others are 0 for another reason (a zero weight on their path, or terms that cancel)"
    if c['confirmed'] is not None:
        text += ("; the numpy port's forward pass finds the same dead units" if c['confirmed'] else
                 "; the numpy port's forward pass disagrees on the dead units")
    return text


def picture(path, r, source):
    from .plot import step_pictures
    step_pictures(path, r, f"{source}: one step on {r['text']!r}, lr {r['lr']:g}")
