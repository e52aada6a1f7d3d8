"""aten::div — ``self / other`` with broadcasting, true division or rounded with
``rounding_mode`` 'trunc' / 'floor' (overloads Tensor, Scalar, Tensor_mode, Scalar_mode, out,
out_mode)."""

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

def div_Tensor_mode(self, other, *, rounding_mode):
    a, b = torch.broadcast_tensors(self, other)
    dt = _div_dtype(self, rounding_mode)
    out = torch.empty(a.shape, dtype=dt, device=self.device)
    return _launch(a, b, out, 0, _CT[dt], _div_mode(self, rounding_mode))


def div_Scalar_mode(self, other, *, rounding_mode):
    dt = _div_dtype(self, rounding_mode)
    b = _scalar(other, _CT[dt], self.device).expand(self.shape)
    out = torch.empty(self.shape, dtype=dt, device=self.device)
    return _launch(self, b, out, 0, _CT[dt], _div_mode(self, rounding_mode))


def div_out_mode(self, other, *, rounding_mode, out):
    a, b = torch.broadcast_tensors(self, other)
    dt = _div_dtype(self, rounding_mode)
    return _launch(a, b, out, 0, _CT[dt], _div_mode(self, rounding_mode))


def div_Tensor(self, other):
    return div_Tensor_mode(self, other, rounding_mode=None)


def div_Scalar(self, other):
    return div_Scalar_mode(self, other, rounding_mode=None)


def div_out(self, other, *, out):
    return div_out_mode(self, other, rounding_mode=None, out=out)
'''

SOLUTION = solution(DIV_OP, _WRAPPERS)

# Floor mode as floor(a / b) of the rounded quotient: 1 // 0.1 gives 10 instead of 9.
NEGATIVE_NAIVE_FLOOR = SOLUTION.replace(
    "        r = tl.where(b == 0, q, r)  # x / 0: IEEE inf or nan\n",
    "        r = libdevice.floor(q)\n")
# Integer floor mode with C division: rounds toward zero for negative quotients.
NEGATIVE_INT_FLOOR_TRUNCATES = SOLUTION.replace("        return 2 if floating else 4\n",
                                                "        return 2 if floating else 3\n")

_PLAIN = [("div_Tensor", TENSOR), ("div_Scalar", SCALAR), ("div_out", OUT)]
_MODES = [("div_Tensor_mode", TENSOR), ("div_Scalar_mode", SCALAR), ("div_out_mode", OUT)]
_ROUNDINGS = ({"rounding_mode": "trunc", "values": "quotients"},
              {"rounding_mode": "trunc", "values": "near"},
              {"rounding_mode": "floor", "values": "quotients"},
              {"rounding_mode": "floor", "values": "near"},
              {"rounding_mode": None})

DESCRIPTION = (
    "Elementwise division following PyTorch's `torch.div`: `self / other` (true division) or, "
    "with `rounding_mode`, its rounded quotient: 'trunc' rounds toward zero "
    "(`trunc(self / other)`), 'floor' rounds down like Python's `//` — the floor of the exact "
    "quotient, so `1.0 // 0.1` is 9 (0.1 is slightly above 1/10) although `1.0 / 0.1` rounds to "
    "10. PyTorch computes float floor division as: if other == 0, self / other (IEEE: +-inf or "
    "nan, the sign of a zero divisor counts); else mod = fmod(self, other), "
    "div = (self - mod) / other, minus 1 if mod != 0 and (other < 0) != (mod < 0), then rounded "
    "to the nearest integer (a zero result takes the sign of self / other). `self` and `other` "
    "broadcast (either may be 0-d; empty tensors give empty results); inputs and `out` may be "
    "non-contiguous (transposed or strided). Both tensors have the same dtype: float16, "
    "bfloat16, float32, float64 (result: that dtype), or int32/int64: true division of "
    "integers gives float32 (computed as float32(self) / float32(other)), 'trunc' and 'floor' "
    "give exact integers of the input dtype (divisors are nonzero). A Python-number `other` "
    "is a float for float tensors and an int for int tensors. For float16/bfloat16, compute in "
    "float32 and round once; a float scalar is held in float32 (float64 for float64)."
)


@register("aten::div", version=1, kind=Kind.COMPUTE)
class Div(DivisionProblem):
    op_name = "div"
    forms = dict(_PLAIN + _MODES)
    entry_points = (
        EntryPoint("div_Tensor", "div_Tensor(self: Tensor, other: Tensor) -> Tensor",
                   "self / other, broadcasting self and other."),
        EntryPoint("div_Scalar", "div_Scalar(self: Tensor, other: Scalar) -> Tensor",
                   "self / other for a Python number other."),
        EntryPoint("div_Tensor_mode",
                   "div_Tensor_mode(self: Tensor, other: Tensor, *, "
                   "rounding_mode: Optional[str]) -> Tensor",
                   "self / other rounded by rounding_mode (None, 'trunc' or 'floor')."),
        EntryPoint("div_Scalar_mode",
                   "div_Scalar_mode(self: Tensor, other: Scalar, *, "
                   "rounding_mode: Optional[str]) -> Tensor",
                   "self / other (a Python number) rounded by rounding_mode."),
        EntryPoint("div_out", "div_out(self: Tensor, other: Tensor, *, out: Tensor) -> Tensor",
                   "Writes self / other into out (already of the broadcast shape and result "
                   "dtype, possibly non-contiguous) and returns out."),
        EntryPoint("div_out_mode",
                   "div_out_mode(self: Tensor, other: Tensor, *, rounding_mode: Optional[str], "
                   "out: Tensor) -> Tensor",
                   "Writes the rounded quotient into out and returns out."),
    )
    description = DESCRIPTION
    solution = SOLUTION
    negatives = (
        Negative("naive_floor", "floor mode computes floor(self / other) of the rounded "
                 "quotient, wrong where it rounds up to an integer (1 // 0.1)",
                 NEGATIVE_NAIVE_FLOOR),
        Negative("int_floor_truncates", "integer floor mode uses C division (rounds toward zero "
                 "for negative quotients)", NEGATIVE_INT_FLOOR_TRUNCATES),
    )
    # One rounding of the quotient (rounded modes: of an integer), plus a float scalar's rounding
    # to float32; float32 allows Triton's default `/` (div.full.f32: up to 2 ulp = 4 units).
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 6),
        "float64": Tolerance.ulps("float64", 2),
    }

    def cases(self) -> Sequence[Case]:
        cs = grid("div_Tensor", scalar="div_Scalar", out="div_out", scalars=(100.001, -0.999))
        f = "div_Tensor_mode"
        cs += [
            case("div_Tensor", "float64", (511, 257), other=(257,), edge=True),
            case("div_Scalar", "float64", (49, 63), other=-111.999),
            case("div_Tensor", "int64", (29, 37), other=(37,), cpu=True),  # -> float32
            case("div_Tensor", "int64", (63, 145), other=(145,)),
            case("div_Scalar", "int32", (49, 63), other=7),
            case(f, "float32", (29, 37), other=(29, 37), rounding_mode="floor", values="near",
                 cpu=True),
            case(f, "float32", (63, 145), other=(63, 145), rounding_mode="floor", values="near"),
            case(f, "float32", (37, 41), other=(37, 41), rounding_mode="trunc",
                 values="quotients", edge=True, cpu=True),
            case(f, "float32", (511, 257), other=(511, 257), rounding_mode="floor",
                 values="quotients", edge=True),
            case(f, "float32", (16, 7, 57, 32, 29), other=(1, 7, 1, 32, 1),
                 rounding_mode="floor", values="quotients"),
            case(f, "float16", (511, 257), other=(257,), rounding_mode="floor",
                 values="quotients", edge=True),
            case(f, "float16", (33, 65), other=(33, 65), rounding_mode="trunc",
                 values="near", layout="transposed"),
            case(f, "bfloat16", (63, 145), other=(145,), rounding_mode="trunc", values="near"),
            case(f, "bfloat16", (511, 257), other=(511, 257), rounding_mode="trunc",
                 values="quotients", edge=True),
            case(f, "bfloat16", (96, 80), other=(96, 80), rounding_mode="floor", values="near",
                 layout="strided"),
            case(f, "float32", (45,), other=(45,), rounding_mode=None),
            case(f, "float64", (63, 145), other=(63, 145), rounding_mode="floor",
                 values="near"),
            case(f, "int32", (511, 257), other=(511, 257), rounding_mode="trunc"),
            case(f, "int64", (2065,), other=(2065,), rounding_mode="floor", cpu=True),
            case(f, "int64", (63, 145), other=(145,), rounding_mode="trunc"),
            case("div_Scalar_mode", "float32", (49, 63), other=0.375, rounding_mode="floor",
                 cpu=True),
            case("div_Scalar_mode", "float16", (49, 63), other=-2.5, rounding_mode="trunc"),
            case("div_Scalar_mode", "int64", (49, 63), other=-7, rounding_mode="floor"),
            case("div_out_mode", "bfloat16", (7, 17, 31), other=(17, 1), rounding_mode="floor",
                 values="quotients", cpu=True),
            case("div_out_mode", "int32", (7, 17, 31), other=(7, 17, 31),
                 rounding_mode="floor"),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        return (hidden(rng, tier, _PLAIN, scalars=(2.5, -0.75, 1e-3), count=1)
                + hidden(rng, tier, _MODES, scalars=(0.375, -2.5, 3.0), variants=_ROUNDINGS,
                         count=1))

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            case("div_Tensor", "float32", (2048, 4096), other=(2048, 4096)),  # 96 MiB
            case("div_Tensor_mode", "bfloat16", (4096, 4096), other=(4096,),
                 rounding_mode="floor"),  # 64 MiB
            case("div_Scalar", "float16", (4096, 4096), other=3.0),  # 64 MiB
        ]
