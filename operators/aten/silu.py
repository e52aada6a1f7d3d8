"""aten::silu — the SiLU (swish) activation ``x * sigmoid(x)`` (overloads default, out)."""

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
    # x / (1 + e^-x): e^-x overflowing to inf for very negative x gives the right -0
    return x / (1.0 + tl.exp(-x))
'''

SOLUTION = solution(OP, PLAIN_WRAPPERS, name="silu")

# sigmoid as e^x / (1 + e^x): inf / inf = NaN once e^x overflows (x > 88.7).
NEGATIVE_SIGMOID_OVERFLOW = SOLUTION.replace(
    "    return x / (1.0 + tl.exp(-x))",
    "    e = tl.exp(x)\n    return x * (e / (1.0 + e))")


@register("aten::silu", version=1, kind=Kind.COMPUTE)
class Silu(Unary):
    op = "silu"
    entry_points = (
        EntryPoint("silu", "silu(self: Tensor) -> Tensor", "x * sigmoid(x), elementwise."),
        EntryPoint("silu_out", "silu_out(self: Tensor, *, out: Tensor) -> Tensor",
                   "Writes silu(self) into out (same shape and dtype) and returns out."),
    )
    description = describe(
        "The SiLU (swish) activation `out = x * sigmoid(x) = x / (1 + exp(-x))`, following "
        "PyTorch's `torch.nn.functional.silu`. Large |x| occur (silu(x) -> x for large x, "
        "-> -0 for very negative x); silu(inf) = inf, silu(-inf) = NaN, silu(NaN) = NaN.",
        FLOATS)
    solution = SOLUTION
    negatives = (
        Negative("sigmoid_overflow", "sigmoid as e^x / (1 + e^x) gives NaN once e^x overflows",
                 NEGATIVE_SIGMOID_OVERFLOW),
        Negative("ignores_input_strides", "indexes a sliced input as if contiguous",
                 ignores_strides(SOLUTION)),
    )
    # Relative to |f| + |x f'|. float32: exp (<= 2 ulp), one add, one division: <= ~4 u of
    # |f|; halves: the final rounding (1 u) and a float32 evaluation far below it.
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 4),
    }
    flops_per_element = 4.0

    def sample(self, n: int, c: Case, gen: torch.Generator) -> torch.Tensor:
        # |x| <= 80: below -88.7 silu is a float32 normal that PyTorch's own kernel flushes
        sign = torch.randint(0, 2, (n,), generator=gen).double() * 2 - 1
        return pick(n, gen, torch.randn(n, generator=gen, dtype=torch.float64) * 3,
                    sign * log_uniform(n, gen, 1e-4, 80.0))

    def edges(self, dtype: torch.dtype, c: Case) -> list[float]:
        return [INF, -INF, NAN, 0.0, -0.0, 100.0, -110.0, 1e4, -1e4, *denormals(dtype)]

    def ref64(self, x: torch.Tensor, call: Call) -> tuple[torch.Tensor, torch.Tensor]:
        s = torch.sigmoid(x)
        y = x * s
        return y, y.abs() + (x * s * (1.0 + x * (1.0 - s))).abs()
