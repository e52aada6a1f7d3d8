"""bfloat16 in Triton's interpreter as compiled Triton computes it (``interpreter_gaps``): the
interpreter keeps bf16 as uint16 bits and does integer arithmetic on them. Each kernel here is
correct when compiled; without the shim it computes garbage or crashes."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from device_agent.platforms.cpu import install_interpreter_support
from device_agent.platforms.interpreter_gaps import bf16_constant

BF16 = torch.bfloat16


def _specials() -> torch.Tensor:
    """Values with every class: signed zeros, infinities, NaN, subnormals, the largest."""
    return torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e-39, -3e-39,
                         3.3895e38, -3.3895e38, 1.0, -1.5, 2.0]).to(BF16)


def _operands(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    a = (torch.randn(n, generator=g) * torch.exp2(torch.randint(-20, 20, (n,), generator=g)))
    b = (torch.randn(n, generator=g) * torch.exp2(torch.randint(-20, 20, (n,), generator=g)))
    s = _specials()
    a, b = a.to(BF16), b.to(BF16)
    a[:len(s)], b[:len(s)] = s, s.flip(0)
    a[len(s):2 * len(s)], b[len(s):2 * len(s)] = s, s.roll(3)
    return a, b


@triton.jit
def _arith(a_ptr, b_ptr, y_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    a, b = tl.load(a_ptr + i), tl.load(b_ptr + i)
    tl.store(y_ptr + i, a + b)
    tl.store(y_ptr + N + i, a - b)
    tl.store(y_ptr + 2 * N + i, a * b)
    tl.store(y_ptr + 3 * N + i, -a)
    tl.store(y_ptr + 4 * N + i, tl.fdiv(a, b))
    tl.store(y_ptr + 5 * N + i, tl.maximum(a, b))
    tl.store(y_ptr + 6 * N + i, tl.minimum(a, b))


def test_bf16_arithmetic_rounds_the_fp32_result_to_nearest_even() -> None:
    """bf16 op bf16 stays bf16: the exact result rounded once (fp32 then RNE is that rounding
    for +, -, *, /), as ``add.rn.bf16`` & co.; torch's CPU bf16 ops round the same way."""
    install_interpreter_support()
    n = 1024
    a, b = _operands(n, 1)
    y = torch.empty(7 * n, dtype=BF16)
    _arith[(1,)](a, b, y, N=n)
    af, bf = a.float(), b.float()
    expected = [af + bf, af - bf, af * bf, -af, af / bf, torch.maximum(af, bf),
                torch.minimum(af, bf)]
    for k, e in enumerate(expected):
        torch.testing.assert_close(y[k * n:(k + 1) * n], e.to(BF16), rtol=0, atol=0,
                                   equal_nan=True, msg=f"op {k}")
    assert str(y[3 * n].item()) == "0.0"  # compiled, -x is 0 - x: -(+0) is +0


@triton.jit
def _fma(a_ptr, b_ptr, c_ptr, y_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(y_ptr + i, tl.fma(tl.load(a_ptr + i), tl.load(b_ptr + i), tl.load(c_ptr + i)))


def test_bf16_fma_rounds_once() -> None:
    """1.125 * 0.90625 = 261/256, a bf16 tie; +-2**-30 moves it off the tie by less than half
    an fp32 unit, so rounding through fp32 would land on the tie and go to even (1.015625)
    both times; ``fma.rn.bf16`` rounds the exact value once: 1.0234375 above, 1.015625 below."""
    install_interpreter_support()
    a = torch.tensor([1.125, 1.125, 3.0, -2.0], dtype=BF16)
    b = torch.tensor([0.90625, 0.90625, 0.5, 4.0], dtype=BF16)
    c = torch.tensor([2.0 ** -30, -2.0 ** -30, 0.25, float("inf")], dtype=BF16)
    y = torch.empty(4, dtype=BF16)
    _fma[(1,)](a, b, c, y, N=4)
    assert y.tolist() == [1.0234375, 1.015625, 1.75, float("inf")]


@triton.jit
def _constants(x_ptr, y_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    x = tl.load(x_ptr + i, mask=i < N - 1, other=float("-inf"))
    tl.store(y_ptr + i, x * 2.0)
    tl.store(y_ptr + N + i, x + 3)
    tl.store(y_ptr + 2 * N + i, tl.full([N], 0.1, tl.bfloat16))
    tl.store(y_ptr + 3 * N + i, tl.where(x > 0.0, x, 1.0039064))


def test_bf16_constants_are_built_as_compiled() -> None:
    """A Python number meeting a bf16 tensor becomes a bf16 constant (the interpreter has no
    ``get_bf16``); compiled, its text is ``std::to_string`` of the fp32 value, six decimals:
    1.0039064 is "1.003906", below the 1.00390625 tie, so 1.0 (rounding the fp32 value
    itself would give 1.0078125)."""
    install_interpreter_support()
    x = torch.tensor([1.5, -3.0, 0.0, 7.0], dtype=BF16)
    y = torch.empty(16, dtype=BF16)
    _constants[(1,)](x, y, N=4)
    inf = float("inf")
    assert y[:4].tolist() == [3.0, -6.0, 0.0, -inf]
    assert y[4:8].tolist() == [4.5, 0.0, 3.0, -inf]
    assert y[8:12].tolist() == [0.10009765625] * 4
    assert y[12:].tolist() == [1.5, 1.0, 1.0, 1.0]


@pytest.mark.parametrize(("value", "bits"), [(1e-7, 0x0000), (-1e-7, 0x8000), (0.1, 0x3DCD),
                                             (1.0039064, 0x3F80), (1.00390625, 0x3F80),
                                             (1.01171875, 0x3F82), (3.4e38, 0x7F80),
                                             (-float("inf"), 0xFF80), (257.0, 0x4380)])
def test_bf16_constant_bits(value: float, bits: int) -> None:
    """Below 5e-7 the six decimals are "0.000000" (a signed zero), ties go to even, past the
    largest bf16 (3.39e38) the constant is infinite."""
    assert int(bf16_constant(value)[0]) == bits


@triton.jit
def _reduce_and_accumulate(x_ptr, sum_ptr, acc_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    x = tl.load(x_ptr + i)
    tl.store(sum_ptr, tl.sum(x, axis=0))
    tl.store(sum_ptr + 1, tl.max(x, axis=0))
    old = tl.atomic_add(acc_ptr + i % 4, x)
    tl.store(sum_ptr + 2 + i, old)


def test_bf16_sums_and_atomic_adds_add_values() -> None:
    """``tl.sum`` of bf16 is a bf16 reduction (the interpreter summed the bits); ``atomic_add``
    on bf16 (the interpreter's C++ atomics refuse the type) adds each lane in turn, rounding
    to bf16 after each add and returning the value before it."""
    install_interpreter_support()
    g = torch.Generator().manual_seed(5)
    x = (torch.randint(-64, 64, (64,), generator=g) / 8).to(BF16)  # sums exact in fp32
    out = torch.zeros(66, dtype=BF16)
    acc = torch.tensor([1000.0, 0.5, -3.0, 0.0], dtype=BF16)
    start = acc.clone()
    _reduce_and_accumulate[(1,)](x, out, acc, N=64)
    assert out[0].item() == x.float().sum().to(BF16).item()
    assert out[1].item() == x.max().item()
    expected, olds = start.float().clone(), []
    for k, v in enumerate(x.float().tolist()):
        olds.append(expected[k % 4].item())
        expected[k % 4] = (expected[k % 4] + v).to(BF16).float()
    assert acc.float().tolist() == expected.tolist()
    assert out[2:].float().tolist() == olds


@triton.jit
def _narrow(x_ptr, y_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(y_ptr + i, tl.load(x_ptr + i).to(tl.bfloat16))


@pytest.mark.parametrize("dtype", [torch.float64, torch.int32, torch.int64])
def test_wide_values_to_bf16_round_once(dtype: torch.dtype) -> None:
    """fp64 and wide ints convert with one rounding (``cvt.rn.bf16.f64``/``.s32``): through
    a rounded fp32, 1 + 2**-8 + 2**-30 (and 2**24 + 2**16 + 1) would first land on a tie."""
    install_interpreter_support()
    if dtype == torch.float64:
        x = torch.tensor([1 + 2 ** -8 + 2 ** -30, -(1 + 2 ** -8 + 2 ** -30), 1e300, 3.0],
                         dtype=dtype)
        expected = [1.0078125, -1.0078125, float("inf"), 3.0]
    else:
        x = torch.tensor([2 ** 24 + 2 ** 16 + 1, -(2 ** 24 + 2 ** 16 + 1), 7, 0], dtype=dtype)
        expected = [2.0 ** 24 + 2 ** 17, -(2.0 ** 24 + 2 ** 17), 7.0, 0.0]
    y = torch.empty(4, dtype=BF16)
    _narrow[(1,)](x, y, N=4)
    assert y.tolist() == expected
