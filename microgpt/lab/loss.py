"""
The training and validation loss curves of a run, or of several side by side, from the logs
train.py writes (one JSON line per step, one per evaluation).

    python -m microgpt.lab loss out/model.log.jsonl --png loss.png
    python -m microgpt.lab loss out/a.log.jsonl out/b.log.jsonl   # two runs on one picture
    python -m microgpt.lab loss out/char.log.jsonl out/bpe.log.jsonl --unit bits   # across tokenizers

A step's loss is one batch's, so the chart draws a running mean (exponential, as Adam's) and
the table the mean over tenths of the run; the evaluations' losses, measured alike, show
overfitting without the mean's lag.
"""

import math

from ..edge.checkpoint import is_our_checkpoint
from ..edge.checks import short
from ..edge.errors import UserError
from ..edge.files import read_user_file
from ..edge.files import parse_json
from ..programs.runlog import log_path_for, log_record_problem
from .render import line_chart, table, width

# chart markers of each run (its running mean, its validation loss, its training-loss estimate),
# the first run's first; validation is drawn last, so it stays visible
MARKS = [('•', 'o', '^'), ('+', 'x', 'v'), ('·', '#', '>'), ('-', '@', '<'), (':', '%', '*'), ('~', '&', '=')]


UNITS = {'nats': 'loss', 'bits': 'bits per character'}  # --unit: what the chart's axis says


def read_log(path, unit='nats'):
    """(train [(step, loss, lr)], val [(step, val_loss, train_loss or None)]) from a train.py
    log, checked; with unit 'bits', every loss in bits per character (see above).

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
    train, val, factor = [], [], None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        record = parse_json(line, f"{path} line {number}",
                            hint="is this the training log (out/model.log.jsonl)?")
        problem = log_record_problem(record)  # the rule train.py's --resume keeps lines by
        if problem:
            raise UserError(f"{path} line {number}{problem}")
        if 'loss' in record:
            train.append((record['step'], float(record['loss']),
                          float(record['lr']) if 'lr' in record else None))
        elif unit == 'bits':
            if 'val_bpc' not in record:
                raise UserError(f"{path} line {number} has no bits per character (written before train.py "
                                "measured them): use --unit nats")
            if factor is None and record.get('train_loss', 0) > 0 and 'train_bpc' in record:
                factor = record['train_bpc'] / record['train_loss']  # tokens / characters / ln 2
            val.append((record['step'], float(record['val_bpc']), record.get('train_bpc')))
        else:
            estimate = record.get('train_loss')  # the training loss measured as val_loss is
            val.append((record['step'], float(record['val_loss']), None if estimate is None else float(estimate)))
    if not train:
        raise UserError(f"{path} holds no training steps: train for a few steps first")
    if unit == 'bits':
        if factor is None:
            raise UserError(f"{path} has no evaluation to convert its steps' losses to bits per character by "
                            "(--eval-every 0, or no held-out data): use --unit nats")
        train = [(step, loss * factor, lr) for step, loss, lr in train]
    return train, val


def _not_a_log(path):
    """What to say when the file given as a log is a checkpoint, naming its log if we can:
    train.py writes out/model.json's log to out/model.log.jsonl."""
    if path.endswith('.json'):
        return f"{path} is a checkpoint, not a training log: give its log, {log_path_for(path)}"
    return f"{path} is a checkpoint, not a training log: give the .log.jsonl file beside it"


def running_mean(losses, window):
    """The losses smoothed: an exponential moving average with the bias correction Adam gives
    its running mean of the gradient (optim.py's m_hat), continuous from the first step.

    A step's weight shrinks by beta at each later step; beta = (window - 1) / (window + 1)
    gives the weights the mean age of a window of `window` steps, (window - 1) / 2. Dividing by
    1 - beta**t makes the first values a mean of the steps so far (the first is the first loss,
    not a fifth of it) whose reach grows smoothly: a mean over a window that grows to full size
    and then slides changes its lag at once where it stops growing, a kink at step `window` that
    reads as an event in training. window 1: the losses themselves.
    """
    beta = (window - 1) / (window + 1)
    out, m = [], 0.0
    for t, loss in enumerate(losses, start=1):
        m = beta * m + (1 - beta) * loss
        out.append(m / (1 - beta ** t))
    return out


def smoothing_window(n_steps):
    """The running mean's reach, about a twentieth of the run: enough names to see the trend."""
    return max(1, n_steps // 20)


def stretches(train, val, n=10):
    """The run cut into n equal stretches of steps:
    (first step, last step, mean loss, learning rate at the end, val loss or None)."""
    size = max(1, math.ceil(len(train) / n))
    rows = []
    for start in range(0, len(train), size):
        chunk = train[start:start + size]
        first, last = chunk[0][0], chunk[-1][0]
        in_range = [v for s, v, _ in val if first <= s <= last]
        rows.append((first, last, sum(l for _, l, _ in chunk) / len(chunk), chunk[-1][2],
                     in_range[-1] if in_range else None))
    return rows


MIN_WIDTH, MIN_HEIGHT = 20, 5  # below this the axis labels no longer fit


def compute(paths, width=60, height=12, unit='nats'):
    """Each log's records, the running mean the chart draws and the table of tenths: {'runs':
    [{'path', 'train', 'val', 'window', 'smooth', 'stretches'}], 'width', 'height', 'unit'}, in the
    order given (one path, or a list of up to len(MARKS): a set of marks each)."""
    if unit not in UNITS:
        raise UserError(f"--unit {short(unit)}: give nats (the loss per token) or bits (bits per character)")
    if width < MIN_WIDTH or height < MIN_HEIGHT:
        raise UserError(f"the chart needs --width {MIN_WIDTH} or more and --height {MIN_HEIGHT} "
                        f"or more (got {width} x {height})")
    paths = [paths] if isinstance(paths, str) else list(paths)
    if len(paths) > len(MARKS):
        raise UserError(f"{len(paths)} logs: at most {len(MARKS)} on one picture (a set of marks each)")
    runs = []
    for path in paths:
        train, val = read_log(path, unit)
        window = smoothing_window(len(train))
        runs.append({'path': path, 'train': train, 'val': val, 'window': window,
                     'smooth': running_mean([l for _, l, _ in train], window),
                     'stretches': stretches(train, val)})
    return {'runs': runs, 'width': width, 'height': height, 'unit': unit}


def render(d):
    runs, series, legend = d['runs'], [], []
    for r, (train_mark, val_mark, estimate_mark) in zip(runs, MARKS):
        estimates = [(s, t) for s, _, t in r['val'] if t is not None]
        series += [(train_mark, [s for s, _, _ in r['train']], r['smooth']),
                   (estimate_mark, [s for s, _ in estimates], [t for _, t in estimates]),
                   (val_mark, [s for s, _, _ in r['val']], [v for _, v, _ in r['val']])]
        name = f"{r['path']}: " if len(runs) > 1 else ''
        legend.append(f"  {name}{train_mark} training loss, running mean over ~{r['window']} steps   "
                      f"{val_mark} validation loss (held-out data)"
                      + (f"   {estimate_mark} training loss measured alike" if estimates else ''))
    # the validation marks last of all, so that no run's curve hides another's
    series = [x for k in (0, 1, 2) for x in series[k::3]]
    lines = []
    for r in runs:
        train = r['train']
        lines.append(f"log {r['path']}: {len(train)} training steps ({train[0][0]}..{train[-1][0]}), "
                     f"{len(r['val'])} validation measurement{'s' * (len(r['val']) != 1)}")
    lines += [''] + legend + (["  in bits per character: each step's loss x its run's tokens per character / ln 2"]
                              if d['unit'] == 'bits' else [])
    y_label = 'bits/char' if d['unit'] == 'bits' else 'loss'
    chart = line_chart(series, width=d['width'], height=d['height'], y_label=y_label)
    over = max(len(line) for line in chart) - width()
    if over > 0 and d['width'] - over >= MIN_WIDTH:  # a chart cannot wrap: it is drawn narrower
        chart = line_chart(series, width=d['width'] - over, height=d['height'], y_label=y_label)
        chart.append(f"  (drawn {d['width'] - over} columns wide to fit the terminal, not --width "
                     f"{d['width']}: --wide draws it so)")
    lines += chart
    for r in runs:
        rows = [(f'{a}..{b}', f'{m:.4f}', '' if lr is None else f'{lr:.3g}', '' if v is None else f'{v:.4f}')
                for a, b, m, lr, v in r['stretches']]
        lines += [''] + ([f"  {r['path']}"] if len(runs) > 1 else []) + [
            table(('steps', 'mean training loss', 'learning rate', 'validation loss'), rows)]
        val = r['val']
        if val:
            best = min(val, key=lambda sv: sv[1])
            last = val[-1]
            lines.append(f"\n  last validation loss {last[1]:.4f} at step {last[0]}"
                         + (f" (training loss measured alike {last[2]:.4f})" if last[2] is not None else '')
                         + f"; lowest {best[1]:.4f} at step {best[0]}")
    return '\n'.join(lines)


def picture(path, d, source):
    from .plot import loss_curves
    loss_curves(path, d['runs'], source, d['unit'])
