"""
Train a tiny GPT on names and save it as one self-sufficient checkpoint.

    python train.py                          # 1000 steps on the bundled census first names
    python train.py --data my_names.txt --steps 3000 --n-layer 2
    python train.py --engine numpy --batch-size 32 ...   # the hand-derived numpy path, batched
    python train.py --engine torch --device cuda ...     # PyTorch (src/torchgpt), on a GPU
    torchrun --nproc_per_node 2 train.py --engine torch --batch-size 8 ...   # data-parallel
    python train.py --resume                 # continue the run saved at --out, exactly

The recipe is microgpt's: one name per step, tokens [BOS] + name + [BOS], loss = mean
cross-entropy of each next token, backward, one Adam update with a learning rate that decays
linearly to 0. Read main() top to bottom: data, model, optimizer, the loop. The loop is the
same whichever engine computes the step (ScalarTrainer below, on the Value engine,
backprop.Trainer, on numpy arrays, or torchgpt.Trainer, in PyTorch); everything that makes a
run safe to stop and resume (flags of a resumed run, the lock on --out, the log, saving,
Ctrl-C, and under torchrun which rank writes) is microgpt/run.py's.

It prints the resolved configuration, a live progress line, the validation loss every
--eval-every steps, and finally a few sampled names. Beside the checkpoint it writes a log of
JSON lines (out/model.log.jsonl) that `python -m microgpt.lab loss` plots.
"""

import itertools
import math

from microgpt import cli, limits, original
from microgpt import run as run_rules
from microgpt.checks import make_config
from microgpt.data import load_docs, split_docs
from microgpt.errors import UserError
from microgpt.model import GPT
from microgpt.optim import Adam
from microgpt.run import DTYPES, ENGINES, MAX_BATCH_SIZE, MAX_STEPS, Run
from microgpt.sampling import iter_names
from microgpt.training import batch_step, doc_tokens, evaluate, learning_rate


def parse_args(argv=None):
    """(args, given): every flag with its value (the defaults are the ones shown in --help), and
    the names of those the command line gave; a resumed run fills the rest from its own
    (run.ON_RESUME), --init and --resume take the model's size from the checkpoint, and
    --reproduce-original takes the original's (microgpt/original.py)."""
    p = cli.ArgumentParser(description="Train a tiny GPT on names (one name per step, unless --batch-size).",
                           formatter_class=cli.ShowDefaults)
    g = p.add_argument_group('data')
    g.add_argument('--data', metavar='PATH',
                   help="UTF-8 text file, one name (document) per line, normalized to NFC "
                        "(default: the census first names bundled with the `names` package)")
    g.add_argument('--val-size', type=cli.int_in(0, MAX_STEPS), metavar='N',
                   help="names held out for validation (default: 10%% of the data, at most 1000; 0 = none)")
    g.add_argument('--no-shuffle', dest='shuffle', action='store_false',
                   help="keep the file's order (default: shuffled once with --seed)")
    g = p.add_argument_group('model (--init and --resume take the checkpoint\'s)')
    g.add_argument('--n-layer', type=cli.int_in(1, limits.MAX_N_LAYER), default=1,
                   help="transformer blocks (1-4 is sensible here)")
    g.add_argument('--n-embd', type=cli.int_in(1, limits.MAX_N_EMBD), default=16,
                   help="embedding width (must divide by --n-head)")
    g.add_argument('--n-head', type=cli.int_in(1, limits.MAX_N_HEAD), default=4, help="attention heads per block")
    g.add_argument('--block-size', type=cli.int_in(1, limits.MAX_BLOCK_SIZE), default=16,
                   help="longest sequence in tokens (names longer than this are cut)")
    g.add_argument('--init', metavar='CKPT',
                   help="start from this checkpoint's weights, config and vocabulary, with a fresh optimizer")
    g = p.add_argument_group('optimization')
    g.add_argument('--steps', type=cli.int_in(1, MAX_STEPS), default=1000,
                   help="training steps; with --resume, the total to reach: the learning rate's decay is "
                        "then spread over the new total, so it rises at the resumed step (printed)")
    g.add_argument('--lr', type=cli.positive_float, default=0.01,
                   help="peak Adam learning rate, decayed linearly to 0 over --steps")
    g.add_argument('--batch-size', type=cli.int_in(1, MAX_BATCH_SIZE), metavar='B', default=1,
                   help="names per step (1 is microgpt's); the loss is the mean over every predicted "
                        "token of the batch")
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
                   help="the weights' precision: float64 (the engines agree to rounding); "
                        "--engine torch also float32 and bfloat16 (float32 weights, bfloat16 products), "
                        "faster on GPUs")
    g.add_argument('--reproduce-original', action='store_true',
                   help="the original single-file microgpt.py's run, number for number: its data "
                        "order, weights, 1000 steps and 20 samples at temperature 0.5, all from one "
                        "generator seeded 42 (no held-out split; refuses flags that would change it)")
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
                        f"(any engine may continue it). {run_rules.resume_rule()}")
    g.add_argument('--force', action='store_true',
                   help="start a fresh run even if --out holds a trained model, replacing it")
    g.add_argument('--save-every', type=cli.int_in(0, MAX_STEPS), metavar='N', default=100,
                   help="also save the checkpoint every N steps (0 = only at the end)")
    g.add_argument('--eval-every', type=cli.int_in(0, MAX_STEPS), metavar='N', default=200,
                   help="validation loss every N steps (0 = only at the end)")
    g.add_argument('--num-samples', type=cli.int_in(0, limits.MAX_NAMES), metavar='N', default=10,
                   help="names to sample when training ends (20 with --reproduce-original)")
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
        if args.dtype != 'float64':
            raise UserError(f"--dtype {args.dtype} is for --engine torch (the {args.engine} engine "
                            "computes in float64): add --engine torch, or drop --dtype")
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
        return backprop.Trainer(model.config, model.weights(), model.tokenizer)
    return ScalarTrainer(model, Adam(model.params))


def batch_at(train_tokens, step, batch_size):
    """The names of step s (counted from 1): the next batch_size names, wrapping around."""
    start = (step - 1) * batch_size
    return [train_tokens[(start + b) % len(train_tokens)] for b in range(batch_size)]


def validation_loss(trainer, docs):
    """Mean loss per predicted token on the held-out names, computed by the numpy port.

    It is the number microgpt.training.evaluate gives with the scalar engine (the tests check
    that), found much faster, because no graph is built. inf or nan means divergence. Where
    numpy is not installed, the scalar engine computes it (only the scalar engine runs there).
    """
    try:
        import inference
    except ImportError:
        try:
            return evaluate(trainer.model, docs)
        except OverflowError:
            return math.nan
    port = inference.NumpyGPT(trainer.config, trainer.weights(), tokenizer=trainer.tokenizer)
    try:
        return inference.evaluate(port, docs)
    except FloatingPointError:  # the port stops at its first overflow, as the scalar engine does
        return math.nan


def main(argv=None):
    args, given = parse_args(argv)
    with Run(args, given) as run:  # --out checked and locked, flags settled (ON_RESUME), signals caught
        # Let there be data: the names, split once into training and validation names.
        docs = load_docs(args.data)
        train_docs, val_docs = split_docs(docs, args.val_size, seed=args.seed, shuffle=args.shuffle)
        tokenizer = run.tokenizer(docs)
        train_tokens = [doc_tokens(tokenizer, doc) for doc in train_docs]
        if args.batch_size > len(train_tokens):
            raise UserError(f"--batch-size {args.batch_size} is larger than the {len(train_tokens)} "
                            f"training names: use at most {len(train_tokens)}")

        # Let there be a model, and the engine that trains it (with its Adam optimizer).
        config = make_config(vocab_size=tokenizer.vocab_size, n_layer=args.n_layer, n_embd=args.n_embd,
                             n_head=args.n_head, block_size=args.block_size)
        model = GPT(config, seed=args.seed, tokenizer=tokenizer, fused=not args.unfused)
        if args.reproduce_original:  # its weights come from the generator that shuffled its data
            recipe = original.prepare(docs)
            model.load_weights(recipe.weights)
        trainer = make_trainer(args, model, run)  # under torchrun: joins the other ranks
        start = run.restore(trainer)  # --init's weights, or --resume's weights, Adam and step

        run.say(f"data: {args.data or 'bundled census first names'}: {len(docs)} names, "
              f"{len(train_docs)} train / {len(val_docs)} val, vocab {tokenizer.vocab_size} "
              f"({''.join(tokenizer.chars)!r} + BOS)")
        run.say(f"model: n_layer={config.n_layer} n_embd={config.n_embd} n_head={config.n_head} "
              f"head_dim={config.head_dim} block_size={config.block_size} params={len(model.params)}")
        run.say(f"training: steps={args.steps} lr={args.lr} seed={args.seed} shuffle={args.shuffle} "
              f"start_step={start} out={args.out} save_every={args.save_every} eval_every={args.eval_every}"
              f" engine={args.engine}{'-unfused' if args.unfused else ''} batch_size={args.batch_size}"
              f" dtype={args.dtype}" + (f" device={args.device} ranks={run.world_size or 1}"
                                        if args.engine == 'torch' else "")
              + (f" init={args.init}" if args.init else ""))

        # Let there be training: one batch per step (one name, by default), as microgpt does.
        for step in range(start + 1, args.steps + 1):  # step s is counted from 1
            lr_t = learning_rate(args.lr, step - 1, args.steps)
            loss = trainer.step(batch_at(train_tokens, step, args.batch_size), lr_t)
            run.log_step(step, loss, lr_t)  # a non-finite loss stops the run here
            if run.evaluation_due(step) and val_docs:
                run.log_validation(step, validation_loss(trainer, val_docs), len(val_docs))
            if run.save_due(step):
                run.save(step, trainer)
            if run.stop_signal:  # Ctrl-C, SIGTERM, SIGHUP or a closed stdout: the step is saved
                return run.stopped(step)
    print(f"saved {args.out} (step {args.steps}); log {run.log_path}")

    if args.num_samples != 0:
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
