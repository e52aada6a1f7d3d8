"""aten::rsqrt — ``1 / sqrt(self)`` elementwise (overloads default, out)."""

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
    solution,
)
from operators.registry import register
from operators.spec import Call, Case, EntryPoint, Kind, Negative, Tolerance

OP = r'''
@triton.jit
def _op(x, p0, p1):
    return libdevice.rsqrt(x)
'''

SOLUTION = solution(OP, PLAIN_WRAPPERS, name="rsqrt", libdevice=True)

# Guards against "bad" inputs by returning 0 for x <= 0: right on positive inputs, wrong at
# zero (inf, or -inf for -0) and for negatives (NaN).
NEGATIVE_ZERO_GUARD = SOLUTION.replace("    return libdevice.rsqrt(x)",
                                       "    return tl.where(x > 0, libdevice.rsqrt(x), 0.0)")


@register("aten::rsqrt", version=1, kind=Kind.COMPUTE)
class Rsqrt(Unary):
    op = "rsqrt"
    entry_points = (
        EntryPoint("rsqrt", "rsqrt(self: Tensor) -> Tensor",
                   "The reciprocal square root of each element."),
        EntryPoint("rsqrt_out", "rsqrt_out(self: Tensor, *, out: Tensor) -> Tensor",
                   "Writes rsqrt(self) into out (same shape and dtype) and returns out."),
    )
    description = describe(
        "Elementwise reciprocal square root `out = 1 / sqrt(self)`, following PyTorch's "
        "`torch.rsqrt`. Positive inputs span the dtype's whole range; rsqrt(+0) = inf, "
        "rsqrt(-0) = -inf, rsqrt(inf) = 0, negative inputs give NaN.", FLOATS)
    solution = SOLUTION
    negatives = (
        Negative("zero_guard", "returns 0 for x <= 0 instead of inf/-inf at zero and NaN for "
                 "negatives", NEGATIVE_ZERO_GUARD),
        Negative("ignores_input_strides", "indexes a sliced input as if contiguous",
                 ignores_strides(SOLUTION)),
    )
    # Relative to 1.5 |rsqrt(x)| (= |f| + |x f'|). float32: CUDA's rsqrtf is within 2 ulp
    # (<= 4 u of |f|); halves: the final rounding (1 u) and a float32 evaluation far below it.
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 4),
    }
    flops_per_element = 2.0

    def sample(self, n: int, c: Case, gen: torch.Generator) -> torch.Tensor:
        # every binade of the dtype's normal range
        hi = 6e4 if c.dtype == "float16" else 1e37
        lo = 1e-4 if c.dtype == "float16" else 1e-37
        return log_uniform(n, gen, lo, hi)

    def edges(self, dtype: torch.dtype, c: Case) -> list[float]:
        # float32-range subnormals are left out: flushed to 0 they would give inf
        return [INF, -INF, NAN, 0.0, -0.0, -1.0, -1e-3, 1.0, *half_denormals(dtype)]

    def ref64(self, x: torch.Tensor, call: Call) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.rsqrt(x)
        return y, 1.5 * y.abs()
