"""
Terminal pictures for the lab: shading for weights, bars for probabilities, aligned tables
and a small line chart, in plain text and a few unicode block characters (plot.py draws the
same as PNG). Nothing is printed here. A printout fits the terminal (100 columns when piped):
`table()` folds a wide table into blocks of columns, `fit()` wraps other long lines between
words, so that no number is ever cut.
"""

import math
import shutil
import sys

# Five shades from "no weight" to "all the weight"; a masked (future) cell gets MASKED instead,
# so that "0 because masked" never looks like "0 because the softmax said so".
SHADES = ' ░▒▓█'
MASKED = '·'
# A bar is drawn in eighths of a character, so 0.10 and 0.12 look different at width 20.
EIGHTHS = ' ▏▎▍▌▋▊▉'
FULL = '█'
BOS_LABEL = '<BOS>'  # how the begin/end-of-name token is shown


def number(x, spec=''):
    """format(x, spec), except that a number that rounds to zero prints with no minus sign:
    Python's '-0.000' reads as a different number from 0.000."""
    text = format(x, spec)
    if '-' in text:
        try:
            zero = float(text.replace(',', '').strip()) == 0
        except ValueError:  # a spec whose output float() cannot read back: leave it alone
            zero = False
        if zero:
            return format(0.0, spec)
    return text


def shade(w):
    """One character for a weight in [0, 1]: blank below 0.05, then ░ ▒ ▓ █ by quarters."""
    if w is None or (isinstance(w, float) and math.isnan(w)):
        return MASKED
    if w < 0.05:
        return SHADES[0]
    return SHADES[min(4, 1 + int(w * 4))]


def bar(x, width=20):
    """A horizontal bar for x in [0, 1], `width` characters at x = 1, drawn to 1/8 character.
    NaN (a ratio of two overflowed numbers) draws as an empty bar, +inf as a full one."""
    x = 0.0 if x != x else min(max(x, 0.0), 1.0)
    eighths = round(x * width * 8)
    full, rest = divmod(eighths, 8)
    text = FULL * full + (EIGHTHS[rest] if rest else '')
    return text.ljust(width)


# Characters that print as nothing (or break a line), shown as a visible sign instead: running
# text's newline and space must be told apart in a table, a heatmap's axis or a bar's label.
VISIBLE = {'\n': '\u23ce', ' ': '\u2423', '\t': '\u21e5', '\r': '\u21b5'}  # ⏎ ␣ ⇥ ↵


def unit(tokenizer):
    """What one token is, for the sentences that name it: 'character', or 'token' for a
    byte-pair model, whose token may be a word, a few letters or part of a character."""
    return 'token' if hasattr(tokenizer, 'merges') else 'character'  # only bpe.py's tokenizer has merges


def token_label(tokenizer, token_id):
    """A token as text: its character (newline as ⏎, space as ␣), or <BOS> for the marker."""
    if token_id == tokenizer.bos:
        return BOS_LABEL
    ch = tokenizer.chars[token_id]
    return VISIBLE.get(ch, ch)


# ---- the width of a printout --------------------------------------------------------------

PIPE_WIDTH = 100  # columns when stdout is not a terminal: a log, a pipe, a test
MIN_WIDTH = 40    # narrower than this, a table's label columns alone would not fit
_chosen = None    # set_width()'s choice for the printout being made, None for the terminal's


def set_width(columns):
    """The width the next printouts fit (None: the terminal's again)."""
    global _chosen
    _chosen = columns


def width():
    """Columns a printed line may take: set_width's choice, else the terminal's, else 100."""
    if _chosen is not None:
        return _chosen
    if sys.stdout.isatty():
        return max(MIN_WIDTH, shutil.get_terminal_size().columns)
    return PIPE_WIDTH


def fit(text, columns=None):
    """text with every line longer than `columns` wrapped between words; a continuation starts
    under the first number of a `name = [...]` vector that the wrap cuts, else two spaces past
    the line's indent.
    A word longer than the whole width (none of the lab's numbers is) is the one thing cut."""
    columns = columns or width()
    out = []
    for line in text.split('\n'):
        if len(line) <= columns:
            out.append(line)
            continue
        lead = len(line) - len(line.lstrip(' '))
        bracket = line.find('[')
        vector = 0 <= bracket < columns // 2 and not 0 < line.find(']', bracket) < columns  # it is what wraps
        hang = min(bracket + 1 if vector else lead + 2, columns // 2)  # a continuation has room to go on
        words, current = line[lead:].split(' '), ' ' * lead
        for word in words:
            joined = current + word if current.strip() == '' else current + ' ' + word
            if len(joined) <= columns or current.strip() == '':
                current = joined
            else:
                carried = ''
                label, _, last = current.rpartition(' ')
                if (_is_number(word) and not _is_number(last) and label.strip()
                        and hang + len(last) + 1 + len(word) <= columns):
                    current, carried = label, last + ' '  # a number stays beside the word it measures
                out.append(current.rstrip())
                current = ' ' * hang + carried + word
            while len(current) > columns:  # one word wider than the terminal: cut it, it is not a number
                out.append(current[:columns])
                current = ' ' * hang + current[columns:]
        out.append(current.rstrip())
    return '\n'.join(out)


FOLD = '↩'  # ↩ ends a line of drawn text that goes on in the next one


def fold_text(text, columns=None):
    """Drawn text (a sample, newlines kept) as lines of at most `columns`: a line too long is
    cut every columns - 1 characters, each cut marked FOLD. fit() would break at a space and
    drop it; here every character stays, and a cut never looks like a drawn newline."""
    columns = columns or width()
    out = []
    for line in text.split('\n'):
        while len(line) > columns:
            out.append(line[:columns - 1] + FOLD)
            line = line[columns - 1:]
        out.append(line)
    return out


def fold_note(lines):
    """The one line that says what FOLD means, for a printout whose drawn text was folded."""
    return [f"  ({FOLD} at a line's end: the drawn line goes on in the next; --wide prints it whole)"] \
        if any(line.endswith(FOLD) for line in lines) else []


def _is_number(word):
    """Whether a word of a printout is a number (0.25, -3, 1.2e-05, 0.000e+00, 50%,)."""
    try:
        float(word.rstrip(',;:%)]'))
        return True
    except ValueError:
        return False


def table(headers, rows, align=None, indent='  ', keep=None, columns=None, sep='  '):
    """Aligned columns of str(cell), align one letter per column, 'l' or 'r' (default: left,
    then right). A table wider than `columns` is folded: its first `keep` columns (default: the
    leading left-aligned ones, a row's labels) start every block, the others follow in blocks
    as wide as fit, one under the other, each with its headers, so every cell is shown."""
    ncol = len(headers)
    align = align or 'l' + 'r' * (ncol - 1)
    cells = [[str(c) for c in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(ncol)]
    columns = columns or width()
    if keep is None:  # the labels: the leading left-aligned columns, one or two of them
        labels = len(align) - len(align.lstrip('l'))
        keep = 1 if labels >= ncol else max(1, min(2, labels))
    blocks = [list(range(ncol))]
    total = len(indent) + sum(widths) + len(sep) * (ncol - 1)
    if total > columns and ncol > keep + 1:
        label = len(indent) + sum(widths[:keep]) + len(sep) * keep
        blocks, block, used = [], [], label
        for i in range(keep, ncol):
            if block and used + widths[i] > columns:
                blocks.append(list(range(keep)) + block)
                block, used = [], label
            block.append(i)
            used += widths[i] + len(sep)
        blocks.append(list(range(keep)) + block)
    lines = []
    for b, block in enumerate(blocks):
        if b:
            first, last = (cells[0][i] or f'#{i + 1}' for i in (block[keep], block[-1]))
            lines.append(f"{indent}(the table continues: columns {first} .. {last})")
        for r in cells:
            parts = [r[i].ljust(widths[i]) if align[i] == 'l' else r[i].rjust(widths[i]) for i in block]
            lines.append((indent + sep.join(parts)).rstrip())
    return '\n'.join(lines)


def line_chart(series, width=60, height=12, y_label=''):
    """A text chart of (marker, xs, ys) series on one pair of axes; a later series overwrites
    an earlier one where they meet, so list the most important series last."""
    xs_all = [x for _, xs, _ in series for x in xs]
    ys_all = [y for _, _, ys in series for y in ys]
    if not xs_all:
        return ['  (nothing to draw)']
    x0, x1 = min(xs_all), max(xs_all)
    y0, y1 = min(ys_all), max(ys_all)
    if y1 - y0 < 1e-12:  # a flat line still needs a y range to sit in
        y0, y1 = y0 - 0.5, y1 + 0.5
    grid = [[' '] * width for _ in range(height)]
    for marker, xs, ys in series:
        for x, y in zip(xs, ys):
            col = 0 if x1 == x0 else round((x - x0) / (x1 - x0) * (width - 1))
            row = round((y1 - y) / (y1 - y0) * (height - 1))  # row 0 is the top
            grid[row][col] = marker
    labels = {0: f'{y1:.3f}', (height - 1) // 2: f'{(y0 + y1) / 2:.3f}', height - 1: f'{y0:.3f}'}
    pad = max(len(t) for t in labels.values())
    lines = [f"  {y_label}"] if y_label else []
    for r, cells in enumerate(grid):
        lines.append(f"  {labels.get(r, ''):>{pad}} ┤{''.join(cells)}".rstrip())
    lines.append(f"  {'':>{pad}} └{'─' * width}")
    left, right = f'{x0:g}', f'{x1:g}'
    lines.append(f"  {'':>{pad}}  {left}{right:>{width - len(left)}}")
    return lines
