"""aten::asin — the arcsine of each element (overloads default, out)."""

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
    return libdevice.asin(x)
'''

SOLUTION = solution(OP, PLAIN_WRAPPERS, name="asin", libdevice=True)

# Clamps to [-1, 1] "for safety": returns ±pi/2 where PyTorch gives NaN (|x| > 1).
NEGATIVE_CLAMP = SOLUTION.replace(
    "    return libdevice.asin(x)",
    "    return libdevice.asin(tl.minimum(tl.maximum(x, -1.0), 1.0))")


@register("aten::asin", version=1, kind=Kind.COMPUTE)
class Asin(Unary):
    op = "asin"
    entry_points = (
        EntryPoint("asin", "asin(self: Tensor) -> Tensor",
                   "The arcsine of each element, in radians."),
        EntryPoint("asin_out", "asin_out(self: Tensor, *, out: Tensor) -> Tensor",
                   "Writes asin(self) into out (same shape and dtype) and returns out."),
    )
    description = describe(
        "Elementwise arcsine `out = asin(self)` in radians, following PyTorch's `torch.asin`. "
        "The domain is [-1, 1], including values within an ulp of ±1 and tiny ones; "
        "asin(±1) = ±pi/2, |x| > 1, ±inf and NaN give NaN.", FLOATS)
    solution = SOLUTION
    negatives = (
        Negative("clamps_domain", "clamps x to [-1, 1], returning ±pi/2 instead of NaN "
                 "outside the domain", NEGATIVE_CLAMP),
        Negative("ignores_input_strides", "indexes a sliced input as if contiguous",
                 ignores_strides(SOLUTION)),
    )
    # Relative to |f| + |x f'| (see ref64). float32: CUDA documents its inverse trigonometric
    # and hyperbolic functions within 2-4 ulp (<= 8 u of |f|); halves: the final rounding
    # (1 u) and a float32 evaluation far below it.
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 8),
    }
    flops_per_element = 10.0

    def sample(self, n: int, c: Case, gen: torch.Generator) -> torch.Tensor:
        sign = torch.randint(0, 2, (n,), generator=gen).double() * 2 - 1
        return pick(n, gen, torch.rand(n, generator=gen, dtype=torch.float64) * 2 - 1,
                    sign * (1.0 - log_uniform(n, gen, 1e-7, 1e-2)),
                    sign * log_uniform(n, gen, 1e-6, 1.0))

    def edges(self, dtype: torch.dtype, c: Case) -> list[float]:
        return [INF, -INF, NAN, 1.0, -1.0, 0.0, -0.0, 1.5, -2.0, *denormals(dtype)]

    def ref64(self, x: torch.Tensor, call: Call) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.asin(x)
        # x f'(x) = x / sqrt(1 - x^2) is unbounded at ±1; perturbations below one unit of
        # roundoff u are meaningless, so 1 - x^2 is taken as at least 2u.
        d = torch.clamp(1.0 - x * x, min=2.0 * self.roundoff(call))
        return y, y.abs() + x.abs() / d.sqrt()
