"""
The sampling sandbox (`python -m microgpt.lab sample`): temperature and top-k, side by side.

    python -m microgpt.lab sample                  # what the first character could be
    python -m microgpt.lab sample ma --top-k 3     # after "ma"
    python -m microgpt.lab sample --temperatures 0 0.3 1 3 --num 8

(This file is sampler.py, not sample.py, so it never reads as the top-level sample.py.)

After [BOS] + PROMPT, the model gives one logit per token. This prints the next-character
distribution softmax(logits / T) for each temperature T in columns (T = 0 is greedy: all the
probability on the favourite), with its entropy in bits: low T concentrates the mass, high T
spreads it. Then what a top-k cut keeps at T = 1 (the k most likely, renormalised), and a few
names drawn at every setting with sample.py's own sampler (microgpt/sampling.py), each marked
as a name of the training data (trained on or held out) or new. Greedy names are the same for every seed.
"""

import math
import os

from ..checks import check_prompt
from ..data import load_docs
from ..errors import UserError
from ..sampling import probabilities, sample_names
from .loading import describe, load_model
from .render import bar, number, table, token_label
from .rowstats import entropy_bits


def distribution(model, prompt, temperatures, top_k):
    """The next-character distribution after [BOS] + prompt at each temperature, and top-k's cut."""
    ids = check_prompt(model.tokenizer, model.config.block_size, prompt)
    logits = model.next_logits_fn()([model.tokenizer.bos] + ids)  # vocab_size floats
    by_t = {t: probabilities(logits, t) for t in temperatures}
    cut = probabilities(logits, 1.0, top_k)
    full = probabilities(logits, 1.0)
    kept = sorted((i for i, p in enumerate(cut) if p > 0), key=lambda i: -cut[i])
    return {
        'logits': logits,
        'probs': by_t,
        'entropy': {t: float(entropy_bits(p)) for t, p in by_t.items()},  # bits: 0 = certain
        'top_k': top_k,
        'top_k_probs': cut,
        'full_probs': full,
        'top_k_kept': kept,
        'top_k_mass': sum(full[i] for i in kept),  # the share of the T = 1 mass that top-k keeps
        'top_k_entropy': float(entropy_bits(cut)),
    }


def training_names(model_path, data, n_head=None):
    """(every name of the training data, held-out ones too, as a set; where they came from),
    or (None, why not).

    n_head: as given to load the model (the tutorial's export needs it to be read at all)."""
    if data is None:
        from ..checkpoint import read_checkpoint
        run = (read_checkpoint(model_path, n_head=n_head)['train_state'] or {}).get('run')
        if not isinstance(run, dict):  # the tutorial's export; only --resume validates a train_state
            return None, "the checkpoint does not say what it was trained on (pass --data)"
        data = run.get('data')  # None: the bundled names
        if data is not None and not (isinstance(data, str) and os.path.isfile(data)):
            return None, f"its training data {data!r} is not a file here (pass --data)"
    return set(load_docs(data)), data or 'the bundled census names'


def draws(model, prompt, temperatures, top_k, num, seed):
    """{(temperature, top_k or None): [names]}, drawn with sample.py's sampler."""
    out = {}
    for t in temperatures:
        for k in (None, top_k):
            if k is not None and (t == 0 or k >= model.config.vocab_size):
                continue  # greedy is already the top-1 cut, and k >= vocab_size cuts nothing
            out[(t, k)] = sample_names(model, num=num, temperature=t, seed=seed, prompt=prompt, top_k=k)
    return out


def sample_view(model, temperature=0.5, seed=42, prompt='', top_k=None):
    """What `lab sample` shows, for the web lab's Sampling page: the distribution after the
    prompt at T = 0, 0.5, 1, 2 and the page's own temperature, with entropies, and top-k's cut
    (top_k, default 5)."""
    temperatures = sorted({0.0, 0.5, 1.0, 2.0, float(temperature)})
    d = distribution(model, prompt, temperatures, top_k or 5)
    chars = [token_label(model.tokenizer, i) for i in range(model.config.vocab_size)]
    return {'chars': chars, 'temperatures': temperatures,
            'probs': [d['probs'][t] for t in temperatures], 'entropy': [d['entropy'][t] for t in temperatures],
            'top_k': d['top_k'], 'top_k_kept': [chars[i] for i in d['top_k_kept']],
            'top_k_mass': d['top_k_mass'], 'top_k_entropy': d['top_k_entropy']}


def render(model, path, prompt, d, samples, known, source):
    tok = model.tokenizer
    temps = list(d['probs'])
    lines = [describe(path, model),
             f"after [BOS] + {prompt!r}: the next character, p = softmax(logits / T); T = 0 is greedy", '']
    order = sorted(range(len(d['logits'])), key=lambda i: -d['logits'][i])
    rows = []
    for i in order:
        if max(d['probs'][t][i] for t in temps) < 0.005:
            continue
        rows.append([token_label(tok, i), number(d['logits'][i], '+.3f')] + [f"{d['probs'][t][i]:.3f}" for t in temps])
    lines.append(table(['next', 'logit'] + [f"T={t:g}" for t in temps], rows))
    hidden = len(order) - len(rows)
    if hidden:
        lines.append(f"  ({hidden} more characters below 0.005 at every T)")
    lines.append(table(['', ''] + [f"T={t:g}" for t in temps],
                       [['entropy', 'bits'] + [f"{d['entropy'][t]:.3f}" for t in temps]]))
    lines.append(f"  (uniform over {len(order)} tokens: {math.log2(len(order)):.3f} bits; certain: 0)")
    lines.append('')
    k = d['top_k']
    if k >= len(order):
        lines.append(f"top-k = {k} at T = 1 keeps all {len(order)} tokens: no cut (try a k below {len(order)})")
    else:
        lines.append(f"top-k = {k} at T = 1: keep the {k} most likely, renormalise; every other token gets 0")
        for i in d['top_k_kept']:
            lines.append(f"  {token_label(tok, i):>5} {bar(d['top_k_probs'][i], 30)} {d['top_k_probs'][i]:.3f}"
                         f"   (was {d['full_probs'][i]:.3f})")
        lines.append(f"  the {k} kept held {d['top_k_mass']:.3f} of the probability; entropy "
                     f"{d['top_k_entropy']:.3f} bits")
    lines.append('')
    lines.append("names drawn at each setting" + (f", * = a name of the training data ({source}; trained on or held out)"
                                                  if known is not None else f" ({source})"))
    for (t, kk), names in samples.items():
        label = f"T={t:g}" + (f" top-k {kk}" if kk else '') + (' (greedy)' if t == 0 else '')
        marked = [name + ('*' if known is not None and name in known else '') for name in names]
        lines.append(f"  {label:<18} {'  '.join(marked)}")
    if known is not None:
        all_names = [n for names in samples.values() for n in names]
        new = sum(n not in known for n in all_names)
        lines.append(f"  {new} of {len(all_names)} are new names")
    return '\n'.join(lines)


def run(args):
    model = load_model(args.ckpt, n_head=args.n_head)
    if args.top_k < 1:
        raise UserError(f"--top-k must be 1 or more, got {args.top_k}")
    d = distribution(model, args.prompt, args.temperatures, args.top_k)
    samples = draws(model, args.prompt, args.temperatures, args.top_k, args.num, args.seed)
    known, source = training_names(args.ckpt, args.data, args.n_head)
    print(render(model, args.ckpt, args.prompt, d, samples, known, source))
    return 0
