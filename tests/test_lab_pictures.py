"""
A lab command's picture (`--png FILE`, autograd's `--dot FILE`) is guarded like a checkpoint
(microgpt/lab/pictures.py): never a file the command reads, never an existing file that is not a
picture without --force, always written whole. And a running-text model's overview of a single
character, which has no next character to score, is a page, not a traceback.

Run: .venv/bin/python -m pytest -q tests/test_lab_pictures.py
"""

import hashlib
import os
import resource
import subprocess
import sys

import pytest

from conftest import REPO_DIR
from labserver import live_server, request
from test_lab_hostile import assert_one_line, run_lab

pytest.importorskip('matplotlib', reason="--png needs matplotlib: pip install -e '.[plot]'")


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


@pytest.mark.parametrize('target, words', [
    ('{ckpt}', 'is the checkpoint'),
    ('{log}', "is the checkpoint's log"),
    ('{link}', 'is the checkpoint'),
    ('{other}', 'exists and is not a PNG picture: it is not replaced'),
])
def test_a_picture_never_overwrites_what_the_command_reads_or_a_file_that_is_not_a_picture(
        copied, tmp_path, capsys, target, words):
    ckpt, log = copied
    link, other = tmp_path / 'link.png', tmp_path / 'notes.png'
    os.symlink(ckpt, link)
    other.write_text('my notes\n')
    before = {p: digest(p) for p in (ckpt, log, other)}
    path = target.format(ckpt=ckpt, log=log, link=link, other=other)
    status, out, err = run_lab(['overview', '--ckpt', ckpt, 'anna', '--png', path], capsys)
    assert_one_line(status, err, words)
    assert out == '' and {p: digest(p) for p in before} == before


def test_lab_loss_never_draws_over_the_log_it_reads(copied, capsys):
    _, log = copied
    before = digest(log)
    status, _, err = run_lab(['loss', log, '--png', log], capsys)
    assert_one_line(status, err, 'is the training log')
    assert digest(log) == before


def test_force_replaces_a_file_that_is_not_a_picture_but_never_the_checkpoint(copied, tmp_path, capsys):
    ckpt, _ = copied
    other = tmp_path / 'notes.png'
    other.write_text('my notes\n')
    status, _, err = run_lab(['overview', '--ckpt', ckpt, 'anna', '--png', str(other), '--force'], capsys)
    assert status == 0, err
    assert other.read_bytes().startswith(b'\x89PNG')
    status, _, err = run_lab(['overview', '--ckpt', ckpt, 'anna', '--png', ckpt, '--force'], capsys)
    assert_one_line(status, err, 'is the checkpoint')


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
    assert p.returncode == 2 and p.stderr.startswith('error: --png: could not write'), p.stderr
    assert 'Traceback' not in p.stderr and p.stderr.count('\n') == 1
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


def test_one_character_of_running_text_through_the_web_lab(text_ckpt, play_file, tmp_path):
    with live_server(text_ckpt, tmp_path / 'runs', play_file) as server:
        status, body, _ = request(server, 'POST', '/api/overview', {'text': 'T'})
        assert status == 200, body
        assert request(server, 'POST', '/api/overview', {'text': 'To'})[0] == 200
