"""
The modern rungs, measured: microgpt's architecture trained through train.py at the settings of
README's two recipes (MICROGPT in recipe.py and shakespeare.py: the recipes without their rungs,
names at the rate and batch that architecture trains best at), with each rung alone, and with the
rungs that helped together, side by side.

    python bench/modern.py                   # names, then tiny shakespeare (../shared/data/)
    python bench/modern.py --only names      # one of the two recipes
    python bench/modern.py --steps 1000      # a quick look: every run this many steps
    python bench/modern.py --combine rope,swiglu  # this combination last, not the ones that helped

Every run of a recipe takes the same steps, one run after another in a child train.py (without
this machine's OpenBLAS settings: common.child_env), so their seconds compare. Each line prints
the validation loss at the last step, the parameters and the whole run's seconds; the table
names the processor and the load average. docs/modern.md quotes it.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from common import REPO_DIR, child_env, load, processor, shared_data
import recipe
import shakespeare

from microgpt.edge.checkpoint import read_checkpoint
from microgpt.edge.limits import parameter_count
from microgpt.programs.runlog import log_path_for

# Each rung alone: its train.py flags. grouped-query attention at 2 kv heads of the recipes' 4.
RUNGS = {
    'rope': ['--rope'],
    'gelu': ['--mlp', 'gelu'],
    'swiglu': ['--mlp', 'swiglu'],
    'norm-gains': ['--norm-gains'],
    'qk-norm': ['--qk-norm'],
    'n-kv-head-2': ['--n-kv-head', '2'],
    'tied': ['--tie-embeddings'],
}
RECIPES = {  # name: (its data file, its flags with microgpt's architecture, its output file's suffix)
    'names': ('names.txt', recipe.recipe_flags(recipe.MICROGPT), '.json'),
    'shakespeare': ('tinyshakespeare.txt', shakespeare.recipe_flags(shakespeare.MICROGPT), '.safetensors'),
}


def train(data, flags, out, env):
    """One train.py run: (validation loss at its last step, parameters, seconds), or the line
    train.py refused or failed with."""
    start = time.perf_counter()
    run = subprocess.run([sys.executable, os.path.join(REPO_DIR, 'train.py'), '--data', data, *flags, '--out', out],
                         env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if run.returncode:
        return (run.stderr.strip().splitlines() or ['no message'])[-1]
    with open(log_path_for(out), encoding='utf-8') as f:
        val_loss = [json.loads(line)['val_loss'] for line in f if 'val_loss' in line][-1]
    return val_loss, parameter_count(read_checkpoint(out).config), seconds


def with_steps(flags, steps):
    """flags with --steps (and --save-every, --eval-every, which must not pass it) set to steps."""
    flags = list(flags)
    for name in ('--steps', '--save-every', '--eval-every'):
        if name in flags:
            i = flags.index(name) + 1
            flags[i] = str(steps if name == '--steps' else min(int(flags[i]), steps))
    return flags


def run_recipe(name, data, steps, combine, env, tmp):
    """Train recipe `name` plain, with each rung, then with `combine` (or the rungs that helped)."""
    file, flags, suffix = RECIPES[name]
    flags = with_steps(flags, steps) if steps else flags
    print(f"\n{name}: train.py --data {file} {' '.join(flags)} [+ the rung's flags]", flush=True)
    print(f"{'model':<40} {'val loss':>8} {'params':>8} {'seconds':>8}")
    results = {}

    def one(label, extra):
        out = os.path.join(tmp, f"{name}-{label.replace(' + ', '+')}{suffix}")
        result = train(data, flags + extra, out, env)
        if isinstance(result, str):
            print(f"{label:<40} failed: {result}", flush=True)
            return
        results[label] = loss, params, seconds = result
        print(f"{label:<40} {loss:8.4f} {params:8,} {seconds:8.1f}", flush=True)

    one('microgpt', [])
    for label, extra in RUNGS.items():
        one(label, extra)
    chosen = combine or [label for label in RUNGS if label in results and results[label][0] < results['microgpt'][0]]
    if {'gelu', 'swiglu'} <= set(chosen):  # one MLP or the other: the better of the two
        chosen.remove(max('gelu', 'swiglu', key=lambda label: results[label][0]))
    if len(chosen) > 1:
        one(' + '.join(chosen), [arg for label in chosen for arg in RUNGS[label]])
    return results


def main(argv=None):
    p = argparse.ArgumentParser(description="Train README's recipes with each modern rung, side by side.")
    p.add_argument('--only', choices=tuple(RECIPES), help="one recipe (default: both)")
    p.add_argument('--steps', type=int, help="every run this many steps (default: each recipe's own)")
    p.add_argument('--combine', help="rungs to combine last, by label, comma-separated (default: "
                                     "those that beat microgpt's architecture)")
    args = p.parse_args(argv)
    combine = args.combine.split(',') if args.combine else None
    if combine and not set(combine) <= set(RUNGS):
        p.error(f"--combine takes labels from: {', '.join(RUNGS)}")
    print(f"processor: {processor()}; load average {load()} (2 cores)")
    env = child_env()
    with tempfile.TemporaryDirectory() as tmp:
        for name in [args.only] if args.only else RECIPES:
            data = shared_data(RECIPES[name][0])
            if not data:
                print(f"\n{name}: {RECIPES[name][0]} not found (../shared/data/): skipped")
                continue
            run_recipe(name, data, args.steps, combine, env, tmp)
    print(f"\nload average after {load()}")
    return 0


if __name__ == '__main__':
    sys.exit(main())
