"""
A refused run touches nothing: every check that can refuse a train.py command runs before
anything at --out changes, so a trained checkpoint and its log stay byte for byte as they were.

The log beside --out is the run's history (the Loss page, `lab loss` and a learner's comparison
of runs read it); it is trimmed only once the run is settled, built and about to take its first
step (run.Output.begin). Here a trained --out meets each kind of refusal, and the hashes of both
files are compared; then the edges of that promise: a log that is a link to the checkpoint, a
trim under `ulimit -f`, a signal during start-up.

Run: .venv/bin/python -m pytest -q tests/test_refusals.py
"""

import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO_DIR, TINY_NAMES
from microgpt.programs import cli, train
from microgpt.programs.run import Output
from microgpt.programs.runlog import log_path_for

TINY = ['--n-embd', '8', '--n-head', '2', '--block-size', '12', '--num-samples', '0', '--eval-every', '0']
STEPS = 30


def digest(path):
    with open(path, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()


def run(argv, capsys):
    with pytest.raises(SystemExit) as e:
        cli.run(train.main, argv)
    out, err = capsys.readouterr()
    return e.value.code, out, err


@pytest.fixture
def trained(tmp_path, capsys):
    """(names file, --out) of a trained run of STEPS steps: a checkpoint and a log of STEPS + 1 lines."""
    names = tmp_path / 'names.txt'
    names.write_text('\n'.join(TINY_NAMES) + '\n', encoding='utf-8')
    out = tmp_path / 'm.json'
    code, _, err = run(['--data', str(names), '--out', str(out), '--steps', str(STEPS), *TINY], capsys)
    assert code == 0, err
    assert len(open(log_path_for(str(out))).read().splitlines()) == STEPS + 1  # the steps and the final validation
    return str(names), str(out)


# Each refusal of a command on a trained --out, and a fragment of its one line.
REFUSED = {
    'device-for-another-engine': (['--force', '--device', 'cuda'], '--device cuda is for --engine torch'),
    'dtype-for-another-engine': (['--force', '--dtype', 'float32'], '--dtype float32 is for the'),
    'resume-and-init-the-same-file': (['--resume', '--init', '{out}'], 'would overwrite the checkpoint --init starts from'),
    'resume-and-init': (['--resume', '--init', '{out}.copy'], '--resume and --init cannot be combined'),
    'resume-and-force': (['--resume', '--force'], '--resume and --force cannot be combined'),
    'resume-with-another-lr': (['--resume', '--steps', '40', '--lr', '0.5'], 'differs from the run being resumed'),
    'resume-with-fewer-steps': (['--resume', '--steps', '10'], f'is already trained for {STEPS} steps'),
    'missing-data-file': (['--force', '--data', '{missing}'], 'missing'),
    'resume-with-other-data': (['--resume', '--steps', '40', '--data', '{other}'], 'the data'),
    'step-too-large-for-memory': (['--force', '--batch-size', '4'], 'more than the'),
    'fresh-run-without-force': ([], 'already holds a trained model'),
}


@pytest.mark.parametrize('name', REFUSED)
def test_a_refused_command_leaves_the_checkpoint_and_its_log_byte_for_byte(trained, tmp_path, capsys,
                                                                           monkeypatch, name):
    names, out = trained
    log = log_path_for(out)
    before = digest(out), digest(log)
    other = tmp_path / 'other.txt'
    other.write_text('anna\nbob\ncarl\ndora\n', encoding='utf-8')
    extra, fragment = REFUSED[name]
    extra = [a.format(out=out, missing=str(tmp_path / 'missing.txt'), other=other) for a in extra]
    if name == 'resume-and-init':
        shutil.copy(out, out + '.copy')
    if name == 'step-too-large-for-memory':  # a machine with 1 MiB free: no step fits
        monkeypatch.setattr(train, 'available_memory', lambda: 1 << 20)
    argv = ['--out', out, '--steps', str(STEPS), *TINY] + (['--data', names] if '--data' not in extra else [])
    code, _, err = run(argv + extra, capsys)
    assert code == 2 and err.startswith('error: ') and err.count('\n') == 1, err
    assert fragment in err, err
    assert (digest(out), digest(log)) == before
    assert not [f for f in os.listdir(tmp_path) if f.endswith('.tmp')]


def test_a_log_that_is_a_link_to_the_checkpoint_is_refused_before_either_is_touched(trained, capsys):
    names, out = trained
    log = log_path_for(out)
    os.remove(log)
    os.symlink(os.path.basename(out), log)  # m.log.jsonl -> m.json
    before = digest(out)
    code, _, err = run(['--data', names, '--out', out, '--steps', '40', '--resume', *TINY], capsys)
    assert code == 2 and 'leads to the checkpoint' in err and err.count('\n') == 1, err
    assert digest(out) == before


def test_a_resumed_run_trims_its_log_by_cutting_it_short_so_a_file_size_limit_cannot_garble_it(trained):
    """The log holds steps past the checkpoint's (a run killed between saves); resumed under
    `ulimit -f` smaller than the log, the trim still leaves exactly the saved steps' lines (it
    only truncates), and the first new line, which cannot be written, is a one-line error."""
    names, out = trained
    log = log_path_for(out)
    with open(log, 'rb') as f:
        saved = f.read()
    with open(log, 'a', encoding='utf-8') as f:  # steps the checkpoint never held
        for step in range(STEPS + 1, STEPS + 11):
            f.write(json.dumps({'step': step, 'loss': 2.0, 'lr': 0.001}) + '\n')
    limit = len(saved) // 2

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    p = subprocess.run([sys.executable, 'train.py', '--data', names, '--out', out, '--resume', '--steps', '40',
                        *TINY], cwd=REPO_DIR, capture_output=True, text=True, timeout=60, preexec_fn=small_files)
    assert p.returncode == 2 and 'could not write the log' in p.stderr, p.stderr
    assert 'Traceback' not in p.stderr
    with open(log, 'rb') as f:
        assert f.read() == saved


def test_a_stop_signal_during_start_up_leaves_no_empty_log(tmp_path, capsys):
    """SIGTERM after --out is locked but before the run's own handlers are set: the program ends
    through its `with` blocks (status 143), and the log it made and never wrote is removed."""
    out = tmp_path / 'fresh.json'

    def main(argv):
        flags = type('Flags', (), {'out': str(out), 'resume': False, 'force': False, 'data': None, 'init': None})
        with Output.of_run(flags):
            assert os.path.exists(log_path_for(str(out)))
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises here
        return 0

    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        with pytest.raises(SystemExit) as e:
            cli.run(main, [])
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)
    assert e.value.code == 128 + signal.SIGTERM
    assert not os.path.exists(log_path_for(str(out)))


def catches_sigint(pid):
    """Whether the process has a handler of its own for SIGINT (Linux: /proc/PID/status), or
    None once it has ended."""
    try:
        with open(f'/proc/{pid}/status', encoding='ascii') as f:
            caught = next(line for line in f if line.startswith('SigCgt:')).split()[1]
    except (OSError, StopIteration):
        return None
    return bool(int(caught, 16) & (1 << (signal.SIGINT - 1)))


@pytest.mark.skipif(not os.path.isdir('/proc/self'), reason='needs /proc to see when train.py starts')
@pytest.mark.parametrize('delay', [0.0, 0.03, 0.1])
def test_ctrl_c_while_train_py_imports_ends_without_a_traceback(tmp_path, delay):
    # Python's own start-up (its site module) is not the program's to guard: the Ctrl-C comes
    # once train.py's first line has run (Python's handler gone again), `delay` into its imports
    p = subprocess.Popen([sys.executable, 'train.py', '--out', str(tmp_path / 'm.json'), *TINY], cwd=REPO_DIR,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    give_up = time.monotonic() + 30
    while catches_sigint(p.pid) is not True and p.poll() is None and time.monotonic() < give_up:
        time.sleep(0.001)  # Python starting: its default_int_handler not yet installed
    while catches_sigint(p.pid) and p.poll() is None and time.monotonic() < give_up:
        time.sleep(0.001)  # Python's site module and train.py's first line
    time.sleep(delay)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert 'Traceback' not in err, err
    assert p.returncode in (-signal.SIGINT, 130), (p.returncode, err)


def test_a_refused_run_leaves_no_folder_it_made_for_its_out(tmp_path, capsys):
    out = tmp_path / 'new' / 'deeper' / 'm.json'
    code, _, err = run(['--out', str(out), '--device', 'cuda', *TINY], capsys)
    assert code == 2 and '--device cuda is for --engine torch' in err, err
    assert os.listdir(tmp_path) == []
