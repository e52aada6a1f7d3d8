"""aten::log10 — the base-10 logarithm of each element (overloads default, out)."""

from __future__ import annotations

import math

import torch

from operators.aten._unary import (
    FLOATS,
    INF,
    NAN,
    PLAIN_WRAPPERS,
    Unary,
    describe,
    half_denormals,
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
    return libdevice.log10(x)
'''

SOLUTION = solution(OP, PLAIN_WRAPPERS, name="log10", libdevice=True)


@register("aten::log10", version=1, kind=Kind.COMPUTE)
class Log10(Unary):
    op = "log10"
    entry_points = (
        EntryPoint("log10", "log10(self: Tensor) -> Tensor",
                   "The base-10 logarithm of each element."),
        EntryPoint("log10_out", "log10_out(self: Tensor, *, out: Tensor) -> Tensor",
                   "Writes log10(self) into out (same shape and dtype) and returns out."),
    )
    description = describe(
        "Elementwise base-10 logarithm `out = log10(self)`, following PyTorch's `torch.log10`. "
        "Positive inputs span the dtype's whole normal range and come close to 1; "
        "log10(±0) = -inf, log10(inf) = inf, negative inputs, -inf and NaN give NaN.", FLOATS)
    solution = SOLUTION
    negatives = (
        Negative("out_not_written", "the out= overload returns a new tensor and leaves out "
                 "unwritten", ignores_out(SOLUTION, "log10")),
        Negative("ignores_input_strides", "indexes a sliced input as if contiguous",
                 ignores_strides(SOLUTION)),
    )
    # Relative to |log10 x| + 1/ln 10. float32: CUDA's log10f is within 2 ulp (4 u of |f|);
    # halves: the final rounding (1 u) and a float32 evaluation far below it.
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 4),
    }
    flops_per_element = 10.0

    def sample(self, n: int, c: Case, gen: torch.Generator) -> torch.Tensor:
        hi = 6e4 if c.dtype == "float16" else 1e37
        lo = 1e-4 if c.dtype == "float16" else 1e-37
        sign = torch.randint(0, 2, (n,), generator=gen).double() * 2 - 1
        return pick(n, gen, log_uniform(n, gen, lo, hi),
                    1.0 + sign * log_uniform(n, gen, 1e-7, 1e-2))

    def edges(self, dtype: torch.dtype, c: Case) -> list[float]:
        # float32-range subnormals are left out: flushed to 0 they would give -inf
        return [INF, -INF, NAN, 0.0, -0.0, -1.0, 1.0, 10.0, 1000.0, *half_denormals(dtype)]

    def ref64(self, x: torch.Tensor, call: Call) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.log10(x)
        return y, y.abs() + 1.0 / math.log(10.0)
