"""aten::heaviside — step function of ``self`` taking ``values`` where self == 0, with
broadcasting (overloads default, out)."""

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
    normal,
    solution,
)
from operators.inputs import randint
from operators.registry import register
from operators.spec import Case, EntryPoint, Kind, Negative, Tier, Tolerance, case

_OP = r'''
@triton.jit
def _op(a, b, p, MODE: tl.constexpr):
    # PyTorch: self == 0 ? values : (self > 0); so a NaN self gives 0 (it is neither)
    return tl.where(a == 0, b, (a > 0).to(b.dtype))
'''

_WRAPPERS = r'''

def heaviside(self, values):
    a, b = torch.broadcast_tensors(self, values)
    out = torch.empty(a.shape, dtype=self.dtype, device=self.device)
    return _launch(a, b, out)


def heaviside_out(self, values, *, out):
    a, b = torch.broadcast_tensors(self, values)
    return _launch(a, b, out)
'''

SOLUTION = solution(_OP, _WRAPPERS)

# 0 below zero, 1 above, values otherwise: a NaN self takes `values` instead of 0.
NEGATIVE_NAN_TAKES_VALUES = SOLUTION.replace(
    "    return tl.where(a == 0, b, (a > 0).to(b.dtype))",
    "    return tl.where(a < 0, 0, tl.where(a > 0, 1, b)).to(b.dtype)")

_ENTRIES = [("heaviside", TENSOR), ("heaviside_out", OUT)]


@register("aten::heaviside", version=1, kind=Kind.COMPUTE)
class Heaviside(BinaryProblem):
    op_name = "heaviside"
    forms = dict(_ENTRIES)
    entry_points = (
        EntryPoint("heaviside", "heaviside(self: Tensor, values: Tensor) -> Tensor",
                   "0 where self < 0, values where self == 0, 1 where self > 0; broadcasting."),
        EntryPoint("heaviside_out",
                   "heaviside_out(self: Tensor, values: Tensor, *, out: Tensor) -> Tensor",
                   "Writes heaviside(self, values) into out (already of the broadcast shape, "
                   "possibly non-contiguous) and returns out."),
    )
    description = (
        "The Heaviside step function following PyTorch's `torch.heaviside`: "
        "`out = values if self == 0 else (1 if self > 0 else 0)`, computed exactly as "
        "`self == 0 ? values : (self > 0)`, so -0.0 counts as zero (takes `values`), a NaN "
        "`self` gives 0, and `values` (possibly inf or NaN) is copied unchanged where self is "
        "zero. `self` and `values` broadcast (either may be 0-d; empty tensors give empty "
        "results); inputs and `out` may be non-contiguous (transposed or strided). Both tensors "
        "have the same dtype (float16, bfloat16, float32, int32 or int64) and the result has "
        "that dtype; results are compared exactly."
    )
    solution = SOLUTION
    negatives = (
        Negative("nan_takes_values", "tests self < 0 and self > 0 and falls back to values, so "
                 "a NaN self gives values instead of 0", NEGATIVE_NAN_TAKES_VALUES),
    )
    # Each result is 0, 1 or an element of values: exact (signed zeros are not told apart).
    tolerances = {
        "float16": Tolerance(0.0, 0.0),
        "bfloat16": Tolerance(0.0, 0.0),
        "float32": Tolerance(0.0, 0.0),
    }

    def draw(self, role: str, shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator,
             c: Case) -> torch.Tensor:
        if role == "self":
            # about a third exact zeros (half of them -0.0 for floats), the rest of both signs
            x = randint(shape, dtype, gen, low=-5, high=6) if not dtype.is_floating_point \
                else normal(shape, dtype, gen, std=2.0)
            pick = randint(shape, torch.int64, gen, low=0, high=6)
            zero = torch.zeros_like(x) if not dtype.is_floating_point else \
                torch.where(pick == 0, -0.0, 0.0).to(dtype)
            return torch.where(pick < 2, zero, x)
        return super().draw(role, shape, dtype, gen, c)

    def edge_values(self, role: str, dtype: torch.dtype) -> Sequence[float]:
        inf, nan = float("inf"), float("nan")
        if role == "self":  # no subnormals: the interpreter flushes bfloat16 ones to zero
            return (inf, -inf, nan, nan, -0.0)
        return (inf, -inf, nan)

    def ref64(self, a: torch.Tensor, b: torch.Tensor, kw: dict[str, Any],
              dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor | None]:
        return torch.heaviside(a, b), None

    def cases(self) -> Sequence[Case]:
        cs = grid("heaviside", out="heaviside_out")
        cs += [
            case("heaviside", "int32", (511, 257), other=(257,)),
            case("heaviside", "int64", (2065,), other=(), cpu=True),
            case("heaviside_out", "int64", (7, 17, 31), other=(17, 1)),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        return hidden(rng, tier, _ENTRIES)

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            case("heaviside", "float32", (2048, 4096), other=(2048, 4096)),  # 96 MiB
            case("heaviside", "bfloat16", (4096, 4096), other=()),  # 64 MiB
            case("heaviside_out", "float16", (4096, 4096), other=(4096,)),  # 64 MiB
        ]
