"""aten::floor_divide — ``self // other`` (Python floor division) with broadcasting
(overloads default, Scalar, out)."""

from __future__ import annotations

import random
from collections.abc import Sequence

from operators.aten._binary import (
    OUT,
    SCALAR,
    TENSOR,
    grid,
    hidden,
    solution,
)
from operators.aten._division import DIV_OP, DIV_WRAPPER_HELPERS, DivisionProblem
from operators.registry import register
from operators.spec import Case, EntryPoint, Kind, Negative, Tier, Tolerance, case

_WRAPPERS = DIV_WRAPPER_HELPERS + r'''

def floor_divide_out(self, other, *, out):
    a, b = torch.broadcast_tensors(self, other)
    return _launch(a, b, out, 0, _CT[self.dtype], _div_mode(self, "floor"))


def floor_divide(self, other):
    a, b = torch.broadcast_tensors(self, other)
    out = torch.empty(a.shape, dtype=self.dtype, device=self.device)
    return _launch(a, b, out, 0, _CT[self.dtype], _div_mode(self, "floor"))


def floor_divide_Scalar(self, other):
    b = _scalar(other, _CT[self.dtype], self.device).expand(self.shape)
    out = torch.empty(self.shape, dtype=self.dtype, device=self.device)
    return _launch(self, b, out, 0, _CT[self.dtype], _div_mode(self, "floor"))
'''

SOLUTION = solution(DIV_OP, _WRAPPERS)

# floor(a / b) of the rounded quotient: 1 // 0.1 gives 10 instead of 9.
NEGATIVE_NAIVE_FLOOR = SOLUTION.replace(
    "        r = tl.where(b == 0, q, r)  # x / 0: IEEE inf or nan\n",
    "        r = libdevice.floor(q)\n")
# Integers with C division: rounds toward zero for negative quotients (-7 // 2 gives -3).
NEGATIVE_INT_TRUNCATES = SOLUTION.replace("        return 2 if floating else 4\n",
                                          "        return 2 if floating else 3\n")

_ENTRIES = [("floor_divide", TENSOR), ("floor_divide_Scalar", SCALAR),
            ("floor_divide_out", OUT)]
_VALUES: tuple[dict[str, str], ...] = ({"values": "quotients"}, {"values": "near"}, {})


@register("aten::floor_divide", version=1, kind=Kind.COMPUTE)
class FloorDivide(DivisionProblem):
    op_name = "floor_divide"
    kw_names = ()
    div_mode = "floor"
    forms = dict(_ENTRIES)
    entry_points = (
        EntryPoint("floor_divide", "floor_divide(self: Tensor, other: Tensor) -> Tensor",
                   "self // other (floor of the quotient), broadcasting self and other."),
        EntryPoint("floor_divide_Scalar",
                   "floor_divide_Scalar(self: Tensor, other: Scalar) -> Tensor",
                   "self // other for a Python number other."),
        EntryPoint("floor_divide_out",
                   "floor_divide_out(self: Tensor, other: Tensor, *, out: Tensor) -> Tensor",
                   "Writes self // other into out (already of the broadcast shape, possibly "
                   "non-contiguous) and returns out."),
    )
    description = (
        "Elementwise floor division following PyTorch's `torch.floor_divide` (the same as "
        "`torch.div(..., rounding_mode='floor')` and Python's `//`): the floor of the exact "
        "quotient, so `1.0 // 0.1` is 9 (0.1 is slightly above 1/10) although `1.0 / 0.1` "
        "rounds to 10, and `-7 // 2` is -4. For floats PyTorch computes: if other == 0, "
        "self / other (IEEE: +-inf or nan, the sign of a zero divisor counts); else "
        "mod = fmod(self, other), div = (self - mod) / other, minus 1 if mod != 0 and "
        "(other < 0) != (mod < 0), then rounded to the nearest integer (a zero result takes the "
        "sign of self / other); so inf // x is nan and -1 // inf is -1. `self` and `other` "
        "broadcast (either may be 0-d; empty tensors give empty results); inputs and `out` may "
        "be non-contiguous (transposed or strided). Both tensors have the same dtype (float16, "
        "bfloat16, float32, int32 or int64) and the result has that dtype; integer results are "
        "exact (divisors are nonzero). A Python-number `other` is a float for float tensors and "
        "an int for int tensors. For float16/bfloat16, compute in float32 and round once; a "
        "float scalar is held in float32."
    )
    solution = SOLUTION
    negatives = (
        Negative("naive_floor", "computes floor(self / other) of the rounded quotient, wrong "
                 "where it rounds up to an integer (1 // 0.1)", NEGATIVE_NAIVE_FLOOR),
        Negative("int_truncates", "integers use C division (rounds toward zero for negative "
                 "quotients)", NEGATIVE_INT_TRUNCATES),
    )
    # Results are integers: exact in float32 (PyTorch's algorithm is exact); the quotient's
    # last rounding for large ones. float16/bfloat16 use 6 units (DivisionProblem.tolerance).
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 2),
    }

    def cases(self) -> Sequence[Case]:
        cs = grid("floor_divide", scalar="floor_divide_Scalar", out="floor_divide_out",
                  scalars=(0.375, -2.5), variants=_VALUES)
        cs += [
            case("floor_divide", "float32", (29, 37), other=(29, 37), values="near", cpu=True),
            case("floor_divide", "float32", (63, 145), other=(63, 145), values="near"),
            case("floor_divide", "int32", (511, 257), other=(511, 257)),
            case("floor_divide", "int64", (2065,), other=(2065,), cpu=True),
            case("floor_divide", "int64", (63, 145), other=(145,)),
            case("floor_divide_Scalar", "int64", (49, 63), other=-7),
            case("floor_divide_Scalar", "int32", (49, 63), other=3),
            case("floor_divide_out", "int32", (7, 17, 31), other=(17, 1)),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        return hidden(rng, tier, _ENTRIES, scalars=(0.375, -2.5, 3.0), variants=_VALUES)

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            case("floor_divide", "float32", (2048, 4096), other=(2048, 4096)),  # 96 MiB
            case("floor_divide", "bfloat16", (4096, 4096), other=(4096,)),  # 64 MiB
            case("floor_divide", "int64", (1024, 4096), other=(1024, 4096)),  # 96 MiB
        ]
