"""
Pictures for `--png FILE`, drawn with matplotlib, the optional `plot` extra.

matplotlib is imported only inside these functions, so the lab runs without it; asking for
--png without it is a one-line error that says how to install it. The pictures mirror the
terminal renderings of render.py: attention weights as a heatmap per head (masked cells left
blank), next-character probabilities as bars, loss curves as lines, a training step's
gradient norms and p(true next) before and after, the embeddings' projection and wpe cosines.
"""

import io
import os
import math

import numpy as np

from ..edge.errors import UserError
from . import pictures

INSTALL_HINT = ("--png needs matplotlib, the optional plot extra: install it with "
                "`pip install -e '.[plot]'` (or `.venv/bin/pip install matplotlib`)")


def require_matplotlib():
    """pyplot, on the non-interactive Agg backend (files only, no window); or a UserError."""
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        raise UserError(INSTALL_HINT) from None
    return plt


def _save(fig, path, title=None):
    """Draw into memory (under `title`, laid out tight), then write the file whole (pictures.write)."""
    plt = require_matplotlib()
    if title is not None:
        fig.suptitle(title)
        fig.tight_layout()
    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format='png', dpi=110, bbox_inches='tight')
    finally:
        plt.close(fig)
    pictures.write(path, buffer.getvalue(), '--png')


def attention_heatmaps(path, weights, labels, query, title):
    """One heatmap per head: weights (n_head, T, T), rows = queries, columns = keys.

    NaN cells (j > i, the masked future) are drawn blank; the chosen query's row is outlined.
    """
    plt = require_matplotlib()
    n_head, T, _ = weights.shape
    cols = min(n_head, 4)
    rows = math.ceil(n_head / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols + 0.8, 3.2 * rows), squeeze=False)
    cmap = plt.get_cmap('viridis').with_extremes(bad='white')  # masked: no weight, not a small one
    for h in range(rows * cols):
        ax = axes[h // cols][h % cols]
        if h >= n_head:
            ax.axis('off')
            continue
        image = ax.imshow(np.ma.masked_invalid(weights[h]), cmap=cmap, vmin=0.0, vmax=1.0)
        ax.set_title(f'head {h}')
        ax.set_xticks(range(T), labels, fontsize=8)
        # the queries' names on a row's first heatmap only: the heads share them, and on every
        # heatmap they ran into the one beside
        ax.set_yticks(range(T), labels if h % cols == 0 else [], fontsize=8)
        ax.set_xlabel('key j')
        if h % cols == 0:
            ax.set_ylabel('query i')
        ax.add_patch(plt.Rectangle((-0.5, query - 0.5), query + 1, 1, fill=False,
                                   edgecolor='red', linewidth=1.5))
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8, label='attention weight')
    fig.suptitle(title + '  (blank = masked future; red = the chosen query)')
    _save(fig, path)


def probability_bars(path, rows, title):
    """One small bar chart per position: the top next characters, the true one in orange."""
    plt = require_matplotlib()
    cols = min(len(rows), 4)
    nrows = math.ceil(len(rows) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(3.0 * cols, 2.4 * nrows), squeeze=False)
    for k in range(nrows * cols):
        ax = axes[k // cols][k % cols]
        if k >= len(rows):
            ax.axis('off')
            continue
        r = rows[k]
        chars = [c for c, _ in r['top']]
        probs = [p for _, p in r['top']]
        if r['target'] is not None and r['target'] not in chars:  # the true one in view, whatever its rank
            chars.append(r['target'])
            probs.append(r['p'])
        colors = ['tab:orange' if c == r['target'] else 'tab:blue' for c in chars]
        ax.barh(range(len(chars)), probs, color=colors)
        ax.set_yticks(range(len(chars)), chars)
        ax.invert_yaxis()  # most likely on top
        ax.set_xlim(0, 1)
        if r['target'] is None:  # running text: the last position's next is not in the text
            ax.set_title(f"pos {r['position']} reads {r['reads']}: next not in the text", fontsize=9)
            continue
        mark = '' if r['hit'] else '  ✗'
        ax.set_title(f"pos {r['position']} reads {r['reads']}: loss {r['loss']:.2f}{mark}", fontsize=9)
    _save(fig, path, title + '  (orange = the true next character)')


def loss_curves(path, runs, title, unit='nats'):
    """Each run's training loss per step (light), its running mean (dark), its validation loss
    (circles) and the training loss measured alike at each evaluation (triangles), one colour
    a run, named by its log's file name where there are several (the legend then beside the
    plot, where it covers no curve)."""
    plt = require_matplotlib()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    colours = plt.rcParams['axes.prop_cycle'].by_key()['color']
    for k, r in enumerate(runs):
        colour, name = colours[k % len(colours)], (f"{os.path.basename(r['path'])}: " if len(runs) > 1 else '')
        # one run: validation orange and the estimate green, as the Loss page draws them
        val_colour, estimate_colour = (colour, colour) if len(runs) > 1 else ('tab:orange', 'tab:green')
        steps = [s for s, _, _ in r['train']]
        ax.plot(steps, [l for _, l, _ in r['train']], color=colour, alpha=0.2, linewidth=0.8,
                label=None if len(runs) > 1 else 'training loss (each step)')
        ax.plot(steps, r['smooth'], color=colour, linewidth=2,
                label=f"{name}training loss, running mean over ~{r['window']} steps")
        estimates = [(s, t) for s, _, t in r['val'] if t is not None]
        if estimates:
            ax.plot([s for s, _ in estimates], [t for _, t in estimates], '^--', color=estimate_colour, markersize=5,
                    label=f'{name}training loss measured alike')
        if r['val']:
            ax.plot([s for s, _, _ in r['val']], [v for _, v, _ in r['val']], 'o-', color=val_colour,
                    markerfacecolor='white' if len(runs) > 1 else colour,
                    label=f'{name}validation loss (held-out data)')
    ax.set_xlabel('step')
    ax.set_ylabel('bits per character' if unit == 'bits' else 'loss (mean cross-entropy, nats)')
    ax.set_title(title)
    if len(runs) > 1:  # six entries or more: beside the axes, not over the curves
        ax.legend(fontsize=8, loc='upper left', bbox_to_anchor=(1.02, 1), borderaxespad=0)
    else:
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    _save(fig, path)


def step_pictures(path, r, title):
    """Left: each matrix's gradient norm; right: p(true next) per position before and after."""
    plt = require_matplotlib()
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    names = [name for name, _ in r['matrix_norms']]
    left.barh(range(len(names)), [v for _, v in r['matrix_norms']], color='tab:blue')
    left.set_yticks(range(len(names)), names, fontsize=8)
    left.invert_yaxis()
    left.set_xlabel('|dL/dW| (gradient norm of the matrix)')
    left.set_title('gradient norm per matrix')
    pos = r['positions']
    xs = np.arange(len(pos))  # (n,)
    right.bar(xs - 0.2, [p['p_before'] for p in pos], width=0.4, label='before', color='tab:gray')
    right.bar(xs + 0.2, [p['p_after'] for p in pos], width=0.4, label='after', color='tab:orange')
    right.set_xticks(xs, [f"{p['reads']}→{p['target']}" for p in pos], fontsize=8)
    right.set_ylim(0, 1)
    right.set_ylabel('p(true next)')
    right.set_title(f"loss {r['loss_before']:.4f} → {r['loss_after']:.4f}")
    right.legend()
    _save(fig, path, title)


def embedding_pictures(path, v, title):
    """Left: wte rows on their two principal components, vowels in orange; right: wpe cosines."""
    plt = require_matplotlib()
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 5.2))
    xy = v['coords']  # (vocab_size, 2)
    colors = ['tab:orange' if is_vowel else 'tab:blue' for is_vowel in v['vowel']]
    left.scatter(xy[:, 0], xy[:, 1], c=colors, s=12)
    for label, (x, y), color in zip(v['labels'], xy, colors):
        left.annotate(label, (x, y), color=color, fontsize=11, ha='center', va='bottom')
    left.set_xlabel(f"principal component 1 ({v['share'][0]:.0%} of the spread)")
    left.set_ylabel(f"principal component 2 ({v['share'][1]:.0%})")
    left.set_title('wte rows (orange = vowels)')
    if v['wpe_cosine'] is None:  # RoPE: no wpe to draw
        right.axis('off')
        right.text(0.5, 0.5, 'no wpe: this model uses RoPE', ha='center', va='center')
    else:
        image = right.imshow(v['wpe_cosine'], cmap='RdBu_r', vmin=-1, vmax=1)
        right.set_xlabel('position j')
        right.set_ylabel('position i')
        right.set_title('wpe: cosine similarity of positions')
        fig.colorbar(image, ax=right, shrink=0.8)
    _save(fig, path, title)


def scaling_pictures(path, v, title):
    """`lab scaling --png`: Var(q.k) against d; one row's weights
    without and with scaling; the median saturation against d; the cost ratio n / (2 D)."""
    plt = require_matplotlib()
    fig, ((var, row), (sweep, cost)) = plt.subplots(2, 2, figsize=(12, 8.5))
    ds = [r['d'] for r in v['variance']]
    # Var / d, so that d = 4 and d = 1024 are read on one scale: 1 is the prediction
    var.errorbar(ds, [r['var'] / r['d'] for r in v['variance']],
                 yerr=[2 * r['se'] / r['d'] for r in v['variance']],
                 fmt='o', color='tab:blue', capsize=4, label='measured here (± 2 standard errors)')
    var.axhline(1, color='tab:gray', linewidth=1, label='Var = d')
    var.set_xscale('log', base=2)
    var.set_xlabel('head size d')
    var.set_ylabel('Var(q·k) / d')
    var.set_title('1) Var(q·k) = d for unit-variance q, k')
    var.legend(fontsize=8)
    n_keys = len(v['row']['with scaling'])
    xs = np.arange(n_keys)  # (n_keys,)
    row.bar(xs - 0.2, v['row']['without scaling'], width=0.4, color='tab:red', label='without scaling')
    row.bar(xs + 0.2, v['row']['with scaling'], width=0.4, color='tab:blue', label='with 1/√d')
    row.set_xticks(xs, [f'k{j}' for j in xs])
    row.set_ylim(0, 1)
    row.set_ylabel('softmax weight')
    row.set_title(f"4) one random row of {n_keys} keys at d = {v['row_d']}")
    row.legend(fontsize=8)
    for label, color in (('without scaling', 'tab:red'), ('with scaling', 'tab:blue')):
        sweep.plot(v['sweep_ds'], v['sweep'][label]['max_weight'], 'o-', color=color,
                   label=f'max weight, {label}')
        sweep.plot(v['sweep_ds'], v['sweep'][label]['gradient_scale'], 's--', color=color,
                   label=f'gradient scale, {label}')
    sweep.set_xscale('log', base=2)
    sweep.set_xlabel('head size d')
    sweep.set_ylim(0, 1.05)
    sweep.set_title(f'median over random rows of {n_keys} keys')
    sweep.legend(fontsize=7)
    cost.plot(v['cost_n'], v['cost_ratio'], color='tab:blue', label='n / (2 D)')
    cost.axhline(1, color='tab:gray', linewidth=1)
    cost.axvline(2 * v['cost_D'], color='tab:gray', linewidth=1, linestyle=':')
    cost.set_xscale('log', base=2)
    cost.set_yscale('log', base=2)
    cost.set_xlabel('sequence length n')
    cost.set_ylabel('attention / projections')
    cost.set_title(f"5) cost at D = {v['cost_D']}: attention wins past n = 2 D")
    cost.legend(fontsize=8)
    _save(fig, path, title)
