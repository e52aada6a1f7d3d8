"""aten::sub — ``self - alpha * other`` with broadcasting (overloads Tensor, Scalar, out)."""

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
from operators.registry import register
from operators.spec import Case, EntryPoint, Kind, Negative, Tier, Tolerance, case

_OP = r'''
@triton.jit
def _op(a, b, p, MODE: tl.constexpr):
    return a - p * b
'''

_WRAPPERS = r'''

def _alpha(x, alpha):
    return float(alpha) if x.dtype.is_floating_point else int(alpha)


def sub_Tensor(self, other, *, alpha=1):
    a, b = torch.broadcast_tensors(self, other)
    out = torch.empty(a.shape, dtype=self.dtype, device=self.device)
    return _launch(a, b, out, _alpha(self, alpha))


def sub_Scalar(self, other, alpha=1):
    b = _scalar(other, _CT[self.dtype], self.device).expand(self.shape)
    out = torch.empty(self.shape, dtype=self.dtype, device=self.device)
    return _launch(self, b, out, _alpha(self, alpha))


def sub_out(self, other, *, alpha=1, out):
    a, b = torch.broadcast_tensors(self, other)
    return _launch(a, b, out, _alpha(self, alpha))
'''

SOLUTION = solution(_OP, _WRAPPERS)

# Scales the wrong operand: alpha * self - other, right only when alpha == 1.
NEGATIVE_ALPHA_ON_SELF = SOLUTION.replace("    return a - p * b\n", "    return p * a - b\n")

_ENTRIES = [("sub_Tensor", TENSOR), ("sub_Scalar", SCALAR), ("sub_out", OUT)]
_ALPHAS = ({"alpha": 1}, {"alpha": 0.5}, {"alpha": -2.0}, {"alpha": 3.0})


@register("aten::sub", version=1, kind=Kind.COMPUTE)
class Sub(BinaryProblem):
    op_name = "sub"
    forms = dict(_ENTRIES)
    kw_names = ("alpha",)
    flops_per_element = 2
    entry_points = (
        EntryPoint("sub_Tensor",
                   "sub_Tensor(self: Tensor, other: Tensor, *, alpha: Scalar = 1) -> Tensor",
                   "self - alpha * other, broadcasting self and other."),
        EntryPoint("sub_Scalar",
                   "sub_Scalar(self: Tensor, other: Scalar, alpha: Scalar = 1) -> Tensor",
                   "self - alpha * other for a Python number other."),
        EntryPoint("sub_out",
                   "sub_out(self: Tensor, other: Tensor, *, alpha: Scalar = 1, out: Tensor) "
                   "-> Tensor",
                   "Writes self - alpha * other into out (already of the broadcast shape, "
                   "possibly non-contiguous) and returns out."),
    )
    description = (
        "Elementwise subtraction with a scale: `out = self - alpha * other`, following "
        "PyTorch's `torch.sub`. `self` and `other` broadcast against each other (either may be "
        "0-d; empty tensors give empty results); inputs and `out` may be non-contiguous "
        "(transposed or strided). Both tensors have the same dtype (float16, bfloat16, float32, "
        "int32 or int64) and the result has that dtype; `alpha` and a Python-number `other` "
        "are ints for int tensors and floats (or ints) for float tensors. For float16/bfloat16, "
        "compute in float32 and round once. IEEE semantics: inf - inf = nan, nan propagates, "
        "results beyond the dtype's range are inf. Integer results are exact modulo 2**bits."
    )
    solution = SOLUTION
    negatives = (
        Negative("alpha_on_self", "computes alpha * self - other (alpha on the wrong operand)",
                 NEGATIVE_ALPHA_ON_SELF),
    )
    # As aten::add: the product alpha * other and the difference, each rounded once, plus the
    # rounding of alpha to float32 for float32 tensors.
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 4),
    }

    def ref64(self, a: torch.Tensor, b: torch.Tensor, kw: dict[str, Any],
              dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor | None]:
        alpha = kw.get("alpha", 1)
        return a - alpha * b, a.abs() + (alpha * b).abs()

    def cases(self) -> Sequence[Case]:
        cs = grid("sub_Tensor", scalar="sub_Scalar", out="sub_out", variants=_ALPHAS)
        cs += [
            case("sub_Tensor", "int32", (511, 257), other=(257,), alpha=3),
            case("sub_Tensor", "int32", (2065,), other=(2065,), alpha=-2, cpu=True),
            case("sub_Scalar", "int64", (49, 63), other=1 << 40, alpha=5, cpu=True),
            case("sub_out", "int64", (7, 17, 31), other=(17, 1), alpha=1),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        return hidden(rng, tier, _ENTRIES, variants=_ALPHAS + ({"alpha": 0.001},))

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            case("sub_Tensor", "float32", (2048, 4096), other=(2048, 4096), alpha=1),  # 96 MiB
            case("sub_Tensor", "bfloat16", (4096, 4096), other=(4096,), alpha=0.5),  # 64 MiB
            case("sub_Scalar", "float16", (4096, 4096), other=1.5, alpha=2.0),  # 64 MiB
        ]
