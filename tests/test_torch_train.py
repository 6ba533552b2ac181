"""
`train.py --engine torch`: the same loop, flags, checkpoint and log as the other engines.

PyTorch is optional: `pip install -e '.[torch]'` enables these tests, otherwise they skip (the
one test of the message a user without PyTorch sees runs either way). The engines' equal
losses through train.py are tests/test_dropout.py's.
"""

import os
import shutil
import subprocess
import sys

import pytest

from helpers import REPO_DIR, assert_one_line_error, interrupt_after, log_of, losses, run, train_args
from microgpt.programs import train
from microgpt.edge.checkpoint import read_checkpoint

pytestmark = pytest.mark.torch

ENGINE_TOL = 1e-9     # the same math in float64, rounded differently
FLOAT32_TOL = 1e-5    # 50 steps in float32: measured at most 4e-7 (default config, batch 1 and 4)
BFLOAT16_TOL = 0.05   # bfloat16 products keep 8 bits: measured at most 5.4e-3 over the same steps


def torch_or_skip():
    torch = pytest.importorskip("torch", reason="needs PyTorch: pip install -e '.[torch]'")
    torch.set_num_threads(1)  # tiny matrices: more threads only contend on a shared machine
    return torch


def test_a_run_moves_scalar_then_torch_then_numpy_as_if_it_never_switched(tmp_path, names_file, capsys,
                                                                         monkeypatch):
    torch_or_skip()
    from microgpt import torchgpt
    whole = tmp_path / 'whole.json'
    assert run(train.main, train_args(names_file, whole, '--steps', '18'), capsys)[0] == 0
    out = tmp_path / 'model.json'
    interrupt_after(monkeypatch, 6)  # the scalar engine, Ctrl-C in its 6th step
    assert run(train.main, train_args(names_file, out, '--steps', '18'), capsys)[0] == 130
    monkeypatch.undo()
    interrupt_after(monkeypatch, 6, torchgpt.Trainer)  # torch does steps 7-12
    code, stdout, _ = run(train.main, ['--out', str(out), '--resume', '--engine', 'torch', '--num-samples', '0'],
                          capsys)
    monkeypatch.undo()
    assert code == 130 and 'engine=torch' in stdout and read_checkpoint(str(out)).train_state.step == 12
    code, stdout, _ = run(train.main, ['--out', str(out), '--resume', '--engine', 'numpy', '--num-samples', '0'],
                          capsys)
    assert code == 0 and 'engine=numpy' in stdout
    got, want = losses(log_of(out)), losses(log_of(whole))
    assert [e['step'] for e in got] == list(range(1, 19))
    assert max(abs(a['loss'] - b['loss']) for a, b in zip(got, want)) < ENGINE_TOL


@pytest.mark.parametrize('dtype,tol', [('float32', FLOAT32_TOL), ('bfloat16', BFLOAT16_TOL)])
def test_lower_precision_losses_stay_near_float64s(tmp_path, names_file, capsys, dtype, tol):
    torch_or_skip()
    logs = {}
    for d in ('float64', dtype):
        out = tmp_path / d / 'model.json'
        code, stdout, _ = run(train.main, train_args(names_file, out, '--steps', '50', '--batch-size', '4',
                                                     '--engine', 'torch', '--dtype', d), capsys)
        assert code == 0 and f'dtype={d}' in stdout
        logs[d] = losses(log_of(out))
    gaps = [abs(a['loss'] - b['loss']) for a, b in zip(logs['float64'], logs[dtype])]
    assert len(gaps) == 50 and max(gaps) < tol
    assert max(gaps) > 0  # the control: it really computed in another precision
    # and a resumed run keeps its dtype, as it keeps its engine
    code, stdout, _ = run(train.main, ['--out', str(tmp_path / dtype / 'model.json'), '--resume',
                                       '--steps', '52', '--num-samples', '0'], capsys)
    assert code == 0 and f'engine=torch batch_size=4 dtype={dtype}' in stdout


# ---------------------------------------------------------------------------- bad input
@pytest.fixture
def kept(tmp_path, tiny_ckpt):
    """A good checkpoint at --out that a refused run must leave byte for byte as it was (the
    runs below pass --force, which would replace it: each is refused before anything is written)."""
    out = tmp_path / 'model.json'
    shutil.copy(tiny_ckpt, out)
    before = out.read_bytes()
    yield out
    assert out.read_bytes() == before
    assert not os.path.exists(str(out)[:-len('.json')] + '.log.jsonl')


def test_engine_torch_without_pytorch_names_the_install_command(kept, names_file):
    block_torch = ("import sys; sys.modules['torch'] = None; sys.argv[0] = 'train.py'; "
                   "from microgpt.programs import train; train.command()")
    p = subprocess.run([sys.executable, '-c', block_torch, *train_args(names_file, kept, '--force', '--engine', 'torch')],
                       cwd=REPO_DIR, capture_output=True, text=True, timeout=120,
                       env={**os.environ, 'PYTHONPATH': REPO_DIR})
    assert p.returncode == 2
    assert_one_line_error(p.returncode, p.stderr, "pip install -e '.[torch]'")


@pytest.mark.parametrize('extra,fragment', [
    (['--engine', 'torch', '--unfused'], "--unfused is for the scalar engine"),
    (['--engine', 'torch', '--dtype', 'float16'], "invalid choice: 'float16'"),
], ids=['unfused-torch', 'float16'])  # --dtype and --device on another engine: tests/test_refusals.py
def test_engine_flag_mismatches_are_one_line_errors(kept, names_file, capsys, extra, fragment):
    torch_or_skip()
    code, _, err = run(train.main, train_args(names_file, kept, '--force', *extra), capsys)
    assert code == 2
    assert_one_line_error(code, err, fragment)


@pytest.mark.parametrize('device', ['cuda', 'mps'])
def test_a_device_that_is_not_there_is_one_line(kept, names_file, capsys, device):
    torch = torch_or_skip()
    if (torch.cuda.is_available() if device == 'cuda' else torch.backends.mps.is_available()):
        pytest.skip(f"this machine has {device}: the error cannot happen here")
    code, _, err = run(train.main, train_args(names_file, kept, '--force', '--engine', 'torch', '--device', device), capsys)
    assert code == 2
    assert_one_line_error(code, err, f"no {device} device")


def test_a_dtype_the_device_cannot_do_is_one_line(kept, names_file, capsys, monkeypatch):
    """Simulated (every dtype works on a CPU): a device whose products refuse the dtype, as
    mps refuses float64."""
    torch = torch_or_skip()
    from microgpt import torchgpt
    import microgpt.torchgpt.trainer  # noqa: F401  (loads torchgpt.trainer)
    real_ones = torch.ones

    def ones(*shape, dtype=None, device=None):
        if dtype == torch.bfloat16:
            raise TypeError("bfloat16 is not supported on this device")
        return real_ones(*shape, dtype=dtype, device=device)
    monkeypatch.setattr(torchgpt.trainer.torch, 'ones', ones)
    code, _, err = run(train.main, train_args(names_file, kept, '--force', '--engine', 'torch', '--dtype', 'bfloat16'), capsys)
    assert_one_line_error(code, err, "--dtype bfloat16 is not supported on --device cpu: use --dtype float32")


@pytest.mark.parametrize('env,extra,fragment', [
    ({'RANK': '0', 'WORLD_SIZE': '2'}, ['--engine', 'numpy'], "only --engine torch trains across processes"),
    ({'RANK': '0', 'WORLD_SIZE': '2'}, [], "only --engine torch trains across processes"),
    ({'RANK': '0', 'WORLD_SIZE': '4'}, ['--engine', 'torch', '--batch-size', '2'],
     "torchrun started 4 ranks for a batch of 2 names"),
    ({'RANK': '5', 'WORLD_SIZE': '2'}, ['--engine', 'torch'], "are not a rank and a number of ranks"),
    ({'RANK': 'x', 'WORLD_SIZE': '2'}, ['--engine', 'torch'], "are not a rank and a number of ranks"),
], ids=['numpy', 'scalar', 'ranks-over-batch', 'rank-past-size', 'rank-not-a-number'])
def test_torchruns_environment_is_checked_before_anything_starts(kept, names_file, capsys, monkeypatch,
                                                                 env, extra, fragment):
    if 'torch' in extra:
        torch_or_skip()
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code, _, err = run(train.main, train_args(names_file, kept, '--force', *extra), capsys)
    assert code == 2
    assert_one_line_error(code, err, fragment)
