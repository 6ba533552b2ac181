"""
The largest inputs microgpt accepts, in one place: what a config, a file or a flag may ask for.

Every number a user hands in (a flag, a field of a checkpoint, a line of a training log) is
checked against a range before anything is computed or allocated from it, so an absurd value
is a one-line UserError instead of a hang, a memory error or an overflow. The caps are
generous: each is far above anything this from-scratch model trains in reasonable time, and
each says why it is where it is. checkpoint.py checks a checkpoint's config with
`check_config_sizes` before building anything from it; the CLIs use the same numbers in their
flags' ranges (microgpt.programs.cli.int_in). Pure standard library.
"""

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
                              # (safetensors.MAX_BYTES, 24 bytes each)

CONFIG_CAPS = {'vocab_size': MAX_VOCAB_SIZE, 'n_layer': MAX_N_LAYER, 'n_embd': MAX_N_EMBD,
               'n_head': MAX_N_HEAD, 'block_size': MAX_BLOCK_SIZE}

# ---------------------------------------------------------------------------- files
MAX_FILE_BYTES = 1 << 30    # 1 GiB: any file a user names (data, a JSON checkpoint, a log);
                            # a .safetensors checkpoint has its own cap, safetensors.MAX_BYTES
MAX_JSON_DEPTH = 32         # nesting of [ and { in a JSON document; a checkpoint needs 5

# ---------------------------------------------------------------------------- flags and log values
MAX_SEED = 2**32 - 1        # seeds are 0..2^32 - 1, what numpy's and Python's generators both take
MAX_TEMPERATURE = 1e3       # at 1000 a trained model's logits (a few units apart) give every token
                            # its uniform share within 1%; 0 means greedy, and a tiny positive one
                            # is computed so that it cannot overflow
MAX_NAMES = 100_000         # names one sample.py run prints (its --num); all are kept in memory
MAX_ROW_NUMBERS = 1_000_000  # lab scaling: --draws x --row-d; section 4 holds 16 bytes x 8 keys
                             # for each, about 128 MB at the cap
MAX_STEP = 10**12           # a training step in a log: a trillion steps is beyond any run
MAX_LOSS = 1e6              # a loss in a log: ln(vocab_size) is ~3.3 for names; sums of a
                            # million of these stay far from overflow


def parameter_count(vocab_size, n_layer, n_embd, block_size, **_):
    """How many numbers a model of this config holds (see model.parameter_shapes):
    wte and lm_head (vocab_size x n_embd each), wpe (block_size x n_embd), and per layer four
    n_embd x n_embd attention matrices plus the MLP's two 4 n_embd x n_embd ones."""
    return 2 * vocab_size * n_embd + block_size * n_embd + n_layer * 12 * n_embd * n_embd


def check_config_sizes(fields):
    """Each of a config's sizes (a dict of field -> value) within its cap, and the whole model
    within MAX_PARAMETERS; otherwise a UserError naming the field and the cap. Runs before
    anything is built from the config, so a claim of a trillion layers costs nothing. Values
    that are not positive integers are left for GPTConfig to refuse."""
    sizes = {}
    for name, cap in CONFIG_CAPS.items():
        value = fields.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            return  # not a size at all: GPTConfig says so, in its own words
        if value > cap:
            shown = f"{value:,}" if value < 10**30 else f"a {len(str(value))}-digit number"
            raise UserError(f"{name} is {shown}, more than the {cap:,} microgpt allows "
                            f"(limits.MAX_{name.upper()})")
        sizes[name] = value
    total = parameter_count(**sizes)
    if total > MAX_PARAMETERS:
        raise UserError(f"this config asks for {total:,} parameters; microgpt takes at most "
                        f"{MAX_PARAMETERS:,}")
