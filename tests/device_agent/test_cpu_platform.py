"""The cpu platform owns the interpreter's gaps: honest candidates that autotune, call libdevice
or use bf16 dots pass; what the interpreter cannot run is a platform limit, not a candidate fault."""

from __future__ import annotations

import math
import os
import time

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

import operators
from device_agent.platforms.cpu import cpu_bench, install_interpreter_support, is_interpreter_limit
from protos.records import Status
from tests.device_agent.test_agent import evaluate, fixture
from tests.helpers import softmax_with_libdevice


def test_autotune_with_several_configs_passes(cpu_agent: str) -> None:
    v = evaluate(cpu_agent, fixture("add_autotuned.py"))
    assert v.status is Status.PASSED, (v.message, v.log[-1500:])


def test_libdevice_calls_pass(cpu_agent: str) -> None:
    v = evaluate(cpu_agent, softmax_with_libdevice(), op="aten::softmax")
    assert v.status is Status.PASSED, (v.message, v.log[-1500:])


def test_bf16_dot_cases_run_in_fp32(cpu_agent: str) -> None:
    spec = operators.get("aten::mm")
    v = evaluate(cpu_agent, spec.solution, op="aten::mm")
    assert v.status is Status.PASSED, v.message
    assert any("bfloat16" in c.name for c in v.cases if not c.hidden)


def test_interpreter_limit_is_not_the_candidates_fault(cpu_agent: str) -> None:
    v = evaluate(cpu_agent, fixture("add_inline_asm.py"))
    assert v.status is Status.INFRA_ERROR
    assert "cpu platform cannot run" in v.message and "inline_asm" in v.message


@triton.jit
def _dot_and_libdevice(a_ptr, b_ptr, c_ptr, x_ptr, y_ptr, B: tl.constexpr):
    r = tl.arange(0, B)
    a = tl.load(a_ptr + r[:, None] * B + r[None, :])
    b = tl.load(b_ptr + r[:, None] * B + r[None, :])
    tl.store(c_ptr + r[:, None] * B + r[None, :], tl.dot(a, b))
    x = tl.load(x_ptr + r)
    tl.store(y_ptr + r, libdevice.pow(libdevice.tanh(x), 2.0) + libdevice.erf(x))


def test_patches_in_process() -> None:
    assert os.environ.get("TRITON_INTERPRET") == "1"
    install_interpreter_support()
    install_interpreter_support()  # idempotent
    a, b = torch.randn(16, 16).bfloat16(), torch.randn(16, 16).bfloat16()
    c, x, y = torch.empty(16, 16), torch.randn(16), torch.empty(16)
    _dot_and_libdevice[(1,)](a, b, c, x, y, B=16)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(y, x.tanh() ** 2 + torch.erf(x), rtol=1e-5, atol=1e-6)


def test_cpu_bench_and_limit_classification() -> None:
    # do_bench's meaning: warmup and rep are millisecond budgets, not counts. A 30 ms call with
    # the defaults (25 ms, 100 ms) runs once to estimate, no warm-up run and three timed runs;
    # a call slower than the whole budget runs once, and that run is the sample.
    calls: list[int] = []

    def slow() -> None:
        calls.append(1)
        time.sleep(0.03)

    assert cpu_bench(slow) >= 30
    assert len(calls) == 4
    calls.clear()
    assert len(cpu_bench(slow, warmup=0, rep=0, quantiles=(0.5, 0.2, 0.8))) == 3
    assert len(calls) == 1  # the estimating run spent the budget: it is the sample
    calls.clear()
    assert cpu_bench(slow, rep=200, quantiles=(0.5,))[0] >= 30
    assert len(calls) == 1 + 6
    fast = cpu_bench(lambda: calls.append(1), return_mode="all")
    assert 1 < len(fast) <= 1000  # a fast call repeats to fill the budget, within a cap
    assert not is_interpreter_limit(ValueError("candidate bug"))
    try:
        np.zeros(1).reshape(2)
    except ValueError as exc:
        assert not is_interpreter_limit(exc)


@pytest.mark.parametrize("name", ["add_autotuned.py", "add_inline_asm.py"])
def test_fixtures_exist(name: str) -> None:
    assert fixture(name)


@triton.jit
def _cast_bf16(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    m = i < n
    tl.store(y_ptr + i, tl.load(x_ptr + i, mask=m).to(tl.bfloat16), mask=m)


@triton.jit
def _dot(a_ptr, b_ptr, c_ptr, N: tl.constexpr, PRECISION: tl.constexpr):
    r = tl.arange(0, N)
    a = tl.load(a_ptr + r[:, None] * N + r[None, :])
    b = tl.load(b_ptr + r[:, None] * N + r[None, :])
    tl.store(c_ptr + r[:, None] * N + r[None, :], tl.dot(a, b, input_precision=PRECISION))


def test_interpreter_rounds_like_the_gpu() -> None:
    """fp32 -> bf16 casts round to nearest even (the interpreter truncates), and a float32
    ``tl.dot`` uses TF32 unless the kernel asks for IEEE, as on an NVIDIA GPU."""
    os.environ["TRITON_INTERPRET"] = "1"
    install_interpreter_support()
    x = torch.randn(1000, generator=torch.Generator().manual_seed(3)) * 10
    x[:4] = torch.tensor([2.1828, float("nan"), float("inf"), -0.0])
    y = torch.empty(1000, dtype=torch.bfloat16)
    _cast_bf16[(1,)](x, y, 1000, BLOCK=1024)
    expected = x.to(torch.bfloat16)
    assert torch.equal(y[4:], expected[4:]) and y[0].item() == 2.1875
    assert torch.isnan(y[1]) and y[2].item() == float("inf") and str(y[3].item()) == "-0.0"

    g = torch.Generator().manual_seed(4)
    a, b = torch.randn(32, 32, generator=g), torch.randn(32, 32, generator=g)
    exact = (a.double() @ b.double())
    tf32 = torch.empty(32, 32)
    ieee = torch.empty(32, 32)
    _dot[(1,)](a, b, tf32, N=32, PRECISION="tf32")
    _dot[(1,)](a, b, ieee, N=32, PRECISION="ieee")
    assert (ieee.double() - exact).abs().max() < 1e-4
    assert (tf32.double() - exact).abs().max() > 1e-3  # 10-bit mantissa inputs
    a_t = (a.view(torch.int32) + 0x1000 + ((a.view(torch.int32) >> 13) & 1)) & ~0x1FFF
    b_t = (b.view(torch.int32) + 0x1000 + ((b.view(torch.int32) >> 13) & 1)) & ~0x1FFF
    emulated = a_t.view(torch.float32).double() @ b_t.view(torch.float32).double()
    assert (tf32.double() - emulated).abs().max() < 1e-4


@triton.jit
def _to_bf16_and_back(x_ptr, y_ptr, z_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    x = tl.load(x_ptr + i)
    tl.store(y_ptr + i, x.to(tl.bfloat16))
    tl.store(z_ptr + i, x.to(tl.bfloat16).to(tl.int32))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float16, torch.float64,
                                   torch.bool])
def test_casts_to_and_from_bfloat16_convert_values(dtype: torch.dtype) -> None:
    """The interpreter bit-casts non-fp32 types to bf16; the cpu platform converts them."""
    install_interpreter_support()
    x = torch.tensor([1, 0, 7, 1, 120, 3, 0, 1]).to(dtype)
    y = torch.empty(8, dtype=torch.bfloat16)
    z = torch.empty(8, dtype=torch.int32)
    _to_bf16_and_back[(1,)](x, y, z, N=8)
    assert torch.equal(y, x.to(torch.bfloat16)) and torch.equal(z, x.to(torch.int32))


@triton.jit
def _gammas(x_ptr, lg_ptr, tg_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    x = tl.load(x_ptr + i)
    tl.store(lg_ptr + i, libdevice.lgamma(x))
    tl.store(tg_ptr + i, libdevice.tgamma(x))


def test_gamma_functions_at_their_poles_are_values_not_crashes() -> None:
    install_interpreter_support()
    x = torch.tensor([0.0, -1.0, -2.0, 3.0])
    lg, tg = torch.empty(4), torch.empty(4)
    _gammas[(1,)](x, lg, tg, N=4)
    assert torch.isinf(lg[:3]).all() and lg[3].item() == pytest.approx(math.log(2.0))
    assert tg[0].item() == math.inf and torch.isnan(tg[1:3]).all() and tg[3].item() == 2.0
