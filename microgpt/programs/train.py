"""
Train a tiny GPT on names (or any text) and save it as one self-sufficient checkpoint.

    python train.py                          # 1000 steps on the bundled census first names
    python train.py --engine numpy --batch-size 32 ...   # the hand-derived numpy path, batched
    python train.py --data-mode text --data input.txt --engine numpy --dtype float32 ...
    torchrun --nproc_per_node 2 train.py --engine torch --batch-size 8 ...   # data-parallel
    python train.py --resume                 # continue the run saved at --out, exactly

The recipe is microgpt's: one name per step, the mean cross-entropy of each next token, one
Adam update with a learning rate that decays linearly to 0. main() reads as the run's stages;
the loop is the same whichever engine computes a step; what makes a run safe to stop and
resume is run.py's.
"""

import functools
import gc
import itertools
import math
from contextlib import contextmanager
from functools import partial
from typing import NamedTuple

from ..edge import text
from ..edge.checks import RUNGS, encode, make_config
from ..edge.data import fingerprint, load_docs, split_docs
from ..edge.errors import OVERFLOWS, UserError
from ..edge.limits import MAX_BLOCK_SIZE, parameter_count
from ..engine import Tape, zero_grad
from ..model import GPT, init_weights
from ..optim import Adam
from ..sampling import TEMPERATURE, iter_names
from ..bpe import BPETokenizer
from ..bpe_fast import FastBPETokenizer
from ..tokenizer import CharTokenizer
from ..training import batch_loss, doc_tokens, evaluate, learning_rate, num_predictions
from . import cli, original, sample
from .run import Output, Run, resume_notes
from .taps import dropout_batch_loss
from .settings import TEXT_SAMPLE_LENGTH, parse_args, resolve_settings


def main(argv=None):
    flags, given = parse_args(argv, prog=cli.program_name('train.py'))
    protected = (flags.data, 'the data file'), (flags.init, 'the checkpoint --init starts from')
    with Output(flags.out, not flags.resume, flags.force, protected) as output:  # 1. lock --out, then read it
        ckpt = output.read(flags, given)
        settings = resolve_settings(flags, given, ckpt, output.rank_world)  # 2. settle: one frozen record of the run
        try:
            built = build(settings, ckpt)              # 3. build: data, first weights, engine
            with Run(settings, output, built, ckpt) as run:
                for line in report(settings, built) + resume_notes(settings, ckpt):
                    run.say(line)
                status = loop(settings, built, run)    # 4. loop
        except MemoryError:  # a step's arrays (or its graph of Values) larger than this machine holds
            raise UserError("this run's training step does not fit in this machine's memory: lower "
                            "--batch-size or --block-size, or train a smaller model") from None
    if status == 0:
        closing_samples(settings, built)               # 5. sample
    return status


# ---------------------------------------------------------------------------- 3. build
class Built(NamedTuple):
    data: object          # Names or RunningText: batches, validation, what to print
    trainer: object       # ScalarTrainer, backprop.Trainer or torchgpt.Trainer
    start: int            # steps already done (--resume), else 0
    threads: str          # the numpy engine's BLAS threads, as chosen or to be timed (None for the others)
    recipe: object        # --reproduce-original's generator, which samples after training
    dropout: object       # --dropout: (step, names) -> that step's masks (backprop/dropout.py); else None


def build(settings, ckpt):
    """The data, the model's first weights, and the engine that trains them."""
    data = (RunningText if settings.data_mode == 'text' else Names)(settings, ckpt)
    config = make_config(vocab_size=data.tokenizer.vocab_size, n_layer=settings.n_layer, n_embd=settings.n_embd,
                         n_head=settings.n_head, block_size=settings.block_size,
                         **{name: getattr(settings, name) for name in RUNGS})  # the rungs (off: microgpt's)
    # --reproduce-original: its weights, and its samples after training, come from the one
    # generator that shuffled its data (resumed too: the samples need the generator's state)
    recipe = original.prepare(data.docs) if settings.reproduce_original else None
    if ckpt is not None:
        weights = ckpt.weights
    elif recipe is not None:
        weights = recipe.weights
    else:
        weights = init_weights(config, seed=settings.seed)  # GPT's numbers, without its Values
    trainer = make_trainer(settings, config, weights, data.tokenizer)
    start = 0
    if settings.resume:
        trainer.load_optimizer_state(ckpt.optimizer)
        start = ckpt.train_state.step
    if settings.world_size is not None:  # torchrun: every rank trains what rank 0 trains, or none starts
        trainer.check_ranks_agree(settings.saved(), data.fingerprint)
    threads = None
    if settings.engine == 'numpy':  # BLAS threads: the user's, or the fastest way, timed on the first steps
        from microgpt.backprop.threads import choose_threads
        trainer, threads = choose_threads(trainer, settings.batch_size, settings.threads)
    dropout = None
    if settings.dropout:  # every engine takes the same masks, drawn from --seed and the step alone
        masks = cli.import_optional('microgpt.backprop.dropout', "--dropout")
        dropout = functools.partial(masks.draw, settings.dropout, settings.seed, config=config)
    return Built(data, trainer, start, threads, recipe, dropout)


def report(settings, built):  # the resolved configuration
    c = built.trainer.config
    rungs = ''.join(f" {name}={value}" for name, value in c.to_dict().items() if name in RUNGS)  # those on
    return [built.data.describe(),
            f"model: n_layer={c.n_layer} n_embd={c.n_embd} n_head={c.n_head} head_dim={c.head_dim} "
            f"block_size={c.block_size}{rungs} params={parameter_count(c)}",
            settings.describe(built.start, built.threads)]


class ScalarTrainer:
    """The Value engine behind the loop: a GPT of Values and its Adam, with the interface of
    the numpy and torch engines (backprop.Trainer, torchgpt.Trainer), so the loop does not care
    which one it drives."""
    dtype, world = 'float64', None

    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer
        self.config, self.tokenizer = model.config, model.tokenizer

    def notice(self):
        return None

    def step(self, batch, lr, masks=None):
        """One update on a batch of tokenized names, or nan and no weight changed where the run
        diverged. masks: the batch's dropout masks (backprop's dropout.Masks)."""
        dropout = masks and [masks.positions(b, num_predictions(tokens, self.config.block_size))
                             for b, tokens in enumerate(batch)]
        params = self.optimizer.params
        with collector_paused():
            try:
                with Tape() as tape:  # records the graph as it is built: backward needs no search
                    loss = dropout_batch_loss(self.model, batch, dropout) if dropout else batch_loss(self.model, batch)
            except OverflowError:  # raised in the forward pass, before any weight changed
                return math.nan
            loss.backward(tape)
            # one check for the step, as the numpy engine's: a diverged run's inf or nan in the
            # loss or in any gradient shows in their sum
            if not math.isfinite(loss.data + sum(p.grad for p in params)):
                zero_grad(params)
                return math.nan
            self.optimizer.step(lr)
        return loss.data

    def weights(self):
        return self.model.weights()

    def optimizer_state(self):
        return self.optimizer.state()

    def load_optimizer_state(self, state):
        self.optimizer.load_state(state)


@contextmanager
def collector_paused():
    """Python's cycle collector off for a step, then as it was. A graph holds no reference
    cycles (children never point back to parents), so reference counting frees it as soon as the
    next step drops it; the collector would only search the fresh objects in vain (3,419 Values
    for a 7-letter name at the default config: `python bench/train_speed.py --nodes`)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def make_trainer(settings, config, weights, tokenizer):
    if settings.engine == 'torch':
        torchgpt = cli.import_optional('microgpt.torchgpt', "--engine torch", "torch", "or use --engine numpy")
        return torchgpt.make_trainer(config, weights, tokenizer, settings.device, settings.dtype,
                                     settings.world_size, settings.batch_size, settings.weight_decay)
    if settings.engine == 'numpy':
        backprop = cli.import_optional('microgpt.backprop', "--engine numpy")
        return backprop.Trainer(config, weights, tokenizer, dtype=settings.dtype, weight_decay=settings.weight_decay)
    model = GPT.from_weights(config, weights, tokenizer, fused=not settings.unfused)  # fused: the fast blocks
    return ScalarTrainer(model, Adam(model.params, weight_decay=settings.weight_decay))


# ---------------------------------------------------------------------------- the data
class Names:
    """The lines mode: one document per line, shuffled, the last --val-size held out."""

    def __init__(self, settings, ckpt):
        docs = load_docs(settings.data)
        val_size = settings.val_size
        if isinstance(val_size, float):  # a fraction of the names
            val_size = int(len(docs) * val_size)
        self.train_docs, self.val_docs = split_docs(docs, val_size, seed=settings.seed, shuffle=settings.shuffle)
        self.docs, self.settings = docs, settings
        self.fingerprint, self.tokenizer = _vocabulary(settings, ckpt, docs, self.train_docs)
        self.train_tokens = [doc_tokens(self.tokenizer, doc) for doc in self.train_docs]
        # the training loss at an evaluation is measured on the first training names that hold
        # as many tokens as the held-out ones: the same measurement, on data the model has seen
        val_tokens = sum(len(self.tokenizer.encode(doc)) + 1 for doc in self.val_docs)
        self.train_sample, tokens = [], 0
        for doc, ids in zip(self.train_docs, self.train_tokens):
            if tokens >= val_tokens:
                break
            self.train_sample.append(doc)
            tokens += len(ids) - 1
        block = settings.block_size  # each name's predicted tokens: the first num_predictions after BOS
        self.bits_per_nat = [bits_per_nat(self.tokenizer, [t[1:1 + num_predictions(t, block)] for t in
                                                           map(partial(doc_tokens, self.tokenizer), part)])
                             for part in (self.val_docs, self.train_sample)]
        if settings.batch_size > len(self.train_tokens):
            raise UserError(f"--batch-size {settings.batch_size} is larger than the {len(self.train_tokens)} "
                            f"training names: use at most {len(self.train_tokens)}")
        self.held_out = f"{len(self.val_docs)} held-out names"

    def describe(self):
        note = long_docs_note(self.docs, self.settings.block_size)
        return (f"data: {self.settings.data or 'bundled census first names'}: {len(self.docs)} names, "
                f"{len(self.train_docs)} train / {len(self.val_docs)} val, vocab {self.tokenizer.vocab_size} "
                f"({vocabulary(self.tokenizer)})" + (f"\n{note}" if note else ""))

    def batch(self, step):
        return batch_at(self.train_tokens, step, self.settings.batch_size)

    def losses(self, trainer):
        """(validation loss, training loss on as many tokens), or None without held-out names."""
        if not self.val_docs:
            return None
        return validation_losses(trainer, [self.val_docs, self.train_sample])


def batch_at(train_tokens, step, batch_size):  # step s counts from 1; the names wrap around
    start = (step - 1) * batch_size
    return [train_tokens[(start + b) % len(train_tokens)] for b in range(batch_size)]


def long_docs_note(docs, block_size):  # said once at start, None if no document is cut
    cut = [doc for doc in docs if len(doc) + 1 > block_size]  # BOS + doc predicts len + 1 tokens
    if not cut:
        return None
    return (f"note: {len(cut)} of {len(docs)} documents (the longest {max(map(len, cut))} characters) are "
            f"longer than the block of {block_size} positions: only their first {block_size} characters "
            f"are trained on, the rest is cut. Fix: a larger --block-size (up to {MAX_BLOCK_SIZE}), or "
            "--data-mode text for running text")


class RunningText:
    """The text mode: the file as one stream, random windows to train, the end to validate."""

    def __init__(self, settings, ckpt):
        whole = text.load_text(settings.data)
        train_text, val_text = text.split_text(whole, settings.val_size, settings.block_size)
        self.docs, self.settings = [whole], settings
        self.fingerprint, self.tokenizer = _vocabulary(settings, ckpt, self.docs, [train_text])
        # each part encoded alone (a byte pair never spans the cut); with characters, the same
        # ids as the whole text's
        self.train_ids, val_ids = self.tokenizer.encode(train_text), self.tokenizer.encode(val_text)
        text.check_windows(len(self.train_ids), len(val_ids), settings.block_size)
        self.val_windows = text.validation_windows(self.train_ids + val_ids, len(val_ids), settings.block_size)
        # the training loss at an evaluation: as many tokens of the training part, in
        # windows spread evenly over it (the same ones each time, so that the curve is smooth)
        self.train_sample = text.spread_windows(self.train_ids, len(val_ids), settings.block_size)
        self.bits_per_nat = [bits_per_nat(self.tokenizer, [w[1:] for w in part])
                             for part in (self.val_windows, self.train_sample)]
        self.n_chars, self.n_val = len(whole), len(val_text)
        self.held_out = f"{self.n_val:,} held-out characters"

    def describe(self):
        return (f"data: {self.settings.data}: running text, {self.n_chars:,} characters, "
                f"{self.n_chars - self.n_val:,} train / {self.n_val:,} val (the last), "
                f"vocab {self.tokenizer.vocab_size} ({vocabulary(self.tokenizer)})")

    def batch(self, step):
        s = self.settings
        return text.train_windows(self.train_ids, s.block_size, s.batch_size, s.seed, step)

    def losses(self, trainer):
        """(validation loss, training loss on as many characters), or None without a validation part."""
        if not self.val_windows:
            return None
        return validation_losses(trainer, [self.val_windows, self.train_sample], windows=True,
                                 threads=self.settings.threads)


def bits_per_nat(tokenizer, predicted):
    """What turns a mean loss over the `predicted` token lists (nats per token) into bits per
    character: tokens / characters / ln 2, so that models of one text with different tokenizers
    compare. The characters are those the predicted tokens cover, each counted once, at the token
    that holds its first byte (a byte pair may hold half of one), and BOS, the end of a name that
    the model predicts as it predicts a letter, counts as one character: for the character
    tokenizer the factor is exactly 1 / ln 2."""
    if isinstance(tokenizer, BPETokenizer):  # a UTF-8 byte 10xxxxxx continues a character
        per_token = [sum(b & 0xC0 != 0x80 for b in t) for t in tokenizer.vocab] + [1]
    else:
        per_token = [1] * tokenizer.vocab_size
    tokens = sum(map(len, predicted))
    chars = sum(per_token[i] for ids in predicted for i in ids)
    return tokens / max(chars, 1) / math.log(2)


def vocabulary(tokenizer):  # in a few words: the characters, or the first merges
    if isinstance(tokenizer, BPETokenizer):
        first = ', '.join(repr(t) for t in tokenizer.chars[256:261])
        return f"256 bytes + {len(tokenizer.merges)} merges ({first}{', ...' * (len(tokenizer.merges) > 5)}) + BOS"
    chars = ''.join(tokenizer.chars)
    return f"{chars[:40]!r}{'...' if len(chars) > 40 else ''} + BOS"


def _vocabulary(settings, ckpt, docs, train_docs):
    """(the data's fingerprint, the tokenizer): the data's characters, the byte-pair merges of
    its training part, or the checkpoint's, which must cover the data."""
    digest = fingerprint(docs)
    if settings.resume and ckpt.train_state.data_sha256 != digest:
        raise UserError(f"the data ({settings.data or 'bundled names'}) changed since {settings.out} was "
                        "saved: resuming would train on a different order; start a new run")
    if ckpt is None and settings.tokenizer == 'bpe':
        return digest, FastBPETokenizer.from_docs(train_docs, settings.vocab_size)
    if ckpt is None:
        return digest, CharTokenizer.from_docs(docs)
    tokenizer = ckpt.tokenizer
    for doc in docs:
        encode(tokenizer, doc)  # a character the checkpoint never saw is an error, now
    return digest, tokenizer


def validation_losses(trainer, parts, windows=False, threads=None):
    """Mean loss per predicted token on each of parts (lists of names, or with windows=True of
    running-text windows): the number the scalar engine gives, computed by the numpy port (or,
    without numpy, the scalar engine). inf or nan means divergence. threads: --threads."""
    try:
        from microgpt import inference
    except ImportError:
        return [_loss(text.evaluate if windows else evaluate, trainer.model, part) for part in parts]
    dtype = 'float32' if str(trainer.dtype) == 'float32' else 'float64'  # bfloat16: float64
    port = inference.NumpyGPT(trainer.config, trainer.weights(), tokenizer=trainer.tokenizer, dtype=dtype)
    if not windows:
        return [_loss(inference.evaluate, port, part) for part in parts]
    from microgpt.backprop.threads import blas_threads, cores, user_threads
    workers = user_threads(threads)[0] or cores()  # a batch of windows on each core, one BLAS thread each
    with blas_threads(1):
        return [_loss(inference.evaluate_windows, port, part, workers=workers) for part in parts]


def _loss(evaluate_with, model, part, **options):
    try:
        return evaluate_with(model, part, **options)
    except OVERFLOWS:  # the port, or the scalar engine, stopped at its first overflow
        return math.nan


# ---------------------------------------------------------------------------- 4. loop
def loop(settings, built, run):
    """Train from the step after built.start to settings.steps; 0, or 128 + a signal's number."""
    data, trainer = built.data, built.trainer
    for step in range(built.start + 1, settings.steps + 1):  # step s is counted from 1
        lr_t = learning_rate(settings.lr, step - 1, settings.steps)
        batch = data.batch(step)
        masks = built.dropout and built.dropout(step, len(batch))  # None without --dropout
        loss = trainer.step(batch, lr_t, masks)
        run.log_step(step, loss, lr_t)  # a non-finite loss stops the run here
        notice = trainer.notice()  # e.g. the numpy engine's threads, once timed on the first steps
        if notice:
            run.say(notice)
        if run.evaluation_due(step):
            losses = data.losses(trainer)
            if losses is not None:
                bits = [loss * factor for loss, factor in zip(losses, data.bits_per_nat)]
                run.log_validation(step, *losses, data.held_out, bits)  # validation, then training
                run.keep_if_best(step, trainer)
        if run.save_due(step):
            run.save(step, trainer)
        if run.stop_signal:  # Ctrl-C, SIGTERM, SIGHUP or a closed stdout: the step is saved
            return run.stopped(step)
    print(f"saved {settings.out} (step {settings.steps}); log {run.output.log_path}")
    if run.best_line():
        print(run.best_line())
    return 0


# ---------------------------------------------------------------------------- 5. sample
def closing_samples(settings, built):
    """A few names at microgpt's temperature (the original's 20, from its own generator), or a few
    lines of running text, by the fastest engine that gives the same text."""
    if settings.num_samples == 0:
        return
    trainer = built.trainer
    model = sample.model_for(trainer.config, trainer.weights(), trainer.tokenizer)
    if settings.data_mode == 'text':
        print("sample:")
        sample.stream_text(model, length=TEXT_SAMPLE_LENGTH, seed=settings.seed)
        return
    print("samples:")
    if built.recipe is not None:  # drawn from the original's generator, where training left it
        names = itertools.islice(original.sample_original(model, built.recipe.rng), settings.num_samples)
    else:
        names = iter_names(model, num=settings.num_samples, temperature=TEMPERATURE, seed=settings.seed)
    for name in names:
        print(' ', name, flush=True)


def command():  # microgpt-train, python -m microgpt.train and train.py
    cli.run(main)


if __name__ == '__main__':
    command()
