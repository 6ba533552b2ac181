"""
torchgpt's modern rungs against PyTorch's own functions, in float64.

PyTorch is optional: `pip install -e '.[torch]'` enables these tests, otherwise they skip.
The pieces model.py writes from their formulas, values and gradients, each against the library's
function for it (F.rms_norm, F.gelu's tanh form, F.silu, F.scaled_dot_product_attention with
enable_gqa) or, for RoPE, which PyTorch lacks, against the same turn as complex numbers; each
with a control that the same bound would catch. Then every rung in lower precisions near
float64. tests/test_modern_engines.py proves the rungs equal in every engine.
"""

import pytest

pytestmark = pytest.mark.torch

torch = pytest.importorskip("torch", reason="needs PyTorch: pip install -e '.[torch]'")
torch.set_num_threads(1)  # tiny tensors: more threads only contend on a shared machine
import torch.nn.functional as F  # noqa: E402

from microgpt import torchgpt  # noqa: E402
from microgpt.model import ROPE_BASE  # noqa: E402
from microgpt.ops import RMS_EPS  # noqa: E402
from microgpt.torchgpt.model import attention, gelu, rmsnorm, rope, silu  # noqa: E402
from microgpt.training import doc_tokens  # noqa: E402
from helpers import RUNG_DOCS, rung_setup  # noqa: E402

TOL = 1e-10  # float64 both sides: the same function, computed in another order


def rand(*shape, seed=0):
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


def gap(ours, theirs, *inputs):
    """The largest difference of two functions of `inputs`: their values, and their inputs'
    gradients for one random weighting of the outputs."""
    inputs = [x.clone().requires_grad_() for x in inputs]
    a, b = ours(*inputs), theirs(*inputs)
    w = rand(*a.shape, seed=9)
    grads = [torch.autograd.grad((y * w).sum(), inputs) for y in (a, b)]
    return max([(a - b).abs().max().item()] + [(ga - gb).abs().max().item() for ga, gb in zip(*grads)])


# ---------------------------------------------------------------------------- the pieces
def test_rmsnorm_with_its_gain_is_pytorchs():
    x, g = rand(3, 5, 8), 0.2 * rand(1, 8, seed=1)  # g: a norm gain (1, n_embd), its difference from 1
    assert gap(rmsnorm, lambda x: F.rms_norm(x, (8,), eps=RMS_EPS), x) < TOL
    assert gap(rmsnorm, lambda x, g: F.rms_norm(x, (8,), weight=1 + g[0], eps=RMS_EPS), x, g) < TOL
    # the control: a gain taken as the factor itself (not its difference from 1) is caught
    assert gap(rmsnorm, lambda x, g: F.rms_norm(x, (8,), weight=g[0], eps=RMS_EPS), x, g) > TOL


def test_gelu_and_silu_are_pytorchs():
    u = 3 * rand(4, 24)
    assert gap(gelu, lambda u: F.gelu(u, approximate='tanh'), u) < TOL
    assert gap(gelu, F.gelu, u) > TOL  # the control: the exact (erf) GELU is another function
    assert gap(silu, F.silu, u) < TOL
    assert gap(silu, torch.sigmoid, u) > TOL


@pytest.mark.parametrize('n_kv_head', [4, 2, 1])  # every head its own, grouped, multi-query
def test_attention_over_shared_heads_is_pytorchs(n_kv_head):
    q, k, v = rand(2, 4, 6, 2), rand(2, n_kv_head, 6, 2, seed=1), rand(2, n_kv_head, 6, 2, seed=2)
    sdpa = F.scaled_dot_product_attention
    assert gap(attention, lambda q, k, v: sdpa(q, k, v, is_causal=True, enable_gqa=True), q, k, v) < TOL
    # the controls: attention that sees the future, and query head h reading kv head h % n_kv_head
    assert gap(attention, lambda q, k, v: sdpa(q, k, v, enable_gqa=True), q, k, v) > TOL
    if n_kv_head == 2:
        def wrong(q, k, v):
            return sdpa(q, k.repeat(1, 2, 1, 1), v.repeat(1, 2, 1, 1), is_causal=True)
        assert gap(attention, wrong, q, k, v) > TOL


def test_rope_is_a_turn_of_complex_numbers():
    D = 8
    x = rand(2, 3, 6, D)  # (B, heads, T, head_dim)
    theta = torch.outer(torch.arange(6.0, dtype=torch.float64),
                        ROPE_BASE ** (-torch.arange(0, D, 2, dtype=torch.float64) / D))  # (T, D/2)

    def turned(x, sign=1):  # pair (a, b) as a + ib, times e^(i theta): Llama's way of writing it
        z = torch.view_as_complex(x.reshape(*x.shape[:-1], D // 2, 2))  # (B, heads, T, D/2)
        return torch.view_as_real(z * torch.polar(torch.ones_like(theta), sign * theta)).flatten(-2)
    assert gap(rope, turned, x) < TOL
    assert gap(rope, lambda x: turned(x, -1), x) > TOL  # the control: turned the other way


# ---------------------------------------------------------------------------- the module
@pytest.mark.parametrize('dtype,tol', [('float32', 1e-5), ('bfloat16', 0.05)])
def test_every_rung_trains_in_lower_precision_near_float64(dtype, tol):
    config, weights, tokenizer = rung_setup('all')
    ours, exact = (torchgpt.Trainer(config, weights, None, dtype=d) for d in (dtype, 'float64'))
    batch = [doc_tokens(tokenizer, d) for d in RUNG_DOCS]
    gaps = [abs(ours.step(batch, 0.01) - exact.step(batch, 0.01)) for _ in range(5)]
    assert 0 < max(gaps) < tol  # near, and not equal: it really computed in dtype
