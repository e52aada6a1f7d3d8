"""Timing one benchmark case, candidate against baseline, inside the worker.

One protocol for every source: rotating input sets whose total exceeds the L2 cache, an L2
flush before every timed call, device-wide synchronisation after it, candidate and baseline
interleaved in ABBA order, repetition until the relative standard error of both medians is
small or the case's time budget ends, and the median with a 95% confidence interval from order
statistics. Only meaningful on a real device; the agent never asks the ``cpu`` platform for it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import torch

from operators.invoke import invoke, prepare
from operators.spec import Call, Case, OperatorSpec

MIN_SAMPLES = 10
MAX_SAMPLES = 400
RSE_TARGET = 0.005
MAX_SETS = 8


def _call_bytes(call: Call) -> int:
    return sum(v.numel() * v.element_size() for _, v in call.tensor_args())


def median_ci(samples: list[float]) -> tuple[float, float, float]:
    """Median and a distribution-free 95% confidence interval (binomial order statistics)."""
    xs = sorted(samples)
    n = len(xs)
    med = xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])
    half = 1.96 * math.sqrt(n) / 2
    lo = max(0, int(math.floor(n / 2 - half)))
    hi = min(n - 1, int(math.ceil(n / 2 + half)) - 1)
    return med, xs[lo], xs[max(lo, hi)]


def _rse(samples: list[float]) -> float:
    n = len(samples)
    if n < 2:
        return math.inf
    mean = sum(samples) / n
    var = sum((x - mean) ** 2 for x in samples) / (n - 1)
    return math.sqrt(var / n) / mean if mean > 0 else math.inf


def time_case(spec: OperatorSpec, case: Case, fn: Callable[..., Any], *, seed: int, device: str,
              budget_s: float, l2_bytes: int) -> dict[str, Any]:
    """Time ``fn`` and the spec's baseline on ``case``; returns medians and CIs in microseconds."""
    if l2_bytes <= 0:
        l2_bytes = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)) or (64 << 20)
    first = spec.make_call(case, torch.Generator().manual_seed(seed))
    set_bytes = max(1, _call_bytes(first))
    n_sets = max(2, min(MAX_SETS, math.ceil(2 * l2_bytes / set_bytes)))
    cpu_sets = [first] + [spec.make_call(case, torch.Generator().manual_seed(seed + k))
                          for k in range(1, n_sets)]
    cand_sets = [prepare(c, device) for c in cpu_sets]
    base_sets = [prepare(c, device) for c in cpu_sets]
    flush = torch.empty(max(2 * l2_bytes, 1 << 20), dtype=torch.uint8, device=device)

    def run_cand(c: Call) -> None:
        invoke(fn, c)

    def run_base(c: Call) -> None:
        spec.baseline(c)

    # Warm-up: compilation, autotuning and first-call costs stay out of the samples.
    for _ in range(2):
        run_cand(cand_sets[0])
        run_base(base_sets[0])
    torch.cuda.synchronize()

    start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    cand: list[float] = []
    base: list[float] = []
    deadline = time.perf_counter() + budget_s
    k = 0
    wall0 = time.perf_counter()
    while True:
        for which in ("A", "B", "B", "A"):
            sets, runner, out = ((cand_sets, run_cand, cand) if which == "A"
                                 else (base_sets, run_base, base))
            c = sets[k % n_sets]
            flush.zero_()
            torch.cuda.synchronize()
            start.record()
            runner(c)
            end.record()
            torch.cuda.synchronize()
            out.append(start.elapsed_time(end) * 1000.0)  # ms -> us
        k += 1
        enough = len(cand) >= MIN_SAMPLES and _rse(cand) < RSE_TARGET and _rse(base) < RSE_TARGET
        if enough or len(cand) >= MAX_SAMPLES or time.perf_counter() > deadline:
            break
    wall = time.perf_counter() - wall0
    cm, clo, chi = median_ci(cand)
    bm, _, _ = median_ci(base)
    return {"l2_bytes": l2_bytes, "median_us": cm, "ci_low_us": clo, "ci_high_us": chi, "samples": len(cand),
            "baseline_median_us": bm, "baseline_samples": len(base), "wall_s": wall,
            "input_sets": n_sets}
