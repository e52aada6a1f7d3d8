"""aten::special_entr — the elementwise entropy term ``-x ln x`` (overloads default, out)."""

from __future__ import annotations

import torch

from operators.aten._unary import (
    FLOATS,
    INF,
    NAN,
    PLAIN_WRAPPERS,
    Unary,
    describe,
    half_denormals,
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
    y = -x * libdevice.log(x)
    y = tl.where(x == 0.0, 0.0, y)  # the limit, where 0 * log(0) would be NaN
    return tl.where(x < 0.0, float("-inf"), y)
'''

SOLUTION = solution(OP, PLAIN_WRAPPERS, name="special_entr", libdevice=True)

# Forgets the x = 0 case: 0 * -inf = NaN instead of 0.
NEGATIVE_NO_ZERO = SOLUTION.replace(
    "    y = tl.where(x == 0.0, 0.0, y)  # the limit, where 0 * log(0) would be NaN\n", "")


@register("aten::special_entr", version=1, kind=Kind.COMPUTE)
class SpecialEntr(Unary):
    op = "special_entr"
    float_dtypes = (*FLOATS, "float64")
    entry_points = (
        EntryPoint("special_entr", "special_entr(self: Tensor) -> Tensor",
                   "-x * ln(x) for x > 0, 0 for x = 0, -inf for x < 0."),
        EntryPoint("special_entr_out", "special_entr_out(self: Tensor, *, out: Tensor) -> Tensor",
                   "Writes special_entr(self) into out (same shape and dtype) and returns out."),
    )
    description = describe(
        "The elementwise entropy term of `torch.special.entr`: `out = -x * ln(x)` for x > 0, "
        "`0` for x = 0 (±0), `-inf` for x < 0 (including -inf); entr(inf) = -inf and NaN "
        "stays NaN. Positive inputs span many orders of magnitude.", (*FLOATS, "float64"))
    solution = SOLUTION
    negatives = (
        Negative("no_zero_case", "returns 0 * log(0) = NaN at x = 0 instead of 0",
                 NEGATIVE_NO_ZERO),
        Negative("ignores_input_strides", "indexes a sliced input as if contiguous",
                 ignores_strides(SOLUTION)),
    )
    # Relative to |x ln x| + |x (ln x + 1)| (1 at x = 1, where entr is 0). float32: log
    # (<= 2 ulp) and a product: <= ~4 u of that; float64 likewise plus the reference's own
    # rounding; halves: the final rounding (1 u) and a float32 evaluation far below it.
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 4),
        "float64": Tolerance.ulps("float64", 8),
    }
    flops_per_element = 4.0

    def sample(self, n: int, c: Case, gen: torch.Generator) -> torch.Tensor:
        hi = 6e4 if c.dtype == "float16" else 1e30
        lo = 1e-4 if c.dtype == "float16" else 1e-30
        return pick(n, gen, torch.rand(n, generator=gen, dtype=torch.float64),
                    log_uniform(n, gen, lo, hi),
                    1.0 + torch.randn(n, generator=gen, dtype=torch.float64) * 1e-3)

    def edges(self, dtype: torch.dtype, c: Case) -> list[float]:
        # float32-range subnormals are left out: flushed to 0 they give 0, not ~1e-37
        return [INF, -INF, NAN, 0.0, -0.0, 1.0, -1.0, -1e-3, *half_denormals(dtype)]

    def ref64(self, x: torch.Tensor, call: Call) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.special.entr(x)
        lx = torch.log(x.abs())
        scale = (x * lx).abs() + (x * (lx + 1.0)).abs()
        return y, torch.where(x > 0, scale, torch.zeros_like(x))
