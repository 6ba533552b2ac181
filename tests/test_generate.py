"""
Generation past the block (microgpt/sampling.py, sample.py --length): a window of at most
block_size tokens that jumps on by half a block when full. With a window at least as long as
the text so far it is ordinary sampling, draw for draw; past the block, the scalar engine and
the numpy port, each with its KV cache, give the whole window's logits and the same text.

Run: .venv/bin/python -m pytest -q tests/test_generate.py
"""

import functools
import io
import random

import numpy as np
import pytest

import helpers
from microgpt import inference
from microgpt.tokenizer import CharTokenizer
from microgpt.programs import sample, train
from microgpt import load_checkpoint
from microgpt.model import GPTConfig, init_weights
from microgpt.sampling import generate, sample_name

PROSE = ("The storm arrived at dusk, and the old man sat by the window watching the sea.\n"
         "He had seen storms before; this one, he thought, would not be the last.\n") * 6
LOGIT_TOL = 1e-9  # the two engines' logits, float64 summed in different orders


@pytest.fixture(scope='module')
def text_ckpt(tmp_path_factory):
    """A running-text checkpoint with a block of 8 positions, trained for 40 steps."""
    folder = tmp_path_factory.mktemp('text')
    data = folder / 'prose.txt'
    data.write_text(PROSE, encoding='utf-8')
    out = folder / 'model.json'
    assert train.main(['--data-mode', 'text', '--data', str(data), '--n-embd', '16', '--n-head', '2',
                       '--block-size', '8', '--batch-size', '4', '--steps', '40', '--eval-every', '0',
                       '--num-samples', '0', '--engine', 'numpy', '--out', str(out)]) == 0
    return str(out)


def test_with_a_window_as_long_as_the_text_it_is_ordinary_sampling(tiny_ckpt):
    model = load_checkpoint(tiny_ckpt)
    tok, block = model.tokenizer, model.config.block_size
    for seed in range(8):
        for prompt in ('', 'ma'):
            expected = sample_name(model, random.Random(seed), 0.9, tok.encode(prompt))
            drawn = generate(model, block - len(prompt), random.Random(seed), 0.9,
                             [tok.bos] + tok.encode(prompt), stop_at_bos=True)
            assert prompt + ''.join(drawn) == expected


class Watched:
    """A model whose next_logits calls are written down: (the window, the logits it gave)."""

    def __init__(self, model):
        self.model, self.calls = model, []
        self.config, self.tokenizer = model.config, model.tokenizer

    def next_logits_fn(self):
        next_logits = self.model.next_logits_fn()

        def watched(window):
            logits = next_logits(window)
            self.calls.append((list(window), logits))
            return logits
        return watched


def generated_windows(model, length, prompt_ids, seed=0):
    """Every (window, logits) of one generation of `length` tokens at temperature 1."""
    watched = Watched(model)
    text = list(generate(watched, length, random.Random(seed), 1.0, prompt_ids))
    assert len(text) == length
    return watched.calls


def test_the_cached_port_gives_the_whole_windows_logits_past_the_block():
    """300 positions of a block-64 model: each cached call's logits are the uncached forward's
    of the same window, to 1e-12 (float64), and the window grows to the block, then jumps."""
    config = GPTConfig(vocab_size=30, n_layer=2, n_embd=16, n_head=4, block_size=64)
    port = inference.NumpyGPT(config, init_weights(config, seed=3), tokenizer=CharTokenizer('abcdefghijklmnopqrstuvwxyz .\n'))
    uncached = port.next_logits_fn(cached=False)
    calls = generated_windows(port, 300, [0, 1, 2])
    lengths = [len(window) for window, _ in calls]
    assert lengths[:62] == list(range(3, 65)) and max(lengths) == 64 and lengths[62] == 32, lengths[:70]
    for window, logits in calls:
        np.testing.assert_allclose(logits, uncached(window), rtol=0, atol=1e-12)


def test_the_scalar_cache_gives_the_ports_logits_past_the_block(text_ckpt):
    model, port = load_checkpoint(text_ckpt), inference.load_checkpoint(text_ckpt)
    uncached = port.next_logits_fn(cached=False)
    calls = generated_windows(model, 30, model.tokenizer.encode('The'))
    assert any(len(window) < len(calls[i - 1][0]) for i, (window, _) in enumerate(calls) if i)  # it jumped
    for window, logits in calls:
        np.testing.assert_allclose(logits, uncached(window), rtol=0, atol=LOGIT_TOL)


def test_the_same_ids_again_keep_their_logits(text_ckpt):
    """A window fed again as it is (a run of one character can jump onto the very window already
    fed): both caches return its logits, and nothing is fed twice."""
    window = load_checkpoint(text_ckpt).tokenizer.encode('e' * 8)
    expected = inference.load_checkpoint(text_ckpt).next_logits_fn(cached=False)(window)
    for model in (load_checkpoint(text_ckpt), inference.load_checkpoint(text_ckpt)):
        next_logits = model.next_logits_fn()
        for _ in range(3):
            np.testing.assert_allclose(next_logits(window), expected, rtol=0, atol=LOGIT_TOL)


class Recorder(io.StringIO):
    def __init__(self):
        super().__init__()
        self.writes, self.flushes = [], 0

    def write(self, s):
        self.writes.append(s)
        return super().write(s)

    def flush(self):
        self.flushes += 1


def test_running_text_is_streamed_character_by_character(text_ckpt):
    port = inference.load_checkpoint(text_ckpt)
    out = Recorder()
    sample.stream_text(port, prompt='He had', length=25, seed=1, out=out)
    assert out.writes[0] == 'He had' and all(len(w) == 1 for w in out.writes[1:-1])
    assert len(out.writes) == 1 + 25 + 1 and out.flushes >= 25


run = functools.partial(helpers.run, sample.main)  # run(argv, capsys): sample.py's (status, stdout, stderr)


def test_sample_py_generates_a_given_length_from_a_prompt_longer_than_the_block(text_ckpt, capsys):
    prompt = 'He had seen storms before; this one'  # 35 characters, the block holds 8
    code, out, err = run(['--ckpt', text_ckpt, '--length', '50', '--prompt', prompt], capsys)
    assert code == 0, err
    assert out.startswith(prompt) and len(out) == len(prompt) + 50 + 1
    code, again, _ = run(['--ckpt', text_ckpt, '--length', '50', '--prompt', prompt, '--engine', 'numpy'], capsys)
    assert again == out


@pytest.mark.parametrize('flags, fragment', [
    (['--length', '0'], 'is out of range'),
    (['--length', 'ten'], 'ten'),
])
def test_bad_sampling_input_is_one_line(text_ckpt, capsys, flags, fragment):
    code, out, err = run(['--ckpt', text_ckpt, *flags], capsys)
    assert code == 2 and err.startswith('error: ') and err.count('\n') == 1 and fragment in err, err
    assert out == ''


def test_the_value_engine_on_a_large_model_says_how_to_go_faster(capsys):
    """A model above SCALAR_UP_TO on the Value engine samples, after one line on stderr naming
    the faster way; below it, nothing is said."""
    tokenizer = CharTokenizer(list('abcdefghij'))
    for n_embd, said in ((48, True), (16, False)):
        config = GPTConfig(vocab_size=tokenizer.vocab_size, n_layer=1, n_embd=n_embd, n_head=4, block_size=16)
        model = sample.model_for(config, init_weights(config), tokenizer, engine='scalar')
        err = capsys.readouterr().err
        assert model.config == config and ('numpy port gives the same text' in err) == said, err
