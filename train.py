"""
Train a tiny GPT on names and save it as one self-sufficient checkpoint.

    python train.py                          # 1000 steps on the bundled census first names
    python train.py --data my_names.txt --steps 3000 --n-layer 2
    python train.py --resume                 # continue the run saved at --out, exactly

The recipe is microgpt's: one name per step, tokens [BOS] + name + [BOS], loss = mean
cross-entropy of each next token, backward through the scalar autograd engine, one Adam
update with a learning rate that decays linearly to 0. It prints the resolved configuration,
a live progress line, the validation loss every --eval-every steps, and finally a few sampled
names. Beside the checkpoint it writes a log of JSON lines (out/model.log.jsonl) that
`python -m microgpt.lab loss` plots.

Nothing is lost: the checkpoint is written atomically every --save-every steps and at the
end; Ctrl-C saves the last completed step and prints the command that resumes; a run whose
loss stops being finite stops without touching the last good checkpoint.
"""

import hashlib
import json
import math
import os
import shlex
import signal
import sys
import tempfile
import time

import numpy as np

import inference
from microgpt import cli
from microgpt.checkpoint import read_checkpoint, save_checkpoint
from microgpt.data import load_docs, split_docs
from microgpt.engine import NonFiniteError
from microgpt.errors import UserError
from microgpt.model import GPT, GPTConfig, parameter_shapes
from microgpt.optim import Adam
from microgpt.sampling import sample_names, scalar_next_logits
from microgpt.tokenizer import CharTokenizer
from microgpt.training import doc_tokens, learning_rate, train_step

# Settings a resumed run must share with the run it continues, with their defaults.
RUN_DEFAULTS = {'data': None, 'val_size': None, 'shuffle': True, 'seed': 42, 'lr': 0.01, 'steps': 1000}
MODEL_DEFAULTS = {'n_layer': 1, 'n_embd': 16, 'n_head': 4, 'block_size': 16}


def parse_args(argv=None):
    p = cli.ArgumentParser(description="Train a tiny GPT on names (one name per step).")
    g = p.add_argument_group('data')
    g.add_argument('--data', metavar='PATH',
                   help="UTF-8 text file, one name (document) per line "
                        "(default: the census first names bundled with the `names` package)")
    g.add_argument('--val-size', type=cli.nonnegative_int, metavar='N',
                   help="names held out for validation (default: 10%% of the data, at most 1000; 0 = none)")
    g.add_argument('--no-shuffle', dest='shuffle', action='store_false', default=None,
                   help="keep the file's order instead of shuffling with --seed")
    g = p.add_argument_group('model (ignored with --init and --resume, which use the checkpoint\'s)')
    g.add_argument('--n-layer', type=cli.positive_int, help="transformer blocks (default 1; 1-4 is sensible here)")
    g.add_argument('--n-embd', type=cli.positive_int, help="embedding width (default 16; must divide by --n-head)")
    g.add_argument('--n-head', type=cli.positive_int, help="attention heads per block (default 4)")
    g.add_argument('--block-size', type=cli.positive_int,
                   help="longest sequence in tokens (default 16; names longer than this are cut)")
    g.add_argument('--init', metavar='CKPT',
                   help="start from this checkpoint's weights, config and vocabulary, with a fresh optimizer")
    g = p.add_argument_group('optimization')
    g.add_argument('--steps', type=cli.positive_int, help="training steps, one name each (default 1000)")
    g.add_argument('--lr', type=cli.positive_float, help="peak Adam learning rate, decayed linearly to 0 (default 0.01)")
    g.add_argument('--seed', type=int, help="seed for the initial weights and the data order (default 42)")
    g = p.add_argument_group('output')
    g.add_argument('--out', default='out/model.json', metavar='PATH',
                   help="checkpoint file (default out/model.json); the log goes beside it as .log.jsonl")
    g.add_argument('--resume', action='store_true',
                   help="continue the run saved at --out: weights, Adam moments, step and data order")
    g.add_argument('--save-every', type=cli.nonnegative_int, default=100, metavar='N',
                   help="also save the checkpoint every N steps (default 100; 0 = only at the end)")
    g.add_argument('--eval-every', type=cli.nonnegative_int, default=200, metavar='N',
                   help="validation loss every N steps (default 200; 0 = only at the end)")
    g.add_argument('--num-samples', type=cli.nonnegative_int, default=10, metavar='N',
                   help="names to sample when training ends (default 10)")
    return p.parse_args(argv)


# ---------------------------------------------------------------------------- setting up
def resolve(args):
    """Fill every unset flag: from the checkpoint when resuming, from the defaults otherwise."""
    saved = {}
    if args.resume:
        if args.init:
            raise UserError("--resume and --init cannot be combined: --resume continues --out, "
                            "--init starts a new run from another checkpoint")
        ckpt = read_checkpoint(args.out)
        if not ckpt['train_state']:
            raise UserError(f"{args.out} has no training state to resume: start a new run "
                            f"with --init {args.out} instead")
        check_train_state(args.out, ckpt['train_state'], ckpt['config'])
        saved = ckpt['train_state']['run']
        for name in RUN_DEFAULTS:  # everything but --steps must match the run being resumed
            given = getattr(args, name)
            if name == 'data' and given is not None:
                given = os.path.abspath(given)  # the run saved its data path absolute
            if name != 'steps' and given is not None and given != saved[name]:
                raise UserError(f"--{name.replace('_', '-')} {getattr(args, name)} differs from the run being "
                                f"resumed ({saved[name]}): drop the flag to resume exactly")
    elif args.init:
        ckpt = read_checkpoint(args.init, n_head=args.n_head)  # n_head: for the tutorial's export
    else:
        ckpt = None
    for name, default in RUN_DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, saved.get(name, default))
    for name, default in MODEL_DEFAULTS.items():
        if ckpt is not None:
            given = getattr(args, name)
            if given is not None and given != getattr(ckpt['config'], name):
                raise UserError(f"--{name.replace('_', '-')} {given} contradicts the checkpoint's "
                                f"{name} {getattr(ckpt['config'], name)}: drop the flag")
            setattr(args, name, getattr(ckpt['config'], name))
        elif getattr(args, name) is None:
            setattr(args, name, default)
    return ckpt


def check_train_state(path, state, config):
    """--resume trusts the saved step, settings and Adam moments: check they are all there."""
    n_params = sum(n_out * n_in for n_out, n_in in parameter_shapes(config).values())
    adam = state.get('adam')
    ok = (isinstance(state.get('step'), int) and not isinstance(state['step'], bool) and state['step'] >= 0
          and isinstance(state.get('run'), dict) and all(name in state['run'] for name in RUN_DEFAULTS)
          and isinstance(state.get('data_sha256'), str)
          and isinstance(adam, dict) and isinstance(adam.get('t'), int)
          and all(isinstance(adam.get(k), list) and len(adam[k]) == n_params
                  and all(isinstance(x, float) and math.isfinite(x) for x in adam[k])
                  for k in ('m', 'v'))
          and min(adam['v'], default=0.0) >= 0)  # a mean of squares: negative would make sqrt complex
    if not ok:
        raise UserError(f"{path} has a damaged training state (step, run settings or Adam moments): "
                        f"it cannot be resumed; start a new run with --init {path}")


def check_writable(path):
    """Fail now, not after an hour of training, if the checkpoint cannot be written."""
    if os.path.isdir(path):
        raise UserError(f"--out {path} is a directory: give a file name such as {path}/model.json")
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix='.write-test-')
        os.close(fd)
        os.remove(probe)
    except OSError as e:
        raise UserError(f"cannot write the checkpoint to {path}: {e.strerror}: choose another --out") from None


def docs_fingerprint(docs):
    """A hash of the documents, so --resume can refuse data that changed under it."""
    return hashlib.sha256('\n'.join(docs).encode('utf-8')).hexdigest()


def log_path_for(out):
    """out/model.json -> out/model.log.jsonl"""
    stem = out[:-len('.json')] if out.endswith('.json') else out
    return stem + '.log.jsonl'


def open_log(path, resume_step):
    """The log file, opened for appending; a fresh run starts it empty, a resumed one keeps
    only the lines up to the resumed step (later ones were never saved in a checkpoint)."""
    kept = []
    if resume_step and os.path.exists(path):
        with open(path, encoding='utf-8') as f:
            for line in f:
                try:
                    if json.loads(line)['step'] <= resume_step:
                        kept.append(line)
                except (ValueError, KeyError, TypeError):
                    pass  # a line cut short by a crash: drop it
    with open(path, 'w', encoding='utf-8') as f:
        f.writelines(kept)
    return open(path, 'a', encoding='utf-8')


class Progress:
    """One self-overwriting status line on a terminal; a plain line now and then otherwise."""

    def __init__(self, total, start):
        self.total, self.start_step = total, start
        self.t0 = time.time()
        self.last = 0.0
        self.tty = sys.stdout.isatty()

    def update(self, step, loss, force=False):
        now = time.time()
        if not force and now - self.last < (0.1 if self.tty else 10.0):
            return
        self.last = now
        rate = (step - self.start_step) / max(now - self.t0, 1e-9)
        left = (self.total - step) / rate if rate > 0 else float('inf')
        line = (f"step {step:>{len(str(self.total))}}/{self.total} | loss {loss:.4f} | "
                f"{rate:.1f} steps/s | {left:.0f}s left")
        print(('\r' + line + ' ' * 4) if self.tty else line, end='' if self.tty else '\n', flush=True)

    def message(self, text):
        """Print a line without mangling the status line."""
        print(('\r' + ' ' * 70 + '\r' + text) if self.tty else text, flush=True)

    def error(self, text):
        """End the status line, then print `error: text` on stderr, where errors go."""
        if self.tty:
            print(flush=True)
        print(f"error: {text}", file=sys.stderr, flush=True)


def validation_loss(model, docs):
    """Mean loss per predicted token on the held-out names, computed by the numpy port.

    It is the number microgpt.training.evaluate gives with the scalar engine (the tests check
    that), found some 60x faster, because no graph is built. inf or nan means divergence.
    """
    port = inference.NumpyGPT.from_scalar(model)  # a float64 copy of the current weights
    try:
        # numpy would carry on past an overflow (rmsnorm of inf gives 0, and a plausible loss):
        # make it stop there, as the scalar engine does
        with np.errstate(over='raise', invalid='raise'):
            return inference.evaluate(port, docs)
    except FloatingPointError:
        return math.nan


# ---------------------------------------------------------------------------- the run
def main(argv=None):
    args = parse_args(argv)
    ckpt = resolve(args)
    check_writable(args.out)

    # Let there be data: the names, split once into training and validation names.
    docs = load_docs(args.data)
    train_docs, val_docs = split_docs(docs, args.val_size, seed=args.seed, shuffle=args.shuffle)
    if ckpt is None:
        tokenizer = CharTokenizer.from_docs(docs)
    else:
        tokenizer = CharTokenizer(ckpt['vocab'])
        for doc in docs:
            tokenizer.encode(doc)  # a character the checkpoint never saw is an error, now
    train_tokens = [doc_tokens(tokenizer, doc) for doc in train_docs]

    # Let there be a model: fresh, or the checkpoint's weights.
    config = GPTConfig(tokenizer.vocab_size, args.n_layer, args.n_embd, args.n_head, args.block_size)
    model = GPT(config, seed=args.seed, tokenizer=tokenizer)
    if ckpt is not None:
        model.load_weights(ckpt['state_dict'])
    optimizer = Adam(model.params)
    start = 0
    run_settings = {name: getattr(args, name) for name in RUN_DEFAULTS}
    if args.data is not None:
        run_settings['data'] = os.path.abspath(args.data)  # so --resume works from any folder
    fingerprint = docs_fingerprint(docs)
    if args.resume:
        state = ckpt['train_state']
        if state['data_sha256'] != fingerprint:
            raise UserError(f"the data ({args.data or 'bundled names'}) changed since {args.out} was "
                            "saved: resuming would train on a different order; start a new run")
        optimizer.load_state(state['adam'])
        start = state['step']
        if start >= args.steps:
            raise UserError(f"{args.out} is already trained for {start} steps: pass --steps "
                            f"greater than {start} to train further")

    val_size = len(val_docs)
    print(f"data: {args.data or 'bundled census first names'}: {len(docs)} names, "
          f"{len(train_docs)} train / {val_size} val, vocab {tokenizer.vocab_size} "
          f"({''.join(tokenizer.chars)!r} + BOS)")
    print(f"model: n_layer={config.n_layer} n_embd={config.n_embd} n_head={config.n_head} "
          f"head_dim={config.head_dim} block_size={config.block_size} params={len(model.params)}")
    print(f"training: steps={args.steps} lr={args.lr} seed={args.seed} shuffle={args.shuffle} "
          f"start_step={start} out={args.out} save_every={args.save_every} eval_every={args.eval_every}"
          + (f" init={args.init}" if args.init else ""))

    def train_state(step, val_loss):
        return {'step': step, 'run': run_settings, 'data_sha256': fingerprint,
                'adam': optimizer.state(), 'val_loss': val_loss}

    def save(step, val_loss=None):
        save_checkpoint(args.out, model, train_state(step, val_loss))

    # Ctrl-C only raises a flag; the loop checks it between steps, so the checkpoint always
    # holds a whole step. A second Ctrl-C quits at once (the last saved checkpoint stays whole).
    stop = []

    def on_interrupt(signum, frame):
        stop.append(True)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    previous_handler = signal.signal(signal.SIGINT, on_interrupt)

    log = open_log(log_path_for(args.out), start)
    progress = Progress(args.steps, start)
    val_loss = None
    try:
        for step in range(start + 1, args.steps + 1):  # step s is counted from 1
            lr_t = learning_rate(args.lr, step - 1, args.steps)
            tokens = train_tokens[(step - 1) % len(train_tokens)]
            try:
                loss = train_step(model, optimizer, tokens, lr_t)
            except NonFiniteError:
                loss = math.nan
            if not math.isfinite(loss):
                progress.error(f"the loss became non-finite at step {step} (training diverged): "
                               f"lower --lr (now {args.lr}); {args.out} was left as last saved")
                return 1
            log.write(json.dumps({'step': step, 'loss': loss, 'lr': lr_t}) + '\n')
            log.flush()
            progress.update(step, loss, force=step == args.steps)
            if step == args.steps or (args.eval_every and step % args.eval_every == 0):
                if val_docs:
                    val_loss = validation_loss(model, val_docs)
                    if not math.isfinite(val_loss):  # the step's loss was finite, the weights it left are not
                        progress.error(f"the validation loss became non-finite after step {step} "
                                       f"(training diverged): lower --lr (now {args.lr}); "
                                       f"{args.out} was left as last saved")
                        return 1
                    log.write(json.dumps({'step': step, 'val_loss': val_loss}) + '\n')
                    progress.message(f"step {step}: val loss {val_loss:.4f} "
                                     f"({val_size} held-out names)")
            if step == args.steps or stop or (args.save_every and step % args.save_every == 0):
                save(step, val_loss)
            if stop:
                progress.message(f"interrupted after step {step}; saved {args.out}. Resume with:\n"
                                 f"  python train.py --out {shlex.quote(args.out)} --resume")
                return 130
    finally:
        signal.signal(signal.SIGINT, previous_handler)
        log.close()
    print(f"saved {args.out} (step {args.steps}); log {log_path_for(args.out)}")

    if args.num_samples:
        print("samples:")
        names = sample_names(lambda: scalar_next_logits(model), tokenizer, config.block_size,
                             num=args.num_samples, temperature=0.5, seed=args.seed)
        for name in names:
            print(' ', name)
    return 0


if __name__ == '__main__':
    cli.run(main)
