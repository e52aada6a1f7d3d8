"""aten::fmax — elementwise maximum that ignores NaN (C's fmax), with broadcasting (overloads
default, out)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch

from operators.aten._binary import (
    OUT,
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
    # A NaN operand is ignored: the other one wins; NaN only when both are NaN.
    # (Integers are never NaN: x != x is false.)
    return tl.where(a != a, b, tl.where(b != b, a, tl.maximum(a, b)))
'''

_WRAPPERS = r'''

def fmax(self, other):
    a, b = torch.broadcast_tensors(self, other)
    out = torch.empty(a.shape, dtype=self.dtype, device=self.device)
    return _launch(a, b, out)


def fmax_out(self, other, *, out):
    a, b = torch.broadcast_tensors(self, other)
    return _launch(a, b, out)
'''

SOLUTION = solution(_OP, _WRAPPERS)

# torch.maximum's semantics instead: NaN propagates.
NEGATIVE_NAN_PROPAGATES = SOLUTION.replace(
    "    return tl.where(a != a, b, tl.where(b != b, a, tl.maximum(a, b)))",
    "    return tl.where((a != a) | (b != b), a + b, tl.maximum(a, b))")

_ENTRIES = [("fmax", TENSOR), ("fmax_out", OUT)]


@register("aten::fmax", version=1, kind=Kind.COMPUTE)
class Fmax(BinaryProblem):
    op_name = "fmax"
    forms = dict(_ENTRIES)
    entry_points = (
        EntryPoint("fmax", "fmax(self: Tensor, other: Tensor) -> Tensor",
                   "Elementwise maximum of self and other, ignoring NaN, broadcasting."),
        EntryPoint("fmax_out", "fmax_out(self: Tensor, other: Tensor, *, out: Tensor) -> Tensor",
                   "Writes fmax(self, other) into out (already of the broadcast shape, possibly "
                   "non-contiguous) and returns out."),
    )
    description = (
        "Elementwise maximum following PyTorch's `torch.fmax` (C's `fmax`): where exactly one "
        "of `self` and `other` is NaN the other value is the result; NaN only where both are "
        "NaN (unlike `torch.maximum`, which propagates NaN). Infinities compare as usual. "
        "`self` and `other` broadcast (either may be 0-d; empty tensors give empty results); "
        "inputs and `out` may be non-contiguous (transposed or strided). Both tensors have the "
        "same dtype (float16, bfloat16, float32, int32 or int64) and the result has that dtype; "
        "the result is one of the inputs, so it is compared exactly."
    )
    solution = SOLUTION
    negatives = (
        Negative("nan_propagates", "propagates NaN like torch.maximum instead of ignoring it",
                 NEGATIVE_NAN_PROPAGATES),
    )
    # The result is one of the inputs: exact (signed zeros are not told apart).
    tolerances = {
        "float16": Tolerance(0.0, 0.0),
        "bfloat16": Tolerance(0.0, 0.0),
        "float32": Tolerance(0.0, 0.0),
    }

    def edge_values(self, role: str, dtype: torch.dtype) -> Sequence[float]:
        # No subnormals: Triton's interpreter (cpu platform) flushes bfloat16 ones to zero.
        return tuple(super().edge_values(role, dtype))[:-1] + (float("nan"),) * 2

    def ref64(self, a: torch.Tensor, b: torch.Tensor, kw: dict[str, Any],
              dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor | None]:
        return torch.fmax(a, b), None

    def cases(self) -> Sequence[Case]:
        cs = grid("fmax", out="fmax_out")
        cs += [
            case("fmax", "int32", (511, 257), other=(257,)),
            case("fmax", "int32", (2065,), other=(2065,), cpu=True),
            case("fmax", "int64", (63, 145), other=(63, 1), layout="transposed"),
            case("fmax_out", "int64", (7, 17, 31), other=(17, 1)),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        return hidden(rng, tier, _ENTRIES)

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            case("fmax", "float32", (2048, 4096), other=(2048, 4096)),  # 96 MiB
            case("fmax", "bfloat16", (4096, 4096), other=(4096,)),  # 64 MiB
            case("fmax_out", "float16", (4096, 4096), other=(4096, 1)),  # 64 MiB
        ]
