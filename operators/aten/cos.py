"""aten::cos — the cosine of each element, in radians (overloads default, out)."""

from __future__ import annotations

import torch

from operators.aten._unary import (
    FLOATS,
    PLAIN_WRAPPERS,
    Unary,
    describe,
    ignores_out,
    ignores_strides,
    solution,
)
from operators.aten.sin import angle_edges, sample_angles
from operators.registry import register
from operators.spec import Call, Case, EntryPoint, Kind, Negative, Tolerance

OP = r'''
@triton.jit
def _op(x, p0, p1):
    return libdevice.cos(x)
'''

SOLUTION = solution(OP, PLAIN_WRAPPERS, name="cos", libdevice=True)

@register("aten::cos", version=1, kind=Kind.COMPUTE)
class Cos(Unary):
    op = "cos"
    entry_points = (
        EntryPoint("cos", "cos(self: Tensor) -> Tensor", "The cosine of each element (radians)."),
        EntryPoint("cos_out", "cos_out(self: Tensor, *, out: Tensor) -> Tensor",
                   "Writes cos(self) into out (same shape and dtype) and returns out."),
    )
    description = describe(
        "Elementwise cosine `out = cos(self)` (radians), following PyTorch's `torch.cos`. "
        "Arguments range from subnormal to huge (up to 1e30); cos(±inf) and cos(NaN) are NaN. "
        "Accuracy is judged relative to |cos x| + |x sin x| (the conditioning of cos at x).",
        FLOATS)
    solution = SOLUTION
    negatives = (
        Negative("out_not_written", "the out= overload returns a new tensor and leaves out "
                 "unwritten", ignores_out(SOLUTION, "cos")),
        Negative("ignores_input_strides", "indexes a sliced input as if contiguous",
                 ignores_strides(SOLUTION)),
    )
    # Relative to |cos x| + |x sin x|. float32: CUDA's cosf is within 2 ulp (4 u of |f|);
    # halves: the final rounding (1 u) and a float32 evaluation far below it.
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 4),
    }
    flops_per_element = 10.0

    def sample(self, n: int, c: Case, gen: torch.Generator) -> torch.Tensor:
        return sample_angles(n, c, gen)

    def edges(self, dtype: torch.dtype, c: Case) -> list[float]:
        return angle_edges(dtype)

    def ref64(self, x: torch.Tensor, call: Call) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.cos(x)
        return y, y.abs() + (x * torch.sin(x)).abs()
