"""
Hostile and damaged inputs: each must end as one line `error: ...` (exit status 2, no
traceback), never as a hang, a memory error or lost data.

The kinds, one section each:
  1. checkpoint writing: symlinked --out, permissions, stale temporary files, failing writes
     (disk full, read-only, permission denied, file-size limit, name too long);
  2. damaged or hostile checkpoints: absurd config sizes, deep nesting, unprintable
     vocabulary, hand-edited byte-pair merges, versions that only compare equal to 1;
  3. files that are not files: devices, pipes, directories, oversized, not UTF-8;
  4. diverged models: huge weights that overflow in the forward pass, in every reader;
  5. absurd numbers: every numeric flag of the lab, and every number of a training log.

Run: .venv/bin/python -m pytest -q tests/test_hostile.py
"""

import errno
import json
import os
import stat
import subprocess
import sys
import tempfile

import numpy as np
import pytest

from microgpt import inference
from microgpt.programs import cli
from microgpt.edge import limits
from microgpt.edge.checkpoint import Checkpoint, is_our_checkpoint, read_checkpoint, write_checkpoint
from microgpt.edge.files import WriteError, remove_stale_temporaries, write_json_atomic
from microgpt.edge.data import load_docs
from microgpt.edge.errors import UserError
from microgpt.edge.files import read_user_file
from microgpt.edge.files import parse_json
from microgpt.lab.__main__ import main as lab_main
from microgpt.model import GPT, GPTConfig
from microgpt.tokenizer import CharTokenizer

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEXT = 'emma'
DEEP = 100_000  # brackets: far past Python's recursion limit of 1000


def small_model():
    return GPT(GPTConfig(vocab_size=4, n_layer=1, n_embd=4, n_head=2, block_size=4),
               tokenizer=CharTokenizer(['a', 'b', 'c']))


def ckpt_obj(path):
    with open(path, encoding='utf-8') as f:
        return json.load(f)


def write_obj(path, obj):
    path.write_text(json.dumps(obj), encoding='utf-8')
    return str(path)


def run_guarded(main, argv, capsys):
    """(exit status, stdout, stderr) of main(argv) under cli.run, the guard of every program."""
    with pytest.raises(SystemExit) as info:
        cli.run(main, argv)
    out, err = capsys.readouterr()
    return info.value.code, out, err


def assert_one_line(status, err, fragment):
    assert status == 2, err
    assert err.startswith('error: ') and err.count('\n') == 1, err
    assert 'Traceback' not in err
    assert fragment in err, err


def run_python(args, timeout=60, **kwargs):
    env = dict(os.environ, PYTHONPATH=REPO_DIR)
    return subprocess.run([sys.executable, *args], cwd=REPO_DIR, capture_output=True, text=True,
                          timeout=timeout, env=env, **kwargs)


# ---------------------------------------------------------------------------- 1) checkpoint writing
def test_a_symlinked_out_is_written_through_and_stays_a_link(tmp_path):
    """Kind: symlinked output. The link's target gets the checkpoint; the link stays a link."""
    target = tmp_path / 'real' / 'model.json'
    target.parent.mkdir()
    link = tmp_path / 'model.json'
    link.symlink_to(target)
    write_checkpoint(str(link), Checkpoint.of(small_model()))
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert ckpt_obj(target)['format'] == 'microgpt'
    write_checkpoint(str(link), Checkpoint.of(small_model()))  # a second save through the link, over the first
    assert link.is_symlink() and sorted(os.listdir(target.parent)) == ['model.json']


@pytest.mark.parametrize('umask', [0o022, 0o077, 0o002])
def test_a_new_checkpoint_gets_the_umasks_permissions(tmp_path, umask):
    """Kind: permissions. mkstemp makes 0600; a checkpoint must be like any new file."""
    old = os.umask(umask)
    try:
        write_checkpoint(str(tmp_path / 'model.json'), Checkpoint.of(small_model()))
        with open(tmp_path / 'plain.txt', 'w') as f:  # the oracle: a file made the usual way
            f.write('x')
    finally:
        os.umask(old)
    mode = stat.S_IMODE(os.stat(tmp_path / 'model.json').st_mode)
    assert mode == 0o666 & ~umask == stat.S_IMODE(os.stat(tmp_path / 'plain.txt').st_mode)


def test_an_overwritten_checkpoint_keeps_its_permissions(tmp_path):
    path = tmp_path / 'model.json'
    write_checkpoint(str(path), Checkpoint.of(small_model()))
    os.chmod(path, 0o640)
    write_checkpoint(str(path), Checkpoint.of(small_model()))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640


def test_stale_temporaries_of_a_killed_save_are_found_and_only_ours_removed(tmp_path):
    """Kind: stale temporary files. Only `.model.json.<8 chars>.tmp` beside model.json goes."""
    out = tmp_path / 'model.json'
    write_checkpoint(str(out), Checkpoint.of(small_model()))
    fd, ours = tempfile.mkstemp(prefix='.model.json.', suffix='.tmp', dir=tmp_path)  # a killed save's
    os.close(fd)
    keep = ['.model.json.tmp', '.model.json.abc.tmp', '.other.json.abcd1234.tmp',
            'model.json.abcd1234.tmp', '.model.json.abcd1234.tmp.bak', 'notes.txt']
    for name in keep:
        (tmp_path / name).write_text('keep me')
    (tmp_path / '.model.json.dir12345.tmp').mkdir()  # our pattern, but a folder: never removed
    (tmp_path / '.model.json.link1234.tmp').symlink_to(tmp_path / 'notes.txt')  # a link: kept
    assert remove_stale_temporaries(str(out)) == [ours]
    left = set(os.listdir(tmp_path))
    assert os.path.basename(ours) not in left
    assert left == {'model.json', *keep, '.model.json.dir12345.tmp', '.model.json.link1234.tmp'}
    assert remove_stale_temporaries(str(out)) == []  # nothing more to do
    assert remove_stale_temporaries(str(tmp_path / 'missing' / 'model.json')) == []


def test_stale_temporaries_are_found_beside_a_symlinks_target(tmp_path):
    (tmp_path / 'real').mkdir()
    link = tmp_path / 'model.json'
    link.symlink_to(tmp_path / 'real' / 'model.json')
    stale = tmp_path / 'real' / '.model.json.k3j_x9a0.tmp'
    stale.write_text('{"format": "micr')
    assert remove_stale_temporaries(str(link)) == [str(stale)]
    assert not stale.exists()


def test_is_our_checkpoint_reads_only_a_prefix_and_knows_ours(tmp_path, tiny_ckpt):
    """is_our_checkpoint: train.py refuses to replace an --out for which it is False."""
    assert is_our_checkpoint(tiny_ckpt)
    log = tiny_ckpt[:-len('.json')] + '.log.jsonl'
    tutorial = write_obj(tmp_path / 'tutorial.json', {'_vocab': ['a'], 'wte': [[0.0]]})
    notes = tmp_path / 'notes.json'
    notes.write_text('{"format": "other"}')
    big = tmp_path / 'big.json'  # a huge file is judged by its first bytes only
    big.write_bytes(b'{"format": "microgpt", "version": 1, "pad": "' + b'x' * 5_000_000 + b'"}')
    assert is_our_checkpoint(str(big))
    for path in (log, tutorial, str(notes), str(tmp_path / 'missing.json'), str(tmp_path),
                 '/dev/zero', '/dev/null'):
        assert not is_our_checkpoint(path), path


def _fail_with(code):
    def fail(*args, **kwargs):
        raise OSError(code, os.strerror(code))
    return fail


@pytest.mark.parametrize('where, code, words', [
    ('fsync', errno.ENOSPC, 'the disk is full'),
    ('replace', errno.EROFS, 'read-only file system'),
    ('fsync', errno.EFBIG, 'file-size limit'),
    ('fchmod', errno.EACCES, 'permission denied'),
    ('replace', errno.EDQUOT, 'quota'),
])
def test_a_failing_save_is_one_line_and_the_old_checkpoint_is_intact(tmp_path, monkeypatch, capsys,
                                                                      where, code, words):
    """Kind: mid-write failures. The old file stays byte for byte; no temporary is left."""
    path = tmp_path / 'model.json'
    write_checkpoint(str(path), Checkpoint.of(small_model()))
    good = path.read_bytes()
    monkeypatch.setattr(os, where, _fail_with(code))
    status, _, err = run_guarded(lambda argv: write_checkpoint(str(path), Checkpoint.of(small_model())), [], capsys)
    assert_one_line(status, err, f"could not write {path}: ")
    assert words in err and err.endswith(f"; the previous {path} is intact\n")
    assert path.read_bytes() == good
    assert os.listdir(tmp_path) == ['model.json']


def test_a_folder_that_cannot_be_written_is_one_line(tmp_path, monkeypatch):
    """EACCES where the temporary file is made (a real read-only folder does not stop root)."""
    import microgpt.edge.files as files
    monkeypatch.setattr(files.tempfile, 'mkstemp', _fail_with(errno.EACCES))
    with pytest.raises(WriteError, match='permission denied; no file was left at'):
        write_json_atomic(str(tmp_path / 'model.json'), {'a': 1})
    assert os.listdir(tmp_path) == []


def test_a_name_too_long_for_the_temporary_is_one_line(tmp_path):
    """Kind: name too long, for real: a 250-character name fits, its temporary name does not."""
    path = tmp_path / ('m' * 245 + '.json')
    with pytest.raises(WriteError, match='the file name is too long'):
        write_json_atomic(str(path), {'a': 1})
    assert os.listdir(tmp_path) == []


def test_the_file_size_limit_is_an_error_not_a_kill(tmp_path):
    """Kind: file-size limit, for real: under `ulimit -f`, SIGXFSZ would kill the process by
    default; the save must end as one line and leave the old (small) file whole."""
    resource = pytest.importorskip('resource')
    path = tmp_path / 'model.json'
    path.write_text('{"old": true}')
    child = ("import sys\n"
             "from microgpt.programs import cli\n"
             "from microgpt.edge.checkpoint import write_json_atomic\n"
             "cli.run(lambda argv: write_json_atomic(sys.argv[1], {'w': [0.5] * 10000}))\n")

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
    result = run_python(['-c', child, str(path)], preexec_fn=limit)
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert_one_line(2, result.stderr, 'file-size limit (ulimit -f); the previous')
    assert path.read_text() == '{"old": true}'
    assert os.listdir(tmp_path) == ['model.json']


# ---------------------------------------------------------------------------- 2) hostile checkpoints
@pytest.mark.parametrize('field, value', [
    ('n_layer', 10**12), ('n_embd', 10**9), ('n_head', 10**6), ('block_size', 10**8),
    ('vocab_size', 10**12), ('n_layer', 10**399),
])
def test_absurd_config_sizes_are_refused_before_anything_is_built(tmp_path, tiny_ckpt, field, value):
    """Kind: absurd sizes. A few hundred bytes claiming a trillion layers used to hang."""
    obj = ckpt_obj(tiny_ckpt)
    obj['config'][field] = value
    with pytest.raises(UserError, match=f"bad config: {field} is .*more than the .* microgpt allows"):
        read_checkpoint(write_obj(tmp_path / 'absurd.json', obj))


def test_a_config_within_each_cap_but_too_many_parameters_in_total_is_refused(tmp_path, tiny_ckpt):
    obj = ckpt_obj(tiny_ckpt)
    obj['config'].update(n_layer=limits.MAX_N_LAYER, n_embd=limits.MAX_N_EMBD, n_head=1)
    with pytest.raises(UserError, match=r"asks for [\d,]+ parameters; microgpt takes at most"):
        read_checkpoint(write_obj(tmp_path / 'huge.json', obj))


def test_a_trillion_layer_checkpoint_fails_fast_in_a_real_process(tmp_path, tiny_ckpt):
    obj = ckpt_obj(tiny_ckpt)
    obj['config']['n_layer'] = 10**12
    path = write_obj(tmp_path / 'trillion.json', obj)
    result = run_python(['sample.py', '--ckpt', path], timeout=30)
    assert_one_line(result.returncode, result.stderr, 'n_layer is 1,000,000,000,000')


@pytest.mark.parametrize('text', [
    '[' * DEEP + ']' * DEEP,
    '{"format": "microgpt", "version": 1, "config": ' + '{"a": ' * DEEP + '1' + '}' * DEEP + '}',
    '[' * DEEP,  # not even closed
])
def test_deeply_nested_json_is_one_line_in_the_checkpoint_reader(tmp_path, text):
    """Kind: deep nesting. 100,000 brackets used to end in RecursionError."""
    path = tmp_path / 'deep.json'
    path.write_text(text)
    with pytest.raises(UserError, match=r"nests brackets 100,00[01] deep; no microgpt file nests more than 32"):
        read_checkpoint(str(path))


def test_brackets_inside_strings_do_not_count_as_nesting():
    assert parse_json('{"v": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", "w": "\\"[["}', 'x') == \
        {'v': '[' * 44, 'w': '"[['}


def test_a_checkpoints_own_nesting_is_far_below_the_cap(tiny_ckpt):
    """The cap must not refuse a real checkpoint (with its Adam moments) nor a real log."""
    from microgpt.edge.files import nesting_depth
    with open(tiny_ckpt, encoding='utf-8') as f:
        depth = nesting_depth(f.read())
    assert 4 <= depth <= limits.MAX_JSON_DEPTH // 4


@pytest.mark.parametrize('vocab_char', ['\ud800', '\udfff'])
def test_a_vocabulary_with_a_lone_surrogate_is_refused(tmp_path, tiny_ckpt, vocab_char):
    """Kind: unprintable vocabulary. It passed the loader and crashed when printing."""
    obj = ckpt_obj(tiny_ckpt)
    obj['vocab'][0] = vocab_char
    with pytest.raises(UserError, match='half of a UTF-16 pair') as e:
        read_checkpoint(write_obj(tmp_path / 'surrogate.json', obj))
    str(e.value).encode('utf-8')  # the message itself can be printed


def _doubling(obj):
    """40 merges each of the token before with itself: token k + 1 is 2^k bytes, a terabyte in all."""
    obj['merges'] = [[97, 97]] + [[256 + k, 256 + k] for k in range(39)]
    obj['config']['vocab_size'] = 256 + 40 + 1


@pytest.mark.parametrize('damage, words', [
    (lambda o: o.update(merges='aa'), "merges must be a list"),
    (lambda o: o['merges'].__setitem__(0, [300, 97]), "merge 0 is [300, 97], not a pair of the 256 ids before it"),
    (lambda o: o['merges'].__setitem__(1, [97, 98, 99]), "merge 1 is [97, 98, 99], not a pair"),
    (lambda o: o['merges'].__setitem__(0, [True, 1]), "merge 0 is [True, 1], not a pair"),
    (lambda o: o['merges'].__setitem__(0, [-1, 97]), "merge 0 is [-1, 97], not a pair"),
    (lambda o: o['merges'].__setitem__(2, list(o['merges'][0])), "repeats the pair"),
    (lambda o: o['merges'].__setitem__(3, [259, 97]), "merge 3 is [259, 97], not a pair of the 259 ids before it"),
    (lambda o: o['merges'].__setitem__(3, [97, 266]), "merge 3 is [97, 266], not a pair of the 259 ids before it"),
    (lambda o: o.update(merges=[[97, 257], [256, 98]] + o['merges'][2:]), "merge 0 is [97, 257], not a pair"),
    (lambda o: o['merges'].pop(), "22 merges make 279 tokens (256 bytes, the merges, BOS), but vocab_size is 280"),
    (lambda o: o.update(vocab=['a', 'b']), "both byte-pair merges and a vocabulary of characters"),
    (_doubling, "make tokens of more than 64 MiB in all"),
])
def test_damaged_or_hand_edited_merges_are_one_line(tmp_path, bpe_ckpt, damage, words):
    """Kind: a byte-pair vocabulary edited by hand. Every merge is checked against the ids before
    it and the sizes it builds, before a token is made."""
    obj = ckpt_obj(bpe_ckpt)
    damage(obj)
    with pytest.raises(UserError, match=words.replace('[', r'\[').replace(']', r'\]').replace('(', r'\(')
                       .replace(')', r'\)')):
        read_checkpoint(write_obj(tmp_path / 'merges.json', obj))


def test_damaged_merges_in_safetensors_metadata_are_one_line_in_a_real_process(tmp_path, bpe_ckpt):
    """The metadata's merges are JSON text inside the header: cut short, sample.py says so."""
    import struct
    path = tmp_path / 'bpe.safetensors'
    write_checkpoint(str(path), read_checkpoint(bpe_ckpt))
    raw = path.read_bytes()
    n = struct.unpack('<Q', raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header['__metadata__']['merges'] = header['__metadata__']['merges'][:-3]  # '[[97, 110], ...' unclosed
    text = json.dumps(header, separators=(',', ':')).encode()
    assert len(text) < n
    text += b' ' * (n - len(text))  # the same length, so the tensors stay where they were
    path.write_bytes(raw[:8] + text + raw[8 + n:])
    result = run_python(['sample.py', '--ckpt', str(path)], timeout=30)
    assert_one_line(result.returncode, result.stderr, "the metadata's merges")


@pytest.mark.parametrize('version', [True, 1.0, '1', [1]])
def test_versions_that_merely_equal_one_are_refused(tmp_path, tiny_ckpt, version):
    """Kind: version type. true == 1 and 1.0 == 1 in Python; neither is version 1."""
    obj = ckpt_obj(tiny_ckpt)
    obj['version'] = version
    with pytest.raises(UserError, match=f"is checkpoint version {version!r}".replace('[', r'\[')
                       .replace(']', r'\]')):
        read_checkpoint(write_obj(tmp_path / 'version.json', obj))


def test_an_integer_of_thousands_of_digits_is_one_line(tmp_path, tiny_ckpt):
    with open(tiny_ckpt, encoding='utf-8') as f:
        text = f.read().replace('"n_layer": 1', '"n_layer": 1' + '0' * 5000, 1)
    path = tmp_path / 'digits.json'
    path.write_text(text)
    with pytest.raises(UserError, match='Exceeds the limit') as e:
        read_checkpoint(str(path))
    assert '\n' not in str(e.value) and 'set_int_max_str_digits' not in str(e.value)


@pytest.mark.parametrize('run, argv, outcome', [
    ([1], ['sampling'], 'does not say what it was trained on'),        # 'run' not an object
    ({'data': ['x']}, ['sampling'], "its training data ['x'] is not a file here"),
    ({'data': 5}, ['sampling'], 'its training data 5 is not a file here'),  # 5 is a file descriptor
    ([1], ['step', TEXT], "lr 0.01 (train.py's default)"),            # the default learning rate
    ({'lr': 'x'}, ['step', TEXT], "lr 0.01 (train.py's default)"),    # not a number: not believed
    ({'lr': -1.0}, ['step', TEXT], "lr 0.01 (train.py's default)"),
], ids=['sampling-run-list', 'sampling-data-list', 'sampling-data-int', 'step-run-list', 'step-lr-text',
        'step-lr-negative'])
def test_the_lab_reads_a_damaged_train_state_without_a_traceback(tmp_path, tiny_ckpt, run, argv, outcome, capsys):
    """Kind: damaged checkpoints. Only --resume validates train_state; step and sampling read
    its 'run' for the learning rate and the training names, and crashed on a 'run' of [1]."""
    obj = ckpt_obj(tiny_ckpt)
    # a dict changes one setting of the saved run, which keeps every other one (a run missing a
    # setting is a damaged training state, left out whole: the [1] cases)
    obj['train_state']['run'] = {**obj['train_state']['run'], **run} if isinstance(run, dict) else run
    path = write_obj(tmp_path / 'state.json', obj)
    more = ['--num', '1'] if argv == ['sampling'] else []
    status, out, err = run_guarded(lab_main, argv + ['--ckpt', path] + more, capsys)
    if 'not a number' in outcome:
        assert_one_line(status, err, outcome + ' greater than 0: pass --lr')
    else:
        assert status == 0 and err == '' and outcome in out, err


# ---------------------------------------------------------------------------- 3) files that are not files
@pytest.mark.parametrize('device', ['/dev/zero', '/dev/urandom', '/dev/null'])
def test_devices_are_refused_for_data_and_checkpoints(device):
    """Kind: special files. /dev/zero used to be read without limit."""
    if not os.path.exists(device):
        pytest.skip(f'{device} is absent')
    with pytest.raises(UserError, match='is not a regular file'):
        load_docs(device)
    with pytest.raises(UserError, match='is not a regular file'):
        read_checkpoint(device)


def test_a_named_pipe_is_refused_without_waiting_for_a_writer(tmp_path):
    if not hasattr(os, 'mkfifo'):
        pytest.skip('no named pipes here')
    fifo = tmp_path / 'model.json'
    os.mkfifo(fifo)
    # a process, so that a regression hangs the child (and the timeout says so), not the suite
    result = run_python(['sample.py', '--ckpt', str(fifo)], timeout=30)
    assert_one_line(result.returncode, result.stderr, 'is not a regular file (a device, pipe or socket)')


def test_sample_and_train_refuse_dev_zero_as_processes(tmp_path):
    for script, flag in (('sample.py', '--ckpt'), ('train.py', '--data')):
        result = run_python([script, flag, '/dev/zero', *(['--out', str(tmp_path / 'm.json')]
                                                          if script == 'train.py' else [])], timeout=60)
        assert_one_line(result.returncode, result.stderr, '/dev/zero is not a regular file')


def test_a_file_over_the_size_cap_is_refused(tmp_path, monkeypatch):
    """The cap is limits.MAX_FILE_BYTES (1 GiB); shrunk here so the test writes 2 kB."""
    monkeypatch.setattr(limits, 'MAX_FILE_BYTES', 1000)
    path = tmp_path / 'names.txt'
    path.write_text('anna\n' * 400)
    with pytest.raises(UserError, match='is larger than 0 MiB, the most microgpt reads'):
        load_docs(str(path))
    path.write_text('anna\n' * 200)  # exactly 1000 bytes: still read
    assert len(load_docs(str(path))) == 200


def test_reading_a_small_file_reserves_no_gigabyte(tmp_path):
    """The cap is enforced by reading in chunks: a process limited to 512 MB of address
    space still reads a small checkpoint (f.read(cap + 1) would reserve 1 GiB and fail)."""
    resource = pytest.importorskip('resource')
    path = tmp_path / 'names.txt'
    path.write_text('anna\nbob\n')
    child = ("import sys\n"
             "from microgpt.edge.data import load_docs\n"
             "print(load_docs(sys.argv[1]))\n")

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (512 << 20, 512 << 20))
    result = run_python(['-c', child, str(path)], preexec_fn=limit)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "['anna', 'bob']\n"


def test_the_chunked_read_returns_the_file_exactly(tmp_path):
    from microgpt.edge.files import read_at_most as _read_at_most
    data = bytes(range(256)) * 3
    path = tmp_path / 'bytes.bin'
    path.write_bytes(data)
    for chunk in (1, 7, 256, 10_000):
        with open(path, 'rb') as f:
            assert _read_at_most(f, len(data) + 1, chunk=chunk) == data
        with open(path, 'rb') as f:
            assert _read_at_most(f, 100, chunk=chunk) == data[:100]


@pytest.mark.parametrize('kind', ['invalid utf-8', 'directory'])
def test_a_log_that_is_not_text_or_not_a_file_is_one_line(tmp_path, capsys, kind):
    """Kind: log files. Invalid UTF-8 or a directory in the log's place."""
    path = tmp_path / 'model.log.jsonl'
    if kind == 'directory':
        path.mkdir()
        fragment = 'is a directory'
    else:
        content = b'{"step": 1, "loss": 3.0}\n{"step": 2, "loss": \xff\xfe}\n'
        path.write_bytes(content)
        fragment = f'is not UTF-8 text (byte {content.index(0xff)})'
    assert_one_line(*run_guarded(lab_main, ['loss', str(path)], capsys)[::2], fragment)


def test_a_checkpoint_given_as_the_log_names_the_log(tiny_ckpt, capsys):
    status, _, err = run_guarded(lab_main, ['loss', tiny_ckpt], capsys)
    log = tiny_ckpt[:-len('.json')] + '.log.jsonl'
    assert_one_line(status, err, f"{tiny_ckpt} is a checkpoint, not a training log: give its log, {log}")


# ---------------------------------------------------------------------------- 4) diverged models
DIVERGED_WEIGHTS = {
    'huge embedding': (['wte'], 1e300),       # squares to inf inside the first rmsnorm
    'huge queries and keys': (['layer0.attn_wq', 'layer0.attn_wk'], 1e200),  # q.k overflows
    'huge lm_head': (['lm_head'], 1e308),     # the logits themselves overflow
}


@pytest.fixture(params=DIVERGED_WEIGHTS)
def diverged_ckpt(request, tmp_path, tiny_ckpt):
    names, value = DIVERGED_WEIGHTS[request.param]
    obj = ckpt_obj(tiny_ckpt)
    for name in names:
        obj['state_dict'][name] = [[value] * len(row) for row in obj['state_dict'][name]]
    return write_obj(tmp_path / 'diverged.json', obj)


@pytest.mark.parametrize('argv', [['overview', TEXT], ['attention', TEXT],
                                  ['attention', TEXT, '--no-scale', '--temperature', '0.001'],
                                  ['step', TEXT], ['sampling', '--num', '1']])
def test_every_lab_reader_of_a_diverged_model_says_so_in_one_line(diverged_ckpt, argv, capsys):
    """Kind: diverged models. overview and attention crashed with NaN errors, step with a
    NonFiniteError traceback."""
    status, out, err = run_guarded(lab_main, argv + ['--ckpt', diverged_ckpt], capsys)
    assert_one_line(status, err, "the model's logits are not finite numbers: its weights are too "
                                 "large (its training diverged); retrain it with a lower --lr")


@pytest.mark.parametrize('argv', [['overview', TEXT], ['attention', TEXT],
                                  ['attention', TEXT, '--no-scale', '--temperature', '0.001']])
def test_a_model_whose_forward_fits_but_whose_lab_statistics_overflow_is_one_line(
        tmp_path, tiny_ckpt, argv, capsys):
    """Weights of 1e77 in attn_wq and attn_wk: the forward pass stays finite (q.k ~ 1e154),
    but the spread of the scores squares them past the largest float. numpy would warn
    and print inf; the lab must stop with one line instead."""
    obj = ckpt_obj(tiny_ckpt)
    for name in ('layer0.attn_wq', 'layer0.attn_wk'):
        obj['state_dict'][name] = [[1e77] * len(row) for row in obj['state_dict'][name]]
    path = write_obj(tmp_path / 'nearly.json', obj)
    port = inference.load_checkpoint(path)
    logits, _ = port.forward([port.tokenizer.bos] + port.tokenizer.encode(TEXT))
    assert np.isfinite(logits).all()  # the model itself still computes
    status, out, err = run_guarded(lab_main, argv + ['--ckpt', path], capsys)
    if argv[0] == 'overview':  # overview computes no statistics of the scores: it works
        assert status == 0 and err == '' and 'inf' not in out and 'nan' not in out
    else:
        assert_one_line(status, err, "the lab's arithmetic on this model's numbers overflows a float")


def test_embeddings_of_huge_rows_are_one_line(tmp_path, tiny_ckpt, capsys):
    """Kind: diverged models. Rows of 1e200 square past the largest float in their norms: numpy
    warned and printed nan; only wte and wpe are read, so only they can do it."""
    obj = ckpt_obj(tiny_ckpt)
    obj['state_dict']['wte'][1] = [1e200] * len(obj['state_dict']['wte'][1])
    path = write_obj(tmp_path / 'huge_row.json', obj)
    status, _, err = run_guarded(lab_main, ['embeddings', '--ckpt', path], capsys)
    assert_one_line(status, err, "the lab's arithmetic on this model's numbers overflows a float")


def test_the_port_raises_one_error_that_is_also_a_floating_point_error(diverged_ckpt):
    """The port's forwards, loss and evaluate share the check; train.py's validation loss,
    which catches FloatingPointError to report divergence, still sees one."""
    port = inference.load_checkpoint(diverged_ckpt)
    ids = [port.tokenizer.bos] + port.tokenizer.encode(TEXT)
    for call in (lambda: port.forward(ids, capture='all'), lambda: port.forward_batch([ids]),
                 lambda: port.loss(ids), lambda: inference.evaluate(port, [TEXT])):
        with pytest.raises(inference.model.DivergedModelError):
            call()
        with pytest.raises(FloatingPointError):
            call()


def test_a_healthy_model_passes_the_divergence_check_unchanged(tiny_ckpt):
    """Negative control: the check must not fire, nor change a number, on a trained model."""
    port = inference.load_checkpoint(tiny_ckpt)
    ids = [port.tokenizer.bos] + port.tokenizer.encode(TEXT)
    logits, _ = port.forward(ids)
    with np.errstate(all='ignore'):
        plain = type(port).forward.__wrapped__(port, ids)[0]  # the method without its check
    assert np.array_equal(logits, plain) and np.isfinite(logits).all()


# ---------------------------------------------------------------------------- 5) absurd numbers
HUGE = '9' * 400


@pytest.mark.parametrize('argv, fragment', [
    (['overview', TEXT, '--top', '1000000'], '--top: 1000000 is out of range: give an integer from 1 to 1,000'),
    (['overview', TEXT, '--top', HUGE], 'is out of range: give an integer from 1 to 1,000'),
    (['overview', TEXT, '--seed', '-1'], 'give an integer from 0 to 4,294,967,295'),
    (['overview', TEXT, '--seed', '4294967296'], 'give an integer from 0 to 4,294,967,295'),
    (['overview', TEXT, '--temperature', '1001'], 'give a number from 0 to 1000'),
    (['overview', TEXT, '--temperature', '-1'], 'give a number from 0 to 1000'),
    (['overview', TEXT, '--temperature', 'inf'], 'give a number from 0 to 1000'),
    (['overview', TEXT, '--temperature', 'nan'], 'give a number from 0 to 1000'),
    (['attention', TEXT, '--temperature', '0'], 'give a number greater than 0 and at most 1000'),
    (['attention', TEXT, '--layer', HUGE], '--layer'),
    (['attention', TEXT, '--head', '100000000'], '--head: 100000000 is out of range'),
    (['attention', TEXT, '--query', '1e9'], "'1e9' is not an integer"),
    (['attention', TEXT, '--n-head', '0'], 'give an integer from 1 to 1,024'),
    (['scaling', '--draws', '1000000000'], '--draws: 1000000000 is out of range: give an integer from 1 to 100,000'),
    (['scaling', '--samples', HUGE], '--samples'),
    (['scaling', '--row-d', '100000'], 'give an integer from 1 to 4,096'),
    (['scaling', '--draws', '100000', '--row-d', '4096'], 'lower one of them'),
    (['loss', 'x.log.jsonl', '--width', '5000000'], 'give an integer from 20 to 1,000'),
    (['loss', 'x.log.jsonl', '--height', '5000000'], 'give an integer from 5 to 500'),
])
def test_every_numeric_lab_flag_has_a_range(argv, fragment, capsys):
    """Kind: absurd flags. --width in the millions ate gigabytes; --draws 1e9 a memory error."""
    status, out, err = run_guarded(lab_main, argv, capsys)
    assert_one_line(status, err, fragment)
    assert out == ''


def test_every_numeric_lab_flag_names_its_range_in_its_help(capsys):
    for command, flags in {'overview': ('--top', '--seed', '--temperature'),
                           'attention': ('--layer', '--head', '--query', '--temperature', '--n-head'),
                           'scaling': ('--samples', '--draws', '--row-d', '--seed'),
                           'loss': ('--width', '--height')}.items():
        with pytest.raises(SystemExit):
            lab_main([command, '--help'])
        text = ' '.join(capsys.readouterr().out.split())
        for flag in flags:
            # the text after each mention of the flag, up to the next flag: one is its help
            after = [part.split(' --')[0] for part in text.split(flag + ' ')[1:]]
            assert any(' from ' in part or ' greater than ' in part for part in after), (command, flag, after)


@pytest.mark.parametrize('line, fragment', [
    ('{"step": 1, "loss": 3.0, "lr": "fast"}', "lr is 'fast', not a finite number 0 or more"),
    ('{"step": 1, "loss": 3.0, "lr": -0.01}', 'lr is -0.01'),
    ('{"step": ' + '1' * 400 + ', "loss": 3.0}', "'step' is 1111111111111111111111111111111111111..."),
    ('{"step": -5, "loss": 3.0}', "'step' is -5, not an integer from 0 to 1,000,000,000"),
    ('{"step": 1.5, "loss": 3.0}', "'step' is 1.5"),
    ('{"step": 1, "loss": 1e308}', 'loss is 1e+308, not a finite number from 0 to 1e+06'),
    ('{"step": 1, "loss": 1e400}', 'loss is inf'),  # json reads 1e400 as float inf
    ('{"step": 1, "loss": -3.0}', 'loss is -3.0'),
    ('{"step": 1, "loss": ' + '9' * 400 + '}', 'loss is ' + '9' * 37 + '...'),
    ('{"step": 1, "val_loss": 1e300}', 'val_loss is 1e+300'),
    ('[' * DEEP + ']' * DEEP, 'line 2 nests brackets 100,000 deep'),
    ('{"step": 1, "loss": Infinity}', 'the non-finite number Infinity'),
    ('[1, 2]', 'line 2 is not a JSON object'),
])
def test_every_number_of_a_training_log_is_checked(tmp_path, capsys, line, fragment):
    """Kind: malformed logs. A non-numeric lr, a 400-digit step or losses of 1e308 crashed."""
    path = tmp_path / 'run.log.jsonl'
    path.write_text('{"step": 0, "loss": 3.3, "lr": 0.01}\n' + line + '\n')
    status, out, err = run_guarded(lab_main, ['loss', str(path)], capsys)
    assert_one_line(status, err, fragment)


def test_the_largest_allowed_log_values_chart_without_overflow(tmp_path, capsys):
    """The top of each range must still work: no overflow in the running mean or the chart."""
    path = tmp_path / 'run.log.jsonl'
    lines = [{'step': limits.MAX_STEPS - 100 + s, 'loss': limits.MAX_LOSS, 'lr': 1e300} for s in range(50)]
    lines.append({'step': limits.MAX_STEPS, 'val_loss': limits.MAX_LOSS})
    path.write_text(''.join(json.dumps(r) + '\n' for r in lines))
    status, out, err = run_guarded(lab_main, ['loss', str(path), '--width', '1000', '--height', '500'], capsys)
    assert status == 0, err
    assert 'nan' not in out and 'inf' not in out


def test_a_hundred_thousand_bracket_log_is_one_line_as_a_process(tmp_path):
    path = tmp_path / 'run.log.jsonl'
    path.write_text('[' * DEEP + ']' * DEEP + '\n')
    result = run_python(['-m', 'microgpt.lab', 'loss', str(path)])
    assert_one_line(result.returncode, result.stderr, 'line 1 nests brackets 100,000 deep')


def test_config_caps_admit_their_own_maximum_and_refuse_one_more():
    """Each cap is inclusive; one more is refused with a message naming the field and the cap."""
    small = dict(vocab_size=27, n_layer=1, n_embd=8, n_head=2, block_size=16)
    for field, cap in limits.CONFIG_CAPS.items():
        fields = dict(small, **{field: cap})
        if field == 'n_embd':
            fields['n_head'] = 1
        if field == 'n_head':
            fields['n_embd'] = cap
        if limits.parameter_count(GPTConfig(**fields)) <= limits.MAX_PARAMETERS:
            limits.check_config_sizes(fields)  # no error at the cap itself
        fields[field] = cap + 1
        with pytest.raises(UserError, match=f"{field} is {cap + 1:,}, more than the {cap:,}"):
            limits.check_config_sizes(fields)


# The child enters the folder, which is then removed under it, and starts the program there.
VANISH = "import os, runpy, sys\nos.chdir(sys.argv[1]); os.rmdir(sys.argv[1])\nsys.argv = sys.argv[2:]\n"
START = {'script': "runpy.run_path(sys.argv[0], run_name='__main__')",
         'module': "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)"}


@pytest.mark.parametrize('how, program', [
    ('script', [os.path.join(REPO_DIR, 'train.py'), '--steps', '2']),
    ('script', [os.path.join(REPO_DIR, 'sample.py')]),
    ('module', ['microgpt.convert', 'a.json', 'b.json']),
    ('module', ['microgpt.lab', 'overview', 'emma']),
], ids=['train', 'sample', 'convert', 'lab'])
def test_a_deleted_working_directory_is_one_line(tmp_path, how, program):
    """Were FileNotFoundError tracebacks from deep inside (realpath, abspath) when the
    folder a program was started in had been deleted. Kind: a vanished working directory."""
    gone = tmp_path / 'gone'
    gone.mkdir()
    r = run_python(['-c', VANISH + START[how], str(gone), *program])
    assert_one_line(r.returncode, r.stderr, "the folder this was started in no longer exists")
