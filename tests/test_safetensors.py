"""
Checkpoints in safetensors (microgpt/edge/safetensors.py), the project's own standard-library
code: checked against the `safetensors` library both ways (an oracle only, the test extra),
taken by every reader, converted to and from JSON bit for bit, one line when damaged.
"""

import json
import os
import shutil
import struct

import numpy as np
import pytest

from microgpt import inference
from microgpt.programs import convert, sample, train
from microgpt.edge.checkpoint import is_our_checkpoint, read_checkpoint
from microgpt.lab.__main__ import main as lab_main
from microgpt.programs.runlog import log_path_for
from helpers import assert_one_line_error, losses, run, train_args


def lists(weights):
    """A checkpoint's weights as lists of floats (a .safetensors file's rows are float64 arrays)."""
    return {name: [list(row) for row in m] for name, m in weights.items()}


def log_of(out):  # beside a .json or a .safetensors checkpoint
    with open(log_path_for(str(out)), encoding='utf-8') as f:
        return [json.loads(line) for line in f]


@pytest.fixture(scope='module')
def trained(tmp_path_factory, names_file):
    """A 12-step run saved as .safetensors, and the same run saved as JSON."""
    folder = tmp_path_factory.mktemp('st')
    paths = {ext: str(folder / f'model{ext}') for ext in ('.safetensors', '.json')}
    for path in paths.values():
        assert train.main(train_args(names_file, path, '--steps', '12', '--engine', 'numpy', '--batch-size', '2')) == 0
    return paths


def test_a_run_saved_as_safetensors_is_the_json_run_number_for_number(trained):
    a, b = (read_checkpoint(trained[ext], training=True) for ext in ('.safetensors', '.json'))
    assert lists(a.weights) == lists(b.weights) and a.train_state == b.train_state
    assert list(a.optimizer['m']) == b.optimizer['m'] and list(a.optimizer['v']) == b.optimizer['v']
    assert (a.config, a.vocab, a.data_mode) == (b.config, b.vocab, b.data_mode)
    assert (a.format, b.format) == ('safetensors', 'json')
    assert os.path.getsize(trained['.safetensors']) < os.path.getsize(trained['.json']) / 2
    assert is_our_checkpoint(trained['.safetensors']) and not is_our_checkpoint(trained['.json'] + '.no')


def test_it_resumes_exactly_and_converts_both_ways_bit_for_bit(trained, tmp_path, capsys):
    """Both saved runs continued from step 12 to 16 log the same losses, bit for bit."""
    for ext in ('.safetensors', '.json'):
        shutil.copy(trained[ext], tmp_path / f'model{ext}')
        shutil.copy(log_path_for(trained[ext]), log_path_for(str(tmp_path / f'model{ext}')))
        assert run(train.main, ['--out', str(tmp_path / f'model{ext}'), '--resume', '--steps', '16',
                                '--num-samples', '0'], capsys)[0] == 0
    out = tmp_path / 'model.safetensors'
    got, want = losses(log_of(out)), losses(log_of(tmp_path / 'model.json'))
    assert [e['step'] for e in got] == list(range(1, 17)) and got == want
    # JSON -> safetensors -> JSON gives the very bytes train.py wrote
    assert run(convert.main, [str(out), str(tmp_path / 'c.json')], capsys)[0] == 0
    assert run(convert.main, [str(tmp_path / 'c.json'), str(tmp_path / 'c.safetensors')], capsys)[0] == 0
    assert (tmp_path / 'c.safetensors').read_bytes() == out.read_bytes()
    assert run(convert.main, [str(tmp_path / 'c.safetensors'), str(tmp_path / 'd.json')], capsys)[0] == 0
    assert (tmp_path / 'd.json').read_bytes() == (tmp_path / 'c.json').read_bytes()


def test_every_reader_takes_it(trained, tmp_path, names_file, capsys):
    path = trained['.safetensors']
    for engine in ('scalar', 'numpy'):
        code, names_st, _ = run(sample.main, ['--ckpt', path, '--num', '5', '--engine', engine], capsys)
        code_j, names_json, _ = run(sample.main, ['--ckpt', trained['.json'], '--num', '5', '--engine', engine], capsys)
        assert code == code_j == 0 and names_st == names_json and names_st.count('\n') == 5
    a, b = inference.load_checkpoint(path), inference.load_checkpoint(trained['.json'])
    assert all((a.weights[k] == b.weights[k]).all() for k in b.weights)
    code, out_st, _ = run(lab_main, ['overview', 'emma', '--ckpt', path], capsys)
    out_json = run(lab_main, ['overview', 'emma', '--ckpt', trained['.json']], capsys)[1]
    # the same printout but for the file's name (whose length may move where a long line wraps)
    assert code == 0 and out_st.replace('model.safetensors', 'model.json').split() == out_json.split()
    code, stdout, _ = run(train.main, train_args(names_file, tmp_path / 'next.json', '--steps', '2', '--init', path), capsys)
    assert code == 0 and f"init={path}" in stdout


def test_the_safetensors_library_reads_ours(trained):
    lib = pytest.importorskip('safetensors.numpy', reason="the oracle: pip install -e '.[test]'")
    from safetensors import safe_open
    ckpt = read_checkpoint(trained['.json'], training=True)
    tensors = lib.load_file(trained['.safetensors'])
    assert set(tensors) == set(ckpt.weights) | {'adam.m', 'adam.v'}
    for name, matrix in ckpt.weights.items():
        assert tensors[name].dtype == np.float64 and (tensors[name] == np.array(matrix)).all(), name
    assert (tensors['adam.v'] == np.array(ckpt.optimizer['v'])).all()
    with safe_open(trained['.safetensors'], framework='np') as f:
        meta = f.metadata()
    assert meta['format'] == 'microgpt' and json.loads(meta['vocab']) == list(ckpt.vocab)
    assert json.loads(meta['config']) == ckpt.config.to_dict()


def test_we_read_what_the_safetensors_library_writes_and_resume_it_in_place(trained, tmp_path, capsys):
    """In float64, float32 and float16. The library writes the metadata's keys in its own order,
    where 'format' is often not first, and --resume once refused such a file in place ("not a
    microgpt checkpoint") that sample.py and --init read."""
    lib = pytest.importorskip('safetensors.numpy', reason="the oracle: pip install -e '.[test]'")
    from safetensors import safe_open
    with safe_open(trained['.safetensors'], framework='np') as f:
        meta = f.metadata()
    ours = lib.load_file(trained['.safetensors'])
    for dtype, tol in ((np.float64, 0.0), (np.float32, 1e-7), (np.float16, 1e-3)):
        path = str(tmp_path / f'lib-{np.dtype(dtype).name}.safetensors')
        lib.save_file({k: v.astype(dtype) for k, v in ours.items()}, path, metadata=meta)
        got = read_checkpoint(path)
        for name, matrix in got.weights.items():
            assert np.abs(np.array(matrix) - ours[name]).max() <= tol * np.abs(ours[name]).max() + 1e-12, name
    path = tmp_path / 'lib.safetensors'
    for _ in range(50):  # its order is a hash map's, drawn anew each time: keep a file where format is not first
        lib.save_file(ours, str(path), metadata=meta)
        if not path.read_bytes()[8:].startswith(b'{"__metadata__":{"format"'):
            break
    assert not path.read_bytes()[8:].startswith(b'{"__metadata__":{"format"')
    shutil.copy(trained['.safetensors'] + '.log.jsonl', str(path) + '.log.jsonl')
    code, _, err = run(train.main, ['--out', str(path), '--resume', '--steps', '14', '--num-samples', '0'], capsys)
    assert code == 0, err
    assert read_checkpoint(str(path), training=True).train_state.step == 14


@pytest.mark.torch
def test_we_read_the_bfloat16_the_safetensors_library_writes(trained, tmp_path):
    import torch
    from safetensors import safe_open
    from safetensors.numpy import load_file
    from safetensors.torch import save_file
    with safe_open(trained['.safetensors'], framework='np') as f:
        meta = f.metadata()
    ours = load_file(trained['.safetensors'])
    path = str(tmp_path / 'lib-bf16.safetensors')
    save_file({k: torch.from_numpy(v).to(torch.bfloat16) for k, v in ours.items()}, path, metadata=meta)
    got = read_checkpoint(path)
    for name, matrix in got.weights.items():  # exactly torch's own widening of each bfloat16
        assert (np.array(matrix) == torch.from_numpy(ours[name]).to(torch.bfloat16).double().numpy()).all()


# ---------------------------------------------------------------------------- damaged files
def parts(path):
    raw = open(path, 'rb').read()
    n = struct.unpack('<Q', raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def pack(header, data):
    text = json.dumps(header).encode()
    return struct.pack('<Q', len(text)) + text + data


def edit_header(change):
    def damage(raw_path):
        header, data = parts(raw_path)
        change(header)
        return pack(header, data)
    return damage


def bytes_of(f):
    return lambda path: f(open(path, 'rb').read())


DAMAGED = {
    'empty': (bytes_of(lambda raw: b''), "is not a safetensors file, or is truncated"),
    'header-past-the-file': (bytes_of(lambda raw: struct.pack('<Q', 10 ** 12) + raw[8:]), "is not a safetensors file"),
    'header-not-json': (bytes_of(lambda raw: raw[:8] + b'!' + raw[9:]), "the safetensors header is not valid JSON"),
    'no-metadata': (edit_header(lambda h: h.pop('__metadata__')), "no microgpt metadata"),
    'unknown-dtype': (edit_header(lambda h: h['wte'].update(dtype='C64')), "lacks a dtype microgpt reads"),
    'shape-lies': (edit_header(lambda h: h['wte'].update(shape=[28, 16])), "offsets do not span its shape"),
    'truncated-data': (bytes_of(lambda raw: raw[:8 + struct.unpack('<Q', raw[:8])[0] + 100]), "is truncated in tensor"),
    'nan-weight': (lambda p: (lambda h, d: pack(h, struct.pack('<d', float('nan')) + d[8:]))(*parts(p)),
                   "wte holds nan, not a finite number"),  # wte is the first tensor
}


@pytest.mark.parametrize('name', sorted(DAMAGED))
def test_a_damaged_file_is_one_line_for_every_reader(trained, tmp_path, capsys, name):
    damage, fragment = DAMAGED[name]
    path = tmp_path / 'bad.safetensors'
    path.write_bytes(damage(trained['.safetensors']))
    code, _, err = run(sample.main, ['--ckpt', str(path), '--num', '1'], capsys)
    assert code == 2
    assert_one_line_error(code, err, fragment)
    # --resume at a damaged --out: refused, the file left as it was
    before = path.read_bytes()
    code, _, err = run(train.main, ['--out', str(path), '--resume'], capsys)
    assert code == 2 and err.startswith('error: ') and err.count('\n') == 1
    assert path.read_bytes() == before


@pytest.mark.parametrize('args,fragment', [
    (['SRC', 'SRC'], "would overwrite the source checkpoint"),
    (['SRC', 'DATA'], "does not end in .json or .safetensors"),
    (['SRC', 'OTHER.json'], "exists and is not a microgpt checkpoint"),
    (['DATA', 'OUT'], "is not valid JSON"),
    (['MISSING.safetensors', 'OUT'], "does not exist"),
], ids=['onto-itself', 'onto-data', 'onto-other-json', 'from-data', 'missing'])
def test_convert_refuses_in_one_line_and_overwrites_nothing(trained, tmp_path, names_file, capsys, args, fragment):
    src = tmp_path / 'src.safetensors'
    shutil.copy(trained['.safetensors'], src)
    (tmp_path / 'other.json').write_text('{"mine": 1}')
    names = {'SRC': str(src), 'DATA': names_file, 'OUT': str(tmp_path / 'out.json'),
             'MISSING.safetensors': str(tmp_path / 'missing.safetensors'), 'OTHER.json': str(tmp_path / 'other.json')}
    before = {p: open(p, 'rb').read() for p in (str(src), names_file, names['OTHER.json'])}
    code, _, err = run(convert.main, [names[a] for a in args], capsys)
    assert code == 2
    assert_one_line_error(code, err, fragment)
    assert {p: open(p, 'rb').read() for p in before} == before
    assert not os.path.exists(names['OUT'])
