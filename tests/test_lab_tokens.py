"""
The Tokens sandbox (microgpt/lab/tokens.py) and its page: the tokens shown are the tokenizer's
own encode of the text, their bytes are the text's UTF-8 bytes in order, the merges listed are
the checkpoint's table, and the page draws the route's answer, one coloured piece a token.
"""

import pytest

import inference
from microgpt.edge.checkpoint import read_checkpoint
from microgpt.edge.errors import UserError
from microgpt.lab import tokens
from microgpt.lab.__main__ import main
from microgpt.programs import cli


def model_of(path):
    ckpt = read_checkpoint(path)
    return ckpt, inference.NumpyGPT(ckpt.config, ckpt.weights, tokenizer=ckpt.tokenizer)


def test_a_byte_pair_models_tokens_are_its_encode_and_its_bytes_the_texts(bpe_ckpt):
    ckpt, model = model_of(bpe_ckpt)
    text = 'emma ř 👩'  # a letter of two bytes and an emoji of four, neither in the names
    d = tokens.compute(model, text, merges=5, ckpt=ckpt)
    ids = ckpt.tokenizer.encode(text)
    assert [t['id'] for t in d['tokens']] == ids and len(ids) < len(text.encode('utf-8'))
    assert b''.join(bytes(t['bytes']) for t in d['tokens']) == text.encode('utf-8')
    assert [tuple(m['pair']) for m in d['merges']] == list(ckpt.merges[:5]) and d['n_merges'] == len(ckpt.merges)
    assert [m['id'] for m in d['merges']] == [256, 257, 258, 259, 260]
    assert d['fed'] == [ckpt.tokenizer.bos] + ids and d['kind'] == 'bpe'


def test_a_character_model_shows_one_token_a_character_and_refuses_one_it_never_saw(tiny_ckpt):
    ckpt, model = model_of(tiny_ckpt)
    d = tokens.compute(model, 'emma', ckpt=ckpt)
    assert [t['label'] for t in d['tokens']] == list('emma') and d['merges'] == [] and d['kind'] == 'char'
    with pytest.raises(UserError, match="character 'ř' is not in the vocabulary"):
        tokens.compute(model, 'emř', ckpt=ckpt)


def test_the_command_prints_the_tokens_and_the_merges(bpe_ckpt, capsys):
    with pytest.raises(SystemExit) as info:
        cli.run(main, ['tokens', 'emma', '--ckpt', bpe_ckpt, '--merges', '3'])
    out = capsys.readouterr().out
    assert info.value.code == 0
    assert 'the first 3 of 23 merges, in the order learned' in out and 'characters in' in out
