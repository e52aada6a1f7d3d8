"""aten::div_ — in-place ``self /= other``, true division or rounded with ``rounding_mode``
'trunc' / 'floor', other broadcast to self's shape (overloads Tensor, Tensor_mode, Scalar,
Scalar_mode). aten::div (out of place) is operators/aten/div.py."""

from __future__ import annotations

import random
from collections.abc import Sequence

from operators.aten._binary import (
    INPLACE,
    INPLACE_SCALAR,
    grid,
    hidden,
    solution,
)
from operators.aten._division import DIV_OP, DIV_WRAPPER_HELPERS, DivisionProblem
from operators.registry import register
from operators.spec import Case, EntryPoint, Kind, Negative, Tier, Tolerance, case

_WRAPPERS = DIV_WRAPPER_HELPERS + r'''

def div__Tensor_mode(self, other, *, rounding_mode):
    # self is read and then written by the same lane: it is both input and output (any strides)
    b = other.expand(self.shape)
    return _launch(self, b, self, 0, _CT[self.dtype], _div_mode(self, rounding_mode))


def div__Scalar_mode(self, other, *, rounding_mode):
    b = _scalar(other, _CT[self.dtype], self.device).expand(self.shape)
    return _launch(self, b, self, 0, _CT[self.dtype], _div_mode(self, rounding_mode))


def div__Tensor(self, other):
    return div__Tensor_mode(self, other, rounding_mode=None)


def div__Scalar(self, other):
    return div__Scalar_mode(self, other, rounding_mode=None)
'''

SOLUTION = solution(DIV_OP, _WRAPPERS)

# Floor mode as floor(a / b) of the rounded quotient: 1 // 0.1 gives 10 instead of 9.
NEGATIVE_NAIVE_FLOOR = SOLUTION.replace(
    "        r = tl.where(b == 0, q, r)  # x / 0: IEEE inf or nan\n",
    "        r = libdevice.floor(q)\n")
# 'trunc' of 16-bit floats truncates the float32 quotient instead of the one rounded to the
# dtype, as PyTorch does (2.9995 in float16 is 3.0, so trunc gives 3, not 2).
NEGATIVE_TRUNC_FP32 = SOLUTION.replace("            return 5\n", "            return 1\n").replace(
    "            return 6\n", "            return 1\n")

_PLAIN = [("div__Tensor", INPLACE), ("div__Scalar", INPLACE_SCALAR)]
_MODES = [("div__Tensor_mode", INPLACE), ("div__Scalar_mode", INPLACE_SCALAR)]
_ROUNDINGS = ({"rounding_mode": "trunc", "values": "quotients"},
              {"rounding_mode": "trunc", "values": "near"},
              {"rounding_mode": "floor", "values": "quotients"},
              {"rounding_mode": "floor", "values": "near"},
              {"rounding_mode": None})


@register("aten::div_", version=1, kind=Kind.COMPUTE)
class DivInplace(DivisionProblem):
    op_name = "div"
    method = "div_"
    forms = dict(_PLAIN + _MODES)
    entry_points = (
        EntryPoint("div__Tensor", "div__Tensor(self: Tensor, other: Tensor) -> Tensor",
                   "In place: self /= other (other broadcast to self's shape); returns self."),
        EntryPoint("div__Tensor_mode",
                   "div__Tensor_mode(self: Tensor, other: Tensor, *, "
                   "rounding_mode: Optional[str]) -> Tensor",
                   "In place: self = self / other rounded by rounding_mode (None, 'trunc', "
                   "'floor'); returns self."),
        EntryPoint("div__Scalar", "div__Scalar(self: Tensor, other: Scalar) -> Tensor",
                   "In place: self /= other for a Python number other; returns self."),
        EntryPoint("div__Scalar_mode",
                   "div__Scalar_mode(self: Tensor, other: Scalar, *, "
                   "rounding_mode: Optional[str]) -> Tensor",
                   "In place: self = self / other (a Python number) rounded by rounding_mode."),
    )
    description = (
        "In-place elementwise division following PyTorch's `Tensor.div_`: the entry points "
        "write into `self` (which may be non-contiguous: transposed or strided — write through "
        "its strides) and return `self`; `other` broadcasts to `self`'s shape (it may be 0-d or "
        "have fewer or size-1 dims); empty tensors are a no-op. `self / other` is true division "
        "or, with `rounding_mode`, the rounded quotient: 'trunc' truncates the quotient rounded "
        "to the dtype (for float16/bfloat16 PyTorch rounds `self / other` to the dtype first, "
        "so 2.9995 becomes 3.0 and truncates to 3), 'floor' rounds down like Python's `//` — "
        "the floor of the exact quotient, so `1.0 // 0.1` is 9 (0.1 is slightly above 1/10) "
        "although `1.0 / 0.1` rounds to 10. PyTorch computes float floor division as: if "
        "other == 0, self / other (IEEE: +-inf or nan, the sign of a zero divisor counts); else "
        "mod = fmod(self, other), div = (self - mod) / other, minus 1 if mod != 0 and "
        "(other < 0) != (mod < 0), then rounded to the nearest integer (a zero result takes "
        "the sign of self / other). Both tensors have the same dtype: float16, bfloat16, "
        "float32, or int32/int64 with 'trunc' or 'floor' (exact integer results; divisors are "
        "nonzero). A Python-number `other` is a float for float tensors and an int for int "
        "tensors. For float16/bfloat16, compute in float32 and round once; a float scalar is "
        "held in float32."
    )
    solution = SOLUTION
    negatives = (
        Negative("naive_floor", "floor mode computes floor(self / other) of the rounded "
                 "quotient, wrong where it rounds up to an integer (1 // 0.1)",
                 NEGATIVE_NAIVE_FLOOR),
        Negative("trunc_in_float32", "16-bit 'trunc' truncates the float32 quotient, not the "
                 "one rounded to the dtype as PyTorch does", NEGATIVE_TRUNC_FP32),
    )
    # As aten::div: one rounding of the quotient (rounded modes: of an integer), plus a float
    # scalar's rounding to float32; float32 allows Triton's default `/` (div.full.f32: up to
    # 2 ulp = 4 units). 16-bit 'floor' uses 6 units (see DivisionProblem.tolerance).
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 6),
    }

    def cases(self) -> Sequence[Case]:
        cs = grid("div__Tensor", scalar="div__Scalar", inplace=True, scalars=(-0.999, 100.001))
        f = "div__Tensor_mode"
        cs += [
            case(f, "float32", (29, 37), other=(29, 37), rounding_mode="floor", values="near",
                 cpu=True),
            case(f, "float32", (63, 145), other=(63, 145), rounding_mode="floor", values="near"),
            case(f, "float16", (37, 41), other=(37, 41), rounding_mode="trunc",
                 values="near", layout="transposed", cpu=True),
            case(f, "float32", (511, 257), other=(511, 257), rounding_mode="trunc",
                 values="quotients", edge=True),
            case(f, "float16", (511, 257), other=(257,), rounding_mode="floor",
                 values="quotients", edge=True),
            case(f, "bfloat16", (511, 257), other=(511, 1), rounding_mode="trunc",
                 values="quotients", edge=True),
            case(f, "bfloat16", (96, 80), other=(96, 80), rounding_mode="floor",
                 values="near", layout="strided"),
            case(f, "float32", (16, 7, 57, 32, 29), other=(1, 7, 1, 32, 1),
                 rounding_mode="floor", values="quotients"),
            case(f, "float32", (45,), other=(45,), rounding_mode=None),
            case(f, "int32", (511, 257), other=(511, 257), rounding_mode="trunc"),
            case(f, "int64", (2065,), other=(2065,), rounding_mode="floor", cpu=True),
            case(f, "int64", (63, 145), other=(145,), rounding_mode="trunc"),
            case("div__Scalar_mode", "float32", (49, 63), other=0.375, rounding_mode="floor",
                 cpu=True),
            case("div__Scalar_mode", "bfloat16", (49, 63), other=-2.5, rounding_mode="trunc"),
            case(f, "bfloat16", (63, 145), other=(145,), rounding_mode="trunc", values="near"),
            case("div__Scalar_mode", "int32", (49, 63), other=-7, rounding_mode="floor"),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        return (hidden(rng, tier, _PLAIN, scalars=(2.5, -0.75, 1e-3), count=1)
                + hidden(rng, tier, _MODES, scalars=(0.375, -2.5, 3.0), variants=_ROUNDINGS,
                         count=1))

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            case("div__Tensor", "float32", (2048, 4096), other=(2048, 4096)),  # 96 MiB
            case("div__Tensor_mode", "bfloat16", (4096, 4096), other=(4096,),
                 rounding_mode="floor"),  # 64 MiB
            case("div__Scalar", "float16", (4096, 4096), other=3.0),  # 64 MiB
        ]
