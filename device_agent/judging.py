"""The agent's judgement of what a worker reported: outputs against references, the anti-cheat
layers' evidence, and timings against the device's physical limits.

Pure functions of typed reports (``device_agent.protocol``) and the agent's own records: the
worker's word is data here, never trusted to be right.
"""

from __future__ import annotations

from typing import Any

import torch

from device_agent.case_inputs import Prepared, informative
from device_agent.profiling import judge as judge_device_time
from device_agent.protocol import CaseOutputs, Rechecked, Timed
from operators.checking import check, same_bits
from operators.invoke import from_wire
from operators.spec import Expected, Kind, OperatorSpec
from protos.records import CaseResult, CaseTiming, Finding, SystemInfo

FLOOR_MARGIN = 1.10  # a time under the datasheet floor by more than this is impossible


# ---- correctness ---------------------------------------------------------------------------------

def check_case(p: Prepared, i: int, out: CaseOutputs) -> CaseResult:
    """Case ``i``'s outputs (and inputs after the call) against the agent's references."""
    call, expected, name = p.calls[i], p.expected[i], p.names[i]
    if len(out.outputs) != len(expected):
        return CaseResult(name, False, p.hidden[i], "worker returned the wrong number of outputs")
    shared = out.layouts if len(out.layouts) == len(expected) else [None] * len(expected)
    for o, wire, exp, layout in zip(call.outputs, out.outputs, expected, shared, strict=True):
        got = from_wire(wire)
        if isinstance(got, dict):
            return CaseResult(name, False, p.hidden[i],
                              f"{o.describe()}: expected a torch.Tensor, got "
                              f"{got.get('not_a_tensor')} ({got.get('repr', '')})")
        if layout is None and exp.view_of is not None and isinstance(got, torch.Tensor) \
                and got.numel() > 0:
            return CaseResult(name, False, p.hidden[i],
                              f"{o.describe()}: the worker did not say where it lives")
        m = check(got, exp, p.spec.tolerance(p.case_objs[i], exp.dtype), layout)
        if m is not None:
            return CaseResult(name, False, p.hidden[i], f"{o.describe()}: {m.summary}"[:1500],
                              max_abs_error=m.max_abs_error, bad_elements=m.bad,
                              total_elements=m.total)
    for key, before in call.tensor_args():
        if key in call.mutable:
            continue
        after = out.post_inputs.get(str(key))
        if after is None or not same_bits(before, after):
            return CaseResult(name, False, p.hidden[i],
                              f"input argument {key!r} was modified; it must stay intact")
    return CaseResult(name, True, p.hidden[i])


def runtime_findings(p: Prepared, i: int, out: CaseOutputs,
                     layers: frozenset[str]) -> tuple[Finding, ...]:
    """What the worker's runtime layers saw during case ``i`` (empty when nothing)."""
    found: list[Finding] = []
    if out.guard and "runtime" in layers:
        listed = ", ".join(out.guard[:8])
        found.append(Finding(
            "runtime", "dispatch-guard",
            f"case {p.names[i]}: the entry point computed with torch ({listed}) outside "
            "Triton kernels; compute the answer in your own Triton kernels"))
    if out.integrity and "integrity" in layers:
        found.append(Finding(
            "integrity", "harness-tampered",
            f"case {p.names[i]}: the candidate changed the harness: "
            + "; ".join(out.integrity[:5]) + ". Candidates may not patch torch, triton, timers "
            "or the harness, change numerics flags, or leave threads running"))
    return tuple(found)


def launches_finding(p: Prepared, i: int, out: CaseOutputs,
                     layers: frozenset[str]) -> Finding | None:
    """A ``compute`` case answered without launching any of the candidate's kernels. Asked only
    of a case whose values are right (a wrong answer is just wrong, launch or not)."""
    if ("launches" in layers and p.spec.kind is Kind.COMPUTE and out.own_launches == 0
            and _has_elements(out.outputs)
            # An empty input's answer is a fill (a sum over nothing is 0): allowed ops do it.
            and not _inputs_empty(p, i)
            # Doing nothing may be the right answer (saxpy with alpha = 0 leaves y as it
            # is, as cuBLAS does): only a case a no-op would fail demands a launch.
            and informative(p.spec, p.case_objs[i], p.calls[i], p.expected[i])):
        return Finding(
            "launches", "no-own-kernel",
            f"case {p.names[i]}: produced outputs without launching any @triton.jit kernel "
            "defined in the candidate; the answer must come from its own Triton kernels")
    return None


def _inputs_empty(p: Prepared, i: int) -> bool:
    """Whether every tensor the case reads (not its out-buffers) has no elements."""
    call = p.calls[i]
    read = [t for k, t in call.tensor_args() if k not in call.out_buffers]
    return bool(read) and all(t.numel() == 0 for t in read)


def ghost_findings(p: Prepared, i: int, out: CaseOutputs,
                   layers: frozenset[str]) -> tuple[Finding, ...]:
    """Outputs still right with the candidate's own launches skipped: the answer came from
    somewhere other than its kernels (torch, a cache, the host)."""
    ghost = out.ghost_outputs
    if "ghost" not in layers or ghost is None:
        return ()
    expected = p.expected[i]
    if len(ghost) != len(expected) or not all(e.by_value for e in expected):
        return ()
    for got, exp in zip(ghost, expected, strict=True):
        if check(from_wire(got), exp, p.spec.tolerance(p.case_objs[i], exp.dtype)) is not None:
            return ()
    return (Finding(
        "ghost", "right-without-kernels",
        f"case {p.names[i]}: with the candidate's own Triton launches skipped, its outputs "
        "were still correct, so the answer does not come from its kernels"),)


def determinism_finding(p: Prepared, i: int, out: CaseOutputs) -> Finding | None:
    """A second run, with freed memory refilled between the two, must agree with the first
    (bitwise where the problem demands it, else within the case's tolerance). A random op's
    second run (:mod:`device_agent.resample`) must instead draw other samples."""
    first, second = out.outputs, out.repeat_outputs
    name = p.names[i]
    if second is None or len(second) != len(first):
        return Finding("determinism", "second-run-failed",
                       f"case {name}: the candidate failed when run a second time on the "
                       "same inputs")
    if p.spec.kind is Kind.RANDOM:
        # A random op must draw fresh samples on every call (PyTorch's generator advances).
        pairs = [(a, b) for a, b in zip(first, second, strict=True)
                 if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)]
        if pairs and all(a.shape == b.shape and same_bits(a, b) for a, b in pairs):
            return Finding("determinism", "repeats-samples",
                           f"case {name}: a second call on the same tensors (its new outputs "
                           "placed where the first call's freed outputs were, as a caching "
                           "allocator places them) returned the very same samples; a random op "
                           "must draw new ones on every call, so a seed taken from a tensor's "
                           "address, its shape or a constant is wrong: seed from "
                           "torch.initial_seed() or the generator plus a per-call counter")
        return None
    for o, a, b, exp in zip(p.calls[i].outputs, first, second, p.expected[i], strict=True):
        if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or not exp.by_value:
            continue
        if exp.canonical is not None and a.shape == b.shape and a.dtype == b.dtype:
            # What the op leaves unspecified (atomics' order, padding) may differ between runs.
            a, b = exp.canonical(a.detach().cpu()), exp.canonical(b.detach().cpu())
        if p.spec.bitwise_deterministic:
            same = a.shape == b.shape and a.dtype == b.dtype and same_bits(a, b)
            detail = "bitwise equality required"
        else:
            run1 = Expected(a.detach().cpu().to(exp.value.dtype), exp.dtype, exp.scale)
            m = check(b, run1, p.spec.tolerance(p.case_objs[i], exp.dtype))
            same = m is None
            detail = m.summary if m is not None else ""
        if not same:
            return Finding("determinism", "runs-disagree",
                           f"case {name}: {o.describe()} differs between two runs on the same "
                           f"inputs ({detail}); the kernel reads memory it never wrote or races")
    return None


def replay_finding(p: Prepared, i: int, out: CaseOutputs) -> Finding | None:
    """The case run again in the *same* buffers refilled with new contents must give the
    new answer: a result cached by address, shape or object identity gives the old one."""
    alt, expected = p.replays[i]
    got = out.replay_outputs
    name = p.names[i]
    if got is None or len(got) != len(expected):
        return Finding("replay", "second-call-failed",
                       f"case {name}: the candidate failed when called again on the same "
                       "buffers with new contents")
    for o, wire, exp in zip(alt.outputs, got, expected, strict=True):
        m = check(from_wire(wire), exp, p.spec.tolerance(p.case_objs[i], exp.dtype))
        if m is not None:
            return Finding("replay", "stale-result",
                           f"case {name}: called again on the same buffers refilled with new "
                           f"values, {o.describe()} is wrong ({m.summary}); results must not "
                           "be cached by pointer, shape or object")
    return None


def _has_elements(outputs: list[Any]) -> bool:
    """Whether any returned output tensor has elements (empty outputs need no kernel)."""
    return any(isinstance(o, torch.Tensor) and o.numel() > 0 for o in outputs)


# ---- timing --------------------------------------------------------------------------------------

def timing_findings(case_name: str, timed: Timed, rechecked: Rechecked, wall_s: float,
                    layers: frozenset[str], profiled: bool,
                    warm_baseline: str = "") -> list[Finding]:
    """Evidence from one timed case: device time spent outside the candidate's kernels, the
    harness changed while timing (a baseline other than the one the workers found at warm-up,
    ``warm_baseline``, included), or more timed time reported than the agent's clock saw."""
    found: list[Finding] = []
    if profiled and rechecked.device_time is not None:
        evidence = judge_device_time(rechecked.device_time, case_name)
        if evidence is not None:
            found.append(Finding("profile", "device-time-elsewhere", evidence))
    tampered = list(dict.fromkeys(timed.integrity + rechecked.integrity))
    ran = timed.measurement.baseline
    if warm_baseline and ran != warm_baseline:
        tampered.append(f"the baseline ran {ran[:40]!r}, not {warm_baseline!r} as at warm-up")
    if tampered and "integrity" in layers:
        found.append(Finding("integrity", "harness-tampered",
                             f"while timing {case_name}: " + "; ".join(tampered[:5])))
    reported_s = timed.measurement.samples_sum_us * 1e-6
    if "timing" in layers and reported_s > wall_s * 1.02 + 0.001:
        found.append(Finding(
            "timing", "wall-clock-mismatch",
            f"while timing {case_name}: the worker reported {reported_s * 1e3:.1f} ms of "
            f"timed calls within {wall_s * 1e3:.1f} ms of the agent's wall clock"))
    return found


def floor_us(datasheet: SystemInfo, spec: OperatorSpec, case: Any) -> float | None:
    """The least time the case can take by the *datasheet* peaks plus ``FLOOR_MARGIN`` (never
    the measured peaks, which are lower): unique bytes over bandwidth, FLOPs over rate."""
    bw = datasheet.peak_bandwidth_gbps
    if not bw:
        return None
    cost = spec.cost(case)
    floor_s = cost.bytes / (bw * 1e9 * FLOOR_MARGIN)
    rate = datasheet.peak_tflops.get(cost.dtype)
    if rate and cost.flops:
        floor_s = max(floor_s, cost.flops / (rate * 1e12 * FLOOR_MARGIN))
    return floor_s * 1e6


def below_floor(datasheet: SystemInfo, spec: OperatorSpec,
                timings: tuple[CaseTiming, ...]) -> tuple[Finding, ...]:
    """A time the hardware cannot reach is evidence of work hidden from the timer."""
    cases = {c.name: c for c in spec.benchmark_cases()}
    found = []
    for t in timings:
        floor = floor_us(datasheet, spec, cases[t.name]) if t.name in cases else None
        if t.meaningful and t.median_us is not None and floor is not None and t.median_us < floor:
            found.append(Finding(
                "timing", "below-physical-floor",
                f"case {t.name}: median {t.median_us:.2f} us is below the physical floor of "
                f"{floor:.2f} us (datasheet peaks with a {FLOOR_MARGIN - 1:.0%} margin, "
                "unique bytes only): work is hidden from the timer"))
    return tuple(found)


def sol_percent(system: SystemInfo, spec: OperatorSpec, case: Any, median_us: float) -> float | None:
    """Percent of speed-of-light: the case's roofline time (measured peaks where the agent has
    them) over its median."""
    bw = system.peak_bandwidth_gbps
    if not bw or median_us <= 0:
        return None
    cost = spec.cost(case)
    floor_s = cost.bytes / (bw * 1e9)
    rate = system.peak_tflops.get(cost.dtype)
    if rate and cost.flops:
        floor_s = max(floor_s, cost.flops / (rate * 1e12))
    return 100.0 * floor_s / (median_us * 1e-6)
