"""aten::cosh — the hyperbolic cosine of each element (overloads default, out)."""

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
    log_uniform,
    pick,
    solution,
)
from operators.registry import register
from operators.spec import Call, Case, EntryPoint, Kind, Negative, Tolerance

OP = r'''
@triton.jit
def _op(x, p0, p1):
    return libdevice.cosh(x)
'''

SOLUTION = solution(OP, PLAIN_WRAPPERS, name="cosh", libdevice=True)

@register("aten::cosh", version=1, kind=Kind.COMPUTE)
class Cosh(Unary):
    op = "cosh"
    entry_points = (
        EntryPoint("cosh", "cosh(self: Tensor) -> Tensor",
                   "The hyperbolic cosine of each element."),
        EntryPoint("cosh_out", "cosh_out(self: Tensor, *, out: Tensor) -> Tensor",
                   "Writes cosh(self) into out (same shape and dtype) and returns out."),
    )
    description = describe(
        "Elementwise hyperbolic cosine `out = cosh(self) = (e^x + e^-x) / 2`, following "
        "PyTorch's `torch.cosh`. Results near the top of the dtype's range occur (|x| up to "
        "88.5 in float32/bfloat16, 11.7 in float16) and larger |x| overflow to inf; "
        "cosh(±inf) = inf, cosh(NaN) = NaN.", FLOATS)
    solution = SOLUTION
    negatives = (
        Negative("out_not_written", "the out= overload returns a new tensor and leaves out "
                 "unwritten", ignores_out(SOLUTION, "cosh")),
        Negative("ignores_input_strides", "indexes a sliced input as if contiguous",
                 ignores_strides(SOLUTION)),
    )
    # Relative to |cosh x| + |x sinh x|. float32: CUDA's coshf is within 2 ulp (4 u of |f|);
    # halves: the final rounding (1 u) and a float32 evaluation far below it.
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 4),
    }
    flops_per_element = 10.0

    def sample(self, n: int, c: Case, gen: torch.Generator) -> torch.Tensor:
        sign = torch.randint(0, 2, (n,), generator=gen).double() * 2 - 1
        top = 12.0 if c.dtype == "float16" else 88.0
        return pick(n, gen, torch.randn(n, generator=gen, dtype=torch.float64) * 3,
                    sign * log_uniform(n, gen, 1e-4, top))

    def edges(self, dtype: torch.dtype, c: Case) -> list[float]:
        # Not 88.7 < |x| < 89.4, where cosh is finite but PyTorch's CPU kernel overflows.
        return [INF, -INF, NAN, 0.0, -0.0, 88.5, -11.7, 100.0, *denormals(dtype)]

    def ref64(self, x: torch.Tensor, call: Call) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.cosh(x)
        return y, y.abs() + (x * torch.sinh(x)).abs()
