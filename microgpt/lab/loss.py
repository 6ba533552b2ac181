"""
The training and validation loss curves of a run, from the log train.py writes.

    python -m microgpt.lab loss out/model.log.jsonl
    python -m microgpt.lab loss out/model.log.jsonl --png loss.png

train.py appends one JSON line per step, {"step": s, "loss": l, "lr": r}, and one per
evaluation, {"step": s, "val_loss": v}. Each training loss is measured on ONE name, so the
raw curve is noisy; the chart therefore shows a running mean over about a twentieth of the
run, and the table the mean over equal tenths of it, beside the learning rate and the
validation loss measured in that stretch.
A falling training loss with a validation loss that stops falling (or rises) is overfitting.
"""

import math

from ..edge.checkpoint import is_our_checkpoint
from ..edge.errors import UserError
from ..edge.files import read_user_file
from ..edge.files import parse_json
from ..programs.runlog import log_path_for, log_record_problem
from .render import line_chart, table

TRAIN, VAL = '•', 'o'  # chart markers; validation is drawn last, so it stays visible


def read_log(path):
    """(train [(step, loss, lr)], val [(step, val_loss)]) from a train.py log, checked.

    A last line without its newline is a write cut short (a crash, or a run still going) and
    is skipped; any other line that is not a log record is an error naming it. Every number
    is checked against a range (limits.MAX_STEPS, MAX_LOSS) before any arithmetic is done on it,
    by run.log_record_problem: the rule by which train.py --resume keeps a log's lines.
    """
    if is_our_checkpoint(path):  # an easy slip: the checkpoint sits right beside its log
        raise UserError(_not_a_log(path))
    text = read_user_file(path, 'training log', "train.py writes one beside the checkpoint "
                                                "(out/model.log.jsonl by default)")
    lines = text.split('\n')
    if lines and not text.endswith('\n'):
        lines = lines[:-1]  # the partial last line (or '' when the file is empty)
    train, val = [], []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        record = parse_json(line, f"{path} line {number}",
                            hint="is this the training log (out/model.log.jsonl)?")
        if isinstance(record, dict) and 'format' in record and 'state_dict' in record:
            raise UserError(_not_a_log(path))
        problem = log_record_problem(record)  # the rule train.py's --resume keeps lines by
        if problem:
            raise UserError(f"{path} line {number}{problem}")
        if 'loss' in record:
            train.append((record['step'], float(record['loss']),
                          float(record['lr']) if 'lr' in record else None))
        else:
            val.append((record['step'], float(record['val_loss'])))
    if not train:
        raise UserError(f"{path} holds no training steps: train for a few steps first")
    return train, val


def _not_a_log(path):
    """What to say when the file given as a log is a checkpoint, naming its log if we can:
    train.py writes out/model.json's log to out/model.log.jsonl."""
    if path.endswith('.json'):
        return f"{path} is a checkpoint, not a training log: give its log, {log_path_for(path)}"
    return f"{path} is a checkpoint, not a training log: give the .log.jsonl file beside it"


def running_mean(losses, window):
    """The mean of each loss and the window - 1 before it (fewer at the start of the run)."""
    out, total = [], 0.0
    for i, loss in enumerate(losses):
        total += loss
        if i >= window:
            total -= losses[i - window]
        out.append(total / min(i + 1, window))
    return out


def smoothing_window(n_steps):
    """About 20 windows across the run: enough names per window to see the trend."""
    return max(1, n_steps // 20)


def stretches(train, val, n=10):
    """The run cut into n equal stretches of steps:
    (first step, last step, mean loss, learning rate at the end, val loss or None)."""
    size = max(1, math.ceil(len(train) / n))
    rows = []
    for start in range(0, len(train), size):
        chunk = train[start:start + size]
        first, last = chunk[0][0], chunk[-1][0]
        in_range = [v for s, v in val if first <= s <= last]
        rows.append((first, last, sum(l for _, l, _ in chunk) / len(chunk), chunk[-1][2],
                     in_range[-1] if in_range else None))
    return rows


MIN_WIDTH, MIN_HEIGHT = 20, 5  # below this the axis labels no longer fit


def compute(path, width=60, height=12):
    """The log's records, the running mean the chart draws, and the table of tenths."""
    if width < MIN_WIDTH or height < MIN_HEIGHT:
        raise UserError(f"the chart needs --width {MIN_WIDTH} or more and --height {MIN_HEIGHT} "
                        f"or more (got {width} x {height})")
    train, val = read_log(path)
    window = smoothing_window(len(train))
    return {'path': path, 'train': train, 'val': val, 'window': window,
            'smooth': running_mean([l for _, l, _ in train], window),
            'stretches': stretches(train, val), 'width': width, 'height': height}


def render(d):
    train, val = d['train'], d['val']
    series = [(TRAIN, [s for s, _, _ in train], d['smooth']), (VAL, [s for s, _ in val], [v for _, v in val])]
    lines = [f"log {d['path']}: {len(train)} training steps ({train[0][0]}..{train[-1][0]}), "
             f"{len(val)} validation measurements", '',
             f"  {TRAIN} training loss, running mean of {d['window']} steps   "
             f"{VAL} validation loss (held-out data)"]
    lines += line_chart(series, width=d['width'], height=d['height'], y_label='loss')
    rows = [(f'{a}..{b}', f'{m:.4f}', '' if lr is None else f'{lr:.3g}', '' if v is None else f'{v:.4f}')
            for a, b, m, lr, v in d['stretches']]
    lines += ['', table(('steps', 'mean training loss', 'learning rate', 'validation loss'), rows)]
    if val:
        best = min(val, key=lambda sv: sv[1])
        lines.append(f"\n  last validation loss {val[-1][1]:.4f} at step {val[-1][0]}; "
                     f"lowest {best[1]:.4f} at step {best[0]}")
    return '\n'.join(lines)


def picture(path, d, source):
    from .plot import loss_curves
    loss_curves(path, d['train'], d['val'], d['smooth'], d['window'], source)
