"""aten::logaddexp2 — ``log2(2**self + 2**other)`` without overflow, with broadcasting
(overloads default, out)."""

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
from operators.registry import register
from operators.spec import Case, EntryPoint, Kind, Negative, Tier, Tolerance, case

_OP = r'''
@triton.jit
def _op(a, b, p, MODE: tl.constexpr):
    # max(a, b) + log2(1 + 2**-|a - b|): no overflow for large inputs
    m = tl.maximum(a, b)
    d = tl.abs(a - b)
    r = m + libdevice.log1p(tl.exp2(-d)) * 1.4426950408889634
    # equal infinities: a - b is nan there, the answer is a itself (inf, or -inf)
    both_inf = (a == b) & ((a - b) != (a - b))
    return tl.where(both_inf, a, r)
'''

_WRAPPERS = r'''

def logaddexp2(self, other):
    a, b = torch.broadcast_tensors(self, other)
    out = torch.empty(a.shape, dtype=self.dtype, device=self.device)
    return _launch(a, b, out)


def logaddexp2_out(self, other, *, out):
    a, b = torch.broadcast_tensors(self, other)
    return _launch(a, b, out)
'''

SOLUTION = solution(_OP, _WRAPPERS)

# The textbook formula: 2**x overflows float32 beyond x = 128 (and underflows below -149).
NEGATIVE_NAIVE = SOLUTION.replace(
    "    return tl.where(both_inf, a, r)",
    "    return tl.log2(tl.exp2(a) + tl.exp2(b))")

_ENTRIES = [("logaddexp2", TENSOR), ("logaddexp2_out", OUT)]


@register("aten::logaddexp2", version=1, kind=Kind.COMPUTE)
class Logaddexp2(BinaryProblem):
    op_name = "logaddexp2"
    forms = dict(_ENTRIES)
    entry_points = (
        EntryPoint("logaddexp2", "logaddexp2(self: Tensor, other: Tensor) -> Tensor",
                   "log2(2**self + 2**other), broadcasting self and other."),
        EntryPoint("logaddexp2_out",
                   "logaddexp2_out(self: Tensor, other: Tensor, *, out: Tensor) -> Tensor",
                   "Writes logaddexp2(self, other) into out (already of the broadcast shape, "
                   "possibly non-contiguous) and returns out."),
    )
    description = (
        "Elementwise `log2(2**self + 2**other)` following PyTorch's `torch.logaddexp2`, which "
        "must not overflow or underflow for large inputs (self = 1000 gives about 1000): "
        "PyTorch computes `max(a, b) + log1p(2**-|a - b|) / ln 2`, and returns `a` where "
        "a == b is infinite (inf stays inf, -inf stays -inf); inf with any non-NaN value is "
        "inf, -inf with x is x, NaN propagates. `self` and `other` broadcast (either may be "
        "0-d; empty tensors give empty results); inputs and `out` may be non-contiguous "
        "(transposed or strided). Both tensors have the same dtype (float16, bfloat16 or "
        "float32) and the result has that dtype. For float16/bfloat16, compute in float32 and "
        "round once."
    )
    solution = SOLUTION
    negatives = (
        Negative("naive_formula", "computes log2(2**self + 2**other) directly: overflows to "
                 "inf for inputs above 128 in float32", NEGATIVE_NAIVE),
    )
    # The scale is |f| + w_a |a| + w_b |b| (w = 2**x / (2**a + 2**b), f's sensitivity to its
    # inputs): the rounded a - b errs in proportion to them. Then one rounding of the result
    # and ~1 unit each of the library exp2 and log1p.
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 4),
    }

    def draw(self, role: str, shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator,
             c: Case) -> torch.Tensor:
        std = 200.0 if c.get("values") == "large" else 4.0
        return normal(shape, dtype, gen, std=std)

    def edge_values(self, role: str, dtype: torch.dtype) -> Sequence[float]:
        big = {torch.float16: 3.0e2, torch.bfloat16: 3.0e30}.get(dtype, 3.0e30)
        inf, nan = float("inf"), float("nan")
        return (inf, -inf, nan, 0.0, -0.0, big, -big, 1000.0 if dtype != torch.float16 else 200.0)

    def ref64(self, a: torch.Tensor, b: torch.Tensor, kw: dict[str, Any],
              dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor | None]:
        value = torch.logaddexp2(a, b)
        wa = torch.sigmoid((a - b) * 0.6931471805599453)  # 2**a / (2**a + 2**b)
        ta = torch.where(wa > 0, wa * a.abs(), torch.zeros_like(wa))
        tb = torch.where(wa < 1, (1 - wa) * b.abs(), torch.zeros_like(wa))
        scale = value.abs() + torch.nan_to_num(ta + tb, nan=0.0, posinf=0.0)
        return value, scale

    def cases(self) -> Sequence[Case]:
        cs = grid("logaddexp2", out="logaddexp2_out")
        cs += [
            case("logaddexp2", "float32", (37, 61), other=(37, 61), values="large", cpu=True),
            case("logaddexp2", "float32", (511, 257), other=(257,), values="large"),
            case("logaddexp2", "bfloat16", (511, 257), other=(511, 257), values="large"),
            case("logaddexp2_out", "float16", (63, 145), other=(63, 1), values="large"),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        return hidden(rng, tier, _ENTRIES, variants=({}, {"values": "large"}))

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            case("logaddexp2", "float32", (2048, 4096), other=(2048, 4096)),  # 96 MiB
            case("logaddexp2", "bfloat16", (4096, 4096), other=(4096,)),  # 64 MiB
            case("logaddexp2_out", "float16", (4096, 4096), other=(4096, 1)),  # 64 MiB
        ]
