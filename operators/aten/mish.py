"""aten::mish — the Mish activation ``x * tanh(softplus(x))`` (overloads default, out)."""

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
    # tanh(log(1 + t)) = n / (n + 2) with t = e^x, n = t (t + 2): no cancellation for x << 0;
    # past x = 20 the factor is 1 to float32 precision (and t^2 would overflow).
    t = tl.exp(tl.minimum(x, 20.0))
    n = t * (t + 2.0)
    return tl.where(x > 20.0, x, x * (n / (n + 2.0)))
'''

SOLUTION = solution(OP, PLAIN_WRAPPERS, name="mish")

# The textbook softplus log(1 + e^x): 1 + e^x rounds to 1 for x < -17 (and loses digits well
# before), so float32 and bfloat16 results for negative x are wrong; float16 hides it.
NEGATIVE_NAIVE_SOFTPLUS = SOLUTION.replace(
    "    t = tl.exp(tl.minimum(x, 20.0))\n    n = t * (t + 2.0)\n"
    "    return tl.where(x > 20.0, x, x * (n / (n + 2.0)))",
    "    return x * libdevice.tanh(tl.log(1.0 + tl.exp(x)))").replace(
    "import triton.language as tl\n",
    "import triton.language as tl\nfrom triton.language.extra import libdevice\n")


@register("aten::mish", version=1, kind=Kind.COMPUTE)
class Mish(Unary):
    op = "mish"
    entry_points = (
        EntryPoint("mish", "mish(self: Tensor) -> Tensor",
                   "x * tanh(softplus(x)), elementwise."),
        EntryPoint("mish_out", "mish_out(self: Tensor, *, out: Tensor) -> Tensor",
                   "Writes mish(self) into out (same shape and dtype) and returns out."),
    )
    description = describe(
        "The Mish activation `out = x * tanh(softplus(x))` with `softplus(x) = log(1 + "
        "exp(x))`, following PyTorch's `torch.nn.functional.mish`. Very negative x occur, "
        "where mish(x) ~ x e^x is tiny but must keep its relative accuracy (a naive "
        "log(1 + exp(x)) does not), and large positive x, where it tends to x; "
        "mish(inf) = inf, mish(-inf) = NaN, mish(NaN) = NaN.", FLOATS)
    solution = SOLUTION
    negatives = (
        Negative("naive_softplus", "log(1 + exp(x)) loses e^x next to 1 for negative x",
                 NEGATIVE_NAIVE_SOFTPLUS),
        Negative("ignores_input_strides", "indexes a sliced input as if contiguous",
                 ignores_strides(SOLUTION)),
    )
    # Relative to |f| + |x f'|. float32: exp (<= 2 ulp) and a few roundings in t (t + 2) /
    # (n + 2) and the product: <= ~8 u of |f|; halves: the final rounding (1 u) and a float32
    # evaluation far below it.
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 8),
    }
    flops_per_element = 8.0

    def sample(self, n: int, c: Case, gen: torch.Generator) -> torch.Tensor:
        sign = torch.randint(0, 2, (n,), generator=gen).double() * 2 - 1
        return pick(n, gen, torch.randn(n, generator=gen, dtype=torch.float64) * 3,
                    sign * log_uniform(n, gen, 1e-4, 80.0))

    def edges(self, dtype: torch.dtype, c: Case) -> list[float]:
        return [INF, -INF, NAN, 0.0, -0.0, 25.0, -30.0, -100.0, 1e4, *denormals(dtype)]

    def ref64(self, x: torch.Tensor, call: Call) -> tuple[torch.Tensor, torch.Tensor]:
        sp = torch.logaddexp(x, torch.zeros_like(x))  # softplus, accurate for any x
        th = torch.tanh(sp)
        y = x * th
        # f' = tanh(sp) + x sech^2(sp) sigmoid(x)
        d = th + x * (1.0 - th * th) * torch.sigmoid(x)
        return y, y.abs() + (x * d).abs()
