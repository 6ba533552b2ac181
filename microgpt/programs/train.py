"""
Train a tiny GPT on names (or any text) and save it as one self-sufficient checkpoint.

    python train.py                          # 1000 steps on the bundled census first names
    python train.py --data my_names.txt --steps 3000 --n-layer 2
    python train.py --engine numpy --batch-size 32 ...   # the hand-derived numpy path, batched
    python train.py --engine torch --device cuda ...     # PyTorch (src/torchgpt), on a GPU
    torchrun --nproc_per_node 2 train.py --engine torch --batch-size 8 ...   # data-parallel
    python train.py --resume                 # continue the run saved at --out, exactly
    python train.py --data-mode text --data input.txt --engine numpy --dtype float32 ...
                                             # running text: the file as one stream (README's recipe)

The recipe is microgpt's: one name per step, tokens [BOS] + name + [BOS], loss = mean
cross-entropy of each next token, backward, one Adam update with a learning rate that decays
linearly to 0. Read main() top to bottom: data, model, optimizer, the loop. The loop is the
same whichever engine computes the step (ScalarTrainer below, on the Value engine,
backprop.Trainer, on numpy arrays, or torchgpt.Trainer, in PyTorch); everything that makes a
run safe to stop and resume (flags of a resumed run, the lock on --out, the log, saving,
Ctrl-C, and under torchrun which rank writes) is microgpt/programs/run.py's.

It prints the resolved configuration, a live progress line, the validation loss every
--eval-every steps, and finally a few sampled names. Beside the checkpoint it writes a log of
JSON lines (out/model.log.jsonl) that `python -m microgpt.lab loss` plots.
"""

import itertools
import math

from microgpt.programs import cli, original, sample
from microgpt.edge import limits, text
from microgpt.programs import resume
from microgpt.edge.checkpoint import DATA_MODES
from microgpt.edge.checks import make_config
from microgpt.edge.data import load_docs, split_docs
from microgpt.edge.errors import UserError
from microgpt.model import GPT
from microgpt.optim import Adam
from microgpt.programs.resume import DTYPES, ENGINES, MAX_BATCH_SIZE, MAX_STEPS
from microgpt.programs.run import Run
from microgpt.sampling import iter_names
from microgpt.training import batch_step, doc_tokens, evaluate, learning_rate


TEXT_SAMPLE_LENGTH = 200  # characters of running text printed when training ends


def parse_args(argv=None):
    """(args, given): every flag with its value (the defaults are the ones shown in --help), and
    the names of those the command line gave; a resumed run fills the rest from its own
    (resume.ON_RESUME), --init and --resume take the model's size from the checkpoint, and
    --reproduce-original takes the original's (microgpt/programs/original.py)."""
    p = cli.ArgumentParser(description="Train a tiny GPT on names (one name per step, unless --batch-size), "
                                       "or on running text (--data-mode text).",
                           formatter_class=cli.ShowDefaults)
    g = p.add_argument_group('data')
    g.add_argument('--data', metavar='PATH',
                   help="UTF-8 text file, one name (document) per line, or with --data-mode text any text; "
                        "normalized to NFC (default: the census first names bundled with the `names` package)")
    g.add_argument('--data-mode', choices=DATA_MODES, default='lines',
                   help="lines: one document per line, each trained as BOS + line + BOS; use it for "
                        "names, words, short items. text: the whole file as one stream of characters "
                        "(newlines included), trained on random windows of --block-size + 1; use it for "
                        "prose, plays, code, anything whose lines run into each other")
    g.add_argument('--val-size', type=cli.count_or_fraction(limits.MAX_FILE_BYTES), metavar='N',
                   help="held out for validation: a count (names, or characters with --data-mode text) "
                        "or a fraction such as 0.1 (default: 10%%, at most 1000 names; 0 = none). Running "
                        "text is split by position: the last characters validate")
    g.add_argument('--no-shuffle', dest='shuffle', action='store_false',
                   help="lines mode: keep the file's order (default: shuffled once with --seed)")
    g = p.add_argument_group('model (--init and --resume take the checkpoint\'s)')
    g.add_argument('--n-layer', type=cli.int_in(1, limits.MAX_N_LAYER), default=1,
                   help="transformer blocks (1-4 is sensible here)")
    g.add_argument('--n-embd', type=cli.int_in(1, limits.MAX_N_EMBD), default=16,
                   help="embedding width (must divide by --n-head)")
    g.add_argument('--n-head', type=cli.int_in(1, limits.MAX_N_HEAD), default=4, help="attention heads per block")
    g.add_argument('--block-size', type=cli.int_in(1, limits.MAX_BLOCK_SIZE), default=16,
                   help="longest sequence in tokens (names longer than this are cut, and train.py says "
                        "how many; 64 or more for running text)")
    g.add_argument('--init', metavar='CKPT',
                   help="start from this checkpoint's weights, config and vocabulary, with a fresh optimizer")
    g = p.add_argument_group('optimization')
    g.add_argument('--steps', type=cli.int_in(1, MAX_STEPS), default=1000,
                   help="training steps; with --resume, the total to reach: the learning rate's decay is "
                        "then spread over the new total, so it rises at the resumed step (printed)")
    g.add_argument('--lr', type=cli.positive_float, default=0.01,
                   help="peak Adam learning rate, decayed linearly to 0 over --steps")
    g.add_argument('--batch-size', type=cli.int_in(1, MAX_BATCH_SIZE), metavar='B', default=1,
                   help="names (or running-text windows) per step (1 is microgpt's); the loss is the "
                        "mean over every predicted token of the batch")
    g.add_argument('--seed', type=cli.int_in(0, limits.MAX_SEED), default=42,
                   help=f"seed for the initial weights and the data order, 0..{limits.MAX_SEED}")
    g = p.add_argument_group('engine (the same losses either way; only the speed differs)')
    g.add_argument('--engine', choices=ENGINES, default='scalar',
                   help="scalar: the Value autograd of microgpt/ (the teaching path); "
                        "numpy: src/backprop, every gradient derived by hand, much faster; "
                        "torch: src/torchgpt, PyTorch's autograd (pip install -e '.[torch]'), "
                        "also data-parallel under torchrun")
    g.add_argument('--device', choices=('cpu', 'cuda', 'mps'), default='cpu',
                   help="--engine torch only: where it computes (under torchrun, cuda means each "
                        "rank's own GPU)")
    g.add_argument('--dtype', choices=DTYPES, default='float64',
                   help="the weights' precision: float64 (the engines agree to rounding; the scalar "
                        "engine's only one); --engine numpy also float32 (about twice as fast on wide "
                        "models, the same checkpoint format); --engine torch also float32 and bfloat16 "
                        "(float32 weights, bfloat16 products), faster on GPUs")
    g.add_argument('--reproduce-original', action='store_true',
                   help="the original single-file microgpt.py's run, number for number: its data "
                        "order, weights, 1000 steps and 20 samples at temperature 0.5, all from one "
                        "generator seeded 42 (no held-out split; refuses flags that would change it)")
    g.add_argument('--threads', type=cli.int_in(1, 256), metavar='N',
                   help="numpy engine: BLAS threads (default: OPENBLAS_NUM_THREADS if set, else the "
                        "count a short measurement at start finds fastest for this model)")
    g.add_argument('--unfused', action='store_true',
                   help="scalar engine only: build the graph from microgpt/ops.py's composed blocks "
                        "as microgpt does, instead of fused.py's (same losses, about 6x slower: "
                        "bench/train_speed.py measures it)")
    g = p.add_argument_group('output')
    g.add_argument('--out', default='out/model.json', metavar='PATH',
                   help="checkpoint file, a .json name, or .safetensors for the compact binary format; "
                        "the log goes beside it as .log.jsonl")
    g.add_argument('--resume', action='store_true',
                   help=f"continue the run saved at --out: weights, Adam moments, step and data order "
                        f"(any engine may continue it). {resume.resume_rule()}")
    g.add_argument('--force', action='store_true',
                   help="start a fresh run even if --out holds a trained model, replacing it")
    g.add_argument('--save-every', type=cli.int_in(0, MAX_STEPS), metavar='N', default=100,
                   help="also save the checkpoint every N steps (0 = only at the end)")
    g.add_argument('--eval-every', type=cli.int_in(0, MAX_STEPS), metavar='N', default=200,
                   help="validation loss every N steps (0 = only at the end)")
    g.add_argument('--num-samples', type=cli.int_in(0, limits.MAX_NAMES), metavar='N', default=10,
                   help="names to sample when training ends (20 with --reproduce-original; running "
                        f"text: any but 0 prints {TEXT_SAMPLE_LENGTH} characters)")
    return p.parse_args_and_given(argv)


class ScalarTrainer:
    """The Value engine behind train.py's loop: a GPT of Values and its Adam.

    The numpy and torch engines (backprop.Trainer, torchgpt.Trainer) have the same methods, so
    the loop does not care which
    one it drives: step(batch, lr) -> loss; weights() and optimizer_state() for the checkpoint.
    """

    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer
        self.config, self.tokenizer = model.config, model.tokenizer

    def step(self, batch, lr):
        """One update on a batch of tokenized names; nan if an exp() overflowed (divergence)."""
        try:
            return batch_step(self.model, self.optimizer, batch, lr)
        except OverflowError:  # raised in the forward pass, before any weight changed
            return math.nan

    def weights(self):
        return self.model.weights()

    def load_weights(self, weights):
        self.model.load_weights(weights)

    def optimizer_state(self):
        return self.optimizer.state()

    def load_optimizer_state(self, state):
        self.optimizer.load_state(state)


def make_trainer(args, model, run):
    """The engine that computes each step: the Value graph (scalar), numpy arrays, or PyTorch."""
    if args.engine != 'torch':
        if run.world_size is not None:
            raise UserError("torchrun started this process (RANK and WORLD_SIZE are set), but only "
                            "--engine torch trains across processes: add --engine torch, or run "
                            "python train.py without torchrun")
        if args.device != 'cpu':
            raise UserError(f"--device {args.device} is for --engine torch: add --engine torch, or drop --device")
    if args.engine == 'torch':
        if args.unfused:
            raise UserError("--unfused is for the scalar engine: drop it, or use --engine scalar")
        try:
            import torchgpt  # PyTorch is optional: only this engine needs it
        except ImportError:
            raise UserError("--engine torch needs PyTorch: pip install -e '.[torch]' "
                            "(or use --engine numpy)") from None
        return torchgpt.make_trainer(model.config, model.weights(), model.tokenizer, args.device,
                                     args.dtype, run.world_size, args.batch_size)
    if args.engine == 'numpy':
        if args.unfused:
            raise UserError("--unfused is for the scalar engine: drop it, or use --engine scalar")
        # numpy lives outside microgpt/, so it is imported only when asked for
        backprop = cli.import_numpy_module('backprop', "--engine numpy")
        return backprop.Trainer(model.config, model.weights(), model.tokenizer, dtype=args.dtype)
    return ScalarTrainer(model, Adam(model.params))


ENGINE_DTYPES = {'scalar': ('float64',), 'numpy': ('float64', 'float32')}  # torch: every one of DTYPES


def check_engine_flags(args, given):
    """Flags that only one engine or one data mode understands; `given`: those on the command line."""
    allowed = ENGINE_DTYPES.get(args.engine, DTYPES)
    if args.dtype not in allowed:
        if 'dtype' in given:
            others = ' and '.join(e for e, d in {**ENGINE_DTYPES, 'torch': DTYPES}.items() if args.dtype in d)
            raise UserError(f"--dtype {args.dtype} is for the {others} engine{'s' * (' and ' in others)} "
                            f"(the {args.engine} engine computes in {' or '.join(allowed)}): add --engine "
                            f"{others.split()[0]}, or drop --dtype")
        args.dtype = allowed[-1]  # a resumed run's float32 (or bfloat16) continues in what this engine has
    if 'threads' in given and args.engine != 'numpy':
        raise UserError("--threads sets the numpy engine's BLAS threads: add --engine numpy, or drop it")
    if args.data_mode == 'text':
        if args.reproduce_original:
            raise UserError("--reproduce-original trains on names, one a line: drop --data-mode text")
        if 'shuffle' in given:
            raise UserError("--no-shuffle is for --data-mode lines: running text keeps its order "
                            "(its windows are drawn at random places)")


def batch_at(train_tokens, step, batch_size):
    """The names of step s (counted from 1): the next batch_size names, wrapping around."""
    start = (step - 1) * batch_size
    return [train_tokens[(start + b) % len(train_tokens)] for b in range(batch_size)]


def validation_loss(trainer, docs=None, windows=None):
    """Mean loss per predicted token on the held-out names (or running-text windows), computed
    by the numpy port, in the trainer's dtype.

    It is the number microgpt.training.evaluate gives with the scalar engine (the tests check
    that), found much faster, because no graph is built. inf or nan means divergence. Where
    numpy is not installed, the scalar engine computes it (only the scalar engine runs there).
    """
    try:
        import inference
    except ImportError:
        try:
            if windows is not None:
                return text.evaluate(trainer.model, windows)
            return evaluate(trainer.model, docs)
        except OverflowError:
            return math.nan
    dtype = 'float32' if str(getattr(trainer, 'dtype', '')) == 'float32' else 'float64'  # bfloat16: float64
    port = inference.NumpyGPT(trainer.config, trainer.weights(), tokenizer=trainer.tokenizer, dtype=dtype)
    try:
        if windows is not None:
            return inference.evaluate_windows(port, windows)
        return inference.evaluate(port, docs)
    except FloatingPointError:  # the port stops at its first overflow, as the scalar engine does
        return math.nan


class Names:
    """The lines mode: one document per line, shuffled, the last --val-size held out."""

    def __init__(self, args, run):
        docs = load_docs(args.data)
        val_size = args.val_size
        if isinstance(val_size, float):  # a fraction of the names
            val_size = int(len(docs) * val_size)
        self.train_docs, self.val_docs = split_docs(docs, val_size, seed=args.seed, shuffle=args.shuffle)
        self.docs, self.tokenizer = docs, run.tokenizer(docs)
        self.train_tokens = [doc_tokens(self.tokenizer, doc) for doc in self.train_docs]
        if args.batch_size > len(self.train_tokens):
            raise UserError(f"--batch-size {args.batch_size} is larger than the {len(self.train_tokens)} "
                            f"training names: use at most {len(self.train_tokens)}")
        self.args, self.held_out = args, f"{len(self.val_docs)} held-out names"

    def describe(self):
        note = long_docs_note(self.docs, self.args.block_size)
        return (f"data: {self.args.data or 'bundled census first names'}: {len(self.docs)} names, "
                f"{len(self.train_docs)} train / {len(self.val_docs)} val, vocab {self.tokenizer.vocab_size} "
                f"({''.join(self.tokenizer.chars)!r} + BOS)" + (f"\n{note}" if note else ""))

    def batch(self, step):
        return batch_at(self.train_tokens, step, self.args.batch_size)

    def validation_loss(self, trainer):
        return validation_loss(trainer, docs=self.val_docs) if self.val_docs else None


def long_docs_note(docs, block_size):
    """What happens to documents longer than the block, said once at start (None if none are)."""
    cut = [doc for doc in docs if len(doc) + 1 > block_size]  # BOS + doc predicts len + 1 tokens
    if not cut:
        return None
    longest = max(map(len, cut))
    return (f"note: {len(cut)} of {len(docs)} documents (the longest {longest} characters) are longer "
            f"than the block of {block_size} positions: only their first {block_size} characters "
            f"are trained on, the rest is cut. Fix: a larger --block-size (up to "
            f"{limits.MAX_BLOCK_SIZE}), or --data-mode text for running text")


class RunningText:
    """The text mode: the file as one stream, random windows to train, the end to validate."""

    def __init__(self, args, run):
        if args.data is None:
            raise UserError("--data-mode text needs a file: give --data PATH (the bundled names are "
                            "one a line: drop --data-mode text for them)")
        whole = text.load_text(args.data)
        train_text, val_text = text.split_text(whole, args.val_size, args.block_size)
        self.docs, self.tokenizer = [whole], run.tokenizer([whole])  # docs: what --resume fingerprints
        ids = self.tokenizer.encode(whole)
        self.train_ids = ids[:len(train_text)]
        self.val_windows = text.validation_windows(ids, len(val_text), args.block_size)
        self.args, self.n_chars, self.n_val = args, len(whole), len(val_text)
        self.held_out = f"{self.n_val:,} held-out characters"

    def describe(self):
        chars = ''.join(self.tokenizer.chars)
        return (f"data: {self.args.data}: running text, {self.n_chars:,} characters, "
                f"{len(self.train_ids):,} train / {self.n_val:,} val (the last), "
                f"vocab {self.tokenizer.vocab_size} ({chars[:40]!r}{'...' if len(chars) > 40 else ''} + BOS)")

    def batch(self, step):
        return text.train_windows(self.train_ids, self.args.block_size, self.args.batch_size,
                                  self.args.seed, step)

    def validation_loss(self, trainer):
        return validation_loss(trainer, windows=self.val_windows) if self.val_windows else None


def main(argv=None):
    args, given = parse_args(argv)
    with Run(args, given) as run:  # --out checked and locked, flags settled (ON_RESUME), signals caught
        check_engine_flags(args, given)
        # Let there be data: names split once into training and validation names, or running
        # text split by position (the end validates).
        data = (RunningText if args.data_mode == 'text' else Names)(args, run)
        tokenizer = data.tokenizer

        # Let there be a model, and the engine that trains it (with its Adam optimizer).
        config = make_config(vocab_size=tokenizer.vocab_size, n_layer=args.n_layer, n_embd=args.n_embd,
                             n_head=args.n_head, block_size=args.block_size)
        model = GPT(config, seed=args.seed, tokenizer=tokenizer, fused=not args.unfused)
        if args.reproduce_original:  # its weights come from the generator that shuffled its data
            recipe = original.prepare(data.docs)
            model.load_weights(recipe.weights)
        trainer = make_trainer(args, model, run)  # under torchrun: joins the other ranks
        start = run.restore(trainer)  # --init's weights, or --resume's weights, Adam and step
        threads = None
        if args.engine == 'numpy':  # BLAS threads: the user's, or the faster count measured on this model
            from backprop.threads import choose_threads
            threads = choose_threads(trainer, data.batch(start + 1), args.threads)

        run.say(data.describe())
        run.say(f"model: n_layer={config.n_layer} n_embd={config.n_embd} n_head={config.n_head} "
                f"head_dim={config.head_dim} block_size={config.block_size} params={len(model.params)}")
        run.say(f"training: steps={args.steps} lr={args.lr} seed={args.seed} shuffle={args.shuffle} "
                f"start_step={start} out={args.out} save_every={args.save_every} eval_every={args.eval_every}"
                f" engine={args.engine}{'-unfused' if args.unfused else ''} batch_size={args.batch_size}"
                f" dtype={args.dtype}" + (f" threads={threads}" if threads else "")
                + (f" device={args.device} ranks={run.world_size or 1}" if args.engine == 'torch' else "")
                + f" data_mode={args.data_mode}" + (f" init={args.init}" if args.init else ""))

        # Let there be training: one batch per step (one name, by default), as microgpt does.
        for step in range(start + 1, args.steps + 1):  # step s is counted from 1
            lr_t = learning_rate(args.lr, step - 1, args.steps)
            loss = trainer.step(data.batch(step), lr_t)
            run.log_step(step, loss, lr_t)  # a non-finite loss stops the run here
            if run.evaluation_due(step):
                val_loss = data.validation_loss(trainer)
                if val_loss is not None:
                    run.log_validation(step, val_loss, data.held_out)
            if run.save_due(step):
                run.save(step, trainer)
            if run.stop_signal:  # Ctrl-C, SIGTERM, SIGHUP or a closed stdout: the step is saved
                return run.stopped(step)
    print(f"saved {args.out} (step {args.steps}); log {run.log_path}")

    if args.num_samples != 0 and args.data_mode == 'text':
        print("sample:")  # a few lines of running text, from the numpy port if it trained
        if args.engine == 'numpy':
            inference = cli.import_numpy_module('inference', "--engine numpy")
            model = inference.NumpyGPT(config, trainer.weights(), tokenizer=tokenizer)
        else:
            model.load_weights(trainer.weights())
        sample.stream_text(model, length=TEXT_SAMPLE_LENGTH, seed=args.seed)
    elif args.num_samples != 0:
        print("samples:")
        model.load_weights(trainer.weights())  # the trained weights, whichever engine trained them
        if args.reproduce_original:  # drawn from the original's generator, where training left it
            names = itertools.islice(original.sample_original(model, recipe.rng), args.num_samples)
        else:
            names = iter_names(model, num=args.num_samples, temperature=0.5, seed=args.seed)
        for name in names:
            print(' ', name, flush=True)
    return 0


def command():
    """`microgpt-train` (installed), `python -m microgpt.train` and the top-level train.py."""
    cli.run(main)


if __name__ == '__main__':
    command()
