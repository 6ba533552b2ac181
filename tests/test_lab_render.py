"""
render.number: how the lab prints every number, and the one thing it changes from format():
a value that rounds to zero prints without a minus sign.
"""

import pytest

from microgpt.lab.render import number


@pytest.mark.parametrize('x, spec, expected', [
    (-0.0, '.3f', '0.000'),
    (-0.0004, '.3f', '0.000'),        # rounds to zero: no sign
    (-0.0004, '+.3f', '+0.000'),      # a signed spec keeps a sign, the plus one
    (-0.0, '.3e', '0.000e+00'),
    (-0.0, 'g', '0'),
    (-1e-9, '>8.2f', '    0.00'),     # the width is kept
    (-0.0005, '.3f', '-0.001'),       # rounds away from zero: the sign is real
    (-1e-300, 'g', '-1e-300'),        # 'g' never rounds a tiny number to zero
    (-2.5, '+.4f', '-2.5000'),
    (0.25, '.0%', '25%'),
    (-1234.5, ',.1f', '-1,234.5'),
])
def test_number(x, spec, expected):
    assert number(x, spec) == expected


def test_format_itself_prints_negative_zero():
    # the negative control: without number(), Python keeps the sign
    assert format(-0.0004, '.3f') == '-0.000' and format(-0.0, 'g') == '-0'


def test_token_labels_make_running_texts_whitespace_visible():
    from microgpt.lab.render import token_label
    from microgpt.tokenizer import CharTokenizer
    tok = CharTokenizer(list('\n !ab'))
    labels = [token_label(tok, i) for i in range(tok.vocab_size)]
    assert labels == ['\u23ce', '\u2423', '!', 'a', 'b', '<BOS>']  # newline, space, ..., BOS
    assert len(set(labels)) == len(labels) and all(label.strip() for label in labels)


def test_a_bar_of_nan_is_empty_and_of_infinity_full():
    """A ratio of two overflowed norms (inf / inf) is NaN: lab step's bars crashed on it."""
    from microgpt.lab.render import FULL, bar
    assert bar(float('nan'), 10) == ' ' * 10
    assert bar(float('inf'), 10) == FULL * 10 and bar(-float('inf'), 10) == ' ' * 10
