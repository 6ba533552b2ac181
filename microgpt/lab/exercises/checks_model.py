"""
The checks of exercises 8 to 16: the GPT's building blocks on Values, gpt(), the loss of a name,
Adam and temperature. The project's answers come from ops.py, GPT.gpt (fused=False),
training.doc_loss, optim.Adam and sampling; the oracles are finite differences, the Czech
lesson's numbers, math.fsum, the numpy port and Adam's closed first step. A usual slip the
learner's numbers match names its own hint.
"""

import math
import random

from ... import ops, optim, sampling, training
from ...engine import Value
from ...model import GPT, GPTConfig
from .harness import central_difference, fmt
from ..example import KEYS, OUT3, Q, ROUNDING, SCORES, VALUES, WEIGHTS

RANDOM_CASES = 6
FD_SAMPLES = 3  # weights of a model whose gradient finite differences measure, per case
NO_GRAPH = ("No gradient reached the inputs: build the result from the Values themselves (a * b, "
            "sum, .exp()), not from their .data, so that backward() can follow it back.")


# ---------------------------------------------------------------------------- Values in, Values out
def tensor(data):
    """Nested lists of floats -> (the same nesting of fresh Values, the flat list of them)."""
    if isinstance(data, (int, float)):
        v = Value(float(data))
        return v, [v]
    parts = [tensor(d) for d in data]
    return [p[0] for p in parts], [v for p in parts for v in p[1]]


def read_value(t, got):
    t.expect(type(got) is Value, got, "a Value, one node of the graph",
             hint="Return a Value computed from the inputs with the engine's ops: a float, even the "
                  "right number, has no graph for backward() to follow.")
    return [got]


def read_values(n, what, hint=''):
    def read(t, got):
        t.expect(type(got) in (list, tuple) and len(got) == n and all(type(v) is Value for v in got), got,
                 f"a list of {n} Values ({what})", hint)
        return list(got)
    return read


def weighted(outs, coeffs):
    """L = sum_k c_k * out_k: one number to backward() from, which weighs every output."""
    return sum(c * o for c, o in zip(coeffs, outs))


def check_function(t, fn, args, names, read, project, out_hint, grad_hint='', out_mistakes=(),
                   out_oracle=None, seed=0, exception_hint='', out_label='the output'):
    """One case of a function of Values: its output against the project's (and an oracle), then,
    through L = sum_k c_k out_k, the gradient of every input against the project's and against
    central differences of the learner's own function. out_label: what the outputs compared are."""
    built, p_built = [tensor(a) for a in args], [tensor(a) for a in args]
    outs = read(t, t.call(fn, *[b[0] for b in built], hint=exception_hint))
    p_outs = read(t, project(*[b[0] for b in p_built]))
    t.compare(out_label, [o.data for o in outs], [o.data for o in p_outs], hint=out_hint,
              mistakes=out_mistakes, oracle=out_oracle)
    rng = random.Random(seed)
    coeffs = [1.0] if len(outs) == 1 else [round(rng.uniform(-1, 1), 2) for _ in outs]
    weighted(outs, coeffs).backward()
    weighted(p_outs, coeffs).backward()
    about = "" if len(outs) == 1 else f" of L = sum_k c_k * out_k, c = {fmt(coeffs)}"

    def loss_at(i, j, z):  # L of the learner's function, with entry j of input i moved to z
        fresh = [tensor(a) for a in args]
        fresh[i][1][j].data = z
        return sum(c * o.data for c, o in zip(coeffs, read(t, t.call(fn, *[f[0] for f in fresh], hint=exception_hint))))
    for i, name in enumerate(names):
        grads, p_leaves = [v.grad for v in built[i][1]], p_built[i][1]
        t.compare(f"the gradient of {name}{about}", grads, [v.grad for v in p_leaves],
                  hint=grad_hint or NO_GRAPH, mistakes=[('no graph', [0.0] * len(grads), NO_GRAPH)])
        picks = sorted(rng.sample(range(len(grads)), min(len(grads), 12)))
        fd = [central_difference(lambda z: loss_at(i, j, z), p_leaves[j].data) for j in picks]
        t.compare(f"the gradient of {name}{about}, entries {picks}", [grads[j] for j in picks],
                  [p_leaves[j].grad for j in picks], hint=grad_hint or NO_GRAPH,
                  oracle=('central differences of your function', fd))


def vectors(rng, n, lo=-2.0, hi=2.0):
    return [round(rng.uniform(lo, hi), 3) for _ in range(n)]


def fsum_softmax(z):
    top = max(z)
    e = [math.exp(x - top) for x in z]
    total = math.fsum(e)
    return [x / total for x in e]


# ---------------------------------------------------------------------------- 8. dot
def check_dot(t, fn):
    rng = random.Random(108)
    cases = [([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]), ([0.5], [-2.0]), ([1.0, -1.0], [1.0, 1.0])]
    cases += [(vectors(rng, n), vectors(rng, n)) for n in (2, 3, 5, 8, 4, 6)[:RANDOM_CASES]]
    for k, (a, b) in enumerate(cases):
        t.case(f"fixed {k + 1}" if k < 3 else f"random {k - 2}", f"a = {fmt(a)}, b = {fmt(b)}", k < 3)
        check_function(t, fn, [a, b], ['a', 'b'], read_value, ops.dot,
                       out_hint="Multiply the two vectors entry by entry and add the products up.",
                       out_oracle=('math.fsum of the products', [math.fsum(x * y for x, y in zip(a, b))]),
                       seed=k)


# ---------------------------------------------------------------------------- 9. linear
def check_linear(t, fn):
    rng = random.Random(109)
    cases = [([1.0, 2.0, 3.0], [[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]]),
             ([0.5, -1.0], [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]),
             ([1.0, 2.0], [[1.0, 2.0], [3.0, 4.0]])]
    for _ in range(RANDOM_CASES):
        n_in, n_out = rng.randint(1, 5), rng.randint(1, 5)
        cases.append((vectors(rng, n_in), [vectors(rng, n_in) for _ in range(n_out)]))
    hint = ("w is stored [n_out][n_in]: output o is the dot product of ROW o of w with x, so there "
            "are as many outputs as rows.")
    for k, (x, w) in enumerate(cases):
        t.case(f"fixed {k + 1}" if k < 3 else f"random {k - 2}",
               f"x = {fmt(x)}, w = {fmt(w)} ({len(w)} rows of {len(x)})", k < 3)
        transposed = ([math.fsum(w[o][i] * x[o] for o in range(len(w))) for i in range(len(x))]
                      if len(w) == len(x) else None)
        check_function(t, fn, [x, w], ['x', 'w'], read_values(len(w), "one per row of w", hint), ops.linear,
                       out_hint=hint,
                       out_mistakes=[('transposed', transposed, hint)] if transposed else (),
                       out_oracle=('math.fsum per row', [math.fsum(a * b for a, b in zip(row, x)) for row in w]),
                       seed=k)


# ---------------------------------------------------------------------------- 10. softmax
SOFTMAX_MAX = ("Subtract the largest logit before exp(): exp(1000) overflows, and exp(-1000) is 0 "
               "for every logit of a very negative row, which then divides 0 by 0.")


def check_softmax(t, fn):
    rng = random.Random(110)
    cases = [('three tokens by hand', SCORES),
             ('a saturated row', [10.0, 2.0, 1.0]),
             ('large logits', [1000.0, 999.0, 0.0]),
             ('very negative logits', [-1000.0, -1001.0, -1002.0]),
             ('one logit', [3.0])]
    cases += [(f"random {i + 1}", vectors(rng, rng.randint(2, 8), -5, 5)) for i in range(RANDOM_CASES)]
    for k, (label, z) in enumerate(cases):
        t.case(label, f"logits = {fmt(z)}", k < 5)
        oracle = (('three tokens by hand (3 decimals)', WEIGHTS, ROUNDING) if k == 0 else
                  ('exp(z - max) / math.fsum', fsum_softmax(z)))
        exps = [math.exp(x - max(z)) for x in z]
        check_function(t, fn, [z], ['the logits'], read_values(len(z), "one probability per logit"),
                       ops.softmax, out_oracle=oracle, seed=k, exception_hint=SOFTMAX_MAX,
                       out_hint="p_i = exp(z_i - max) / sum_j exp(z_j - max): positive, summing to 1.",
                       out_mistakes=[('not normalised', exps, "Divide each exp by their sum, so that the "
                                                               "probabilities add up to 1.")],
                       grad_hint="Subtract the max as a plain number (max(z.data for z in logits)), and "
                                 "build the rest from the Values: exp(), sum and / carry the gradient.")


# ---------------------------------------------------------------------------- 11. rmsnorm
def check_rmsnorm(t, fn):
    rng = random.Random(111)
    cases = [[1.0, 2.0, 3.0, 4.0], [0.0, 0.0, 0.0], [3.0], [-1.0, 1.0]]
    cases += [vectors(rng, rng.randint(2, 8), -3, 3) for _ in range(RANDOM_CASES)]
    eps = ops.RMS_EPS  # microgpt's, the stub's default
    for k, x in enumerate(cases):
        t.case(f"fixed {k + 1}" if k < 4 else f"random {k - 3}", f"x = {fmt(x)} (eps = {eps:g}, the default)", k < 4)
        n = len(x)
        ss = math.fsum(v * v for v in x)
        mistakes = [('no eps', [v / math.sqrt(ss / n) for v in x] if ss else None,
                     "Add eps inside the square root, (ms + eps) ** -0.5: microgpt's rmsnorm has it (1e-5), "
                     "and a vector of zeros then divides by it instead of by 0."),
                    ('no mean', [v / math.sqrt(ss + eps) for v in x],
                     "Take the MEAN of the squares (divide their sum by n) before the square root."),
                    ('no sqrt', [v / (ss / n + eps) for v in x],
                     "Divide by the square ROOT of the mean square: (ms + eps) ** -0.5."),
                    ('inverted', [v * math.sqrt(ss / n + eps) for v in x],
                     "Divide by the root-mean-square, do not multiply: x_i * (ms + eps) ** -0.5.")]
        check_function(t, fn, [x], ['x'], read_values(n, "one per input"), ops.rmsnorm,
                       out_hint="y_i = x_i / sqrt(mean_j x_j^2 + eps).", out_mistakes=mistakes,
                       out_oracle=('x / sqrt(math.fsum(x * x) / n + eps)', [v / math.sqrt(ss / n + eps) for v in x]),
                       grad_hint="The scale depends on every x_j: build it from the Values (sum of "
                                 "xi * xi, then ** -0.5), not from their .data, so its gradient flows too.",
                       exception_hint="Add eps inside the square root: a vector of zeros has mean square 0.",
                       seed=k)


# ---------------------------------------------------------------------------- 12. attention_head
def float_attention(q, keys, values, scale='sqrt', use_keys=False):
    """attention_head in plain floats, with the usual slips on request."""
    head_dim = len(q)
    s = {'sqrt': head_dim ** -0.5, 'none': 1.0, 'keys': len(keys) ** -0.5, 'dim': 1 / head_dim}[scale]
    w = fsum_softmax([math.fsum(a * b for a, b in zip(q, k)) * s for k in keys])
    mix = keys if use_keys else values
    return [math.fsum(w[j] * mix[j][d] for j in range(len(keys))) for d in range(head_dim)], w


ATTENTION_SLIPS = [
    ({'scale': 'none'}, "Divide every score by sqrt(head_dim) before the softmax (three tokens by hand: q3.k / 2)."),
    ({'scale': 'keys'}, "The scale is 1/sqrt(head_dim), the length of q, not of the number of keys."),
    ({'scale': 'dim'}, "Divide by the square ROOT of head_dim, not by head_dim."),
    ({'use_keys': True}, "The output averages the VALUES with the weights; the keys only score."),
]


def check_attention_head(t, fn):
    rng = random.Random(112)
    cases = [("three tokens by hand: q3 over k1, k2, k3", Q[2], KEYS, VALUES),
             ("three tokens by hand: q1 sees only k1", Q[0], KEYS[:1], VALUES[:1]),
             ("head_dim 2, two keys", [1.0, -1.0], [[0.5, 0.5], [2.0, -1.0]], [[1.0, 0.0], [0.0, 1.0]])]
    for i in range(RANDOM_CASES):
        head_dim, n = rng.choice([2, 4, 8]), rng.randint(1, 5)
        cases.append((f"random {i + 1}", vectors(rng, head_dim),
                      [vectors(rng, head_dim) for _ in range(n)], [vectors(rng, head_dim) for _ in range(n)]))

    def project(q, keys, values):  # step 2 of gpt(), one head, as model.py writes it
        scale = len(q) ** -0.5
        weights = ops.softmax([ops.dot(q, k_j) * scale for k_j in keys])
        return [ops.dot(weights, [v_j[d] for v_j in values]) for d in range(len(q))], weights

    for k, (label, q, keys, values) in enumerate(cases):
        t.case(label, f"q = {fmt(q)}, keys = {fmt(keys)}, values = {fmt(values)}", k < 3)
        head_dim, n = len(q), len(keys)

        def read(t, got):
            t.expect(type(got) in (tuple, list) and len(got) == 2, got, "a pair (out, weights)")
            out, weights = got
            read_values(head_dim, "out: one per dimension of the head")(t, out)
            read_values(n, "weights: one per visible key")(t, weights)
            return list(out) + list(weights)

        right_out, right_w = float_attention(q, keys, values)
        if k == 0:
            oracle = ('three tokens by hand: out3, then the weights (3 decimals)', OUT3 + WEIGHTS,
                      ROUNDING)
        elif k == 1:
            oracle = ('one visible key has weight 1, so out1 = v1 exactly', VALUES[0] + [1.0])
        else:
            oracle = ('the same three steps in floats, sums by math.fsum', right_out + right_w)
        mistakes = [(str(kw), sum(float_attention(q, keys, values, **kw), []), h) for kw, h in ATTENTION_SLIPS]
        check_function(t, fn, [q, keys, values], ['q', 'keys', 'values'], read, project,
                       out_hint="The three steps of the docstring: scaled scores, softmax, the weighted sum "
                                "of the values per dimension.",
                       out_mistakes=mistakes, out_oracle=oracle, seed=k,
                       out_label=f"out ({head_dim} numbers), then the weights ({n})")


# ---------------------------------------------------------------------------- 13. gpt
def model_case(config, seed):
    """A small GPT of microgpt's own (fused=False: ops.py, as the learner composes) and its weights."""
    model = GPT(config, seed=seed, fused=False)
    return model, model.weights()


def value_state_dict(weights):
    return {name: [[Value(x) for x in row] for row in matrix] for name, matrix in weights.items()}


def float_gpt(weights, config, tokens, slip=None):
    """Logits at every position of `tokens`, in plain floats, with one of GPT_SLIPS on request."""
    def linear(x, w):
        return [math.fsum(a * b for a, b in zip(row, x)) for row in w]

    def rms(x):
        s = (math.fsum(v * v for v in x) / len(x) + ops.RMS_EPS) ** -0.5
        return [v * s for v in x]
    norm = (lambda x: x) if slip == 'no first norm' else rms
    hd = config.n_embd // config.n_head
    keys = [[] for _ in range(config.n_layer)]
    values = [[] for _ in range(config.n_layer)]
    out = []
    for pos, tok in enumerate(tokens):
        x = norm([a + b for a, b in zip(weights['wte'][tok], weights['wpe'][pos])])
        for li in range(config.n_layer):
            res = x
            x = x if slip == 'no attention norm' else rms(x)
            q, k, v = (linear(x, weights[f'layer{li}.attn_w{c}']) for c in 'qkv')
            keys[li].append(k)
            values[li].append(v)
            heads = []
            for h in range(config.n_head):
                s = slice(h * hd, (h + 1) * hd)
                o, _ = float_attention(q[s], [kk[s] for kk in keys[li]], [vv[s] for vv in values[li]],
                                       scale='none' if slip == 'no scale' else 'sqrt')
                heads += o
            x = heads if slip == 'no attn_wo' else linear(heads, weights[f'layer{li}.attn_wo'])
            x = x if slip == 'no attention residual' else [a + b for a, b in zip(x, res)]
            res = x
            x = x if slip == 'no mlp norm' else rms(x)
            x = linear(x, weights[f'layer{li}.mlp_fc1'])
            x = x if slip == 'no relu' else [max(0.0, a) for a in x]
            x = linear(x, weights[f'layer{li}.mlp_fc2'])
            x = x if slip == 'no mlp residual' else [a + b for a, b in zip(x, res)]
        out.append(linear(x, weights['lm_head']))
    return out


GPT_SLIPS = {
    'no first norm': "Step 1 ends with x = rmsnorm(x): the embedding is normalised once before the first "
                     "block (model.py's note: not redundant, the stream carries this normalised vector).",
    'no attention norm': "Each block normalises a copy of the stream first: x = rmsnorm(x) after keeping "
                         "x_residual, before q, k and v.",
    'no mlp norm': "The MLP normalises its input too: rmsnorm after keeping x_residual, before mlp_fc1.",
    'no scale': "Each score is divided by sqrt(head_dim) (in your attention_head).",
    'no attn_wo': "The heads' outputs, side by side, go through linear(., attn_wo) before the residual add.",
    'no attention residual': "Add the residual after attention: x = [a + b for a, b in zip(x, x_residual)].",
    'no relu': "Apply .relu() to each of mlp_fc1's outputs before mlp_fc2.",
    'no mlp residual': "Add the residual after the MLP too.",
}
GPT_HINT = ("Follow the docstring's four steps; slice each head as h*head_dim .. (h+1)*head_dim - 1 of "
            "q and of every cached k and v, and put the heads back side by side in order.")


def gpt_cases(rng):
    cases = [('1 layer, 2 heads, 4 positions', GPTConfig(5, n_layer=1, n_embd=8, n_head=2, block_size=6), 1,
              [4, 0, 1, 1]),
             ('2 layers, 4 heads, 3 positions', GPTConfig(6, n_layer=2, n_embd=8, n_head=4, block_size=6), 2,
              [5, 2, 0])]
    for i in range(2):
        n_head = rng.choice([1, 2])
        config = GPTConfig(rng.randint(3, 6), n_layer=rng.randint(1, 2), n_embd=4 * n_head, n_head=n_head,
                           block_size=5)
        tokens = [config.vocab_size - 1] + [rng.randrange(config.vocab_size - 1) for _ in range(rng.randint(1, 4))]
        cases.append((f"random {i + 1}", config, 100 + i, tokens))
    return cases


def describe_config(config, tokens):
    return (f"config vocab_size={config.vocab_size} n_layer={config.n_layer} n_embd={config.n_embd} "
            f"n_head={config.n_head} block_size={config.block_size}; tokens {tokens} fed one position at a "
            "time; weights: GPT(config, seed) as microgpt draws them")


def check_gpt(t, fn):
    from microgpt.inference import NumpyGPT
    rng = random.Random(113)
    for k, (label, config, seed, tokens) in enumerate(gpt_cases(rng)):
        t.case(label, describe_config(config, tokens), k < 2)
        model, weights = model_case(config, seed)
        sd = value_state_dict(weights)
        port = NumpyGPT(config, weights).forward(tokens)[0]  # (T, vocab_size): the oracle
        keys, values = model.empty_cache()
        p_keys, p_values = model.empty_cache()
        read = read_values(config.vocab_size, "one logit per token id")
        logits, p_logits = [], []
        slipped = {slip: float_gpt(weights, config, tokens, slip) for slip in GPT_SLIPS}
        for pos, tok in enumerate(tokens):
            got = read(t, t.call(fn, tok, pos, keys, values, sd, config, hint=GPT_HINT))
            for li in range(config.n_layer):
                if len(keys[li]) != pos + 1 or len(values[li]) != pos + 1:
                    t.fail_line(f"after gpt() at position {pos}, the cache of layer {li} holds {len(keys[li])} "
                                f"keys and {len(values[li])} values, expected {pos + 1} of each",
                                hint="Append this position's k and v to keys[li] and values[li] once per "
                                     "layer, before attending (a query sees itself).")
            want = model.gpt(tok, pos, p_keys, p_values)
            mistakes = [(slip, slipped[slip][pos], hint) for slip, hint in GPT_SLIPS.items()]
            t.compare(f"the logits at position {pos}", [v.data for v in got], [v.data for v in want],
                      hint=GPT_HINT, mistakes=mistakes,
                      oracle=('the numpy port, src/inference', port[pos].tolist(), 1e-9))
            logits.append(got)
            p_logits.append(want)
        compare_model_gradients(t, rng, sd, model, logits, p_logits, config,
                                lambda sd_: [read(t, t.call(fn, tok, pos, ks, vs, sd_, config, hint=GPT_HINT))
                                             for ks, vs in [model.empty_cache()]
                                             for pos, tok in enumerate(tokens)], weights)


def compare_model_gradients(t, rng, sd, model, outs, p_outs, config, learner_forward, weights, scalar=False):
    """Through L (the loss itself, or sum c * logits), every weight's gradient against the project's,
    and a few of them against central differences of the learner's whole forward."""
    if scalar:
        coeffs = [[1.0]]
    else:
        coeffs = [[round(rng.uniform(-1, 1), 2) for _ in row] for row in outs]
    sum(weighted(row, c) for row, c in zip(outs, coeffs)).backward()
    sum(weighted(row, c) for row, c in zip(p_outs, coeffs)).backward()
    about = "" if scalar else " of L = sum over positions and ids of c * logit (c fixed at random)"
    for name in model.state_dict:
        got = [[v.grad for v in row] for row in sd[name]]
        want = [[v.grad for v in row] for row in model.state_dict[name]]
        t.compare(f"the gradient of {name}{about}", got, want, hint=NO_GRAPH if not any(map(any, got)) else
                  "The forward agrees, the gradient does not: is some step computed from .data (a float) "
                  "instead of the Values?")
    names = list(model.state_dict)
    for _ in range(FD_SAMPLES):
        name = rng.choice(names)
        i, j = rng.randrange(len(weights[name])), rng.randrange(len(weights[name][0]))

        def loss_at(z):
            moved = {n: [row[:] for row in m] for n, m in weights.items()}
            moved[name][i][j] = z
            rows = learner_forward(value_state_dict(moved))
            return sum(c * v.data for row, cs in zip(rows, coeffs) for c, v in zip(cs, row))
        fd = central_difference(loss_at, weights[name][i][j])
        t.compare(f"the gradient of {name}[{i}][{j}]{about}", sd[name][i][j].grad,
                  model.state_dict[name][i][j].grad, oracle=('central differences of your function', fd),
                  hint="See the docstring's steps.")


# ---------------------------------------------------------------------------- 14. name_loss
LOSS_SLIPS = {
    'sum': "The loss of a name is the MEAN over its positions: multiply the sum by 1 / n.",
    'current': "At position i the model predicts the NEXT token: the target is tokens[i + 1].",
    'no minus': "The loss is -ln p: minus the log, so that a likely character costs little.",
    'over all tokens': "Divide by the number of positions predicted, n = min(block_size, len(tokens) - 1), "
                       "not by the number of tokens.",
}


def float_losses(weights, config, tokens):
    """Each position's -ln p(next) from float_gpt's logits, for the loss's slips."""
    n = min(config.block_size, len(tokens) - 1)
    logits = float_gpt(weights, config, tokens[:n])
    p = [fsum_softmax(z) for z in logits]
    right = [-math.log(p[i][tokens[i + 1]]) for i in range(n)]
    return {'sum': math.fsum(right), 'current': math.fsum(-math.log(p[i][tokens[i]]) for i in range(n)) / n,
            'no minus': -math.fsum(right) / n, 'over all tokens': math.fsum(right) / len(tokens)}


def check_name_loss(t, fn):
    from microgpt.inference import NumpyGPT
    rng = random.Random(114)
    config = GPTConfig(5, n_layer=1, n_embd=8, n_head=2, block_size=6)
    cases = [('a name of 4 letters', config, 1, [4, 0, 1, 1, 0, 4]),
             ('a name of 1 letter', config, 2, [4, 2, 4]),
             ('a name of 8 letters: longer than the block (6)', config, 3, [4, 0, 1, 2, 3, 0, 1, 2, 3, 4]),
             ('2 layers', GPTConfig(5, n_layer=2, n_embd=8, n_head=4, block_size=6), 4, [4, 3, 3, 1, 4])]
    for i in range(2):
        n = rng.randint(1, 4)
        cases.append((f"random {i + 1}", config, 10 + i, [4] + [rng.randrange(4) for _ in range(n)] + [4]))
    for k, (label, cfg, seed, tokens) in enumerate(cases):
        t.case(label, describe_config(cfg, tokens).replace(' fed one position at a time', ''), k < 4)
        model, weights = model_case(cfg, seed)
        sd = value_state_dict(weights)
        hint_long = ("A position past block_size has no row in wpe: stop after min(block_size, "
                     "len(tokens) - 1) positions." if k == 2 else "See the docstring.")
        got = read_value(t, t.call(fn, tokens, sd, cfg, hint=hint_long))[0]
        want = training.doc_loss(model, tokens)
        slips = float_losses(weights, cfg, tokens)
        t.compare('the loss', got.data, want.data, hint=hint_long,
                  mistakes=[(s, slips[s], h) for s, h in LOSS_SLIPS.items()],
                  oracle=('the numpy port, NumpyGPT.loss', NumpyGPT(cfg, weights).loss(tokens), 1e-9))
        compare_model_gradients(t, rng, sd, model, [[got]], [[want]], cfg,
                                lambda sd_: [[read_value(t, t.call(fn, tokens, sd_, cfg))[0]]], weights, scalar=True)


# ---------------------------------------------------------------------------- 15. adam_step
def float_adam(data, grads_per_step, lrs, b1, b2, eps, wd=0.0, slip=None):
    """(the parameters, m) after each step, in floats: Adam with decoupled weight decay wd, with
    one of ADAM_SLIPS or checks_regularization's ADAMW_SLIPS on request."""
    m, v, w, after = [0.0] * len(data), [0.0] * len(data), list(data), []
    for t, (grads, lr) in enumerate(zip(grads_per_step, lrs), start=1):
        for i, g in enumerate(grads):
            g = g + wd * w[i] if slip == 'L2' else g  # the decay as a gradient: the moments see it
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            bias1, bias2 = (1.0, 1.0) if slip == 'no bias correction' else (1 - b1 ** t, 1 - b2 ** t)
            root = math.sqrt(v[i] / bias2 + eps) if slip == 'eps inside' else math.sqrt(v[i] / bias2) + eps
            s = lr * (m[i] / bias1) / root
            shrunk = {'no lr': w[i] * (1 - wd), 'constant': w[i] - lr * wd, 'L2': w[i], 'no decay': w[i],
                      'after': w[i]}.get(slip, w[i] * (1 - lr * wd))
            w[i] = (shrunk - s) * (1 - lr * wd if slip == 'after' else 1.0)
        after.append((list(w), list(m)))
    return after


ADAM_SLIPS = {
    'no bias correction': "Adam's bias correction forgotten: divide m by (1 - beta1 ** t) and v by "
                          "(1 - beta2 ** t). Without it the first steps are the wrong size (m and v start at 0).",
    'eps inside': "eps goes outside the square root: m_hat / (sqrt(v_hat) + eps).",
}


def adam_steps(t, fn, data, grads, lrs, settings, slips, hints, hint, zero_hint, wd=None):
    """The learner's steps (fn: adam_step; adamw_step when wd is given) beside optim.Adam's on the
    same gradients: the parameters after each step compared with microgpt's (the first step also
    with its closed form, w (1 - lr wd) - lr g / (|g| + eps)), each of `slips` ({name: float_adam's
    answer}) naming hints[name], the defaults one too when settings are passed in; the learner's
    gradients checked to be used up. Yields (step, g, lr, the parameters, m, v, Adam) for the rest."""
    b1, b2, eps = settings or (0.85, 0.99, 1e-8)
    if settings is not None:
        slips = dict(slips, defaults=float_adam(data, grads, lrs, 0.85, 0.99, 1e-8, wd or 0.0))
    params, p_params = [Value(x) for x in data], [Value(x) for x in data]
    m, v = [0.0] * len(data), [0.0] * len(data)
    adam = optim.Adam(p_params, b1, b2, eps, weight_decay=wd or 0.0)
    for step, (g, lr) in enumerate(zip(grads, lrs), start=1):
        for p, q, gi in zip(params, p_params, g):
            p.grad = q.grad = gi
        t.call(fn, params, m, v, step, lr, *([] if wd is None else [wd]), *(settings or ()))
        adam.step(lr)
        if any(p.grad != 0 for p in params):
            t.fail_line(f"after step {step} a parameter's .grad is still {next(p.grad for p in params if p.grad)}",
                        hint=zero_hint)
        got, want = [p.data for p in params], [p.data for p in p_params]
        oracle = None
        if step == 1:  # a fresh Adam's first step is lr * g / (|g| + eps), after the decay
            oracle = ("Adam's first step, p - lr * g / (|g| + eps)" if wd is None else
                      "AdamW's first step, w (1 - lr * wd) - lr * g / (|g| + eps)",
                      [x * (1 - lr * (wd or 0.0)) - lr * gi / (abs(gi) + eps) for x, gi in zip(data, g)], 1e-12)
        t.compare(f"the parameters after step {step}", got, want, oracle=oracle, hint=hint,
                  mistakes=[(s, after[step - 1][0], hints[s]) for s, after in slips.items()])
        yield step, g, lr, got, want, m, v, adam


def check_adam(t, fn):
    rng = random.Random(115)
    cases = [('one weight, 3 steps', [0.5], [[0.1], [-0.2], [0.05]], 0.01, None),
             ('gradients of 1e-4, 0.5 and 0: the first step is lr for both, 0 for the last',
              [1.0, -2.0, 0.0], [[1e-4, 0.5, 0.0], [2e-4, -0.5, 0.0], [0.0, 0.1, 0.0]], 0.01, None),
             ('betas (0.9, 0.999) and eps 1e-6 passed in', [0.3, 0.7], [[0.2, -0.1], [0.1, 0.3]], 0.05,
              (0.9, 0.999, 1e-6))]
    for i in range(2):
        n = rng.randint(2, 5)
        cases.append((f"random {i + 1}", vectors(rng, n), [vectors(rng, n, -1, 1) for _ in range(4)],
                      round(rng.uniform(0.001, 0.05), 4), None))
    hints = dict(ADAM_SLIPS, **{'betas swapped': "beta1 (0.85) weighs the mean m, beta2 (0.99) the mean square v.",
                                'defaults': "Use the beta1, beta2 and eps passed in, not the default numbers."})
    for k, (label, data, grads, lr, settings) in enumerate(cases):
        b1, b2, eps = settings or (0.85, 0.99, 1e-8)
        t.case(label, f"params {fmt(data)}, lr {lr}, beta1 {b1}, beta2 {b2}, eps {eps:g}; the gradient at "
                      f"each step: {fmt(grads)}", k < 3)
        lrs = [lr] * len(grads)
        slips = {s: float_adam(data, grads, lrs, b1, b2, eps, slip=s) for s in ADAM_SLIPS}
        slips['betas swapped'] = float_adam(data, grads, lrs, b2, b1, eps)
        for step, *_, m, v, adam in adam_steps(
                t, fn, data, grads, lrs, settings, slips, hints, "Follow the docstring's lines, in order, for every "
                "parameter.", "Set p.grad = 0.0 once it is used: the next backward() adds to it."):
            t.compare(f"m after step {step}", list(m), adam.m, hint="Update m in place (m[i] = ...): the caller "
                      "keeps the same list for the next step.")
            t.compare(f"v after step {step}", list(v), adam.v, hint="Update v in place (v[i] = ...), with g * g.")


# ---------------------------------------------------------------------------- 16. probabilities
def fsum_probabilities(logits, temperature):
    if temperature == 0:
        best = logits.index(max(logits))
        return [float(i == best) for i in range(len(logits))]
    top = max(logits)  # subtracted before dividing: a tiny temperature then gives exp() of a hugely negative number
    return fsum_softmax([(l - top) / temperature for l in logits])


def check_probabilities(t, fn):
    rng = random.Random(116)
    cases = [('temperature 1', [1.0, 2.0, 3.0], 1.0),
             ('temperature 0.5 sharpens', [1.0, 2.0, 3.0], 0.5),
             ('temperature 2 flattens', [2.0, 1.0, 0.5], 2.0),
             ('large logits', [1000.0, 999.0, 0.0], 1.0),
             ('temperature 0 is greedy: the first of two equal largest', [1.0, 3.0, 3.0, 2.0], 0.0),
             ('a tiny temperature, 1e-300: greedy in the limit', [2.5, 1.0, 0.0], 1e-300)]
    for i in range(RANDOM_CASES):
        cases.append((f"random {i + 1}", vectors(rng, rng.randint(2, 8), -4, 4), rng.choice([0.3, 0.7, 1.0, 1.5])))
    for k, (label, logits, temperature) in enumerate(cases):
        t.case(label, f"logits = {fmt(logits)}, temperature = {temperature:g}", k < 6)
        if temperature == 0:
            hint = "temperature 0 means greedy: 1.0 on the first largest logit, 0.0 elsewhere; no division."
        elif temperature < 1e-100:
            hint = ("Subtract the largest logit BEFORE dividing by the temperature: (l - max) / T is <= 0, "
                    "and exp() of a hugely negative number is 0, never an overflow.")
        else:
            hint = "softmax(logits / temperature), with the largest logit subtracted first."
        got = t.numbers(t.call(fn, list(logits), temperature, hint=hint), len(logits),
                        f"a list of {len(logits)} floats, one probability per logit")
        want = sampling.probabilities(list(logits), temperature)
        plain = fsum_probabilities(logits, 1.0)
        t.compare('the probabilities', got, want, hint=hint, oracle=('softmax written out with math.fsum',
                  fsum_probabilities(logits, temperature)),
                  mistakes=[('no temperature', plain, "Divide the logits by the temperature before exp().")]
                  if temperature not in (0, 1) else ())


CHECKS = {8: check_dot, 9: check_linear, 10: check_softmax, 11: check_rmsnorm, 12: check_attention_head,
          13: check_gpt, 14: check_name_loss, 15: check_adam, 16: check_probabilities}
