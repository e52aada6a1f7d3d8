"""aten::erfc — the complementary error function ``1 - erf(x)`` (overloads default, out)."""

from __future__ import annotations

import math

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
    pick,
    solution,
)
from operators.registry import register
from operators.spec import Call, Case, EntryPoint, Kind, Negative, Tolerance

OP = r'''
@triton.jit
def _op(x, p0, p1):
    return libdevice.erfc(x)
'''

SOLUTION = solution(OP, PLAIN_WRAPPERS, name="erfc", libdevice=True)

# 1 - erf(x) cancels catastrophically for x > ~1: right in float16/bfloat16 (and for x <= 0),
# wrong in float32/float64 tails.
NEGATIVE_ONE_MINUS_ERF = SOLUTION.replace("    return libdevice.erfc(x)",
                                          "    return 1.0 - libdevice.erf(x)")


@register("aten::erfc", version=1, kind=Kind.COMPUTE)
class Erfc(Unary):
    op = "erfc"
    float_dtypes = (*FLOATS, "float64")
    entry_points = (
        EntryPoint("erfc", "erfc(self: Tensor) -> Tensor",
                   "The complementary error function of each element."),
        EntryPoint("erfc_out", "erfc_out(self: Tensor, *, out: Tensor) -> Tensor",
                   "Writes erfc(self) into out (same shape and dtype) and returns out."),
    )
    description = describe(
        "Elementwise complementary error function `out = erfc(x) = 1 - erf(x) = "
        "2/sqrt(pi) * integral_x^inf exp(-t^2) dt`, following PyTorch's `torch.erfc`. The "
        "right tail matters: erfc(x) is tiny for large x (1e-45 at x = 10, 1e-296 at x = 26 in "
        "float64) and must keep its relative accuracy there, so `1 - erf(x)` is not good "
        "enough; erfc(inf) = 0, erfc(-inf) = 2, erfc(NaN) = NaN.", (*FLOATS, "float64"))
    solution = SOLUTION
    negatives = (
        Negative("one_minus_erf", "computes 1 - erf(x), losing all accuracy in the right tail",
                 NEGATIVE_ONE_MINUS_ERF),
        Negative("ignores_input_strides", "indexes a sliced input as if contiguous",
                 ignores_strides(SOLUTION)),
    )
    # Relative to |erfc x| + |x erfc'(x)| = |erfc x| + 2|x| e^(-x^2) / sqrt(pi). float32: CUDA's
    # erfcf is within 4 ulp (8 u); float64: CUDA's erfc is within 5 ulp (10 u), plus the
    # float64 reference's own ~2 ulp; halves: the final rounding (1 u) and a float32
    # evaluation far below it.
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 8),
        "float64": Tolerance.ulps("float64", 16),
    }
    flops_per_element = 20.0

    def sample(self, n: int, c: Case, gen: torch.Generator) -> torch.Tensor:
        top = 27.0 if c.dtype == "float64" else 10.0
        return pick(n, gen, torch.randn(n, generator=gen, dtype=torch.float64) * 2,
                    torch.rand(n, generator=gen, dtype=torch.float64) * (top + 3) - 3)

    def edges(self, dtype: torch.dtype, c: Case) -> list[float]:
        return [INF, -INF, NAN, 0.0, -0.0, 5.0, 9.0, 26.0, -6.0, 30.0, *denormals(dtype)]

    def ref64(self, x: torch.Tensor, call: Call) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.erfc(x)
        return y, y.abs() + (2.0 / math.sqrt(math.pi)) * (x * torch.exp(-x * x)).abs()
