"""Distribution tests that judge the outputs of random problems (``bernoulli``, ``poisson`` …).

A random op has no single right answer, so each output is judged by statistical tests against
the distribution it must follow. Every judge controls its **false-failure rate**: an honest
sampler fails a judged output with probability at most ``ALPHA`` (the z and Kolmogorov–Smirnov
thresholds below are set for it, Bonferroni-corrected over the judge's several tests). Each
judge's docstring states the wrong distribution it catches with at least 99 % probability at
the problem's cpu-tier size — its **power** — and ``tests/operators/test_distributions.py``
shows both by simulation. Judges also check the support (0/1, non-negative integers …) exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

ALPHA = 1e-6  # false-failure probability per judged output, for an honest sampler
MIN_EXPECTED_ZEROS = 25.0  # the zero-count test runs where this many zeros are expected


def z_threshold(tests: int, alpha: float = ALPHA) -> float:
    """Two-sided normal threshold for ``tests`` z-tests sharing a total level ``alpha``."""
    q = torch.tensor(1.0 - alpha / (2 * tests), dtype=torch.float64)
    return float(torch.special.ndtri(q))


def ks_threshold(n: int, alpha: float = ALPHA) -> float:
    """Kolmogorov–Smirnov bound on sup |F_n - F| at level ``alpha`` (the asymptotic
    ``P(sqrt(n) D > t) <= 2 exp(-2 t^2)``, which is conservative for every n: Massart)."""
    return math.sqrt(-math.log(alpha / 2) / 2) / math.sqrt(max(n, 1))


def _buckets(key: torch.Tensor, count: int) -> list[torch.Tensor]:
    """Index groups of (nearly) equal size by increasing ``key``."""
    order = torch.argsort(key, stable=True)
    return [c for c in order.chunk(count) if c.numel()]


def _z(observed: float, expected: float, variance: float) -> float:
    return (observed - expected) / math.sqrt(variance) if variance > 0 else 0.0


@dataclass(frozen=True)
class BernoulliJudge:
    """Output element i must be 0 or 1, with P(1) = p[i] (``p`` in the output's row-major
    order). Tests: the total count of ones and the counts within 8 buckets of p, each against
    its binomial mean and variance. Power: a sampler biased by +0.03 in p (clamped to [0, 1])
    on 16,384 elements with p ~ U(0, 1) is caught with probability > 99.99 % (overall z ~ 9
    against a threshold of 5.3)."""

    p: torch.Tensor
    buckets: int = 8

    def __call__(self, out: torch.Tensor) -> str | None:
        x = out.detach().reshape(-1).double()
        p = self.p.reshape(-1).double()
        if x.numel() != p.numel():
            return f"{x.numel()} samples for {p.numel()} probabilities"
        bad = ~((x == 0) | (x == 1))
        if bool(bad.any()):
            return f"{int(bad.sum())} values are neither 0 nor 1 (first: {float(x[bad][0])})"
        sure = (p == 0) | (p == 1)
        if bool((x[sure] != p[sure]).any()):
            return "an element with probability exactly 0 or 1 has the other value"
        limit = z_threshold(self.buckets + 1)
        groups = [torch.arange(p.numel())] + _buckets(p, self.buckets)
        for g in groups:
            z = _z(float(x[g].sum()), float(p[g].sum()), float((p[g] * (1 - p[g])).sum()))
            if abs(z) > limit:
                lo, hi = float(p[g].min()), float(p[g].max())
                return (f"the number of ones for probabilities in [{lo:.3f}, {hi:.3f}] is "
                        f"{float(x[g].sum()):.0f}, expected {float(p[g].sum()):.1f} (z = {z:.1f}, "
                        f"beyond {limit:.1f}: false-failure rate {ALPHA:g})")
        return None


@dataclass(frozen=True)
class ExponentialJudge:
    """Every element must follow Exp(rate): density ``rate * exp(-rate x)`` on x >= 0. Test:
    Kolmogorov–Smirnov against that CDF. Power: a sampler with rate 1.1x too high on 16,384
    elements gives sup |F_n - F| near 0.035, more than 1.6x the threshold (0.021): caught
    with probability > 99.99 %."""

    rate: float

    def __call__(self, out: torch.Tensor) -> str | None:
        x = out.detach().reshape(-1).double()
        if not bool(torch.isfinite(x).all()) or bool((x < 0).any()):
            return "samples must be finite and non-negative"
        return _ks_rounded(torch.sort(x).values, out.dtype,
                           lambda v: 1.0 - torch.exp(-self.rate * v.clamp(min=0)),
                           f"Exp({self.rate:g})")


PRECISION_BITS = {torch.float64: 53, torch.float32: 24, torch.float16: 11, torch.bfloat16: 8}


def _neighbours(v: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """The representable values of ``dtype`` just below and just above each value of ``v``
    (float64 values that ``dtype`` holds exactly)."""
    bits = PRECISION_BITS[dtype]
    _, emin = torch.frexp(torch.tensor(torch.finfo(dtype).tiny, dtype=torch.float64))
    m, e = torch.frexp(v.abs())
    e = torch.where(v == 0, int(emin), torch.clamp(e, min=int(emin)))  # frexp(0) is (0, 0)
    ulp = torch.ldexp(torch.ones_like(v), e - bits)
    # Just below a power of two (above the subnormals) the spacing halves.
    inner = torch.where((m == 0.5) & (v.abs() > torch.finfo(dtype).tiny), ulp / 2, ulp)
    below = torch.where(v > 0, v - inner, v - ulp)
    above = torch.where(v < 0, v + inner, v + ulp)
    return below, above


def _ks_rounded(sorted_x: torch.Tensor, dtype: torch.dtype, cdf: object,
                name: str) -> str | None:
    """Kolmogorov–Smirnov for samples of a continuous distribution rounded to ``dtype``: each
    sample came from somewhere between its neighbours in ``dtype``, whatever the rounding (to
    nearest, toward zero …). Against the bare continuous CDF, rounding alone (bfloat16 keeps 8
    bits) exceeds the threshold once there are millions of samples."""
    if dtype not in PRECISION_BITS:
        return _ks(sorted_x, cdf, name)
    lo, hi = _neighbours(sorted_x, dtype)
    return _ks_band(lo, hi, cdf, f"{name} (allowing for rounding to "
                                 f"{str(dtype).removeprefix('torch.')})")


def _ks_band(lo: torch.Tensor, hi: torch.Tensor, cdf: object, name: str) -> str | None:
    """Kolmogorov–Smirnov where each sample is known only to lie in ``[lo[i], hi[i]]`` (its
    value before rounding). With S the unrounded samples, #{S <= t} lies between #{hi <= t}
    and #{lo <= t} for every t, so the distance of that band from the CDF F is at most S's own
    KS distance: the test keeps its false-failure rate, and with exact samples (lo = hi) it is
    the plain test."""
    n = lo.numel()
    if n == 0:
        return None
    lo_sorted, hi_sorted = torch.sort(lo).values, torch.sort(hi).values
    k = torch.arange(1, n + 1, dtype=torch.float64)
    f_lo, f_hi = cdf(lo_sorted), cdf(hi_sorted)  # type: ignore[operator]
    d = float(torch.maximum(f_lo - (k - 1) / n, k / n - f_hi).max())
    limit = ks_threshold(n)
    if d > limit:
        return (f"the samples do not follow {name}: Kolmogorov-Smirnov distance {d:.4f} over "
                f"{n} samples, beyond {limit:.4f} (false-failure rate {ALPHA:g})")
    return None


def _ks(sorted_x: torch.Tensor, cdf: object, name: str) -> str | None:
    n = sorted_x.numel()
    if n == 0:
        return None
    f = cdf(sorted_x)  # type: ignore[operator]
    i = torch.arange(1, n + 1, dtype=torch.float64)
    d = float(torch.maximum(i / n - f, f - (i - 1) / n).max())
    limit = ks_threshold(n)
    if d > limit:
        return (f"the samples do not follow {name}: Kolmogorov-Smirnov distance {d:.4f} over "
                f"{n} samples, beyond {limit:.4f} (false-failure rate {ALPHA:g})")
    return None


@dataclass(frozen=True)
class PoissonJudge:
    """Element i must follow Poisson(rate[i]) (``rate`` in row-major order). Tests within 8
    buckets of the rate and overall: the sum of (x - rate) (mean), of (x - rate)^2 - rate
    (dispersion) and, where at least 25 are expected, the number of zeros, each as a z-score.
    Power: rates scaled by 1.05 on 16,384 elements with rates ~ U(0.5, 20) move the overall
    mean test by z ~ 20 (threshold 5.5): caught with probability > 99.99 %."""

    rate: torch.Tensor
    buckets: int = 8

    def __call__(self, out: torch.Tensor) -> str | None:
        x = out.detach().reshape(-1).double()
        lam = self.rate.reshape(-1).double()
        if x.numel() != lam.numel():
            return f"{x.numel()} samples for {lam.numel()} rates"
        if not bool(torch.isfinite(x).all()) or bool(((x < 0) | (x != x.round())).any()):
            return "samples must be non-negative integers"
        if bool((x[lam == 0] != 0).any()):
            return "an element with rate 0 is not 0"
        limit = z_threshold(3 * (self.buckets + 1))
        for g in [torch.arange(lam.numel())] + _buckets(lam, self.buckets):
            xs, ls = x[g], lam[g]
            e0 = torch.exp(-ls)
            tests = (
                ("mean", _z(float(xs.sum()), float(ls.sum()), float(ls.sum()))),
                ("dispersion", _z(float(((xs - ls) ** 2).sum()), float(ls.sum()),
                                  float((ls + 2 * ls * ls).sum()))),
                ("zero count", _z(float((xs == 0).sum()), float(e0.sum()),
                                  float((e0 * (1 - e0)).sum()))),
            )
            for what, z in tests:
                if what == "zero count" and float(e0.sum()) < MIN_EXPECTED_ZEROS:
                    continue  # too few zeros expected for a normal approximation of their count
                if abs(z) > limit:
                    lo, hi = float(ls.min()), float(ls.max())
                    return (f"the {what} of the samples for rates in [{lo:.3g}, {hi:.3g}] is off "
                            f"(z = {z:.1f}, beyond {limit:.1f}: false-failure rate {ALPHA:g})")
        return None


@dataclass(frozen=True)
class RReluJudge:
    """rrelu in training mode, for its output (``of_noise`` False) or its noise tensor: where
    ``x`` > 0 the output is x and the noise 1; where x <= 0 the noise is a ~ U(lower, upper)
    and the output x * a. The slopes (noise, or output / x where x < 0) must lie in
    [lower, upper] up to ``rel`` (the output dtype's rounding) and pass a Kolmogorov–Smirnov
    test against U(lower, upper). Power: slopes drawn from U(0, upper) (lower forgotten) on
    2,000 negative elements are caught with probability > 99.99 % (they leave the interval)."""

    x: torch.Tensor
    lower: float
    upper: float
    of_noise: bool
    rel: float

    def __call__(self, out: torch.Tensor) -> str | None:
        v = out.detach().reshape(-1).double()
        x = self.x.reshape(-1).double()
        pos = x > 0
        if self.of_noise:
            if bool((v[pos] != 1).any()):
                return "noise must be 1 where self > 0"
            slopes = v[~pos]
        else:
            if bool((v[pos] != x[pos]).any()):
                return "the output must equal self where self > 0"
            if bool((v[x == 0] != 0).any()):
                return "the output must be 0 where self is 0"
            neg = x < 0
            slopes = v[neg] / x[neg]
        lo, hi = self.lower * (1 - self.rel), self.upper * (1 + self.rel)
        if bool(((slopes < lo) | (slopes > hi)).any()):
            return f"slopes outside [{self.lower:g}, {self.upper:g}]"
        width = self.upper - self.lower
        name = f"U({self.lower:g}, {self.upper:g})"
        if out.dtype not in PRECISION_BITS:
            return _ks(torch.sort(slopes.clamp(self.lower, self.upper)).values,
                       lambda t: (t - self.lower) / width, name)
        # Each slope is known up to the rounding of the output it comes from.
        below, above = _neighbours(v, out.dtype)
        if self.of_noise:
            s_lo, s_hi = below[~pos], above[~pos]
        else:
            s_lo, s_hi = above[neg] / x[neg], below[neg] / x[neg]  # x < 0 flips the order
        return _ks_band(s_lo.clamp(self.lower, self.upper), s_hi.clamp(self.lower, self.upper),
                        lambda t: (t - self.lower) / width,
                        f"{name} (allowing for rounding to "
                        f"{str(out.dtype).removeprefix('torch.')})")
