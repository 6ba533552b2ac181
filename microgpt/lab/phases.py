"""
Attention in phases: one head and one query, in the order the model computes it, each phase
beside the lines of microgpt/model.py's gpt() that compute it.

    python -m microgpt.lab phases anna --head 1 --query 2

`gpt_source` finds each phase's lines in gpt()'s syntax tree by what they compute (the
state_dict names they read, softmax, the KV cache), not by variable names, so an edited
model.py is shown as it is now; one that cannot be parsed leaves the code out, saying why.
"""

import ast
import os

import numpy as np

from ..edge.errors import UserError
from .attention import check_choice, kv_head
from .loading import data_mode, read_text
from .render import token_label, width

# (id, name, what it shows): the phases, in the order gpt() computes them
PHASES = [
    ('tokens', 'tokens', "each token and its position become one vector: wte[token] + wpe[pos], normalised"),
    ('qkv', 'Q / K / V', "three linear maps of the same vector: what it looks for (q), offers (k), hands over (v)"),
    ('scores', 'scores', "q_i . k_j / sqrt(head_dim) for every key j the query can see"),
    ('mask', 'mask', "keys j > i are not in the KV cache yet: never scored, never weighted"),
    ('softmax', 'softmax', "scores to weights: positive, summing to 1 over the visible keys"),
    ('weighted', 'weighted sum', "each value times its weight, w_j * v_j, summed: this head's output"),
    ('heads', 'all heads', "every head does the same on its slice; side by side, then attn_wo mixes them"),
]

MODEL_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'model.py')


# ---------------------------------------------------------------------------- the numbers
def phase_view(model, text, layer=0, head=0, query=None, mode='lines'):
    """Every number the phases show, for head `head` of layer `layer` at query `query`.

    Returns {'labels', 'query', 'layer', 'head', 'head_dim',
             'q', 'k', 'v': (T, head_dim) this head's vectors at every position,
             'raw': (t,) q_i . k_j for the visible keys, 'scores': (t,) / sqrt(head_dim),
             'weights': (t,), 'weighted': (t, head_dim) w_j * v_j, 'out': (head_dim,),
             'all_weights': (n_head, t) every head's weights for this query,
             'all_out': (n_head, head_dim), 'concat': (n_embd,), 'attn_wo_out': (n_embd,)}.
    t = query + 1 visible keys; the future positions have q, k, v (computed by their own
    calls of gpt()), but the query's call never sees them.
    """
    from microgpt import inference

    token_ids = read_text(model, text, mode).ids  # [BOS] + a name, or a window of running text
    query = check_choice(model, token_ids, layer, head, query, mode)
    _, caps = model.forward(token_ids, capture=('q', 'k', 'v', 'head_output'))
    c = model.config
    t = query + 1
    per_head = []
    for h in range(c.n_head):
        # the port's own attention step, the one forward() takes for this head and position
        kv = kv_head(c, h)  # grouped-query attention: the keys and values its group shares
        out, scores, weights = inference.attention_head(
            caps['q'][layer, h, query], caps['k'][layer, kv, :t], caps['v'][layer, kv, :t])
        per_head.append((out, scores, weights))
    out, scores, weights = per_head[head]
    kv = kv_head(c, head)
    q, k, v = caps['q'][layer, head], caps['k'][layer, kv], caps['v'][layer, kv]  # (T, head_dim) each
    concat = np.concatenate([o for o, _, _ in per_head])                 # (n_embd,): heads side by side
    return {
        'labels': [token_label(model.tokenizer, i) for i in token_ids], 'query': query, 'data_mode': mode,
        'layer': layer, 'head': head, 'head_dim': c.head_dim, 'n_head': c.n_head,
        'q': q, 'k': k, 'v': v,
        'raw': k[:t] @ q[query],                                         # (t,): before 1/sqrt(head_dim)
        'scores': scores, 'weights': weights,
        'weighted': weights[:, None] * v[:t],                            # (t, head_dim): w_j * v_j
        'out': out,
        'all_weights': np.stack([w for _, _, w in per_head]),            # (n_head, t)
        'all_out': np.stack([o for o, _, _ in per_head]),                # (n_head, head_dim)
        'concat': concat,
        'model_concat': caps['head_output'][layer, :, query].reshape(-1),  # (n_embd,): forward()'s own
        'attn_wo_out': model.weights[f'layer{layer}.attn_wo'] @ concat,  # (n_embd,): linear(x_attn, attn_wo)
    }


# ---------------------------------------------------------------------------- the code beside it
def gpt_source(path=MODEL_FILE):
    """gpt()'s lines as they are on disk now, and each phase's line numbers in them.

    Returns {'file': 'microgpt/model.py', 'first': line number of `def gpt`, 'lines': [text],
    'phases': {phase id: [line numbers]}}; a phase whose statements are not found has []. A
    file that cannot be read, is not UTF-8 or Python, or has no gpt() is a UserError saying so.
    """
    shown = 'microgpt/model.py'
    try:
        with open(path, encoding='utf-8') as f:
            text = f.read()
        tree = ast.parse(text)
    except OSError as e:
        raise UserError(f"{shown} cannot be read: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise UserError(f"{shown} is not UTF-8 text (byte {e.object[e.start]:#04x} at offset "
                        f"{e.start})") from None
    except SyntaxError as e:
        where = f" at line {e.lineno}" if e.lineno else ''
        raise UserError(f"{shown} does not parse: {e.msg}{where}") from None
    except ValueError as e:  # a NUL byte, on Python 3.10 (later ones raise SyntaxError)
        raise UserError(f"{shown} does not parse: {e}") from None
    func = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == 'gpt'), None)
    if func is None:
        raise UserError(f"{shown} has no function gpt()")
    all_lines = text.split('\n')
    first, last = func.lineno, func.end_lineno
    phases = {}
    for phase, nodes in phase_lines(func).items():
        found = set()
        for node in nodes:
            compound = isinstance(node, (ast.For, ast.While, ast.If, ast.With))
            found.update(range(node.lineno, (node.lineno if compound else node.end_lineno) + 1))
            above = node.lineno - 1  # the comment block directly above says why
            while above > first and all_lines[above - 1].strip().startswith('#'):
                found.add(above)
                above -= 1
        phases[phase] = sorted(found)
    return {'file': shown, 'first': first, 'lines': all_lines[first - 1:last], 'phases': phases}


def phase_lines(func):
    """{phase id: [statements of gpt()]}, found by what they compute (the module's docstring):
      tokens   the statements reading wte and wpe, and the one that adds what they read;
      qkv      the ones reading attn_wq, attn_wk, attn_wv, and those making q, k or v again from them;
      softmax  the call of a block named softmax; the loop around it is the heads' loop;
      scores   the statements in that loop making the softmax's input, and those making theirs;
      mask     the appends to gpt()'s own arguments (the KV cache), and the scores' reads of it;
      weighted the assignments in that loop reading the softmax's output, and what they read;
      heads    the loop's header, the slice the scores read, where the heads' outputs go, attn_wo.
    """
    parent = {child: node for node in ast.walk(func) for child in ast.iter_child_nodes(node)}
    statements = [n for n in ast.walk(func) if isinstance(n, ast.stmt) and n is not func
                  and not isinstance(n, (ast.For, ast.While, ast.If, ast.With))]
    args = {a.arg for a in func.args.args}

    def keys(node):  # the state_dict names it spells: 'wte' in sd['wte'], 'attn_wq' in f'layer{li}.attn_wq'
        return {c.value.split('.')[-1] for c in ast.walk(node)
                if isinstance(c, ast.Constant) and isinstance(c.value, str)}

    def reads(node):
        return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}

    def binds(node):
        return {n.id for t in getattr(node, 'targets', []) for n in ast.walk(t) if isinstance(n, ast.Name)}

    def calls(node, name):
        return any(isinstance(c, ast.Call) and name in (getattr(c.func, 'id', None), getattr(c.func, 'attr', None))
                   for c in ast.walk(node))

    def making(names, among):  # the assignments among `among` that bind any of `names`
        return [s for s in among if isinstance(s, ast.Assign) and binds(s) & names]

    def inside(node):  # the innermost loop around node, or None
        node = parent.get(node)
        while node is not None and not isinstance(node, ast.For):
            node = parent.get(node)
        return node

    # (the output's line may read wte too, as the tied output matrix: it names lm_head beside it)
    found = {'tokens': [s for s in statements if keys(s) & {'wte', 'wpe'} and 'lm_head' not in keys(s)],
             'qkv': [s for s in statements if keys(s) & {'attn_wq', 'attn_wk', 'attn_wv'}],
             'softmax': [s for s in statements if calls(s, 'softmax')]}
    qkv = set().union(*map(binds, found['qkv']))  # QK-norm's and RoPE's lines make q and k again
    found['qkv'] += [s for s in statements if s not in found['qkv'] and isinstance(s, ast.Assign)
                     and binds(s) & qkv and reads(s) & qkv]
    embeddings = set().union(*map(binds, found['tokens']))
    found['tokens'] += [s for s in statements if s not in found['tokens'] and reads(s) & embeddings][:1]
    loop = inside(found['softmax'][0]) if found['softmax'] else None
    body = [s for s in statements if inside(s) is loop] if loop is not None else []
    made = making(set().union(*map(reads, found['softmax'])), body)
    found['scores'] = made + making(set().union(*map(reads, made)), body)
    appends = [s for s in statements if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
               and getattr(s.value.func, 'attr', None) == 'append' and reads(s.value.func) & args]
    found['mask'] = appends + [s for s in found['scores'] if reads(s) & args]
    weights = set().union(*map(binds, found['softmax']))
    derived, outputs = set(weights), []
    for s in body:  # in order: the lines that read the weights, or read a line that did (dropout's)
        if isinstance(s, ast.Assign) and reads(s.value) & derived:
            outputs.append(s)
            derived |= binds(s)
    found['weighted'] = outputs + making(set().union(*map(reads, outputs)) - derived, body)
    slices = [s for s in making(set().union(*map(reads, found['scores'])), body) if s not in found['scores']]
    gathered = set().union(*map(binds, outputs))
    found['heads'] = ([loop] if loop is not None else []) + slices \
        + [s for s in body if isinstance(s, ast.Expr) and reads(s) & gathered] \
        + [s for s in statements if 'attn_wo' in keys(s)]
    return {phase: found[phase] for phase, _, _ in PHASES}


# ---------------------------------------------------------------------------- the sandbox
def compute(model, text, layer=0, head=0, query=None, ckpt=None):
    """The registry's contract: phase_view's numbers, the phases, and gpt()'s lines now (or, where
    model.py cannot give them, {'file', 'error'}: the page and the printout say why)."""
    out = phase_view(model, text, layer, head, query, data_mode(ckpt))
    about, c = {i: a for i, _, a in PHASES}, model.config  # what each phase shows, said of this model's rungs
    if c.rope:
        about['tokens'] = ("each token becomes one vector, wte[token], normalised (RoPE: no wpe; the "
                           "position turns q and k instead)")
    if c.qk_norm or c.rope:
        about['qkv'] += "; each head's q and k then " + " and ".join(
            ["normalised (QK-norm)"] * c.qk_norm + ["turned by its position (RoPE)"] * c.rope)
    if c.n_kv_head < c.n_head:
        about['qkv'] += (f"; grouped-query attention: {c.n_kv_head} heads of k and v, each shared by "
                         f"{c.n_head // c.n_kv_head} query heads")
    out['phases'] = [{'id': i, 'name': n, 'about': about[i]} for i, n, _ in PHASES]
    try:
        out['code'] = gpt_source(MODEL_FILE)
    except UserError as e:  # the numbers stand without the code beside them
        out['code'] = {'file': 'microgpt/model.py', 'error': f"{e}: gpt()'s lines are not shown"}
    return out


def _side_by_side(left, right):
    """k_j and v_j on one line where it fits the terminal, else one under the other (each then
    wrapped by the printout under its first number)."""
    both = f"{left}   {right}"
    return [both] if len(both) + 3 <= width() else [left, right]


def render(v):
    code = v['code']
    i, labels = v['query'], v['labels']
    fmt = lambda x: '[' + ' '.join(f'{a:+.3f}' for a in x) + ']'
    numbers = {
        'tokens': [' '.join(f'{j}:{l}' for j, l in enumerate(labels)) + f"   query i = {i} ({labels[i]!r})"],
        'qkv': [f"q_{i} = {fmt(v['q'][i])}"] + [line for j in range(i + 1) for line in
                                                 _side_by_side(f"k_{j} = {fmt(v['k'][j])}", f"v_{j} = {fmt(v['v'][j])}")],
        'scores': [f"key {j} ({labels[j]}): q.k = {v['raw'][j]:+.4f}, / sqrt({v['head_dim']}) = {v['scores'][j]:+.4f}"
                   for j in range(i + 1)],
        'mask': [f"keys {i + 1}..{len(labels) - 1} lie in the future: not scored" if i + 1 < len(labels)
                 else "no key lies in the future of the last position"],
        'softmax': [f"key {j} ({labels[j]}): weight {w:.4f}" for j, w in enumerate(v['weights'])]
                   + [f"sum {v['weights'].sum():.6f}"],
        'weighted': [f"w_{j} v_{j} = {fmt(wv)}" for j, wv in enumerate(v['weighted'])] + [f"out_{i} = {fmt(v['out'])}"],
        'heads': [f"head {h}: weights " + ' '.join(f'{w:.3f}' for w in ws) for h, ws in enumerate(v['all_weights'])]
                 + [f"attn_wo(concat) = {fmt(v['attn_wo_out'])}"],
    }
    lines = [f"layer {v['layer']}, head {v['head']}, query {i}: {i + 1} visible key{'s' * (i > 0)}"]
    if 'error' in code:
        lines.append(f"({code['error']})")
    for n, phase in enumerate(v['phases'], start=1):
        pid = phase['id']
        lines += ['', f"{n}) {phase['name']}: {phase['about']}"]
        lines += ['   ' + line for line in numbers[pid]]
        lines += [f"   {code['file']}:{ln}  {code['lines'][ln - code['first']].strip()}"
                  for ln in code.get('phases', {}).get(pid, ())
                  if not code['lines'][ln - code['first']].strip().startswith('#')]
    return '\n'.join(lines)
