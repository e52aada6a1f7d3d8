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
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple, Protocol

import torch

from device_agent import triton_hooks
from device_agent.harness_faults import blamed, candidate_code
from device_agent.profiling import DeviceTime, attribute, profiled
from operators.checking import check
from operators.invoke import collect, from_wire, invoke, poison, prepare, wire_output
from operators.spec import Call, Case, Expected, Kind, OperatorSpec, PointerArray

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


def _settled(samples: list[float]) -> bool:
    """Enough samples: the relative standard error is under the bound, or — robust to the rare
    slow outlier (a host hiccup) that keeps the standard error up — so is the relative
    half-width of the median's 95% confidence interval, the figure that gets reported."""
    if _rse(samples) < RSE_TARGET:
        return True
    med, lo, hi = median_ci(samples)
    return med > 0 and (hi - lo) / 2 / med < RSE_TARGET


class Timer(Protocol):
    """How a platform times one call: device-wide synchronisation around the work."""

    def l2_bytes(self) -> int: ...

    def sync(self) -> None: ...

    def time_us(self, fn: Callable[[], Any]) -> float: ...

    def throttled(self) -> bool:
        """True when the device is being slowed by heat or power right now."""
        ...

    def readings(self) -> tuple[float | None, float | None]:
        """(SM clock in MHz, temperature in °C) now, each None where unreadable."""
        ...

    def clear_l2(self, flush: torch.Tensor) -> None:
        """Leave nothing of the last call in the cache: ``flush`` is bigger than the L2."""
        ...


class DeviceMonitor(Protocol):
    """The vendor's management library (NVML, amdsmi) as a timer reads it: throttling and
    readings of the worker's one device. Platforms supply it; :data:`NO_MONITOR` reads nothing."""

    def throttled(self) -> bool: ...

    def readings(self) -> tuple[float | None, float | None]: ...


class _NoMonitor:
    def throttled(self) -> bool:
        return False

    def readings(self) -> tuple[float | None, float | None]:
        return None, None


NO_MONITOR: DeviceMonitor = _NoMonitor()


class EventTimer:
    """Device events around the call, with a device-wide synchronize after it (work queued on
    side streams is waited for). ``torch.cuda`` is PyTorch's device API for CUDA and for ROCm
    (HIP events) alike; what differs per vendor comes from the platform: ``monitor`` (throttle
    reasons, clocks, temperature), ``before_flush`` (e.g. CUDA's persisting-L2 reset) and
    ``last_level_cache_bytes`` where a cache behind the L2 must be flushed too (MI300X)."""

    def __init__(self, device: str, monitor: DeviceMonitor = NO_MONITOR,
                 before_flush: Callable[[], None] | None = None,
                 last_level_cache_bytes: int = 0) -> None:
        self.device = device
        self.last_level_cache_bytes = last_level_cache_bytes
        self.start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        self.end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        self.monitor = monitor
        self.before_flush = before_flush

    def l2_bytes(self) -> int:
        props = torch.cuda.get_device_properties(self.device)
        l2 = int(getattr(props, "L2_cache_size", 0)) or (64 << 20)
        return max(l2, self.last_level_cache_bytes)

    def sync(self) -> None:
        torch.cuda.synchronize()

    # A spin kernel queued ahead of the start event keeps the device busy while the host
    # enqueues the start event, the call's launches and the end event, so host scheduling
    # jitter (other workers compile on the same host) does not show up as device time.
    # About 0.2 ms at H200 clocks; launch gaps *inside* a slow wrapper still count.
    SHIELD_CYCLES = 400_000

    def time_us(self, fn: Callable[[], Any]) -> float:
        torch.cuda._sleep(self.SHIELD_CYCLES)  # type: ignore[no-untyped-call]
        self.start.record()
        fn()
        self.end.record()
        torch.cuda.synchronize()
        return float(self.start.elapsed_time(self.end)) * 1000.0

    def clear_l2(self, flush: torch.Tensor) -> None:
        """The platform's own reset first (state a previous call left that a memset does not
        evict), then the flush buffer, bigger than the L2, is written over."""
        if self.before_flush is not None:
            self.before_flush()
        flush.zero_()

    def throttled(self) -> bool:
        return self.monitor.throttled()

    def readings(self) -> tuple[float | None, float | None]:
        return self.monitor.readings()


class WallTimer:
    """Host wall clock, for platforms without device timers. Never reported as performance."""

    def clear_l2(self, flush: torch.Tensor) -> None:
        flush.zero_()

    def l2_bytes(self) -> int:
        return 1 << 20

    def sync(self) -> None:
        pass

    def time_us(self, fn: Callable[[], Any]) -> float:
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e6

    def throttled(self) -> bool:
        return False

    def readings(self) -> tuple[float | None, float | None]:
        return None, None


@dataclass
class TimingSets:
    """Everything a timed case needs, built before the device is taken exclusively: the
    candidate's and the baseline's rotations (never the same storage), the flush buffer, and
    a pristine copy of set 0 that nothing has run on, for :func:`recheck`."""

    spec: OperatorSpec
    case: Case
    device: str
    timer: Timer
    l2_bytes: int
    cand_sets: list[Call]
    base_sets: list[Call]
    flush: torch.Tensor
    pristine: Call  # set 0 as built: on the host when large (PRISTINE_ON_DEVICE_MAX_BYTES)


def build_sets(spec: OperatorSpec, case: Case, *, seed: int, l2_bytes: int,
               device: str = "cpu") -> list[Call]:
    """Rotating input sets totalling more than twice the L2 (set ``k`` from ``seed + k``).

    Made directly on ``device`` (its factory functions and a device generator) where the
    problem's input code allows it: benchmark inputs are hundreds of megabytes, and making them
    on the host in float64 took seconds of CPU per case — the agent's throughput limit. Device
    work, so the caller holds the device's gate (shared). Falls back to the host, slowly, for
    input code that needs it."""
    if device != "cpu":
        try:
            with torch.device(device):
                return _make_sets(spec, case, seed, l2_bytes,
                                  lambda s: torch.Generator(device).manual_seed(s))
        except Exception:  # noqa: BLE001 - host-only input code: make them on the host
            pass
    return _make_sets(spec, case, seed, l2_bytes, lambda s: torch.Generator().manual_seed(s))


def _make_sets(spec: OperatorSpec, case: Case, seed: int, l2_bytes: int,
               generator: Callable[[int], torch.Generator]) -> list[Call]:
    with blamed("input generation", case.name):
        first = spec.make_call(case, generator(seed))
        set_bytes = max(1, _call_bytes(first))
        n_sets = max(2, min(MAX_SETS, math.ceil(2 * l2_bytes / set_bytes)))
        return [first] + [spec.make_call(case, generator(seed + k)) for k in range(1, n_sets)]


def upload_sets(spec: OperatorSpec, case: Case, source: list[Call], *, device: str,
                l2_bytes: int, timer: Timer) -> TimingSets:
    """The timed rotations and the L2 flush buffer: device work, done while the device is
    shared, before it is taken alone. The candidate times on the ``source`` sets themselves
    where they lie on ``device`` as a copy would (:func:`_adopt`), the baseline on its own
    copies (a candidate that writes its inputs cannot slow or speed the baseline); set 0 is
    copied first, before anything runs on it, for :func:`recheck`. Device memory: two rotations,
    plus set 0 when small. The caller drops its reference to ``source``."""
    with blamed("input upload", case.name):
        # Where the candidate runs on copies, set 0 as built is already out of its reach.
        pristine = _pristine(source[0], device) if _as_made(source[0], device) else source[0]
        base_sets = [prepare(c, device) for c in source]
        cand_sets = [_adopt(c, device) for c in source]
        flush = torch.empty(max(2 * l2_bytes, 1 << 20), dtype=torch.uint8, device=device)
        timer.sync()
    return TimingSets(spec, case, device, timer, l2_bytes, cand_sets, base_sets, flush, pristine)


# Above this many bytes of tensor arguments, the pristine copy of set 0 that the re-check runs
# on is kept in host memory rather than on the device: benchmark sets of the cuBLAS ``_64``
# problems span 8-16 GiB each, and two device rotations plus a device copy of set 0 did not fit
# an 80 GB H100. The price, one host round trip of set 0 per case, is small next to making it.
PRISTINE_ON_DEVICE_MAX_BYTES = 1 << 30


def _pristine(call: Call, device: str) -> Call:
    """A copy of ``call`` that nothing will run on, where :func:`_pristine_place` says."""
    return prepare(call, _pristine_place(call, device))


def _pristine_place(call: Call, device: str) -> str:
    """The host for a set over :data:`PRISTINE_ON_DEVICE_MAX_BYTES`, else ``device``."""
    return "cpu" if _call_bytes(call) > PRISTINE_ON_DEVICE_MAX_BYTES else device


def _same_device(a: torch.device, b: torch.device) -> bool:
    """``a`` and ``b`` name one device (``cuda`` and ``cuda:0`` do while 0 is current)."""
    if a.type != b.type:
        return False
    if a.index == b.index:
        return True
    current = torch.cuda.current_device() if a.type == "cuda" else 0
    return (current if a.index is None else a.index) == (current if b.index is None else b.index)


def _placed(obj: Any) -> list[torch.Tensor | torch.device]:
    """Every tensor (a pointer array's buffer and pointers too) and device argument in
    ``obj``, recursing as :func:`operators.invoke.map_tensors` does."""
    if isinstance(obj, torch.Tensor | torch.device):
        return [obj]
    if isinstance(obj, PointerArray):
        return [obj.buffer, obj.pointers]
    items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, tuple | list) else ()
    return [x for o in items for x in _placed(o)]


def _as_made(call: Call, device: str) -> bool:
    """``call`` lies as :func:`prepare` would make it on ``device``: every tensor and device
    argument there, each tensor at the start of its own storage (the same alignment), none
    sharing storage with another (a copy does not), so timing it is timing a copy."""
    placed = _placed((call.args, call.kwargs))
    target = torch.device(device)
    if not all(_same_device(p if isinstance(p, torch.device) else p.device, target)
               for p in placed):
        return False
    tensors = [t for t in placed if isinstance(t, torch.Tensor) and t.untyped_storage().nbytes()]
    storages = {t.untyped_storage().data_ptr() for t in tensors}
    return all(t.storage_offset() == 0 for t in tensors) and len(storages) == len(tensors)


def _adopt(call: Call, device: str) -> Call:
    """``call`` itself with its out-buffers poisoned in place, as :func:`prepare` poisons its
    copy, where it lies as a copy would (:func:`_as_made`); else ``prepare(call, device)``."""
    if not _as_made(call, device):
        return prepare(call, device)
    poison(call)
    return call


def time_case(spec: OperatorSpec, case: Case, fn: Callable[..., Any], *, seed: int, device: str,
              budget_s: float, l2_bytes: int = 0, timer: Timer | None = None) -> dict[str, Any]:
    """:func:`build_sets`, :func:`upload_sets`, :func:`measure` and :func:`recheck` (its finding
    under ``recheck``) in one go, for callers without a device gate (tests, benchmarks)."""
    timer = timer or WallTimer()
    l2_bytes = l2_bytes if l2_bytes > 0 else timer.l2_bytes()
    sets = upload_sets(spec, case, build_sets(spec, case, seed=seed, l2_bytes=l2_bytes,
                                              device=device),
                       device=device, l2_bytes=l2_bytes, timer=timer)
    result = measure(sets, fn, budget_s=budget_s)
    pristine = sets.pristine
    del sets
    drift = recheck(spec, case, pristine, fn, device=device, timer=timer).drift
    return {**asdict(result), "recheck": drift}


@dataclass(frozen=True)
class Measurement:
    """One benchmark case timed: candidate and baseline medians with the candidate's 95% CI (µs),
    what the samples add up to (for the agent's wall-clock cross-check), the device's state, and
    which library the baseline was (a speed-up means nothing without it)."""

    l2_bytes: int
    median_us: float
    ci_low_us: float
    ci_high_us: float
    samples: int
    baseline_median_us: float
    baseline_samples: int
    samples_sum_us: float
    wall_s: float
    input_sets: int
    throttled_discarded: int
    sm_clock_mhz: float | None
    temperature_c: float | None
    baseline: str  # the library the baseline ran (the problem's ``baseline_library()``)


@dataclass
class _Samples:
    """What the interleaved A-B-B-A rounds of :func:`measure` collected: rounds run while the
    device throttled are kept apart, used only when nothing else was."""

    cand: list[float] = field(default_factory=list)
    base: list[float] = field(default_factory=list)
    kept_throttled: list[tuple[float, float, float, float]] = field(default_factory=list)
    clocks: list[float] = field(default_factory=list)
    temps: list[float] = field(default_factory=list)

    def add(self, round_: list[float], throttled: bool) -> None:
        if throttled:
            self.kept_throttled.append((round_[0], round_[1], round_[2], round_[3]))
        else:
            self.cand += [round_[0], round_[3]]
            self.base += [round_[1], round_[2]]

    def done(self, deadline: float) -> bool:
        enough = len(self.cand) >= MIN_SAMPLES and _settled(self.cand) and _settled(self.base)
        return (enough or len(self.cand) + 2 * len(self.kept_throttled) >= MAX_SAMPLES
                or time.perf_counter() > deadline)

    def keep_throttled_if_short(self) -> None:
        """The device throttled throughout: keep those rounds rather than report nothing."""
        if len(self.cand) < MIN_SAMPLES // 2:
            for a1, b1, b2, a2 in self.kept_throttled:
                self.cand += [a1, a2]
                self.base += [b1, b2]


def measure(sets: TimingSets, fn: Callable[..., Any], *, budget_s: float) -> Measurement:
    """Time ``fn`` and the spec's baseline on prepared ``sets``; medians and CIs in microseconds.
    Run while the device is held exclusively; :func:`recheck` follows once it is shared again.
    """
    spec, timer, flush = sets.spec, sets.timer, sets.flush
    cand_sets, base_sets = sets.cand_sets, sets.base_sets
    n_sets = len(cand_sets)

    def candidate_call(c: Call) -> Callable[[], Any]:
        return lambda: invoke(fn, c)

    def baseline_call(c: Call) -> Callable[[], Any]:
        return lambda: spec.baseline(c)

    # Warm-up: compilation, autotuning and first-call costs stay out of the samples. The
    # candidate's work is waited for first: its device faults surface as its own, not the baseline's.
    for _ in range(2):
        with candidate_code():
            candidate_call(cand_sets[0])()
            timer.sync()
        with blamed("baseline", sets.case.name):
            baseline_call(base_sets[0])()
            timer.sync()

    got = _Samples()
    deadline = time.perf_counter() + budget_s
    k = 0
    wall0 = time.perf_counter()
    while True:
        round_: list[float] = []
        throttled = timer.throttled()
        for which in ("A", "B", "B", "A"):
            c = (cand_sets if which == "A" else base_sets)[k % n_sets]
            timer.clear_l2(flush)
            timer.sync()
            # Outside the timed call: what raises is the candidate's, or the baseline's fault.
            with candidate_code() if which == "A" else blamed("baseline", sets.case.name):
                round_.append(timer.time_us(candidate_call(c) if which == "A" else baseline_call(c)))
        throttled = throttled or timer.throttled()
        if k % 8 == 0:  # NVML reads cost ~100 us: sample every eighth round
            clock, temp = timer.readings()
            got.clocks += [clock] if clock is not None else []
            got.temps += [temp] if temp is not None else []
        k += 1
        got.add(round_, throttled)
        if got.done(deadline):
            break
    discarded = len(got.kept_throttled)
    got.keep_throttled_if_short()
    wall = time.perf_counter() - wall0
    return _measurement(sets, got, discarded, wall)


def _measurement(sets: TimingSets, got: _Samples, discarded: int, wall: float) -> Measurement:
    cand, base = got.cand, got.base
    cm, clo, chi = median_ci(cand)
    bm, _, _ = median_ci(base)
    return Measurement(
        l2_bytes=sets.l2_bytes, median_us=cm, ci_low_us=clo, ci_high_us=chi, samples=len(cand),
        baseline_median_us=bm, baseline_samples=len(base), samples_sum_us=sum(cand) + sum(base),
        wall_s=wall, input_sets=len(sets.cand_sets), throttled_discarded=discarded,
        sm_clock_mhz=sum(got.clocks) / len(got.clocks) if got.clocks else None,
        temperature_c=max(got.temps) if got.temps else None, baseline=sets.spec.baseline_library())


class Recheck(NamedTuple):
    drift: str | None  # the first difference from the reference, or None
    device_time: DeviceTime | None  # the call's device time (profiled), when asked and possible


def recheck(spec: OperatorSpec, case: Case, source: Call, fn: Callable[..., Any], *,
            device: str, timer: Timer, own_module: str | None = None) -> Recheck:
    """Run the candidate once more on a pristine copy of the first timing input set and compare
    its outputs with the problem's fp64 reference on those inputs: a kernel right while checked
    and wrong while timed (work skipped on repeats, a cached result) is caught. Needs no
    exclusive device. With ``own_module`` (the candidate's) the call runs under the device's
    kernel profiler (:mod:`device_agent.profiling`), its device time split between that
    module's kernels and everything else.

    Done here, next to the data: shipping a benchmark-sized output to the agent and computing
    the reference on its host cost seconds per case. These inputs are no secret (the worker made
    them), and the reference and check functions are among the primitives whose identity the
    integrity layer verifies. The reference runs on the device where it can, else on the host."""
    with blamed("input upload", case.name):
        call = prepare(source, device)
    device_time = None
    with candidate_code():
        if own_module is None:
            result = invoke(fn, call)
        else:
            timer.sync()  # the copies prepare queued are not the call's device time
            triton_hooks.start_recording()
            result, activities = profiled(lambda: invoke(fn, call), device)
            if activities is not None:
                device_time = attribute(activities, triton_hooks.kernels_of(own_module))
        timer.sync()
        outputs = [from_wire(wire_output(o)) for o in collect(call, result)]
    expected = _reference(spec, case, source, device)
    if len(outputs) != len(expected):
        return Recheck(f"{case.name}: {len(outputs)} outputs came back from the call after "
                       "timing", device_time)
    for o, got, exp in zip(call.outputs, outputs, expected, strict=True):
        with blamed("checker", case.name):
            m = check(got, exp, spec.tolerance(case, exp.dtype))
        if m is not None:
            return Recheck((f"{case.name}: after timing, {o.describe()} differs from the "
                            f"reference: {m.summary}")[:1500], device_time)
    return Recheck(None, device_time)


def _reference(spec: OperatorSpec, case: Case, source: Call, device: str) -> tuple[Expected, ...]:
    """The reference on ``source``, on ``device`` where it can, else on the host (a fault there
    is the harness's)."""
    if spec.kind is not Kind.RANDOM:  # distribution judges work on host tensors
        try:
            return spec.reference(prepare(source, device))
        except Exception:  # noqa: BLE001 - a reference that needs host tensors
            pass
    with blamed("reference", case.name):
        return spec.reference(prepare(source, "cpu"))
