"""
The sampling sandbox: temperature and top-k, side by side (the sampling loop is the core's
microgpt/sampling.py, the one sample.py uses).

    python -m microgpt.lab sampling                # what the first character could be
    python -m microgpt.lab sampling ma --top-k 3   # after "ma"
    python -m microgpt.lab sampling "ROMEO:" --ckpt out/shakespeare.safetensors --length 200

A model of running text reads no BOS and draws continuations, exactly as
`sample.py --num N --length L --temperature T --top-k K --seed S --prompt PROMPT`.
"""

import functools
import math
import os
import random

from ..edge.checks import check_prompt
from ..edge.data import load_docs
from ..edge.errors import UserError
from ..programs.sample import text_prompt_ids
from ..sampling import generate, probabilities, sample_names
from .loading import data_mode, trained_run
from .registry import SAMPLE_LENGTH, SAMPLE_NUM
from .limits import MAX_LAB_CHARACTERS
from .render import bar, fold_note, fold_text, number, table, token_label, unit
from .rowstats import entropy_bits



def context(model, prompt, mode='lines'):
    """The token ids the model reads before the next character: [BOS] + PROMPT, or running
    text's PROMPT (any length; empty: after a newline, as sample.py starts)."""
    tok = model.tokenizer
    if mode != 'text':
        return [tok.bos] + check_prompt(tok, model.config.block_size, prompt)
    return text_prompt_ids(tok, prompt)


def distribution(model, prompt, temperatures, top_k, mode='lines'):
    """The next-character distribution after [BOS] + prompt (or running text's prompt) at each
    temperature, and top-k's cut. Running text's is over the characters alone: BOS, never in
    the text, is left out of the draw (sampling.generate)."""
    ids = context(model, prompt, mode)[-model.config.block_size:]
    logits = model.next_logits_fn()(ids)  # vocab_size floats
    if mode == 'text':
        logits = logits[:model.tokenizer.bos]  # the characters' logits: BOS is the last id
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


def training_names(ckpt, data=None):
    """(every name of the training data, held-out ones too, as a set; where they came from),
    or (None, why not). data: a file of names (--data), else the one the checkpoint names."""
    if ckpt is not None and ckpt.data_mode == 'text':
        return None, "running text: continuations are not marked"
    if data is None:
        run = trained_run(ckpt)
        if run is None:  # the tutorial's export, or a damaged training state
            return None, "the checkpoint does not say what it was trained on (pass --data)"
        data = run.data  # None: the bundled names
        if data is not None and not (isinstance(data, str) and os.path.isfile(data)):
            return None, f"its training data {data!r} is not a file here (pass --data)"
    st = None if data is None else os.stat(data)
    stamp = None if st is None else (st.st_mtime_ns, st.st_size)
    return names_of(data, stamp), data or 'the bundled census names'


@functools.lru_cache(maxsize=4)  # read once per version of the file: names.txt takes 40 ms
def names_of(data, stamp):
    """The names of a data file (None: the bundled ones) as a frozenset; stamp: its mtime and
    size, so an edited file is read again."""
    return frozenset(load_docs(data))


def settings_of(temperatures, top_k, n_tokens):
    """[(temperature, top_k or None)]: each temperature without a cut, and with top-k's where it
    cuts something (greedy is already the top-1 cut, and k >= the tokens drawn from cuts nothing)."""
    return [(t, k) for t in temperatures for k in (None, top_k)
            if k is None or (t != 0 and k < n_tokens)]


def draws(model, prompt, temperatures, top_k, num, seed):
    """{(temperature, top_k or None): [names]}, drawn with sample.py's sampler."""
    return {(t, k): sample_names(model, num=num, temperature=t, seed=seed, prompt=prompt, top_k=k)
            for t, k in settings_of(temperatures, top_k, model.config.vocab_size)}


def continuations(model, prompt, temperatures, top_k, num, length, seed):
    """{(temperature, top_k or None): [texts]}: sample.py's own continuations at each setting,
    from a generator seeded afresh with `seed`."""
    ids = context(model, prompt, 'text')
    out = {}
    for t, k in settings_of(temperatures, top_k, model.tokenizer.bos):  # BOS is never drawn
        rng = random.Random(seed)
        out[(t, k)] = [''.join(generate(model, length, rng, t, ids, k)) for _ in range(num)]
    return out


def compute(model, prompt='', temperatures=(0.0, 0.5, 1.0, 2.0), top_k=5, num=None, names_at=(), seed=42,
            data=None, length=None, ckpt=None):
    """The distribution at each temperature, and `num` names (running text: continuations)
    drawn at every setting, or at the temperatures `names_at` only, where given."""
    mode = data_mode(ckpt)
    num = SAMPLE_NUM[mode] if num is None else num
    temperatures = sorted({float(t) for t in temperatures})
    at = sorted({float(t) for t in names_at}) if names_at else temperatures
    if mode != 'text' and length is not None:
        raise UserError("--length is for running-text models: a names model ends each name at its end "
                        "token; use --num for how many names")
    if mode == 'text':
        length = SAMPLE_LENGTH if length is None else length
        total = num * length * len(settings_of(at, top_k, model.tokenizer.bos))
        if total > MAX_LAB_CHARACTERS:
            raise UserError(f"{num} continuation(s) of {length} characters at each of these settings are "
                            f"{total:,} characters: at most {MAX_LAB_CHARACTERS:,} in one call; ask for fewer "
                            "or shorter ones")
    d = distribution(model, prompt, temperatures, top_k, mode)
    n_shown = model.tokenizer.bos if mode == 'text' else model.config.vocab_size  # no BOS in running text
    chars = [token_label(model.tokenizer, i) for i in range(n_shown)]
    settings = []
    if num == 0:  # the distribution alone (the Sampling page asks for its draws apart)
        known, source = None, "nothing drawn (num 0)"
    elif mode == 'text':
        known, source = training_names(ckpt, data)  # (None, why: running text is not marked)
        for (t, k), texts in continuations(model, prompt, at, top_k, num, length, seed).items():
            settings.append({'temperature': t, 'top_k': k, 'texts': texts})
    else:
        known, source = training_names(ckpt, data)
        for (t, k), names in draws(model, prompt, at, top_k, num, seed).items():
            settings.append({'temperature': t, 'top_k': k, 'names': names,
                             'known': None if known is None else [n in known for n in names]})
    reads = context(model, prompt, mode)[-model.config.block_size:]
    return {'prompt': prompt, 'data_mode': mode, 'length': length,
            'context': [token_label(model.tokenizer, i) for i in reads],
            'chars': chars, 'logits': d['logits'], 'temperatures': temperatures,
            'probs': [d['probs'][t] for t in temperatures], 'entropy': [d['entropy'][t] for t in temperatures],
            'top_k': top_k, 'top_k_probs': d['top_k_probs'], 'full_probs': d['full_probs'],
            'top_k_kept': [chars[i] for i in d['top_k_kept']], 'top_k_kept_ids': d['top_k_kept'],
            'top_k_mass': d['top_k_mass'], 'top_k_entropy': d['top_k_entropy'],
            'draws': settings, 'marked': known is not None, 'source': source, 'seed': seed, 'num': num,
            'unit': unit(model.tokenizer)}


def render(d):
    temps, chars, u = d['temperatures'], d['chars'], d['unit']
    if d['data_mode'] == 'text':
        lines = [f"after {d['prompt']!r} (running text, no BOS; the model reads "
                 f"{''.join(d['context'])!r}): the next {u}, p = softmax(logits / T) over the "
                 f"{u}s (BOS is never drawn in running text); T = 0 is greedy", '']
    else:
        lines = [f"after [BOS] + {d['prompt']!r}: the next {u}, p = softmax(logits / T); T = 0 is greedy", '']
    order = sorted(range(len(d['logits'])), key=lambda i: -d['logits'][i])
    rows = []
    for i in order:
        if max(p[i] for p in d['probs']) < 0.005:
            continue
        rows.append([chars[i], number(d['logits'][i], '+.3f')] + [f"{p[i]:.3f}" for p in d['probs']])
    lines.append(table(['next', 'logit'] + [f"T={t:g}" for t in temps], rows))
    hidden = len(order) - len(rows)
    if hidden:
        lines.append(f"  ({hidden} more {u}s below 0.005 at every T)")
    lines.append(table(['', ''] + [f"T={t:g}" for t in temps],
                       [['entropy', 'bits'] + [f"{e:.3f}" for e in d['entropy']]]))
    lines.append(f"  (uniform over {len(order)} tokens: {math.log2(len(order)):.3f} bits; certain: 0)")
    lines.append('')
    k = d['top_k']
    if k >= len(order):
        lines.append(f"top-k = {k} at T = 1 keeps all {len(order)} tokens: no cut (try a k below {len(order)})")
    else:
        lines.append(f"top-k = {k} at T = 1: keep the {k} most likely, renormalise; every other token gets 0")
        for i in d['top_k_kept_ids']:
            lines.append(f"  {chars[i]:>5} {bar(d['top_k_probs'][i], 30)} {d['top_k_probs'][i]:.3f}"
                         f"   (was {d['full_probs'][i]:.3f})")
        lines.append(f"  the {k} kept held {d['top_k_mass']:.3f} of the probability; entropy "
                     f"{d['top_k_entropy']:.3f} bits")
    lines.append('')
    if not d['num']:
        return '\n'.join(lines[:-1])
    if d['data_mode'] == 'text':
        lines.append(f"{d['num']} continuation{'s' * (d['num'] != 1)} of {d['length']} characters drawn at each "
                     "setting after the prompt, newlines kept (as sample.py --length draws them)")
        drawn = []
        for s in d['draws']:
            t, kk = s['temperature'], s['top_k']
            label = f"T={t:g}" + (f" top-k {kk}" if kk else '') + (' (greedy)' if t == 0 else '')
            for text in s['texts']:
                drawn += ['', f"  {label}:", *fold_text(d['prompt'] + text)]
        return '\n'.join(lines + fold_note(drawn) + drawn)
    lines.append("names drawn at each setting" + (f", * = a name of the training data ({d['source']}; trained on "
                                                  "or held out)" if d['marked'] else f" ({d['source']})"))
    for s in d['draws']:
        t, kk = s['temperature'], s['top_k']
        label = f"T={t:g}" + (f" top-k {kk}" if kk else '') + (' (greedy)' if t == 0 else '')
        marked = [name + ('*' if s['known'] and s['known'][i] else '') for i, name in enumerate(s['names'])]
        lines.append(f"  {label:<18} {'  '.join(marked)}")
    if d['marked']:
        all_known = [k for s in d['draws'] for k in s['known']]
        lines.append(f"  {all_known.count(False)} of {len(all_known)} are new names")
    return '\n'.join(lines)
