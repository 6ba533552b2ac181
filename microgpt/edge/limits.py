"""
The largest inputs microgpt accepts: every cap on a config, a file, a flag or a log value.

Every number a user hands in (a flag, a field of a checkpoint, a line of a training log) is
checked against a range before anything is computed or allocated from it, so an absurd value
is a one-line UserError instead of a hang, a memory error or an overflow. The caps are
generous: each is far above anything this from-scratch model trains in reasonable time, and
each says why it is where it is. checks.make_config checks a config with `check_config_sizes`
before anything is built from it; the programs' flags take their ranges from here
(programs/cli.int_in). The lab's caps, smaller, are the lab's own (microgpt/lab/limits.py).
Pure standard library.
"""

from ..model import GPTConfig, parameter_shapes
from .errors import UserError

# ---------------------------------------------------------------------------- model sizes
MAX_N_LAYER = 256           # transformer blocks; GPT-3 has 96
MAX_N_EMBD = 16_384         # width of the residual stream; GPT-3 has 12,288
MAX_N_HEAD = 1_024          # heads per layer (n_embd must also divide evenly by it)
MAX_BLOCK_SIZE = 65_536     # positions; names need about 16
MAX_VOCAB_SIZE = 1_114_113  # every Unicode code point, plus BOS
MAX_PARAMETERS = 100_000_000  # numbers in all matrices together, whatever reads them. What a
                              # training run may have is smaller, set by its checkpoint's format
                              # (checkpoint.check_fits, before step 1): weights and Adam's two
                              # moments must fit the reader's cap, about 13.7M parameters as JSON
                              # (MAX_FILE_BYTES, ~78 bytes each) and 89M as .safetensors
                              # (MAX_SAFETENSORS_BYTES, 24 bytes each)

CONFIG_CAPS = {'vocab_size': MAX_VOCAB_SIZE, 'n_layer': MAX_N_LAYER, 'n_embd': MAX_N_EMBD,
               'n_head': MAX_N_HEAD, 'block_size': MAX_BLOCK_SIZE}

# ---------------------------------------------------------------------------- files
MAX_FILE_BYTES = 1 << 30    # 1 GiB: any file a user names (data, a JSON checkpoint, a log);
                            # a .safetensors checkpoint has its own cap, MAX_SAFETENSORS_BYTES
MAX_SAFETENSORS_BYTES = 1 << 31  # 2 GiB: weights and Adam moments at 24 bytes a parameter, about
                                 # 89M parameters; its numbers are read as 8-byte floats
MAX_SAFETENSORS_HEADER = 100_000_000  # what the safetensors library itself accepts
MAX_TENSOR_DIMS = 8         # microgpt's tensors have 1 or 2; other programs' up to 5 or so
MAX_JSON_DEPTH = 32         # nesting of [ and { in a JSON document; a checkpoint needs 5
MAX_LOG_LINE = 1 << 12      # bytes of one log line: train.py writes a few hundred

# ---------------------------------------------------------------------------- flags and log values
MAX_SEED = 2**32 - 1        # seeds are 0..2^32 - 1, what numpy's and Python's generators both take
MAX_TEMPERATURE = 1e3       # at 1000 a trained model's logits (a few units apart) give every token
                            # its uniform share within 1%; 0 means greedy, and a tiny positive one
                            # is computed so that it cannot overflow
MAX_NAMES = 100_000         # names one sample.py run prints (its --num); all are kept in memory
MAX_LENGTH = 10_000_000     # characters of running text one sample.py run prints
MAX_STEPS = 10**9           # train.py --steps, and a step in a log: more than any run here takes
MAX_BATCH_SIZE = 100_000    # names (or windows) per step
MAX_THREADS = 256           # train.py --threads
MAX_WEIGHT_DECAY = 10.0     # train.py --weight-decay: a step shrinks each weight by lr x this, and
                            # lr x 10 is still a small fraction at the learning rates that train
MAX_BPE_VOCAB_SIZE = 16_384  # train.py --vocab-size with --tokenizer bpe: each merge scans every
                            # pair's count, so learning 4,096 tokens of tiny Shakespeare takes 392 s
                            # (256 take 3.4 s, bench/bpe_speed.py); GPT-2 has 50,257
MAX_TOKEN_BYTES = 1 << 26   # 64 MiB: the bytes of a byte-pair vocabulary's tokens together, checked
                            # before it is built (tiny Shakespeare's 4,096 tokens hold 19,102 bytes)
MAX_LOSS = 1e6              # a loss in a log: ln(vocab_size) is ~3.3 for names; sums of a
                            # million of these stay far from overflow


def parameter_count(config):
    """How many numbers a model of this config holds: the sum over model.parameter_shapes."""
    return sum(n_out * n_in for n_out, n_in in parameter_shapes(config).values())


def check_config_sizes(fields):
    """Each of a config's sizes (a dict of field -> positive int, as checks.make_config hands
    them) within its cap, and the whole model within MAX_PARAMETERS; otherwise a UserError
    naming the field and the cap. Runs before anything is built from the config, so a claim of
    a trillion layers costs nothing."""
    sizes = {}
    for name, cap in CONFIG_CAPS.items():
        value = fields[name]
        if value > cap:
            shown = f"{value:,}" if value < 10**30 else f"a {len(str(value))}-digit number"
            raise UserError(f"{name} is {shown}, more than the {cap:,} microgpt allows "
                            f"(limits.MAX_{name.upper()})")
        sizes[name] = value
    total = parameter_count(GPTConfig(**sizes))
    if total > MAX_PARAMETERS:
        raise UserError(f"this config asks for {total:,} parameters; microgpt takes at most "
                        f"{MAX_PARAMETERS:,}")
