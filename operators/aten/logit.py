"""aten::logit — ``log(z / (1 - z))`` with z = self, optionally clamped to [eps, 1 - eps]
(overloads default, out)."""

from __future__ import annotations

from typing import Any

import torch

from operators.aten._unary import (
    FLOATS,
    INF,
    NAN,
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
    # p0 is eps, or -1 for eps=None (no clamping). Comparisons, not min/max, keep NaN.
    clamp = p0 >= 0.0
    z = tl.where(clamp & (x < p0), p0, x)
    z = tl.where(clamp & (x > 1.0 - p0), 1.0 - p0, z)
    return libdevice.log(z / (1.0 - z))
'''

WRAPPERS = '''

def logit(self, eps=None):
    return _launch(self, _result_like(self, self.dtype), -1.0 if eps is None else float(eps))


def logit_out(self, eps=None, *, out):
    return _launch(self, out, -1.0 if eps is None else float(eps))
'''

SOLUTION = solution(OP, WRAPPERS, name="logit", libdevice=True)

# Ignores eps: right for eps=None, wrong wherever eps would clamp.
NEGATIVE_NO_EPS = SOLUTION.replace("-1.0 if eps is None else float(eps)", "-1.0")


@register("aten::logit", version=1, kind=Kind.COMPUTE)
class Logit(Unary):
    op = "logit"
    variants = ({}, {"eps": 1e-6}, {"eps": 0.05})

    def variants_for(self, dtype: str) -> tuple[dict[str, Any], ...]:
        # PyTorch's CPU kernel rounds the bounds to float16/bfloat16 (1 - 1e-6 becomes 1),
        # its CUDA kernel keeps them in float32: half inputs only get eps where both agree
        # within the conditioning at the bound.
        return self.variants if dtype == "float32" else ({}, {"eps": 0.01}, {"eps": 0.05})

    entry_points = (
        EntryPoint("logit", "logit(self: Tensor, eps: float | None = None) -> Tensor",
                   "log(z / (1 - z)) where z = self, clamped to [eps, 1 - eps] when eps is "
                   "given."),
        EntryPoint("logit_out",
                   "logit_out(self: Tensor, eps: float | None = None, *, out: Tensor) -> Tensor",
                   "Writes logit(self, eps) into out (same shape and dtype) and returns out."),
    )
    description = describe(
        "The logit (inverse sigmoid) `out = log(z / (1 - z))`, following PyTorch's "
        "`torch.logit(self, eps)`: z = self when eps is None, else self clamped to "
        "[eps, 1 - eps] (eps a Python float: 1e-6, 0.01 or 0.05, float16/bfloat16 inputs "
        "only get eps >= 0.01; the bounds computed in float32; a NaN input stays NaN). "
        "Without eps: logit(0) = -inf, logit(1) = inf, and inputs outside [0, 1] (±inf "
        "included) give NaN. Inputs come close to 0 and 1.", FLOATS)
    solution = SOLUTION
    negatives = (
        Negative("ignores_eps", "never clamps to [eps, 1 - eps]", NEGATIVE_NO_EPS),
        Negative("ignores_input_strides", "indexes a sliced input as if contiguous",
                 ignores_strides(SOLUTION)),
    )
    # Relative to |f| + 1/(1 - z) (= |f| + |z f'(z)|, >= |f| + 1). float32: z / (1 - z) is
    # off by <= 2 u (an absolute 2 u after the log), CUDA's logf by 2 ulp (4 u of |f|), and
    # 1 - eps rounds in float32 (covered by 1/(1 - z) at z = 1 - eps): 8 u; halves: the final
    # rounding (1 u) and a float32 evaluation far below it.
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 8),
    }
    flops_per_element = 12.0

    def args(self, x: torch.Tensor, c: Case) -> tuple[tuple[Any, ...], dict[str, Any]]:
        eps = c.get("eps")
        return ((x,) if eps is None else (x, eps)), {}

    def sample(self, n: int, c: Case, gen: torch.Generator) -> torch.Tensor:
        return pick(n, gen, torch.rand(n, generator=gen, dtype=torch.float64),
                    log_uniform(n, gen, 1e-7, 1e-2), 1.0 - log_uniform(n, gen, 1e-7, 1e-2))

    def edges(self, dtype: torch.dtype, c: Case) -> list[float]:
        # float32-range subnormals are left out: flushed to 0 they give -inf
        return [INF, -INF, NAN, 0.0, -0.0, 1.0, 0.5, -0.5, 1.5, *half_denormals(dtype)]

    def ref64(self, x: torch.Tensor, call: Call) -> tuple[torch.Tensor, torch.Tensor]:
        eps = call.args[1] if len(call.args) > 1 else call.kwargs.get("eps")
        z = x if eps is None else torch.clamp(x, eps, 1.0 - eps)  # NaN stays NaN
        y = torch.log(z / (1.0 - z))
        # z f'(z) = 1 / (1 - z), unbounded at z = 1: 1 - z is taken as at least one roundoff
        w = torch.clamp((1.0 - z).abs(), min=self.roundoff(call))
        return y, y.abs() + 1.0 / w
