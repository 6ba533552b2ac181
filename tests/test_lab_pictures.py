"""
A lab command's picture (`--png`, autograd's `--dot`) replaces only a picture of its kind
(microgpt/lab/pictures.py), never the learner's checkpoint, best file, log or data, and is
written whole.
"""

import hashlib
import os
import resource
import subprocess
import sys

import pytest

from helpers import REPO_DIR, assert_one_line, run_lab

pytestmark = pytest.mark.plot


def digest(path):
    with open(path, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.fixture
def copied(tiny_ckpt, tmp_path):
    """A copy of the tiny checkpoint with a log beside it: (checkpoint, log)."""
    ckpt, log = tmp_path / 'model.json', tmp_path / 'model.log.jsonl'
    ckpt.write_bytes(open(tiny_ckpt, 'rb').read())
    log.write_text('{"step": 1, "loss": 3.3, "lr": 0.01}\n{"step": 2, "loss": 3.1, "lr": 0.005}\n')
    return str(ckpt), str(log)


@pytest.fixture
def trained(tmp_path, names_file, capsys):
    """A trained run's files in tmp_path/w: its data, checkpoint, best file and log."""
    from microgpt.programs import train
    from helpers import run
    folder = tmp_path / 'w'
    folder.mkdir()
    data = folder / 'names.txt'
    data.write_bytes(open(names_file, 'rb').read())
    assert run(train.main, ['--data', str(data), '--out', str(folder / 'd.json'), '--steps', '4', '--eval-every', '2',
                            '--n-embd', '8', '--n-head', '2', '--block-size', '12', '--num-samples', '0'], capsys)[0] == 0
    return folder


@pytest.mark.parametrize('command', ['overview', 'loss'])
def test_a_picture_replaces_only_a_picture(trained, capsys, command):
    targets = ['d.json', 'd.best.json', 'd.log.jsonl', 'names.txt', 'notes.png']
    (trained / 'notes.png').write_text('my notes\n')
    for name in targets:
        (trained / f'link-{name}.png').symlink_to(trained / name)
    before = {name: digest(trained / name) for name in targets}
    reads = ['overview', '--ckpt', str(trained / 'd.json'), 'anna'] if command == 'overview' else \
            ['loss', str(trained / 'd.log.jsonl')]
    for target in targets + [f'link-{name}.png' for name in targets]:
        status, out, err = run_lab([*reads, '--png', str(trained / target)], capsys)
        assert_one_line(status, err, 'error: ')
        assert out == '' and {name: digest(trained / name) for name in targets} == before, target
        assert os.path.islink(trained / target) or not target.startswith('link-')  # still a link


def test_a_picture_replaces_a_picture(trained, capsys):
    picture = trained / 'old.png'
    assert run_lab(['overview', '--ckpt', str(trained / 'd.json'), 'anna', '--png', str(picture)], capsys)[0] == 0
    picture.write_bytes(picture.read_bytes()[:100])
    assert run_lab(['overview', '--ckpt', str(trained / 'd.json'), 'ann', '--png', str(picture)], capsys)[0] == 0
    assert len(picture.read_bytes()) > 100


def test_a_picture_that_cannot_be_written_whole_leaves_the_old_one(copied, tmp_path, capsys):
    """Under `ulimit -f` smaller than the new picture, the old PNG stays as it was (the bytes
    go to a temporary file, renamed over it only once whole)."""
    ckpt, _ = copied
    picture = tmp_path / 'old.png'
    assert run_lab(['overview', '--ckpt', ckpt, 'anna', '--png', str(picture)], capsys)[0] == 0
    old = picture.read_bytes()
    picture.write_bytes(old[:2000])  # an old picture smaller than the new one: the limit lets it be
    limit = 4096

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    p = subprocess.run([sys.executable, '-m', 'microgpt.lab', 'overview', '--ckpt', ckpt, 'anna', '--png',
                        str(picture)], cwd=REPO_DIR, capture_output=True, text=True, timeout=120,
                       preexec_fn=small_files)
    assert_one_line(p.returncode, p.stderr, 'error: --png: could not write')
    assert picture.read_bytes() == old[:2000]
    assert sorted(os.listdir(tmp_path)) == sorted(['model.json', 'model.log.jsonl', 'old.png'])


def test_a_dot_file_and_its_rendering_are_guarded_alike(copied, tmp_path, capsys):
    ckpt, _ = copied
    notes = tmp_path / 'graph.png'  # where Graphviz would render graph.dot
    notes.write_text('not a picture\n')
    status, _, err = run_lab(['autograd', 'a*b', 'a=2', 'b=3', '--dot', str(tmp_path / 'graph.dot')], capsys)
    assert_one_line(status, err, 'graph.png exists and is not a PNG picture')
    assert notes.read_text() == 'not a picture\n' and not (tmp_path / 'graph.dot').exists()


def test_one_character_of_running_text_is_an_overview_with_no_loss(text_ckpt, capsys):
    status, out, err = run_lab(['overview', '--ckpt', text_ckpt, 'T'], capsys)
    assert status == 0, err
    assert 'no position has its next character in the text' in out
