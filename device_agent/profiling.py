"""The ``profile`` layer (GPU): the candidate's own Triton kernels must carry most of the device
time of its call.

Launch accounting proves that the candidate's kernels *run*; it cannot tell a token kernel from
one that does the work while something else (torch, or a library reached some other way)
computes the answer (catalogue rows 12 and 13). On a device with a kernel profiler, the re-check
call after timing — one call per benchmark case, on pristine inputs — runs under
``torch.profiler``, and every device activity (kernels, copies, fills) is attributed: to the
candidate when its name is one of the Triton kernels the candidate itself launched, to something
else otherwise. Less than :data:`MIN_OWN_SHARE` of the device time in the candidate's kernels is
``CHEAT_DETECTED``. Allowed data movement (``clone``, ``copy_``, ``zero_`` …) counts as other
time too: it may help, not carry the work.

On the host (the ``cpu`` platform) there is no device profiler: the layer does nothing there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

MIN_OWN_SHARE = 0.5
# Below this much device time in all (µs) a share means nothing: launch-bound noise.
MIN_DEVICE_US = 5.0
TOP_OTHERS = 3


@dataclass(frozen=True)
class DeviceTime:
    """Device time of one profiled call, split between the candidate's kernels and the rest."""

    own_us: float
    other_us: float
    others: tuple[tuple[str, float], ...] = ()  # the largest other activities, by time

    @property
    def total_us(self) -> float:
        return self.own_us + self.other_us

    @property
    def own_share(self) -> float | None:
        return self.own_us / self.total_us if self.total_us >= MIN_DEVICE_US else None


def attribute(activities: Iterable[tuple[str, float]], own_kernels: Iterable[str]) -> DeviceTime:
    """Split device activities ``(name, µs)`` into the candidate's (a name among
    ``own_kernels``, the Triton kernels it launched) and the others."""
    own = set(own_kernels)
    own_us = 0.0
    other: dict[str, float] = {}
    for name, us in activities:
        if name in own:
            own_us += us
        else:
            other[name] = other.get(name, 0.0) + us
    top = sorted(other.items(), key=lambda kv: -kv[1])[:TOP_OTHERS]
    return DeviceTime(own_us, sum(other.values()), tuple(top))


def judge(dt: DeviceTime, case_name: str) -> str | None:
    """The evidence when the candidate's kernels carry less than :data:`MIN_OWN_SHARE` of the
    device time, else None."""
    share = dt.own_share
    if share is None or share >= MIN_OWN_SHARE:
        return None
    others = ", ".join(f"{n[:80]} {us:.0f} µs" for n, us in dt.others[:TOP_OTHERS])
    return (f"while re-checking {case_name}: the candidate's own Triton kernels ran "
            f"{dt.own_us:.0f} µs of the call's {dt.total_us:.0f} µs of device time "
            f"({share:.0%}, at least {MIN_OWN_SHARE:.0%} required); the rest: {others}. The "
            "answer must be computed by the candidate's kernels, not by torch or a library")


def profiled(run: Callable[[], T], device: str) -> tuple[T, list[tuple[str, float]] | None]:
    """``run()`` under the device's kernel profiler: its result and every device activity as
    ``(name, µs)``; ``None`` for the activities where ``device`` has no profiler (the host) or
    the profiler could not start or stop (then the layer cannot judge: never the candidate's
    fault). What ``run`` raises propagates."""
    if device != "cuda":
        return run(), None
    import torch
    from torch._C._autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    try:
        prof = profile(activities=[ProfilerActivity.CUDA])
        prof.start()
    except Exception:  # noqa: BLE001 - no profiler here (e.g. CUPTI unavailable)
        return run(), None
    try:
        result = run()
        torch.cuda.synchronize()
    except BaseException:
        with contextlib.suppress(Exception):
            prof.stop()
        raise
    try:
        prof.stop()
        # Kineto's raw records: parsing them into FunctionEvents costs seconds on large traces.
        results = prof.profiler.kineto_results if prof.profiler is not None else None
        activities = [(str(e.name()), e.duration_ns() / 1000.0) for e in
                      (results.events() if results is not None else [])
                      if e.device_type() == DeviceType.CUDA]
    except Exception:  # noqa: BLE001
        return result, None
    return result, activities
