"""
The Tokens sandbox (microgpt/lab/tokens.py) and its page: the tokens shown are the tokenizer's
own encode of the text, their bytes are the text's UTF-8 bytes in order, the merges listed are
the checkpoint's table, and the page draws the route's answer, one coloured piece a token.
"""

import pytest
from hypothesis import given, settings, strategies as st

from helpers import TINY_NAMES, run_lab
from microgpt.bpe import BPETokenizer, learn_merges
from microgpt.edge.errors import UserError
from microgpt.lab import tokens
from microgpt.lab.loading import load


def test_a_byte_pair_models_tokens_are_its_encode_and_its_bytes_the_texts(bpe_ckpt):
    ckpt, model = load(bpe_ckpt)
    text = 'emma ř 👩'  # a letter of two bytes and an emoji of four, neither in the names
    d = tokens.compute(model, text, merges=5, ckpt=ckpt)
    ids = ckpt.tokenizer.encode(text)
    assert [t['id'] for t in d['tokens']] == ids and len(ids) < len(text.encode('utf-8'))
    assert b''.join(bytes(t['bytes']) for t in d['tokens']) == text.encode('utf-8')
    assert [tuple(m['pair']) for m in d['merges']] == list(ckpt.merges[:5]) and d['n_merges'] == len(ckpt.merges)
    assert [m['id'] for m in d['merges']] == [256, 257, 258, 259, 260]
    assert d['fed'] == [ckpt.tokenizer.bos] + ids and d['kind'] == 'bpe'


def test_a_character_model_shows_one_token_a_character_and_refuses_one_it_never_saw(tiny_ckpt):
    ckpt, model = load(tiny_ckpt)
    d = tokens.compute(model, 'emma', ckpt=ckpt)
    assert [t['label'] for t in d['tokens']] == list('emma') and d['merges'] == [] and d['kind'] == 'char'
    assert len(d['cuts']) == 3 and all(c['lost'] == [] for c in d['cuts'])  # a cut between every two
    assert all(x['merge'] is None for x in d['tokens'])
    with pytest.raises(UserError, match="character 'ř' is not in the vocabulary"):
        tokens.compute(model, 'emř', ckpt=ckpt)


# ---------------------------------------------------------------------------- why it splits there
class Model:
    """What compute reads of a model: its tokenizer."""

    def __init__(self, merges):
        self.tokenizer = BPETokenizer(merges)


def test_a_merge_learned_earlier_takes_the_side_a_later_one_wanted():
    """'the' with merges 'h' + 'e' (0) then 't' + 'h' (1): merge 0 goes first and takes the 'h',
    so 't' + 'h' never happens, and 't' + 'he' is no merge at all."""
    h, e, t = b'het'
    d = tokens.compute(Model([(h, e), (t, h)]), 'the')
    assert [(x['label'], x['merge']) for x in d['tokens']] == [('t', None), ('he', 0)]
    assert d['tokens'][1]['why'] == "merge 0: 'h' + 'e'"
    assert d['tokens'][0]['why'] == "byte 116: one of the 256 base tokens, no merge made it"
    assert d['cuts'] == [{'after': 0, 'pair': [t, 256], 'lost': [{'pair': [t, h], 'rank': 1, 'by': 0, 'side': 'right'}],
                          'why': "'t' + 'h' is merge 1, but merge 0 ('h' + 'e') took 'h' first; "
                                 "'t' + 'he' is not in the merge table"}]
    d = tokens.compute(Model([(t, h), (h, e)]), 'the')  # the other order: 'th' wins and 'e' is left
    assert [x['label'] for x in d['tokens']] == ['th', 'e']
    assert d['cuts'][0]['lost'] == [{'pair': [h, e], 'rank': 1, 'by': 0, 'side': 'left'}]
    d = tokens.compute(Model([(t, h), (256, e)]), 'the')  # one token: no cut to explain
    assert d['tokens'][0]['why'] == "merge 1: 'th' + 'e'" and d['cuts'] == []


def test_a_run_of_one_letter_merges_left_to_right_and_says_so():
    a = ord('a')
    d = tokens.compute(Model([(a, a)]), 'aaa')
    assert [x['label'] for x in d['tokens']] == ['aa', 'a']
    assert d['cuts'][0]['lost'] == [{'pair': [a, a], 'rank': 0, 'by': 0, 'side': 'left'}]
    assert 'another occurrence of the same pair (a merge runs left to right)' in d['cuts'][0]['why']


MERGES = learn_merges(TINY_NAMES, 40)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.text(alphabet='aeilmnorsty ř', max_size=24))
def test_every_token_and_cut_is_explained_by_the_table(text):
    """Against the text itself: a cut's own pair would have been merged, were it in the table."""
    model = Model(MERGES)
    tok, data = model.tokenizer, text.encode('utf-8')
    d = tokens.compute(model, text)
    assert [x['id'] for x in d['tokens']] == tok.encode(text) == tokens.replay(tok, text)[0]
    for x in d['tokens']:
        assert (x['merge'] is None) == (x['id'] < 256) and (x['merge'] is None or x['id'] == 256 + x['merge'])
    ends = [sum(len(x['bytes']) for x in d['tokens'][:c + 1]) for c in range(len(d['cuts']))]
    for cut, end in zip(d['cuts'], ends):
        assert tuple(cut['pair']) not in tok.rank and cut['why'].endswith('is not in the merge table')
        for lost in cut['lost']:
            a, b = lost['pair']
            assert data[end - len(tok.vocab[a]):end] == tok.vocab[a] and data[end:end + len(tok.vocab[b])] == tok.vocab[b]
            assert tok.rank[a, b] == lost['rank'] >= lost['by']


def test_the_command_prints_the_tokens_the_merges_and_why_each_is_cut_where_it_is(bpe_ckpt, capsys):
    ckpt, model = load(bpe_ckpt)
    d = tokens.compute(model, 'emma', ckpt=ckpt)
    status, out, _ = run_lab(['tokens', 'emma', '--ckpt', bpe_ckpt, '--merges', '3'], capsys)
    assert status == 0 and 'the first 3 of 23 merges, in the order learned' in out
    assert 'characters in' in out and 'why it splits where it does' in out
    assert all(x['why'] in out for x in d['tokens']) and all(c['why'] in out for c in d['cuts'])


# ---------------------------------------------------------------------------- tokens, not characters
@pytest.fixture(scope='module')
def bpe_text_ckpt(tmp_path_factory, play_file):
    """A byte-pair model of running text (300 tokens), trained 2 steps: for the words, not the numbers."""
    from helpers import train_text
    return train_text(tmp_path_factory.mktemp('bpe-text') / 'play.json', play_file, 16, '--tokenizer', 'bpe',
                      '--vocab-size', '300', '--steps', '2', '--n-embd', '8', '--n-head', '2', '--eval-every', '0')


def printed(capsys, *argv):
    status, out, _ = run_lab(list(argv), capsys)
    assert status == 0, out
    return ' '.join(out.split())  # the sentences, whatever the terminal's width folded


@pytest.mark.parametrize('model, text, unit', [('bpe_ckpt', 'emma', 'token'), ('bpe_text_ckpt', 'ROMEO: Well', 'token'),
                                               ('tiny_ckpt', 'emma', 'character'), ('text_ckpt', 'ROMEO: Well', 'character')])
def test_the_lab_says_tokens_of_a_byte_pair_model_and_characters_of_a_character_model(request, capsys, model, text, unit):
    """The overview, attention and sampling printouts name what the model reads: a byte-pair
    model predicts the next token, never 'the next character', which a byte-pair token is not."""
    ckpt = request.getfixturevalue(model)
    other = {'token': 'character', 'character': 'token'}[unit]
    running = model.endswith('text_ckpt')
    out = printed(capsys, 'overview', text, '--ckpt', ckpt)
    assert f'predicts the next {unit}' in out and f'the next {other}' not in out
    out = printed(capsys, 'sampling', text[:2], '--ckpt', ckpt, '--num', '0')
    assert f'the next {unit}, p = softmax' in out and f'the next {other}' not in out
    assert (f'over the {unit}s (BOS is never drawn' in out) == running
    if running:  # a name's attention says BOS comes first, whatever the tokenizer
        assert f'the model reads its {unit}s' in printed(capsys, 'attention', text, '--ckpt', ckpt)
    assert tokens.compute(load(ckpt)[1], text)['kind'] == {'token': 'bpe', 'character': 'char'}[unit]
