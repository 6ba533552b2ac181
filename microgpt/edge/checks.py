"""
The checks at the edges: what a user hands in, verified where it enters, before the core (which
trusts its arguments, as micrograd and microgpt do) sees it; each failure is a one-line
UserError. `Range` declares a number's range once for a flag, a web field and a saved value.
"""

import argparse
import dataclasses
import math
from dataclasses import dataclass

from .errors import UserError
from .limits import check_config_sizes
from ..model import SIZE_FIELDS, GPTConfig

RUNGS = tuple(f.name for f in dataclasses.fields(GPTConfig) if f.name not in SIZE_FIELDS)  # the architecture's changes
MLPS = ('relu', 'gelu', 'swiglu')  # the MLP's nonlinearities (GPTConfig.mlp)
SWITCHES = ('rope', 'norm_gains', 'qk_norm', 'tie_embeddings')  # the rungs that are on or off


def make_config(**fields):
    """GPTConfig(**fields), once every size is a positive integer within limits.py's caps,
    n_embd divides evenly into n_head heads, and each rung given is one the model can run:
    a switch true or false, a known mlp, n_kv_head dividing n_head, RoPE's head_dim even."""
    for name in SIZE_FIELDS:
        if not Range(int, 1).holds(fields.get(name)):
            raise UserError(f"{name} must be a positive integer, got {short(fields.get(name))}")
    for name in SWITCHES:
        if not isinstance(fields.get(name, False), bool):
            raise UserError(f"{name} must be true or false, got {short(fields[name])}")
    if fields.get('mlp', 'relu') not in MLPS:
        raise UserError(f"mlp must be {', '.join(MLPS[:-1])} or {MLPS[-1]}, got {short(fields['mlp'])}")
    n_kv_head = fields.get('n_kv_head')
    if n_kv_head is not None and not Range(int, 1, fields['n_head']).holds(n_kv_head):
        raise UserError(f"n_kv_head must be an integer from 1 to n_head ({fields['n_head']}), got {short(n_kv_head)}")
    check_config_sizes(fields)
    if fields['n_embd'] % fields['n_head']:
        raise UserError(f"n_embd ({fields['n_embd']}) must be divisible by n_head "
                        f"({fields['n_head']}): every head gets an equal slice of the embedding")
    if n_kv_head is not None and fields['n_head'] % n_kv_head:
        raise UserError(f"n_kv_head ({n_kv_head}) must divide n_head ({fields['n_head']}): each head of keys "
                        "and values serves an equal group of query heads")
    if fields.get('rope') and fields['n_embd'] // fields['n_head'] % 2:
        raise UserError(f"RoPE needs an even head_dim, got {fields['n_embd'] // fields['n_head']} (n_embd "
                        f"{fields['n_embd']} / n_head {fields['n_head']}): it turns each head's numbers in pairs")
    return GPTConfig(**{name: fields[name] for name in SIZE_FIELDS + RUNGS if name in fields})


@dataclass(frozen=True)
class Range:
    """The numbers a value may take, checked the same way from a flag (`parse`), a lab or web
    field (`check`) and a saved run (`holds`). low..high inclusive (high None: no top); above
    leaves low out (a temperature that divides), below leaves high out (a dropout of 1 drops all)."""
    kind: type
    low: float
    high: float = None
    above: bool = False
    below: bool = False

    def text(self):
        """What it takes, in words: 'an integer from 1 to 256', 'a number greater than 0'."""
        shown = (lambda x: f"{x:,}") if self.kind is int else (lambda x: f"{x:g}")
        words = 'an integer' if self.kind is int else 'a number'
        low = f"greater than {shown(self.low)}" if self.above else f"from {shown(self.low)}"
        if self.high is None:
            return f"{words} {low}" if self.above else f"{words} of at least {shown(self.low)}"
        if self.above:
            return f"{words} {low} and {'less than' if self.below else 'at most'} {shown(self.high)}"
        return f"{words} {low} to {'less than ' * self.below}{shown(self.high)}"

    what = property(text)  # as programs/settings.py's other kinds name their values
    choices = None

    def holds(self, value):  # an int is a number too; a bool is neither
        if isinstance(value, bool) or not isinstance(value, self.kind if self.kind is int else (int, float)):
            return False
        if self.kind is float and not is_finite_number(value):
            return False
        return ((value > self.low if self.above else value >= self.low) and
                (self.high is None or (value < self.high if self.below else value <= self.high)))

    def check(self, value, where):  # value, or a one-line UserError naming where
        if not self.holds(value):
            raise UserError(f"{where} is {short(value)}: give {self.text()}")
        return value

    def parse(self, text):  # an argparse type
        try:
            value = self.kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{short(text)} is not {'an integer' if self.kind is int else 'a number'}"
                                             ) from None
        if not self.holds(value):
            raise argparse.ArgumentTypeError(f"{text} is out of range: give {self.text()}")
        return value


def is_finite_number(x):
    """x is a finite int or float (not a bool); False for an integer too large for any float."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    try:
        return math.isfinite(x)
    except OverflowError:
        return False


def short(x, most=40):
    """repr(x), cut to at most `most` characters: what a message quotes of a value it was handed."""
    text = repr(x) if not isinstance(x, str) or len(x) <= most else repr(x[:most])
    return text if len(text) <= most else text[:most - 3] + '...'


def encode(tokenizer, text):
    """text's ids, or a UserError naming what is not text or the first character the model does not know."""
    try:
        text.encode('utf-8')
    except UnicodeEncodeError as e:  # a byte of a command line that is not UTF-8, or half a pair in JSON
        raise UserError(f"{text[e.start]!r} at position {e.start} is not a character (a byte that is not "
                        "UTF-8, or half of a surrogate pair): give the text as UTF-8") from None
    ch = tokenizer.unknown(text)  # the byte-pair tokenizer knows every character
    if ch is not None:
        raise UserError(f"character {ch!r} is not in the vocabulary ({short(''.join(tokenizer.chars), 80)}): "
                        "use only characters the model was trained on")
    return tokenizer.encode(text)


def check_prompt(tokenizer, block_size, prompt):
    """The prompt's ids; its characters must be known and it must leave room in the block."""
    ids = encode(tokenizer, prompt)
    if len(ids) >= block_size:
        raise UserError(f"--prompt has {len(ids)} characters but the block holds {block_size} "
                        f"positions, one of them BOS: use at most {block_size - 1} characters")
    return ids


def check_sampling(temperature, top_k, vocab_size=None):
    """Temperature >= 0 (0 = greedy); top_k None (no cut) or 1..vocab_size."""
    Range(float, 0).check(temperature, '--temperature')
    if top_k is not None:
        Range(int, 1, vocab_size).check(top_k, '--top-k')
