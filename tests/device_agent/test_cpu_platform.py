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


# ---- interpreter gaps: each kernel below is correct when compiled (interpreter_gaps.py) --------

@triton.jit
def _and_mask(x_ptr, y_ptr, n, lo, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    inside = (offs < n) and (offs >= lo)  # compiled: a logical and of the two masks
    outside = (offs < lo) or (offs >= n)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=inside, other=0.0) + 1, mask=inside)
    tl.store(y_ptr + BLOCK + offs, outside.to(tl.float32))


def test_python_and_or_between_tensors_are_logical() -> None:
    install_interpreter_support()
    x, y = torch.arange(8.0), torch.full((16,), -5.0)
    _and_mask[(1,)](x, y, 6, 2, BLOCK=8)
    assert y[:8].tolist() == [-5, -5, 3, 4, 5, 6, -5, -5]  # nothing written past n
    assert y[8:].tolist() == [1, 1, 0, 0, 0, 0, 1, 1]


@triton.jit
def _invert(x_ptr, y_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(y_ptr + i, ~tl.load(x_ptr + i))


@pytest.mark.parametrize("dtype", [torch.uint8, torch.uint16, torch.uint32, torch.int8])
def test_bitwise_not_of_unsigned_ints(dtype: torch.dtype) -> None:
    install_interpreter_support()
    x = torch.tensor([0, 1, 100, 127, 3, 7, 9, 12]).to(dtype)
    y = torch.empty_like(x)
    _invert[(1,)](x, y, N=8)
    bits = x.element_size() * 8
    expected = [(~v) & ((1 << bits) - 1) if dtype != torch.int8 else ~v for v in x.tolist()]
    assert y.tolist() == expected


@triton.jit
def _compare(a_ptr, b_ptr, y_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    a, b = tl.load(a_ptr + i), tl.load(b_ptr + i)
    tl.store(y_ptr + i, (a < b).to(tl.int32) + 2 * (a <= b).to(tl.int32)
             + 4 * (a == b).to(tl.int32) + 8 * (a != b).to(tl.int32)
             + 16 * (a > b).to(tl.int32) + 32 * (a >= b).to(tl.int32))


def test_bfloat16_comparisons_compare_values() -> None:
    install_interpreter_support()
    nan = float("nan")
    a = torch.tensor([-1.0, -2.0, 1.0, 0.5, -0.0, 3.0, nan, float("inf")], dtype=torch.bfloat16)
    b = torch.tensor([-2.0, -1.0, 1.0, -0.5, 0.0, 3.0, 1.0, 2.0], dtype=torch.bfloat16)
    y = torch.empty(8, dtype=torch.int32)
    _compare[(1,)](a, b, y, N=8)
    expected = ((a < b).int() + 2 * (a <= b).int() + 4 * (a == b).int() + 8 * (a != b).int()
                + 16 * (a > b).int() + 32 * (a >= b).int())
    assert torch.equal(y, expected)


@triton.jit
def _scale(x_ptr, y_ptr, alpha, N: tl.constexpr):
    i = tl.arange(0, N)
    a = alpha.to(tl.float32)  # compiled: alpha is an fp32 scalar
    tl.store(y_ptr + i, (tl.load(x_ptr + i) * alpha + a).to(y_ptr.dtype.element_ty))


def test_float_arguments_are_fp32_scalars() -> None:
    install_interpreter_support()
    x = torch.tensor([1.0, 2.0, 3.0, 2049.0], dtype=torch.float16)
    y = torch.empty(4, dtype=torch.float32)
    _scale[(1,)](x, y, 1.0001, N=4)  # fp16 * fp32 scalar computes in fp32, as compiled
    alpha = torch.tensor(1.0001, dtype=torch.float32)
    assert torch.equal(y, x.float() * alpha + alpha)


@triton.jit
def _convert(v, DTYPE: tl.constexpr):
    return v.to(DTYPE.value)  # compiled: a constexpr parameter, so .value is the dtype


@triton.jit
def _cast_with_helper(x_ptr, y_ptr, OUT: tl.constexpr, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(y_ptr + i, _convert(tl.load(x_ptr + i), OUT))


def test_dtype_given_to_a_jit_helper() -> None:
    install_interpreter_support()
    x, y = torch.arange(4.0) + 0.25, torch.empty(4, dtype=torch.int32)
    _cast_with_helper[(1,)](x, y, OUT=tl.int32, N=4)
    assert y.tolist() == [0, 1, 2, 3]


def _fp8_values(torch_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Every byte of an fp8 format and its value, decoded by torch (an independent decoder)."""
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    return codes, codes.view(torch_dtype).float()


@triton.jit
def _fp8_round_trip(x_ptr, bits_ptr, back_ptr, FMT: tl.constexpr, N: tl.constexpr):
    i = tl.arange(0, N)
    q = tl.load(x_ptr + i).to(FMT)
    tl.store(bits_ptr + i, q.to(tl.uint8, bitcast=True))
    tl.store(back_ptr + i, q.to(tl.float32))


@pytest.mark.parametrize(("fmt", "torch_dtype", "max_norm"),
                         [("fp8e4nv", torch.float8_e4m3fn, 448.0),
                          ("fp8e5", torch.float8_e5m2, 57344.0)])
def test_fp8_casts_round_to_nearest_even_and_saturate(fmt: str, torch_dtype: torch.dtype,
                                                      max_norm: float) -> None:
    """Every value of the format decodes exactly and round-trips; every tie between two
    neighbours goes to the even one, just off a tie to the nearer one; finite overflow and
    infinities saturate, NaN stays NaN: as ``cvt.rn.satfinite`` on an NVIDIA GPU."""
    install_interpreter_support()
    codes, values = _fp8_values(torch_dtype)
    finite = torch.isfinite(values)
    pos = sorted({v for v in values[finite].tolist() if v >= 0})
    lo, hi = torch.tensor(pos[:-1]), torch.tensor(pos[1:])
    mid = (lo + hi) / 2  # exact in fp32
    even = torch.tensor([(codes[values == v][0].item() & 1) == 0 for v in pos[:-1]])
    tie_expected = torch.where(even, lo, hi)
    x = torch.cat([values[finite], mid, -mid, torch.nextafter(mid, hi), torch.nextafter(mid, lo),
                   torch.tensor([max_norm * 1.01, -max_norm * 1.06, 1e30, float("inf"),
                                 -float("inf"), float("nan")])])
    expected = torch.cat([values[finite], tie_expected, -tie_expected, hi, lo,
                          torch.tensor([max_norm, -max_norm, max_norm, max_norm, -max_norm,
                                        float("nan")])])
    n = triton.next_power_of_2(len(x))
    xs = torch.zeros(n)
    xs[:len(x)] = x
    bits, back = torch.empty(n, dtype=torch.uint8), torch.empty(n)
    _fp8_round_trip[(1,)](xs, bits, back, FMT=getattr(tl, fmt.replace("fp8", "float8")), N=n)
    torch.testing.assert_close(back[:len(x)], expected, rtol=0, atol=0, equal_nan=True)
    decoded = bits[:len(x)].view(torch_dtype).float()
    torch.testing.assert_close(decoded, expected, rtol=0, atol=0, equal_nan=True)
    assert torch.equal(bits[:int(finite.sum())], codes[finite])  # -0.0 keeps its sign too
