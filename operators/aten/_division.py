"""The division shared by aten::div, aten::div_ and aten::floor_divide. Registers nothing.

``DIV_OP`` / ``DIV_WRAPPER_HELPERS``: the division kernel op (true, 'trunc', 'floor' for
floats and ints) and the wrappers' mode and dtype rules; :class:`DivisionProblem`: inputs with
exact and near-integer quotients, the float64 reference and tolerances of the rounding modes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import torch

from operators.aten._binary import BinaryProblem, normal
from operators.inputs import broadcast_shapes, randint
from operators.spec import Case, Tolerance

# The division op shared by aten::div, aten::div_ and aten::floor_divide. MODE (chosen by the
# wrapper from the dtype and rounding_mode): 0 true division, 1 'trunc' and 2 'floor' of floats,
# 3 'trunc' and 4 'floor' of integers, 5 and 6 'trunc' of float16 and bfloat16.
DIV_OP = r'''
@triton.jit
def _op(a, b, p, MODE: tl.constexpr):
    if MODE == 0:
        r = libdevice.div_rn(a, b)
    elif MODE == 1:
        r = libdevice.trunc(libdevice.div_rn(a, b))
    elif MODE == 5:  # float16: PyTorch truncates the quotient rounded to float16
        r = libdevice.trunc(libdevice.div_rn(a, b).to(tl.float16).to(tl.float32))
    elif MODE == 6:  # bfloat16: likewise
        r = libdevice.trunc(libdevice.div_rn(a, b).to(tl.bfloat16).to(tl.float32))
    elif MODE == 2:
        # PyTorch's (and Python's) float floor division: the floor of the exact quotient,
        # from the exact remainder, so 1 // 0.1 is 9 although 1 / 0.1 rounds to 10.
        q = libdevice.div_rn(a, b)
        mod = libdevice.fmod(a, b)
        div = libdevice.div_rn(a - mod, b)
        div = tl.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1, div)
        fl = libdevice.floor(div)
        fl = tl.where(div - fl > 0.5, fl + 1, fl)
        r = tl.where(div != 0, fl, libdevice.copysign(tl.zeros_like(q), q))
        r = tl.where(b == 0, q, r)  # x / 0: IEEE inf or nan
    elif MODE == 3:
        r = a // b  # integer division truncates toward zero
    else:
        q = a // b
        rem = a - q * b
        r = tl.where((rem != 0) & ((rem < 0) != (b < 0)), q - 1, q)
    return r
'''

DIV_WRAPPER_HELPERS = r'''

def _div_mode(x, rounding_mode):
    floating = x.dtype.is_floating_point
    if rounding_mode is None:
        return 0
    if rounding_mode == "trunc":
        if x.dtype == torch.float16:
            return 5
        if x.dtype == torch.bfloat16:
            return 6
        return 1 if floating else 3
    if rounding_mode == "floor":
        return 2 if floating else 4
    raise ValueError(f"rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")


def _div_dtype(x, rounding_mode):
    # true division of integers gives the default float dtype
    if rounding_mode is None and not x.dtype.is_floating_point:
        return torch.get_default_dtype()
    return x.dtype
'''


def div_reference(a: torch.Tensor, b: torch.Tensor, mode: str | None,
                  dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(value, scale) of float division in float64. 'floor': PyTorch's own float64 op, the
    exact floor of the quotient for inputs of lower precision. 'trunc': as PyTorch defines it,
    the truncation of the quotient rounded to the output dtype (trunc(a / b) in that dtype;
    for 16-bit floats that rounding can reach the next integer: 2.9995 -> 3)."""
    if mode == "trunc":
        value = torch.trunc((a / b).to(dtype).to(torch.float64))
    else:
        value = torch.div(a, b, rounding_mode=mode)
    return value, value.abs()



# Divisors with few mantissa bits: k * d is exact in every float dtype for |k| <= 200, so
# quotients are exact integers (or exact halves ...) and truncation/floor have one right answer.
_SHORT_DIVISORS = (0.5, -0.5, 0.75, -0.75, 1.5, -1.5, 2.0, -2.0, 2.5, -2.5, 3.0, -3.0, 0.125,
                   -6.0)


class DivisionProblem(BinaryProblem):
    """Division problems: ``kw["rounding_mode"]`` (None, 'trunc', 'floor') picks the rounding,
    ``div_mode`` overrides it for ops that always floor. Case param ``values``: "quotients"
    (exact integer quotients mixed with fractional ones), "near" (self = other * k rounded to the
    dtype: quotients a hair away from integers, where floor(a / b) in the input precision is
    wrong but Python's floor division is not)."""

    kw_names: ClassVar[tuple[str, ...]] = ("rounding_mode",)
    div_mode: ClassVar[str | None] = None  # "floor" for floor_divide

    def mode(self, kw: dict[str, Any]) -> str | None:
        return self.div_mode if self.div_mode is not None else kw.get("rounding_mode")

    def result_dtype(self, dtype: torch.dtype, kw: dict[str, Any]) -> torch.dtype:
        if self.mode(kw) is None and not dtype.is_floating_point:
            return torch.float32  # true division of integers: the default float dtype
        return dtype

    def draw(self, role: str, shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator,
             c: Case) -> torch.Tensor:
        if dtype.is_floating_point:
            return normal(shape, dtype, gen, std=2.0)
        if role == "self":
            return randint(shape, dtype, gen, low=-1000, high=1000)
        # nonzero divisors of both signs (integer division by zero raises in PyTorch)
        mag = randint(shape, torch.int64, gen, low=1, high=31)
        sign = randint(shape, torch.int64, gen, low=0, high=2) * 2 - 1
        return (mag * sign).to(dtype)

    def draw_pair(self, shape_a: tuple[int, ...], shape_b: tuple[int, ...], dtype: torch.dtype,
                  gen: torch.Generator, c: Case) -> tuple[torch.Tensor, torch.Tensor] | None:
        values = c.get("values")
        if values is None or not dtype.is_floating_point or \
                tuple(broadcast_shapes(shape_a, shape_b)) != tuple(shape_a):
            return None
        k = randint(shape_a, torch.float64, gen, low=-200, high=201)
        if values == "quotients":
            pick = randint(shape_b, torch.int64, gen, low=0, high=len(_SHORT_DIVISORS))
            b = torch.tensor(_SHORT_DIVISORS, dtype=torch.float64)[pick]
            frac = torch.rand(shape_a, generator=gen, dtype=torch.float64) - 0.5
            whole = torch.rand(shape_a, generator=gen, dtype=torch.float64) < 0.5
            a = (k + torch.where(whole, 0.0, frac)) * b
        elif values == "near":
            b = normal(shape_b, dtype, gen, std=2.0).to(torch.float64)
            a = k * b
        else:
            raise ValueError(f"unknown values profile {values!r}")
        return a.to(dtype), b.to(dtype)

    def edge_values(self, role: str, dtype: torch.dtype) -> Sequence[float]:
        if role == "self":
            values = super().edge_values(role, dtype)
            # No bfloat16 subnormal dividend: Triton's interpreter (the cpu platform) flushes
            # bfloat16 subnormals to zero when converting to float32, and floor(tiny / -2.5)
            # is -1 where floor(0 / -2.5) is -0.
            return values[:-1] if dtype == torch.bfloat16 else values
        # Divisors: signed zeros (x / -0 is -inf), infinities, nan, large; no subnormals
        # (a device that flushes them would turn a huge finite quotient into inf).
        big = {torch.float16: 3.0e2, torch.bfloat16: 3.0e30}.get(dtype, 3.0e30)
        return (float("inf"), float("-inf"), float("nan"), 0.0, -0.0, big, -big)

    def ref64(self, a: torch.Tensor, b: torch.Tensor, kw: dict[str, Any],
              dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor | None]:
        return div_reference(a, b, self.mode(kw), dtype)

    def tolerance(self, case: Case, dtype: torch.dtype) -> Tolerance:
        if dtype in (torch.float16, torch.bfloat16) and self.mode(self.kwargs(case)) == "floor":
            # PyTorch's own float16/bfloat16 floor division rounds its intermediates
            # (self - mod, and its quotient) to the dtype: up to ~4 units off at quotients
            # >= 2**(p-2); exact floor, as computed in float32, is also accepted.
            return Tolerance.ulps(dtype, 6)
        return super().tolerance(case, dtype)

    def exact(self, a: Any, b: Any, kw: dict[str, Any]) -> torch.Tensor:
        return torch.div(a, b, rounding_mode=self.mode(kw))
