"""aten::mul — ``self * other`` with broadcasting (overloads Tensor, Scalar, out)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch

from operators.aten._binary import (
    OUT,
    SCALAR,
    TENSOR,
    BinaryProblem,
    grid,
    hidden,
    solution,
)
from operators.inputs import randint
from operators.registry import register
from operators.spec import Case, EntryPoint, Kind, Negative, Tier, Tolerance, case

_OP = r'''
@triton.jit
def _op(a, b, p, MODE: tl.constexpr):
    return a * b
'''

_WRAPPERS = r'''

def mul_Tensor(self, other):
    a, b = torch.broadcast_tensors(self, other)
    out = torch.empty(a.shape, dtype=self.dtype, device=self.device)
    return _launch(a, b, out)


def mul_Scalar(self, other):
    b = _scalar(other, _CT[self.dtype], self.device).expand(self.shape)
    out = torch.empty(self.shape, dtype=self.dtype, device=self.device)
    return _launch(self, b, out)


def mul_out(self, other, *, out):
    a, b = torch.broadcast_tensors(self, other)
    return _launch(a, b, out)
'''

SOLUTION = solution(_OP, _WRAPPERS)

# A "fast path" that treats x * 0 as 0: loses inf * 0 = nan and nan * 0 = nan.
NEGATIVE_ZERO_SHORTCUT = SOLUTION.replace("    return a * b\n",
                                          "    return tl.where(b == 0, 0, a * b)\n")
# Computes every dtype in float32: int64 products beyond 2**24 are no longer exact.
NEGATIVE_INT_VIA_FLOAT = SOLUTION.replace("torch.int64: tl.int64}", "torch.int64: tl.float32}")

_ENTRIES = [("mul_Tensor", TENSOR), ("mul_Scalar", SCALAR), ("mul_out", OUT)]


@register("aten::mul", version=1, kind=Kind.COMPUTE)
class Mul(BinaryProblem):
    op_name = "mul"
    forms = dict(_ENTRIES)
    entry_points = (
        EntryPoint("mul_Tensor", "mul_Tensor(self: Tensor, other: Tensor) -> Tensor",
                   "self * other, broadcasting self and other."),
        EntryPoint("mul_Scalar", "mul_Scalar(self: Tensor, other: Scalar) -> Tensor",
                   "self * other for a Python number other."),
        EntryPoint("mul_out", "mul_out(self: Tensor, other: Tensor, *, out: Tensor) -> Tensor",
                   "Writes self * other into out (already of the broadcast shape, possibly "
                   "non-contiguous) and returns out."),
    )
    description = (
        "Elementwise multiplication `out = self * other`, following PyTorch's `torch.mul`. "
        "`self` and `other` broadcast against each other (either may be 0-d; empty tensors give "
        "empty results); inputs and `out` may be non-contiguous (transposed or strided). Both "
        "tensors have the same dtype (float16, bfloat16, float32, float64, int32 or int64) and "
        "the result has that dtype; a Python-number `other` has the tensor's dtype category "
        "(float for float tensors, int for int tensors). For float16/bfloat16, compute in "
        "float32 and round once; a float scalar is held in float32 (float64 for float64 "
        "tensors). IEEE semantics: inf * 0 = nan, nan propagates, products beyond the dtype's "
        "range are inf. Integer products are exact modulo 2**bits (wrap-around)."
    )
    solution = SOLUTION
    negatives = (
        Negative("zero_shortcut", "returns 0 wherever other == 0, so inf * 0 and nan * 0 give 0 "
                 "instead of nan", NEGATIVE_ZERO_SHORTCUT),
        Negative("int_via_float32", "computes integer products in float32, inexact beyond 2**24",
                 NEGATIVE_INT_VIA_FLOAT),
    )
    # One rounding of the product, plus one of a float scalar held in float32: 2 units.
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 2),
        "float64": Tolerance.ulps("float64", 2),
    }

    def draw(self, role: str, shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator,
             c: Case) -> torch.Tensor:
        if c.get("big"):  # int64 products up to 2**40: exact only in integer arithmetic
            return randint(shape, dtype, gen, low=-2**20, high=2**20)
        return super().draw(role, shape, dtype, gen, c)

    def ref64(self, a: torch.Tensor, b: torch.Tensor, kw: dict[str, Any],
              dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor | None]:
        value = a * b
        return value, value.abs()

    def cases(self) -> Sequence[Case]:
        cs = grid("mul_Tensor", scalar="mul_Scalar", out="mul_out")
        cs += [
            case("mul_Tensor", "float64", (511, 257), other=(257,), edge=True),
            case("mul_Tensor", "float64", (45, 31), other=(45, 31), layout="transposed",
                 cpu=True),
            case("mul_Scalar", "float64", (49, 63), other=-111.999),
            case("mul_Tensor", "int32", (511, 257), other=(511, 257)),
            case("mul_Tensor", "int32", (2065,), other=(), cpu=True),
            case("mul_Scalar", "int64", (49, 63), other=-7),
            case("mul_Tensor", "int64", (63, 45), other=(45,), big=True, cpu=True),
            case("mul_out", "int64", (7, 17, 31), other=(17, 1), big=True),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        return hidden(rng, tier, _ENTRIES, scalars=(2.5, -0.75, 1e-3))

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            case("mul_Tensor", "float32", (2048, 4096), other=(2048, 4096)),  # 96 MiB
            case("mul_Tensor", "bfloat16", (4096, 4096), other=(4096,)),  # 64 MiB
            case("mul_Scalar", "float16", (4096, 4096), other=0.5),  # 64 MiB
        ]
