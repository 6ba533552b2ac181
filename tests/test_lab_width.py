"""
Every lab command's printout fits 100 columns, on the default names model and at the
Shakespeare recipe's sizes, and folding or wrapping hides no number (--wide prints the long lines).
"""

import re

import pytest

from microgpt.lab import __main__ as lab
from microgpt.lab import registry, render
from microgpt.programs.runlog import log_path_for
from helpers import train_text

COLUMNS = render.PIPE_WIDTH
WINDOW = "ROMEO: But soft, what light through yonder window breaks? It"  # 60 characters
NAME = "emma"


@pytest.fixture(scope='module')
def shakespeare_sized(tmp_path_factory, play_file):
    """The Shakespeare recipe's sizes, trained one step (the width depends on the sizes alone), in
    .safetensors: each command reads it a second faster than the JSON's 56 MB."""
    return train_text(tmp_path_factory.mktemp('wide') / 'play.safetensors', play_file, 64, '--steps', '1',
                      '--n-layer', '4', '--n-embd', '128', '--n-head', '4', '--eval-every', '0')


def argv_for(s, ckpt, text):
    """The command line that runs sandbox s on ckpt (or its log), TEXT being `text`."""
    argv = [s.name]
    for p in s.params:
        if p.positional and p.required:
            argv.append({'expression': 'a*b + a', 'text': text}[p.name])
    if s.name == 'autograd':
        argv += ['a=2', 'b=-3']
    if s.name == 'sampling':  # a continuation longer than a line: it folds
        argv += [text[:6]] + (['--length', '110'] if len(text) > COLUMNS // 2 else [])
    if s.model == 'log':
        argv.append(log_path_for(ckpt))
    if s.reads_a_checkpoint:
        argv += ['--ckpt', ckpt]
    if s.name == 'step':
        argv += ['--engine', 'numpy']  # the scalar engine's graph of 4 x 128 is far too slow for a test
    if s.name == 'scaling':
        argv += ['--samples', '1000', '--draws', '100']  # the printout's width does not depend on them
    return argv


def printout(capsys, argv):
    assert lab.main(argv) == 0, argv
    return capsys.readouterr().out


def too_long(out):
    return [(len(line), line[:60]) for line in out.splitlines() if len(line) > COLUMNS]


@pytest.mark.parametrize('ckpt, text', [('shakespeare_sized', WINDOW), ('default_ckpt', NAME)])
@pytest.mark.parametrize('name', [s.name for s in registry.SANDBOXES])
def test_every_command_fits_100_columns(request, capsys, ckpt, text, name):
    ckpt = request.getfixturevalue(ckpt)
    capsys.readouterr()  # what train.py printed, making a session checkpoint here
    out = printout(capsys, argv_for(registry.get(name), ckpt, text))
    assert too_long(out) == []


def numbers(out):
    return sorted(re.findall(r'[-+]?\d+\.\d+', out))


@pytest.mark.parametrize('name', ['attention', 'phases'])
def test_wide_prints_the_long_lines_and_folding_loses_no_number(capsys, shakespeare_sized, name):
    argv = argv_for(registry.get(name), shakespeare_sized, WINDOW)
    folded = printout(capsys, argv)
    wide = printout(capsys, argv + ['--wide'])
    assert max(len(line) for line in wide.splitlines()) > COLUMNS  # the negative control: it was too wide
    if name == 'attention':  # its vectors are shortened, and it says so
        assert 'of 32' in folded and '--wide' in folded
    else:
        assert numbers(folded) == numbers(wide)


def test_a_table_folds_into_blocks_that_keep_every_cell_and_the_row_labels():
    headers = ['j', 'key'] + [f'd{d}' for d in range(30)]
    rows = [[j, 'abc'[j]] + [f'{j + d / 100:+.3f}' for d in range(30)] for j in range(3)]
    text = render.table(headers, rows, align='ll' + 'r' * 30, columns=60)
    assert max(len(line) for line in text.splitlines()) <= 60
    assert numbers(text) == numbers(render.table(headers, rows, align='ll' + 'r' * 30, columns=10 ** 6))
    blocks = [line for line in text.splitlines() if line.lstrip().startswith('j ')]
    assert len(blocks) > 1 and all(line.split()[:2] == ['j', 'key'] for line in blocks)


def test_fit_wraps_between_words_and_hangs_a_vector_under_its_first_number():
    line = '   q_5 = [' + ' '.join(f'{x / 7:+.3f}' for x in range(40)) + ']'
    lines = render.fit(line, 50).splitlines()
    assert all(len(x) <= 50 for x in lines) and len(lines) > 1
    assert ' '.join(x.strip() for x in lines) == line.strip()  # nothing cut, nothing lost
    assert all(x.startswith(' ' * len('   q_5 = [')) for x in lines[1:])


def test_drawn_text_folds_at_a_marked_cut_and_keeps_every_character():
    drawn = 'ab cd ' * 40 + '\nshort\n' + 'x' * 250
    lines = render.fold_text(drawn, 50)
    assert all(len(x) <= 50 for x in lines)
    assert '\n'.join(lines).replace(render.FOLD + '\n', '') == drawn  # spaces included
    assert render.fold_note(lines) and not render.fold_note(render.fold_text('short', 50))


def test_a_chart_wider_than_the_terminal_is_drawn_narrower_and_says_so(capsys, shakespeare_sized):
    log = log_path_for(shakespeare_sized)
    out = printout(capsys, ['loss', log, '--width', '300'])
    assert too_long(out) == [] and 'not --width 300' in out
    wide = printout(capsys, ['loss', log, '--width', '300', '--wide'])
    assert max(len(line) for line in wide.splitlines()) > 300


@pytest.mark.parametrize('name', ['attention', 'sampling'])
def test_on_a_terminal_the_printout_fits_its_columns(capsys, monkeypatch, shakespeare_sized, name):
    import sys
    monkeypatch.setenv('COLUMNS', '64')  # shutil.get_terminal_size reads it first
    monkeypatch.setattr(sys.stdout, 'isatty', lambda: True)
    out = printout(capsys, argv_for(registry.get(name), shakespeare_sized, WINDOW))
    assert max(len(line) for line in out.splitlines()) <= 64


def test_fit_ends_and_fits_whatever_the_indent_and_word_lengths():
    for line in [' ' * 70 + 'word ' * 30, 'x' * 300, '   scale ' + '0.000e+00 ' * 20, ' ' * 45 + 'y' * 90]:
        lines = render.fit(line, 40).splitlines()
        assert all(len(x) <= 40 for x in lines)
        assert ''.join(x.strip() for x in lines).replace(' ', '') == line.replace(' ', '')
