"""aten::hardsigmoid — ``clamp(x / 6 + 1/2, 0, 1)``, elementwise (overloads default, out)."""

from __future__ import annotations

import torch

from operators.aten._unary import (
    FLOATS,
    INF,
    NAN,
    PLAIN_WRAPPERS,
    Unary,
    denormals,
    describe,
    ignores_out,
    ignores_strides,
    solution,
)
from operators.registry import register
from operators.spec import Call, Case, EntryPoint, Kind, Negative, Tolerance

OP = r'''
@triton.jit
def _op(x, p0, p1):
    # comparisons (not min/max, which drop NaN on GPUs) so that NaN stays NaN
    return tl.where(x <= -3.0, 0.0, tl.where(x >= 3.0, 1.0, (x + 3.0) / 6.0))
'''

SOLUTION = solution(OP, PLAIN_WRAPPERS, name="hardsigmoid")


@register("aten::hardsigmoid", version=1, kind=Kind.COMPUTE)
class Hardsigmoid(Unary):
    op = "hardsigmoid"
    entry_points = (
        EntryPoint("hardsigmoid", "hardsigmoid(self: Tensor) -> Tensor",
                   "min(max(x + 3, 0), 6) / 6, elementwise."),
        EntryPoint("hardsigmoid_out", "hardsigmoid_out(self: Tensor, *, out: Tensor) -> Tensor",
                   "Writes hardsigmoid(self) into out (same shape and dtype) and returns out."),
    )
    description = describe(
        "The hard sigmoid activation `out = min(max(x + 3, 0), 6) / 6` (0 for x <= -3, 1 for "
        "x >= 3, (x + 3) / 6 between), following PyTorch's "
        "`torch.nn.functional.hardsigmoid`. hardsigmoid(-inf) = 0, hardsigmoid(inf) = 1 and "
        "NaN stays NaN (beware: GPU min/max instructions return the non-NaN operand).", FLOATS)
    solution = SOLUTION
    negatives = (
        Negative("out_not_written", "the out= overload returns a new tensor and leaves out "
                 "unwritten", ignores_out(SOLUTION, "hardsigmoid")),
        Negative("ignores_input_strides", "indexes a sliced input as if contiguous",
                 ignores_strides(SOLUTION)),
    )
    # Relative to |f| + |x f'| (= |f| + |x| / 6 inside (-3, 3)): x + 3 and the division by 6
    # (or a multiplication by 1/6) round twice: <= 2 u of that in float32, and halves add
    # their final rounding (1 u).
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 4),
    }
    flops_per_element = 3.0

    def sample(self, n: int, c: Case, gen: torch.Generator) -> torch.Tensor:
        return torch.randn(n, generator=gen, dtype=torch.float64) * 3

    def edges(self, dtype: torch.dtype, c: Case) -> list[float]:
        return [INF, -INF, NAN, 0.0, -0.0, 3.0, -3.0, -2.9990234375, 1e30, *denormals(dtype)]

    def ref64(self, x: torch.Tensor, call: Call) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.clamp((x + 3.0) / 6.0, 0.0, 1.0)
        y = torch.where(x.isnan(), x, y)
        inside = (x > -3.0) & (x < 3.0)
        return y, y.abs() + torch.where(inside, x.abs() / 6.0, torch.zeros_like(x))
