"""The timing stage of one candidate's run, as the agent drives it (the worker's half is in
``device_agent.sandboxed_job``): per benchmark case, the input sets are built while the device is
shared, measured while the agent holds it alone, and the outputs re-checked with it shared again.
"""

from __future__ import annotations

import logging
import secrets
import time
from typing import TYPE_CHECKING, Any

from device_agent import judging
from device_agent.protocol import (
    BuildInputs,
    Built,
    Measure,
    Recheck,
    Rechecked,
    StartTiming,
    Timed,
    Upload,
    Uploaded,
    accept,
)
from operators.spec import Kind
from protos.records import CaseTiming, Finding

if TYPE_CHECKING:
    from device_agent.candidate_run import CandidateRun

log = logging.getLogger(__name__)

LAUNCH_BOUND_US = 10.0  # a median below this is mostly launch overhead


async def time_cases(run: CandidateRun) -> tuple[tuple[CaseTiming, ...], list[str | None],
                                                 tuple[Finding, ...]]:
    """Per benchmark case: the worker makes its input sets while the device is shared, then
    measures while this agent holds the device alone, then re-checks its outputs. Returns
    the timings, per case how the outputs after timing differ from the reference (None where
    they agree), and findings made while timing."""
    bench = list(run.p.spec.benchmark_cases())
    seeds = [secrets.randbits(48) for _ in bench]
    run.clock.start(run.h.budgets.timing_s)
    await run.ch.send(StartTiming(n_cases=len(bench),
                                   budget_s=run.h.budgets.timing_case_budget_s, l2_bytes=0))
    # The re-check call runs under the device's kernel profiler (the profile layer).
    profile = ("profile" in run.h.layers and run.p.spec.kind is Kind.COMPUTE
               and bool(getattr(run.h.platform, "profiles_device", False)))
    out: list[CaseTiming] = []
    drifts: list[str | None] = []
    found: list[Finding] = []
    for index, (case, seed) in enumerate(zip(bench, seeds, strict=True)):
        timing, drift, evidence = await _time_case(run, index, case, seed, profile)
        out.append(timing)
        drifts.append(drift)
        found += evidence
        if found or (drift is not None and "timing" in run.h.layers):
            break  # the verdict is decided: the remaining cases need no device time
    return tuple(out), drifts, tuple(found)

async def _time_case(run: CandidateRun, index: int, case: Any, seed: int,
                     profile: bool) -> tuple[CaseTiming, str | None, list[Finding]]:
    ch, clock, gate = run.ch, run.clock, run.gate
    t_build = time.monotonic()
    # The worker makes the input sets on the device while it is shared (on the cpu
    # platform, at BuildInputs, without the gate). On a compiling platform it first runs the
    # case dry on benchmark-sized allocations, so no kernel compiles while the device is held.
    await ch.send(BuildInputs(index=index, seed=seed, warm=run.h.platform.compiles_kernels))
    built = await ch.expect(Built, until=clock.end, index=index)
    run.h.launchers_built(built.launchers)
    async with clock.holding(gate.shared, run.worker) as (asked, t_upload):
        await ch.send(Upload(index=index))
        await ch.expect(Uploaded, until=clock.end, index=index)
    async with clock.holding(gate.exclusive, run.worker) as (asked_x, went):
        await ch.send(Measure(index=index))
        measured = await ch.recv(clock.end)
        wall = time.monotonic() - went
    if run.h.metrics is not None:  # outside the exclusive window, which is being timed
        run.h.metrics.timing_lock_waited(run.device, went - asked_x)
    timed = accept(measured, Timed, index)
    run.baselines.add(timed.measurement.baseline)
    # One more call on pristine inputs, checked against the reference in the worker, with
    # the device shared: it does not hold up other timers.
    async with clock.holding(gate.shared, run.worker) as (asked_r, t_recheck):
        await ch.send(Recheck(index=index, profile=profile))
        reply = await ch.recv(clock.end)
    rechecked = accept(reply, Rechecked, index)
    m = timed.measurement
    log.debug("%s %s timing %s: build %.2fs (dry run %.2fs%s), upload wait %.2fs + %.2fs, "
              "exclusive wait %.2fs + held %.2fs (measured %.2fs, %d samples), recheck "
              "wait %.2fs + %.2fs", run.p.spec.ref, run.p.candidate_hash[:12], case.name,
              asked - t_build, built.seconds,
              f", stopped: {built.stopped}" if built.stopped else "", t_upload - asked,
              asked_x - t_upload, went - asked_x, wall, m.wall_s, m.samples,
              t_recheck - asked_r, time.monotonic() - t_recheck)
    if profile and rechecked.device_time is not None:
        log.debug("%s %s %s: own kernels %.0f of %.0f µs device time", run.p.spec.ref,
                  run.p.candidate_hash[:12], case.name, rechecked.device_time.own_us,
                  rechecked.device_time.total_us)
    found = judging.timing_findings(case.name, timed, rechecked, wall, run.h.layers, profile,
                                    run.system.baseline_for(run.p.spec.id))
    drift = rechecked.drift[:1500] if rechecked.drift is not None else None
    return _case_timing(run, case, timed), drift, found

def _case_timing(run: CandidateRun, case: Any, timed: Timed) -> CaseTiming:
    m = timed.measurement
    med, base = m.median_us, m.baseline_median_us
    return CaseTiming(
        name=case.name, meaningful=True, median_us=med, ci_low_us=m.ci_low_us,
        ci_high_us=m.ci_high_us, samples=m.samples, baseline_median_us=base,
        speedup=base / med if med > 0 else None,
        sol_percent=judging.sol_percent(run.system, run.p.spec, case, med),
        launch_bound=med < LAUNCH_BOUND_US, throttled_discarded=m.throttled_discarded,
        sm_clock_mhz=m.sm_clock_mhz, temperature_c=m.temperature_c)
