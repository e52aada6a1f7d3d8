"""aten::rsub — ``other - alpha * self`` with broadcasting (overloads Tensor, Scalar,
Tensor_out): torch.sub with its operands swapped."""

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
from operators.spec import Call, Case, EntryPoint, Kind, Negative, Tier, Tolerance, case

_OP = r'''
@triton.jit
def _op(a, b, p, MODE: tl.constexpr):
    # a is self, b is other
    return b - p * a
'''

_WRAPPERS = r'''

def _alpha(x, alpha):
    return float(alpha) if x.dtype.is_floating_point else int(alpha)


def rsub_Tensor(self, other, *, alpha=1):
    a, b = torch.broadcast_tensors(self, other)
    out = torch.empty(a.shape, dtype=self.dtype, device=self.device)
    return _launch(a, b, out, _alpha(self, alpha))


def rsub_Scalar(self, other, alpha=1):
    b = _scalar(other, _CT[self.dtype], self.device).expand(self.shape)
    out = torch.empty(self.shape, dtype=self.dtype, device=self.device)
    return _launch(self, b, out, _alpha(self, alpha))


def rsub_Tensor_out(self, other, *, alpha=1, out):
    a, b = torch.broadcast_tensors(self, other)
    return _launch(a, b, out, _alpha(self, alpha))
'''

SOLUTION = solution(_OP, _WRAPPERS)

# Drops alpha: right only when alpha == 1.
NEGATIVE_NO_ALPHA = SOLUTION.replace("    return b - p * a\n", "    return b - a\n")

_ENTRIES = [("rsub_Tensor", TENSOR), ("rsub_Scalar", SCALAR), ("rsub_Tensor_out", OUT)]
_ALPHAS = ({"alpha": 1}, {"alpha": 0.5}, {"alpha": -2.0}, {"alpha": 3.0})


@register("aten::rsub", version=1, kind=Kind.COMPUTE)
class Rsub(BinaryProblem):
    op_name = "rsub"
    forms = dict(_ENTRIES)
    kw_names = ("alpha",)
    flops_per_element = 2
    entry_points = (
        EntryPoint("rsub_Tensor",
                   "rsub_Tensor(self: Tensor, other: Tensor, *, alpha: Scalar = 1) -> Tensor",
                   "other - alpha * self, broadcasting self and other."),
        EntryPoint("rsub_Scalar",
                   "rsub_Scalar(self: Tensor, other: Scalar, alpha: Scalar = 1) -> Tensor",
                   "other - alpha * self for a Python number other (as `1 - x` calls it)."),
        EntryPoint("rsub_Tensor_out",
                   "rsub_Tensor_out(self: Tensor, other: Tensor, *, alpha: Scalar = 1, "
                   "out: Tensor) -> Tensor",
                   "Writes other - alpha * self into out (already of the broadcast shape, "
                   "possibly non-contiguous) and returns out."),
    )
    description = (
        "Reversed subtraction with a scale: `out = other - alpha * self` (note: alpha scales "
        "`self`, the first argument), following PyTorch's `torch.rsub`. `self` and `other` "
        "broadcast against each other (either may be 0-d; empty tensors give empty results); "
        "inputs and `out` may be non-contiguous (transposed or strided). Both tensors have the "
        "same dtype (float16, bfloat16, float32, int32 or int64) and the result has that dtype; "
        "`alpha` and a Python-number `other` are ints for int tensors and floats (or ints) for "
        "float tensors. For float16/bfloat16, compute in float32 and round once. IEEE "
        "semantics: inf - inf = nan, nan propagates, results beyond the dtype's range are inf. "
        "Integer results are exact modulo 2**bits."
    )
    solution = SOLUTION
    negatives = (
        Negative("ignores_alpha", "computes other - self, dropping alpha", NEGATIVE_NO_ALPHA),
    )
    # As aten::sub: the product alpha * self and the difference, each rounded once, plus the
    # rounding of alpha to float32 for float32 tensors.
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 4),
    }

    def ref64(self, a: torch.Tensor, b: torch.Tensor, kw: dict[str, Any],
              dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor | None]:
        alpha = kw.get("alpha", 1)
        return b - alpha * a, b.abs() + (alpha * a).abs()

    def baseline(self, call: Call) -> object:
        if call.entry == "rsub_Tensor_out":  # torch.rsub has no out= in Python
            return torch.ops.aten.rsub.Tensor_out(*call.args, **call.kwargs)
        return super().baseline(call)

    def cases(self) -> Sequence[Case]:
        cs = grid("rsub_Tensor", scalar="rsub_Scalar", out="rsub_Tensor_out", variants=_ALPHAS,
                  scalars=(1.0, -111.999))
        cs += [
            case("rsub_Tensor", "int32", (511, 257), other=(257,), alpha=3),
            case("rsub_Tensor", "int32", (2065,), other=(2065,), alpha=-2, cpu=True),
            case("rsub_Scalar", "int64", (49, 63), other=1 << 40, alpha=5, cpu=True),
            case("rsub_Tensor_out", "int64", (7, 17, 31), other=(17, 1), alpha=1),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        return hidden(rng, tier, _ENTRIES, scalars=(1.0, 2.5, -0.75),
                      variants=_ALPHAS + ({"alpha": 0.001},))

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            case("rsub_Tensor", "float32", (2048, 4096), other=(2048, 4096), alpha=1),  # 96 MiB
            case("rsub_Tensor", "bfloat16", (4096, 4096), other=(4096,), alpha=0.5),  # 64 MiB
            case("rsub_Scalar", "float16", (4096, 4096), other=1.0, alpha=1),  # 64 MiB
        ]
