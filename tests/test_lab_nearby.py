"""
The checkpoints the web lab finds beside the one it was started on (train.py's, with a log
beside them) and their labels; a request still names an id, never a file. Against a live server.
"""

import os
import shutil

import pytest

from helpers import live_server, post, request
from microgpt.lab import loss
from microgpt.lab.api import NEARBY_MOST, Checkpoints
from microgpt.programs import train
from microgpt.programs.runlog import log_path_for


@pytest.fixture
def folder(tmp_path, tiny_ckpt):
    """out/ of a learner: the start checkpoint and its log, as train.py left them."""
    out = tmp_path / 'out'
    out.mkdir()
    shutil.copy(tiny_ckpt, out / 'model.json')
    shutil.copy(log_path_for(tiny_ckpt), log_path_for(str(out / 'model.json')))
    return out


def listed(server):
    return {c['id']: c for c in request(server, 'GET', '/api/config')[1]['checkpoints']}


def test_the_checkpoints_beside_the_start_are_listed_drawn_and_only_found(folder, names_file, tmp_path):
    """One server, the folder changed under it (it is looked at again at each listing)."""
    with live_server(str(folder / 'model.json'), tmp_path / 'runs', names_file) as server:
        assert list(listed(server)) == ['start']  # nothing beside it yet
        assert listed(server)['start']['label'] == 'model.json (given at start): 60 steps, 1x8'
        other = str(folder / 'wide.json')
        assert train.main(['--data', names_file, '--out', other, '--steps', '6', '--n-embd', '12',
                           '--n-head', '2', '--block-size', '12', '--eval-every', '3', '--num-samples', '0']) == 0
        entries = listed(server)
        assert list(entries) == ['start', 'file:wide.json']
        assert entries['file:wide.json']['label'] == 'wide.json: 6 steps, 1x12'  # its steps and its size
        assert entries['file:wide.json']['log'] is True
        got = post(server, '/api/loss', {'also': ['file:wide.json']})
        want = loss.compute([log_path_for(str(folder / 'model.json')), log_path_for(other)])
        assert [r['train'] for r in got['runs']] == [[list(t) for t in r['train']] for r in want['runs']]
        assert [r['val'] for r in got['runs']] == [[list(v) for v in r['val']] for r in want['runs']]

        # only checkpoints of ours with a log beside, the first NEARBY_MOST by name
        shutil.copy(folder / 'model.json', folder / 'converted.json')  # no log: no run to draw
        (folder / 'notes.json').write_text('{"format": "something else"}')  # a log beside, but not ours
        (folder / 'notes.log.jsonl').write_text('{"step": 1, "loss": 3.0}\n')
        os.symlink(folder / 'model.json', folder / 'same.json')  # the start itself, by another name
        for k in range(NEARBY_MOST + 2):  # more than the list holds
            shutil.copy(folder / 'model.json', folder / f'copy{k:02}.json')
            shutil.copy(log_path_for(str(folder / 'model.json')), log_path_for(str(folder / f'copy{k:02}.json')))
        assert list(listed(server)) == ['start'] + [f'file:copy{k:02}.json' for k in range(NEARBY_MOST)]

        # an id the server did not find there is refused as any unknown id: never joined onto a path
        (tmp_path / 'model.json').write_bytes((folder / 'model.json').read_bytes())  # one folder up
        shutil.copy(log_path_for(str(folder / 'model.json')), log_path_for(str(tmp_path / 'model.json')))
        for ckpt in ('file:../model.json', 'file:/etc/passwd', 'file:converted.json', 'file:model.log.jsonl',
                     'file:missing.json', 'file:'):
            for route, body in (('/api/overview', {'ckpt': ckpt, 'text': 'emma'}), ('/api/loss', {'also': [ckpt]})):
                status, answer, _ = request(server, 'POST', route, body)
                assert status == 404 and 'no checkpoint with id' in answer['error'], (ckpt, answer)
    # a checkpoint with no log beside (a converted one): the listing says so, and the Loss page asks nothing
    assert Checkpoints(str(folder / 'converted.json')).listing()[0]['log'] is False
