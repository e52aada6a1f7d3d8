"""aten::acosh — the inverse hyperbolic cosine of each element (overloads default, out)."""

from __future__ import annotations

import torch

from operators.aten._unary import (
    FLOATS,
    INF,
    NAN,
    PLAIN_WRAPPERS,
    Unary,
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
    return libdevice.acosh(x)
'''

SOLUTION = solution(OP, PLAIN_WRAPPERS, name="acosh", libdevice=True)

# The textbook formula: x * x overflows float32 for x > 1.8e19, so huge inputs give inf.
NEGATIVE_NAIVE = SOLUTION.replace("    return libdevice.acosh(x)",
                                  "    return tl.log(x + tl.sqrt(x * x - 1.0))")


@register("aten::acosh", version=1, kind=Kind.COMPUTE)
class Acosh(Unary):
    op = "acosh"
    entry_points = (
        EntryPoint("acosh", "acosh(self: Tensor) -> Tensor",
                   "The inverse hyperbolic cosine of each element."),
        EntryPoint("acosh_out", "acosh_out(self: Tensor, *, out: Tensor) -> Tensor",
                   "Writes acosh(self) into out (same shape and dtype) and returns out."),
    )
    description = describe(
        "Elementwise inverse hyperbolic cosine `out = acosh(self) = log(x + sqrt(x^2 - 1))`, "
        "following PyTorch's `torch.acosh`. The domain is x >= 1: inputs run from just above 1 "
        "to the dtype's largest values (up to ~3e38, where x^2 overflows float32); acosh(1) = 0, "
        "acosh(inf) = inf, x < 1 (and -inf, NaN) gives NaN.", FLOATS)
    solution = SOLUTION
    negatives = (
        Negative("naive_formula", "log(x + sqrt(x*x - 1)) overflows for x > 1.8e19",
                 NEGATIVE_NAIVE),
        Negative("ignores_input_strides", "indexes a sliced input as if contiguous",
                 ignores_strides(SOLUTION)),
    )
    # Relative to |f| + |x f'| (see ref64). float32: CUDA's acoshf is within 4 ulp (8 u of
    # |f|); halves: the final rounding (1 u) and a float32 evaluation far below it.
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 8),
    }
    flops_per_element = 10.0

    def sample(self, n: int, c: Case, gen: torch.Generator) -> torch.Tensor:
        top = 6e4 if c.dtype == "float16" else 1e18
        return pick(n, gen, 1.0 + torch.randn(n, generator=gen, dtype=torch.float64).abs() * 3,
                    1.0 + log_uniform(n, gen, 1e-7, 1e-2), log_uniform(n, gen, 1.0, top))

    def edges(self, dtype: torch.dtype, c: Case) -> list[float]:
        fi = torch.finfo(dtype)
        return [INF, -INF, NAN, 1.0, 0.999, 0.0, -1.0, 1e30, fi.max]

    def ref64(self, x: torch.Tensor, call: Call) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.acosh(x)
        # x f'(x) = x / sqrt(x^2 - 1) is unbounded at x = 1; an input perturbation below one
        # unit of roundoff u is meaningless, so x^2 - 1 is taken as at least 2u x^2.
        u = self.roundoff(call)
        d = torch.maximum(x * x - 1.0, 2.0 * u * x * x)
        return y, y.abs() + x.abs() / d.sqrt()
