"""aten::sin — the sine of each element, in radians (overloads default, out)."""

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
    return libdevice.sin(x)
'''

SOLUTION = solution(OP, PLAIN_WRAPPERS, name="sin", libdevice=True)

# sin(x) = cos(x - pi/2) with pi/2 rounded to float32: an absolute error of ~4e-8 that is
# invisible in float16 but wrong in float32 wherever |sin x| is small (x near 0).
NEGATIVE_COS_SHIFT = SOLUTION.replace("    return libdevice.sin(x)",
                                      "    return libdevice.cos(x - 1.5707963267948966)")


def sample_angles(n: int, c: Case, gen: torch.Generator) -> torch.Tensor:
    """Angles for sin/cos: mostly a few periods, some tiny, some large (to 1e4)."""
    sign = torch.randint(0, 2, (n,), generator=gen).double() * 2 - 1
    return pick(n, gen, torch.randn(n, generator=gen, dtype=torch.float64) * 3,
                torch.randn(n, generator=gen, dtype=torch.float64) * 3,
                sign * log_uniform(n, gen, 1e-6, 1e4))


def angle_edges(dtype: torch.dtype) -> list[float]:
    # inf -> NaN; 1e30 is inf in float16 and needs full range reduction in float32/bfloat16
    return [INF, -INF, NAN, 0.0, -0.0, 3.14159265, 1e30, -65504.0, *denormals(dtype)]


@register("aten::sin", version=1, kind=Kind.COMPUTE)
class Sin(Unary):
    op = "sin"
    entry_points = (
        EntryPoint("sin", "sin(self: Tensor) -> Tensor", "The sine of each element (radians)."),
        EntryPoint("sin_out", "sin_out(self: Tensor, *, out: Tensor) -> Tensor",
                   "Writes sin(self) into out (same shape and dtype) and returns out."),
    )
    description = describe(
        "Elementwise sine `out = sin(self)` (radians), following PyTorch's `torch.sin`. "
        "Arguments range from subnormal to huge (up to 1e30); sin(±inf) and sin(NaN) are NaN. "
        "Accuracy is judged relative to |sin x| + |x cos x| (the conditioning of sin at x).",
        FLOATS)
    solution = SOLUTION
    negatives = (
        Negative("cos_shift_float32_pi", "computes cos(x - pi/2) with pi/2 rounded to float32, "
                 "wrong in float32 near x = 0", NEGATIVE_COS_SHIFT),
        Negative("ignores_input_strides", "indexes a sliced input as if contiguous",
                 ignores_strides(SOLUTION)),
    )
    # Relative to |sin x| + |x cos x|. float32: CUDA's sinf is within 2 ulp (4 u of |f|);
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
        y = torch.sin(x)
        return y, y.abs() + (x * torch.cos(x)).abs()
