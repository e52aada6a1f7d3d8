"""aten::floor — the largest integer <= self, elementwise (overloads default, out)."""

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
    return libdevice.floor(x)
'''

SOLUTION = solution(OP, PLAIN_WRAPPERS, name="floor", libdevice=True)

# Floor through an int32 round trip: right for moderate values, wrong for |x| >= 2**31,
# infinities and NaN.
NEGATIVE_INT32_ROUND_TRIP = SOLUTION.replace(
    "    return libdevice.floor(x)",
    "    t = x.to(tl.int32).to(x.dtype)\n    return tl.where(t > x, t - 1.0, t)")


@register("aten::floor", version=1, kind=Kind.COMPUTE)
class Floor(Unary):
    op = "floor"
    entry_points = (
        EntryPoint("floor", "floor(self: Tensor) -> Tensor",
                   "The largest integer not greater than each element, in self's dtype."),
        EntryPoint("floor_out", "floor_out(self: Tensor, *, out: Tensor) -> Tensor",
                   "Writes floor(self) into out (same shape and dtype) and returns out."),
    )
    description = describe(
        "Elementwise floor, following PyTorch's `torch.floor`: the largest integer value not "
        "greater than x, as a float of the input's dtype. Values of any magnitude occur "
        "(beyond 2**31, up to the dtype's largest finite value); floor(-0.5) = -1, "
        "floor(±inf) = ±inf, NaN stays NaN. Negative subnormal inputs (which a flush-to-zero "
        "unit would turn into -0) occur only in float16.", FLOATS)
    solution = SOLUTION
    negatives = (
        Negative("int32_round_trip", "floors through an int32 conversion, wrong beyond 2**31 "
                 "and for inf/NaN", NEGATIVE_INT32_ROUND_TRIP),
        Negative("ignores_input_strides", "indexes a sliced input as if contiguous",
                 ignores_strides(SOLUTION)),
    )
    # floor is exact in every float format.
    tolerances = {
        "float16": Tolerance(0.0, 0.0),
        "bfloat16": Tolerance(0.0, 0.0),
        "float32": Tolerance(0.0, 0.0),
    }

    def sample(self, n: int, c: Case, gen: torch.Generator) -> torch.Tensor:
        sign = torch.randint(0, 2, (n,), generator=gen).double() * 2 - 1
        return pick(n, gen, torch.randn(n, generator=gen, dtype=torch.float64) * 50,
                    torch.rand(n, generator=gen, dtype=torch.float64) * 2 - 1,
                    sign * log_uniform(n, gen, 1e-3, 1e6))

    def edges(self, dtype: torch.dtype, c: Case) -> list[float]:
        fi = torch.finfo(dtype)
        # float32-range subnormals only positive: floor(-subnormal) is -1, but a flushed one
        # gives -0 (see half_denormals)
        tiny = fi.tiny
        return [INF, -INF, NAN, 0.0, -0.0, -0.5, 0.5, -1.0, 3e9, -3e9 - 0.5, fi.max, -fi.max,
                tiny / 4, *half_denormals(dtype)]

    def ref64(self, x: torch.Tensor, call: Call) -> tuple[torch.Tensor, None]:
        return torch.floor(x), None
