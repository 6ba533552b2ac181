"""
The largest inputs microgpt accepts: a model's sizes, a file's, and the top of a few flags. Each
is a sanity check that fails in one line, not a defence against inputs crafted to exhaust memory
(docs/reliability.md); the lab's own, smaller ones are microgpt/lab/limits.py's.
"""

from ..model import GPTConfig, parameter_shapes
from .errors import UserError

# ---------------------------------------------------------------------------- a model
MAX_N_LAYER = 256           # transformer blocks; GPT-3 has 96
MAX_N_EMBD = 16_384         # width of the residual stream; GPT-3 has 12,288
MAX_N_HEAD = 1_024          # heads per layer (n_embd must also divide evenly by it)
MAX_BLOCK_SIZE = 65_536     # positions; names need about 16
MAX_VOCAB_SIZE = 1_114_113  # every Unicode code point, plus BOS
MAX_PARAMETERS = 10_000_000  # so that every checkpoint a run saves reads back: with Adam's two
                             # moments, at most 26 bytes a number as JSON, 780 MB < MAX_FILE_BYTES

CONFIG_CAPS = {'vocab_size': MAX_VOCAB_SIZE, 'n_layer': MAX_N_LAYER, 'n_embd': MAX_N_EMBD,
               'n_head': MAX_N_HEAD, 'block_size': MAX_BLOCK_SIZE}

# ---------------------------------------------------------------------------- files, flags, losses
MAX_FILE_BYTES = 1 << 30    # 1 GiB: any file a user names (data, a checkpoint of either format, a log)
MAX_SEED = 2**32 - 1        # seeds are 0..2^32 - 1, what numpy's and Python's generators both take
MAX_TEMPERATURE = 1e3       # at 1000 a trained model's logits (a few units apart) give every token
                            # its uniform share within 1%; 0 means greedy
MAX_NAMES = 100_000         # names one sample.py run prints (its --num)
MAX_WEIGHT_DECAY = 10.0     # train.py --weight-decay: a step shrinks each weight by lr x this, and
                            # lr x 10 is still a small fraction at the learning rates that train
MAX_LOSS = 1e6              # a loss above this is a diverged run's (run.py) and no log's (runlog.py):
                            # ln(vocab_size) is ~3.3 for names


def parameter_count(config):  # how many numbers a model of this config holds
    return sum(n_out * n_in for n_out, n_in in parameter_shapes(config).values())


def check_config_sizes(fields):
    """Each of a config's sizes within its cap, then the whole model, with its rungs, within
    MAX_PARAMETERS. fields: GPTConfig's, each already of the kind it should be (checks.make_config)."""
    for name, cap in CONFIG_CAPS.items():
        if fields[name] > cap:
            raise UserError(f"{name} is more than the {cap:,} microgpt allows (limits.MAX_{name.upper()})")
    total = parameter_count(GPTConfig(**fields))
    if total > MAX_PARAMETERS:
        raise UserError(f"this model has {total:,} parameters; microgpt trains and reads at most "
                        f"{MAX_PARAMETERS:,} (limits.MAX_PARAMETERS): make it smaller")
