"""
Attention in phases, on the learner's model: the 3D tutorial's sandbox (docs/lessons.md), one
head and one query, walked through in the order the model computes it, each phase beside the
lines of microgpt/model.py's gpt() that compute it.

    python -m microgpt.lab phases anna                  # layer 0, head 0, the last position
    python -m microgpt.lab phases anna --head 1 --query 2

The phases (PHASES): the tokens; their q, k and v for this head; the scores q_i . k_j / sqrt(d)
of the query against every visible key; the causal mask (the future keys j > i are not in the
KV cache yet, so they are never scored); the softmax; the weighted sum of the values, each
w_j * v_j and their sum; then every head at once, the heads side by side, and attn_wo.

`phase_view` computes the numbers with the numpy port's forward pass (its captured q, k, v) and
its own attention_head, the function forward() calls per head and position. `gpt_source`
reads microgpt/model.py from disk when asked (so an edited file is shown as it is now) and
finds each phase's lines by the statements that compute it (PHASE_STATEMENTS), searched in
gpt()'s body: a moved or re-commented line is still found, and a phase whose statements are
gone shows no lines rather than wrong ones (tests check that every phase finds its lines).
"""

import ast
import os
import re

import numpy as np

from .attention import check_choice
from .loading import data_mode, text_tokens
from .render import token_label

# (id, name, what it shows): the 3D tutorial's phases, in the order gpt() computes them
PHASES = [
    ('tokens', 'tokens', "each token and its position become one vector: wte[token] + wpe[pos], normalised"),
    ('qkv', 'Q / K / V', "three linear maps of the same vector: what it looks for (q), offers (k), hands over (v)"),
    ('scores', 'scores', "q_i . k_j / sqrt(head_dim) for every key j the query can see"),
    ('mask', 'mask', "keys j > i are not in the KV cache yet: never scored, never weighted"),
    ('softmax', 'softmax', "scores to weights: positive, summing to 1 over the visible keys"),
    ('weighted', 'weighted sum', "each value times its weight, w_j * v_j, summed: this head's output"),
    ('heads', 'all heads', "every head does the same on its slice; side by side, then attn_wo mixes them"),
]

# Each phase's statements in gpt(), as regular expressions over a statement's first line (for a
# `for` loop, its header). Searched by statement, not by line number, so edits elsewhere in
# model.py move nothing; a comment block directly above a matched statement is shown with it.
PHASE_STATEMENTS = {
    'tokens': [r"^tok_emb\s*=", r"^pos_emb\s*=", r"zip\(tok_emb,\s*pos_emb\)"],
    'qkv': [r"^[qkv]\s*=\s*(\w+\.)?linear\(.*attn_w[qkv]"],
    'scores': [r"^q_h\s*=", r"^k_h\s*=", r"^attn_logits\s*="],
    'mask': [r"^keys\[li\]\.append", r"^values\[li\]\.append", r"^k_h\s*="],
    'softmax': [r"^attn_weights\s*=\s*(\w+\.)?softmax"],
    'weighted': [r"^v_h\s*=", r"^head_out\s*="],
    'heads': [r"^for h in range", r"^hs\s*=", r"^x_attn\.extend", r"^x\s*=\s*(\w+\.)?linear\(x_attn"],
}
# (a building block may be called through the set gpt() names, as blocks.linear, or bare)
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
    import inference

    token_ids = text_tokens(model, text, mode)  # [BOS] + a name, or a window of running text
    query = check_choice(model, token_ids, layer, head, query, mode)
    _, caps = model.forward(token_ids, capture=('q', 'k', 'v', 'head_output'))
    c = model.config
    t = query + 1
    per_head = []
    for h in range(c.n_head):
        # the port's own attention step, the one forward() takes for this head and position
        out, scores, weights = inference.attention_head(
            caps['q'][layer, h, query], caps['k'][layer, h, :t], caps['v'][layer, h, :t])
        per_head.append((out, scores, weights))
    out, scores, weights = per_head[head]
    q, k, v = caps['q'][layer, head], caps['k'][layer, head], caps['v'][layer, head]  # (T, head_dim) each
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
    'phases': {phase id: [line numbers]}}; a phase whose statements are not found has [].
    """
    with open(path, encoding='utf-8') as f:
        text = f.read()
    all_lines = text.split('\n')
    func = _find_gpt(ast.parse(text))
    first, last = func.lineno, func.end_lineno
    statements = [node for node in ast.walk(func) if isinstance(node, ast.stmt) and node is not func]
    phases = {}
    for phase, patterns in PHASE_STATEMENTS.items():
        found = set()
        for node in statements:
            head_line = all_lines[node.lineno - 1].strip()
            if any(re.search(p, head_line) for p in patterns):
                end = node.lineno if isinstance(node, (ast.For, ast.While, ast.If, ast.With)) else node.end_lineno
                found.update(range(node.lineno, end + 1))
                above = node.lineno - 1  # the comment block directly above says why
                while above > first and all_lines[above - 1].strip().startswith('#'):
                    found.add(above)
                    above -= 1
        phases[phase] = sorted(found)
    return {'file': 'microgpt/model.py', 'first': first, 'lines': all_lines[first - 1:last],
            'phases': phases}


def _find_gpt(tree):
    """The FunctionDef of gpt (the GPT class's method, or a function of that name)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == 'gpt':
            return node
    raise LookupError("microgpt/model.py has no function gpt()")


# ---------------------------------------------------------------------------- the sandbox
def compute(model, text, layer=0, head=0, query=None, ckpt=None):
    """The registry's contract: phase_view's numbers, the phases, and gpt()'s lines now."""
    out = phase_view(model, text, layer, head, query, data_mode(ckpt))
    out['phases'] = [{'id': i, 'name': n, 'about': a} for i, n, a in PHASES]
    out['code'] = gpt_source()
    return out


def render(v):
    code = v['code']
    i, labels = v['query'], v['labels']
    fmt = lambda x: '[' + ' '.join(f'{a:+.3f}' for a in x) + ']'
    numbers = {
        'tokens': [' '.join(f'{j}:{l}' for j, l in enumerate(labels)) + f"   query i = {i} ({labels[i]!r})"],
        'qkv': [f"q_{i} = {fmt(v['q'][i])}"] + [f"k_{j} = {fmt(v['k'][j])}   v_{j} = {fmt(v['v'][j])}"
                                                 for j in range(i + 1)],
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
    for n, phase in enumerate(v['phases'], start=1):
        pid = phase['id']
        lines += ['', f"{n}) {phase['name']}: {phase['about']}"]
        lines += ['   ' + line for line in numbers[pid]]
        lines += [f"   {code['file']}:{ln}  {code['lines'][ln - code['first']].strip()}"
                  for ln in code['phases'][pid] if not code['lines'][ln - code['first']].strip().startswith('#')]
    return '\n'.join(lines)
