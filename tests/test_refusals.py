"""
A refused run touches nothing: every check that can refuse a train.py command runs before
anything at --out changes (the log is trimmed only once the run is about to take its first step,
run.Output.begin). A trained --out meets each kind of refusal, and both files are compared
byte for byte.
"""

import functools
import os
import pathlib
import shutil

import pytest

import helpers
from helpers import QUIET, TINY_NAMES
from microgpt.programs import train
from microgpt.programs.runlog import log_path_for

TINY = helpers.TINY + QUIET
STEPS = 30


run = functools.partial(helpers.run, train.main)  # run(argv, capsys): train.py's (status, stdout, stderr)


def files(*paths):
    return [pathlib.Path(p).read_bytes() for p in paths]


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
    """(names file, --out) of a trained run of STEPS steps: a checkpoint and a log of STEPS + 1
    lines, which every refusal below leaves as it is."""
    folder = tmp_path_factory.mktemp('trained')
    names = folder / 'names.txt'
    names.write_text('\n'.join(TINY_NAMES) + '\n', encoding='utf-8')
    out = folder / 'm.json'
    assert train.main(['--data', str(names), '--out', str(out), '--steps', str(STEPS), *TINY]) == 0
    assert len(open(log_path_for(str(out))).read().splitlines()) == STEPS + 1  # the steps and the final validation
    return str(names), str(out)


# Each refusal of a command on a trained --out, and a fragment of its one line.
REFUSED = {
    'device-for-another-engine': (['--force', '--device', 'cuda'], '--device cuda is for --engine torch'),
    'dtype-for-another-engine': (['--force', '--dtype', 'float32'], '--dtype float32 is for the numpy and torch engines'),
    'dtype-for-torch-alone': (['--force', '--engine', 'numpy', '--dtype', 'bfloat16'], '--dtype bfloat16 is for the torch engine'),
    'resume-and-init-the-same-file': (['--resume', '--init', '{out}'], 'would overwrite the checkpoint --init starts from'),
    'resume-and-init': (['--resume', '--init', '{out}.copy'], '--resume and --init cannot be combined'),
    'resume-and-force': (['--resume', '--force'], '--resume and --force cannot be combined'),
    'resume-with-another-lr': (['--resume', '--steps', '40', '--lr', '0.5'],
                               '--lr 0.5 differs from the run being resumed (0.01): drop the flag'),
    'resume-without-shuffle': (['--resume', '--steps', '40', '--no-shuffle'],
                               '--no-shuffle differs from the run being resumed (which shuffled)'),
    'resume-with-another-model': (['--resume', '--steps', '40', '--n-embd', '16'],
                                  "--n-embd 16 contradicts the checkpoint's n_embd 8"),
    'resume-with-fewer-steps': (['--resume', '--steps', '10'], f'is already trained for {STEPS} steps'),
    'resume-without-more-steps': (['--resume'], f'already trained for {STEPS} steps: pass --steps greater than {STEPS}'),
    'missing-data-file': (['--force', '--data', '{missing}'], 'missing'),
    'resume-with-other-data': (['--resume', '--steps', '40', '--data', '{other}'], 'changed since'),
    'fresh-run-without-force': ([], 'already holds a trained model: continue it with --resume, write this run '
                                    'elsewhere with another --out, or replace it with --force'),
    'init-from-itself-by-another-name': (['--force', '--init', '{dotted}'], 'would overwrite the checkpoint --init'),
}


@pytest.mark.parametrize('name', REFUSED)
def test_a_refused_command_leaves_the_checkpoint_and_its_log_byte_for_byte(trained, tmp_path, capsys, name):
    names, out = trained
    log = log_path_for(out)
    before = files(out, log)
    other = tmp_path / 'other.txt'
    other.write_text('anna\nbob\ncarl\nZoë\n', encoding='utf-8')  # new characters: the data changed, said first
    extra, fragment = REFUSED[name]
    extra = [a.format(out=out, missing=str(tmp_path / 'missing.txt'), other=other,
                      dotted=os.path.join(os.path.dirname(out), '.', 'm.json')) for a in extra]
    if name == 'resume-and-init':
        shutil.copy(out, out + '.copy')
    argv = ['--out', out, '--steps', str(STEPS), *TINY] + (['--data', names] if '--data' not in extra else [])
    code, _, err = run(argv + extra, capsys)
    assert code == 2 and err.startswith('error: ') and err.count('\n') == 1, err
    assert fragment in err, err
    assert files(out, log) == before
    assert not [f for f in os.listdir(os.path.dirname(out)) if f.endswith('.tmp')]
