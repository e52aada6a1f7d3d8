"""aten::polygamma — the n-th derivative of the digamma function, ``psi^(n)(self)`` (overloads
default, out)."""

from __future__ import annotations

import math
from typing import Any

import torch

from operators.aten._unary import (
    FLOATS,
    INF,
    NAN,
    Unary,
    describe,
    ignores_strides,
    log_uniform,
    pick,
    solution,
)
from operators.registry import register
from operators.spec import Call, Case, EntryPoint, Kind, Negative, Tolerance

# B_2, B_4, ..., B_24 (Bernoulli numbers) for the asymptotic expansion.
BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510,
             43867 / 798, -174611 / 330, 854513 / 138, -236364091 / 2730)


def polygamma64(n: int, x: torch.Tensor) -> torch.Tensor:
    """psi^(n)(x) in float64, to a few float64 ulps of the conditioning (checked against
    mpmath at 40 digits: <= 7 u for n <= 4 over x in (-20, 1e4)). PyTorch's own float64
    trigamma is off by ~2e-10 relative (a short asymptotic series), hence this.

    Recurrence psi^(n)(x) = psi^(n)(x + m) - (-1)^n n! sum_{k<m} (x + k)^-(n+1) up to
    z = x + m >= 20, then the asymptotic series with B_2 ... B_24."""
    finite = torch.isfinite(x)
    steps = torch.where(finite, torch.clamp(torch.ceil(20.0 - x), 0.0, 200.0), 0.0)
    m = int(steps.max().item()) if x.numel() else 0
    k = torch.arange(m, dtype=torch.float64).reshape(-1, *([1] * x.dim()))
    terms = torch.where(k < steps, (x + k) ** (-(n + 1)), 0.0)  # x + k is exact
    s = terms.sum(0) if m else torch.zeros_like(x)
    z = x + steps
    r = 1.0 / z
    fact = float(math.factorial(n))
    zn = r ** n
    t0 = -torch.log(z) if n == 0 else (fact / n) * zn
    th = fact * 0.5 * zn * r
    rk = math.factorial(n + 1) * 0.5 * zn * r * r  # (2k+n-1)! / ((2k)! z^(2k+n)), k = 1
    ser = torch.zeros_like(x)
    for i, b in enumerate(BERNOULLI):
        kk = i + 1
        ser = ser + b * rk
        rk = rk * ((2 * kk + n) * (2 * kk + n + 1) / ((2 * kk + 1) * (2 * kk + 2))) * r * r
    res = t0 + th + ser + fact * s
    return res if n % 2 == 1 else -res


def _series(n_terms: int) -> str:
    lines = []
    for i, b in enumerate(BERNOULLI[:n_terms]):
        kk = i + 1
        lines.append(f"    ser += {b!r} * rk")
        if i + 1 < n_terms:
            lines.append(f"    rk = rk * ((2 * {kk} + n) * (2 * {kk} + n + 1)) "
                         f"* {1 / ((2 * kk + 1) * (2 * kk + 2))!r} * r2")
    return "\n".join(lines)


OP = r'''
@triton.jit
def _op(x, p0, p1):
    # psi^(n)(x) = (-1)^(n+1) [T0 + n!/(2 z^(n+1)) + sum_k B_2k (2k+n-1)!/((2k)! z^(2k+n))
    #                          + n! sum_{i<m} (x+i)^-(n+1)],  z = x + m >= 10,
    # T0 = -log z for n = 0, else (n-1)!/z^n.
    n = p0
    fact = 1.0
    for j in range(1, n + 1):
        fact = fact * j
    finite = (x == x) & (tl.abs(x) < float("inf"))
    # (inputs below -54 would need more steps; the problem keeps x > -10)
    steps = tl.where(finite, tl.minimum(tl.maximum(tl.ceil(10.0 - x), 0.0), 64.0), 0.0)
    s = tl.zeros_like(x)
    z = x
    for i in range(0, tl.max(steps, axis=0).to(tl.int32)):
        r = 1.0 / z
        p = r
        for j in range(0, n):
            p = p * r
        active = i < steps
        s += tl.where(active, p, 0.0)
        z = tl.where(active, z + 1.0, z)
    r = 1.0 / z
    r2 = r * r
    zn = tl.zeros_like(x) + 1.0
    for j in range(0, n):
        zn = zn * r
    t0 = tl.where(n == 0, -tl.log(z), (fact / tl.maximum(n, 1)) * zn)
    th = fact * 0.5 * zn * r
    rk = fact * (n + 1) * 0.5 * zn * r2
    ser = tl.zeros_like(x)
SERIES
    res = t0 + th + ser + fact * s
    return tl.where(n % 2 == 1, res, -res)
'''.replace("SERIES", _series(8))

WRAPPERS = '''

def polygamma(n, self):
    return _launch(self, _result_like(self, self.dtype), int(n))


def polygamma_out(n, self, *, out):
    return _launch(self, out, int(n))
'''

SOLUTION = solution(OP, WRAPPERS, name="polygamma")

# Hard-codes trigamma (n = 1), the most used order: right for n = 1 only.
NEGATIVE_TRIGAMMA_ONLY = SOLUTION.replace("_result_like(self, self.dtype), int(n))",
                                          "_result_like(self, self.dtype), 1)").replace(
    "return _launch(self, out, int(n))", "return _launch(self, out, 1)")


@register("aten::polygamma", version=1, kind=Kind.COMPUTE)
class Polygamma(Unary):
    op = "polygamma"
    variants = ({"n": 1}, {"n": 0}, {"n": 2}, {"n": 3})
    heavy = True
    small_cpu = True
    entry_points = (
        EntryPoint("polygamma", "polygamma(n: int, self: Tensor) -> Tensor",
                   "The n-th derivative of the digamma function at each element of self "
                   "(n = 0 is digamma itself)."),
        EntryPoint("polygamma_out", "polygamma_out(n: int, self: Tensor, *, out: Tensor) -> Tensor",
                   "Writes polygamma(n, self) into out (same shape and dtype) and returns out."),
    )
    description = describe(
        "The polygamma function `out = psi^(n)(x)`, the n-th derivative of digamma "
        "psi(x) = d/dx ln Gamma(x), following PyTorch's `torch.polygamma(n, self)`; n is a "
        "Python int (0 to 3 are tested; n = 0 is digamma, 1 trigamma). For n >= 1, "
        "psi^(n)(x) = (-1)^(n+1) n! sum_{k>=0} 1/(x+k)^(n+1). Inputs are positive (tiny to "
        "~1e4) and negative non-integers down to -10, never the poles 0, -1, -2, ...; values "
        "near the poles are huge and may overflow the dtype to ±inf. NaN stays NaN; "
        "psi(inf) = inf and trigamma(inf) = 0 (±inf is not tested for n >= 2). A recurrence "
        "to shift x above ~10 plus the asymptotic expansion with Bernoulli numbers works for "
        "every n.", FLOATS)
    solution = SOLUTION
    negatives = (
        Negative("trigamma_only", "ignores n and always computes trigamma (n = 1)",
                 NEGATIVE_TRIGAMMA_ONLY),
        Negative("ignores_input_strides", "indexes a sliced input as if contiguous",
                 ignores_strides(SOLUTION)),
    )
    # Relative to |psi^(n)(x)| + |x psi^(n+1)(x)| (= |f| + |x f'|). float32: the shift
    # recurrence (up to 20 terms, of mixed sign for negative x) and the series: <= 7.5 u
    # measured over 6e4 points for n <= 3 (PyTorch's CPU kernel <= 6.3 u); a GPU's
    # approximate division and log add ~2 ulp each: 16. Halves: the final rounding (1 u) and a
    # float32 evaluation far below it.
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 16),
    }
    flops_per_element = 150.0

    def args(self, x: torch.Tensor, c: Case) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (c["n"], x), {}

    def input_of(self, call: Call) -> torch.Tensor:
        t = call.args[1]
        assert isinstance(t, torch.Tensor)
        return t

    def sample(self, n: int, c: Case, gen: torch.Generator) -> torch.Tensor:
        v = pick(n, gen, log_uniform(n, gen, 1e-2, 1e4),
                 torch.rand(n, generator=gen, dtype=torch.float64) * 12,
                 torch.rand(n, generator=gen, dtype=torch.float64) * -10)
        # Off the poles once rounded to the dtype (bfloat16 has only 1/16 steps near -10).
        v = v.to(c.torch_dtype).double()
        return torch.where((v <= 0) & (v == torch.floor(v)), v + 0.5, v)

    def edges(self, dtype: torch.dtype, c: Case) -> list[float]:
        # PyTorch returns NaN at +inf for n >= 2 (psi^(n)(inf) = 0): +inf only for n <= 1
        inf = [INF] if c["n"] <= 1 else []
        return [NAN, *inf, 1.0, 0.5, 1e-3, 1e4, -0.5, -2.5, -9.5, 1.4616321449683622]

    def ref64(self, x: torch.Tensor, call: Call) -> tuple[torch.Tensor, torch.Tensor]:
        n = int(call.args[0])
        y = polygamma64(n, x)
        return y, y.abs() + (x * polygamma64(n + 1, x)).abs()
