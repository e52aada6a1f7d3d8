"""One candidate on one worker, as the agent drives it: load, check, time, re-check.

The agent's side of a job (the worker's is ``device_agent.sandboxed_job``). Every report comes
through the worker's :class:`~device_agent.protocol.WorkerChannel`; every way a report can be
wrong (late, forged, malformed, unexpected, a failure of the candidate's code, a dead worker)
becomes the candidate's verdict in :meth:`CandidateRun.run`, the one place that maps them; a
failure of the harness's own code (:mod:`device_agent.harness_faults`) becomes ``INFRA_ERROR``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

from device_agent import harness_faults, judging, timing_stage, toolchain_faults
from device_agent.case_inputs import Prepared
from device_agent.codec import CodecError
from device_agent.protocol import (
    Accepted,
    CaseError,
    CaseOutputs,
    CheckCase,
    Failure,
    Forged,
    Job,
    Loaded,
    LoadError,
    Ran,
    RunCase,
    Stop,
    TimingError,
    Unexpected,
    Warmed,
    WorkerFailed,
    accept,
)
from device_agent.run_harness import Harness, MakeVerdict, WorkerLost
from device_agent.stage_clock import StageClock
from device_agent.worker_process import Worker
from operators.spec import Kind
from protos.records import CaseResult, CaseTiming, Finding, Stage, Status, SystemInfo, Verdict

if TYPE_CHECKING:
    from device_agent.device_gate import DeviceGate
    from protos.records import ToolchainFault

log = logging.getLogger(__name__)
_T = TypeVar("_T")

LOG_LIMIT = 8000
WORKER_ACK_S = 30.0  # a live worker acknowledges its job at once; silence this long is a loss
# Within one hold of the gate, how long the next case's dry run may take before the hold is let
# go (a dry run of a case whose kernels are compiled already takes milliseconds).
DRY_RUN_GRACE_S = 0.05


@dataclass
class _CheckLog:
    """What the correctness stage logs at -vv: compiling off the gate, holding it."""

    dry_s: float = 0.0
    held_s: float = 0.0
    own_launchers: int = 0  # Triton launchers the worker had to build itself
    dry_stopped: str = ""  # the first dry run that stopped early
    holds: int = 0  # shared holds of the device's gate (several cases each when they are ready)
    case_seconds: list[float] = field(default_factory=list)


@dataclass
class _DryRun:
    """A case sent to the worker, its Warmed report being read by ``warmed``."""

    asked: CheckCase
    warmed: asyncio.Future[Warmed]


async def _ready(f: asyncio.Future[Any], grace_s: float, hold_end: float) -> bool:
    """Whether ``f`` is done within ``grace_s`` (and before ``hold_end``), leaving it running."""
    wait = min(grace_s, hold_end - time.monotonic())
    if not f.done() and wait > 0:
        await asyncio.wait({f}, timeout=wait)
    return f.done() and f.exception() is None


class CandidateRun:
    """The stages of one candidate on one worker; :meth:`run` returns its verdict."""

    def __init__(self, harness: Harness, worker: Worker, device: int, gate: DeviceGate,
                 p: Prepared, verdict: MakeVerdict, report: Callable[..., None], *,
                 system: SystemInfo, datasheet: SystemInfo, deadline: float, t0: float,
                 skip_timing: bool) -> None:
        self.h = harness
        self.worker = worker
        self.ch = worker.channel
        self.device = device  # the pool's index
        self.gate = gate
        self.p = p
        self.verdict = verdict
        self.report = report  # progress: (Stage, detail, done, total)
        self.system = system  # for % of speed-of-light (measured peaks where known)
        self.datasheet = datasheet  # for the physical floor
        self.t0 = t0
        self.deadline = deadline
        self.skip_timing = skip_timing
        self.clock = StageClock(deadline - harness.budgets.margin_s)
        self.stage = "load"
        self.results: list[CaseResult] = []
        self.check_log = _CheckLog()
        self.baselines: set[str] = set()  # the libraries the timed cases' baseline ran
        self.claim: harness_faults.WorkerClaim | None = None  # the worker's, of a harness fault

    async def run(self) -> Verdict:
        """The candidate's verdict. Raises :class:`WorkerLost` when the worker never took the
        job: the system's failure, retried on another worker."""
        self.report(Stage.LOAD)
        await self._hand_over()
        try:
            await self._load()
            decided = await self._check()
            return decided if decided is not None else await self._time()
        except TimeoutError:
            return await self._toolchain_hang() or self._timed_out()
        except (EOFError, asyncio.IncompleteReadError, ConnectionError):
            return await self._died()
        except Forged as exc:
            return self.verdict(Status.CHEAT_DETECTED, "result channel carried a forged message",
                                cases=tuple(self.results),
                                findings=(Finding("process", "result-channel-nonce", str(exc)),))
        except CodecError as exc:  # a frame that does not decode, or a malformed message
            return self.verdict(Status.RUNTIME_ERROR, f"malformed message from worker: {exc}",
                                cases=tuple(self.results), log=_tail(self.worker.log_tail()))
        except Unexpected as exc:
            if self.stage == "timing":
                return self.verdict(Status.RUNTIME_ERROR, f"timing failed: {exc}",
                                    cases=tuple(self.results))
            return self.verdict(Status.RUNTIME_ERROR, str(exc))
        except WorkerFailed as exc:
            return self._failed(exc.failure)
        except harness_faults.HarnessFault as exc:  # the agent's own checks of a case
            await self._stop()
            return self._harness_verdict(exc.describe(), exc.trace())

    # ---- load ------------------------------------------------------------------------------------
    async def _hand_over(self) -> None:
        """Give the worker its job and wait for its acknowledgement, sent before any candidate
        code runs: a worker that dies or stalls before it is lost to the system, never the
        candidate's fault."""
        p, ch = self.p, self.ch
        module_name = f"kgb_candidate_{p.candidate_hash[:16]}"
        path = self.worker.workdir / f"{module_name}.py"
        path.write_text(p.source, encoding="utf-8")
        ch.nonce = secrets.token_hex(16)
        self.clock.start(self.h.budgets.load_s)
        try:
            await ch.send(Job(nonce=ch.nonce, operator_id=p.spec.id, path=str(path),
                              module_name=module_name, n_calls=len(p.calls),
                              layers=tuple(sorted(self.h.layers))))
            await ch.expect(Accepted, until=min(time.monotonic() + WORKER_ACK_S, self.clock.end))
        except (EOFError, asyncio.IncompleteReadError, ConnectionError, CodecError) as exc:
            raise WorkerLost(f"{type(exc).__name__}, worker "
                             f"{describe_exit(self.worker.proc.returncode)}"
                             f"{self.worker.death_note()}") from None
        except TimeoutError:
            raise WorkerLost(f"no acknowledgement within {WORKER_ACK_S:.0f}s") from None
        except (Forged, Unexpected) as exc:
            raise WorkerLost(f"unexpected first message {exc.kind!r}") from None

    async def _load(self) -> None:
        self.clock.start(self.h.budgets.load_s)
        await self.ch.expect(Loaded, until=self.clock.end)

    # ---- correctness -----------------------------------------------------------------------------
    async def _check(self) -> Verdict | None:
        """Every case, checked as it comes back; a verdict as soon as one is decided."""
        self.stage = "correctness"
        n = len(self.p.calls)
        self.report(Stage.CORRECTNESS, "", 0, n)
        self.clock.start(self.h.budgets.correctness_s)
        unstable: list[Finding] = []  # determinism: a second run disagreed with the first
        nxt: _DryRun | None = None
        try:
            while len(self.results) < n:
                nxt = nxt or await self._dry_run(len(self.results))
                self._warmed(await nxt.warmed)  # off the gate: its kernels compile now
                ran, nxt = await self._run_held(nxt, n)
                for asked, out in ran:
                    out = out or await self.ch.expect(CaseOutputs, until=self.clock.end,
                                                      index=asked.index)  # off the gate
                    decided = await self._judge_case(asked, out, unstable)
                    if decided is not None:
                        return decided
                    self.check_log.case_seconds.append(out.seconds)
                    self.report(Stage.CORRECTNESS, self.p.names[asked.index], asked.index + 1, n)
        finally:  # a verdict came first: nothing reads this worker again
            if nxt is not None and not nxt.warmed.cancel() and not nxt.warmed.cancelled():
                nxt.warmed.exception()  # its failure, if any, is not this verdict's
        c = self.check_log
        log.debug("%s %s correctness: %d cases, dry runs %.2fs, device held %.2fs in %d holds, "
                  "waited for the device %.2fs, launchers built by the worker %d%s",
                  self.p.spec.ref, self.p.candidate_hash[:12], len(self.results), c.dry_s,
                  c.held_s, c.holds, self.clock.waited, c.own_launchers, c.dry_stopped[:300])
        return await self._correctness_verdict(unstable)

    async def _dry_run(self, i: int) -> _DryRun:
        """Case ``i`` goes over; the worker runs it dry (compiling its kernels) and says so in a
        Warmed report, read by a task so that a hold on the gate need not wait for it."""
        p, layers = self.p, self.h.layers
        probe = i in p.probes
        asked = CheckCase(index=i, call=p.calls[i], warm=self.h.platform.compiles_kernels,
                          ghost=probe and "ghost" in layers and p.spec.kind is Kind.COMPUTE,
                          repeat=probe and "determinism" in layers,
                          replay=p.replays[i][0] if i in p.replays else None)
        await self.ch.send(asked, until=self.clock.end)
        return _DryRun(asked, asyncio.ensure_future(
            self.ch.expect(Warmed, until=self.clock.end, index=i)))

    def _warmed(self, warmed: Warmed) -> None:
        self.check_log.dry_s += warmed.seconds
        self.check_log.own_launchers += self.h.launchers_built(warmed.launchers)
        if warmed.stopped and not self.check_log.dry_stopped:
            name = self.p.names[warmed.index]
            self.check_log.dry_stopped = f"; case {name}'s dry run stopped: {warmed.stopped}"

    async def _run_held(self, first: _DryRun, n: int
                        ) -> tuple[list[tuple[CheckCase, CaseOutputs | None]], _DryRun | None]:
        """Run dry-run cases on the device under one shared hold of its gate, as many in a row
        as ``check_hold_s`` allows while the next case's dry run is ready at once (no compile).
        A hold per case made every case of every candidate wait for a batch of timers when
        many candidates share a device. Returns the cases run, each with its outputs where they
        were read under the hold (the last one's may not be), and the next case when its dry
        run was still going as the hold ended."""
        ran: list[tuple[CheckCase, CaseOutputs | None]] = []
        ch, budget = self.ch, self.h.budgets.check_hold_s
        nxt: _DryRun | None = first
        async with self.clock.holding(self.gate.shared, self.worker):  # not while timing
            held = time.monotonic()
            try:
                while nxt is not None:
                    asked, nxt = nxt.asked, None
                    await ch.send(RunCase(index=asked.index))
                    accept(await ch.recv(self.clock.end), Ran, asked.index)
                    ran.append((asked, None))
                    if asked.index + 1 >= n or time.monotonic() - held >= budget:
                        break  # the outputs are read off the gate
                    ran[-1] = (asked, await ch.expect(CaseOutputs, until=self.clock.end,
                                                      index=asked.index))
                    nxt = await self._dry_run(asked.index + 1)
                    if not await _ready(nxt.warmed, DRY_RUN_GRACE_S, held + budget):
                        break  # compiling: the gate is let go while it does
                    self._warmed(nxt.warmed.result())
            except BaseException:
                if nxt is not None:
                    nxt.warmed.cancel()  # the worker is ended inside the hold: nothing to read
                raise
            self.check_log.held_s += time.monotonic() - held
            self.check_log.holds += 1
        return ran, nxt

    async def _judge_case(self, asked: CheckCase, out: CaseOutputs,
                          unstable: list[Finding]) -> Verdict | None:
        p, i, layers = self.p, asked.index, self.h.layers
        findings = judging.runtime_findings(p, i, out, layers)
        findings += await self._host_check(judging.ghost_findings, i, out, layers)
        if findings:
            await self._stop()
            return self.verdict(Status.CHEAT_DETECTED,
                                " ; ".join(f.evidence for f in findings)[:1500],
                                cases=tuple(self.results), findings=findings)
        result = await self._host_check(judging.check_case, i, out)
        self.results.append(result)
        with harness_faults.blamed("checker", f"case {p.names[i]}"):
            launchless = judging.launches_finding(p, i, out, layers) if result.passed else None
        if launchless is not None:
            await self._stop()
            return self.verdict(Status.CHEAT_DETECTED, launchless.evidence[:1500],
                                cases=tuple(self.results), findings=(launchless,))
        if result.passed and asked.repeat:
            differs = await self._host_check(judging.determinism_finding, i, out)
            if differs is not None:
                unstable.append(differs)
        if result.passed and asked.replay is not None:
            stale = await self._host_check(judging.replay_finding, i, out)
            if stale is not None:
                unstable.append(stale)
        return None

    async def _host_check(self, fn: Callable[..., _T], i: int, *args: Any) -> _T:
        """The agent's own comparison of case ``i`` (``fn(p, i, *args)``): its time is the
        agent's load, not the candidate's, so it extends the stage's deadline (as waiting for
        the device does); the request's own deadline still bounds it. What it raises is the
        checker's fault, never the candidate's."""
        began = time.monotonic()
        try:
            with harness_faults.blamed("checker", f"case {self.p.names[i]}"):
                return await self.h.host.check(fn, self.p, i, *args)
        finally:
            self.clock.extend(time.monotonic() - began)

    async def _correctness_verdict(self, unstable: list[Finding]) -> Verdict | None:
        failed = [r for r in self.results if not r.passed]
        if failed:
            await self._stop()
            first = failed[0]
            return self.verdict(Status.WRONG_ANSWER,
                                f"{len(failed)} of {len(self.results)} cases wrong; first "
                                f"{first.name}: {first.mismatch}"[:1500], cases=tuple(self.results))
        if unstable:
            await self._stop()
            return self.verdict(Status.WRONG_ANSWER, unstable[0].evidence[:1500],
                                cases=tuple(self.results), findings=tuple(unstable))
        return None

    # ---- timing and re-check ---------------------------------------------------------------------
    async def _time(self) -> Verdict:
        self.stage = "timing"
        timings: tuple[CaseTiming, ...] = ()
        if self.skip_timing:
            await self._stop()
        elif not self.h.platform.timings_meaningful:
            await self._stop()
            timings = tuple(
                CaseTiming(name=self.p.names[i], meaningful=False, median_us=s * 1e6, samples=1)
                for i, s in enumerate(self.check_log.case_seconds[:3]))
        else:
            self.report(Stage.TIMING)
            timings, drifts, during = await timing_stage.time_cases(self)
            decided = self._timing_verdict(timings, drifts, during)
            if decided is not None:
                return replace(decided, baseline="+".join(sorted(self.baselines)))
        self.report(Stage.DONE)
        return self.verdict(Status.PASSED, f"all {len(self.results)} cases passed",
                            cases=tuple(self.results), timings=timings,
                            baseline="+".join(sorted(self.baselines)))

    def _timing_verdict(self, timings: tuple[CaseTiming, ...], drifts: list[str | None],
                        during: tuple[Finding, ...]) -> Verdict | None:
        cases, layers = tuple(self.results), self.h.layers
        if during:
            return self.verdict(Status.CHEAT_DETECTED, during[0].evidence[:1500], cases=cases,
                                timings=timings, findings=during)
        too_fast = (judging.below_floor(self.datasheet, self.p.spec, timings)
                    if "timing" in layers else ())
        if too_fast:
            return self.verdict(Status.CHEAT_DETECTED, too_fast[0].evidence, cases=cases,
                                timings=timings, findings=too_fast)
        drift = next((d for d in drifts if d), None) if "timing" in layers else None
        if drift is not None:
            return self.verdict(Status.WRONG_ANSWER, drift, cases=cases, timings=timings,
                                findings=(Finding("timing", "recheck-after-timing", drift),))
        return None

    # ---- how a run ends badly ----------------------------------------------------------------------
    async def _stop(self) -> None:
        """Tell the worker the verdict is decided (it may be gone already)."""
        with contextlib.suppress(ConnectionError, OSError):
            await self.ch.send(Stop())

    def _timed_out(self) -> Verdict:
        now = time.monotonic()
        margin = self.h.budgets.margin_s
        material = self.clock.waited >= max(1.0, 0.1 * (self.deadline - self.t0))
        if self.clock.waiting_since or (material and now >= self.deadline - margin - 0.5):
            # The request's own deadline ran out while the candidate waited for the device:
            # an overloaded agent, never the candidate's fault. A candidate that hangs
            # through the deadline after a negligible wait is the candidate's TIMEOUT.
            return self.verdict(Status.INFRA_ERROR,
                                f"{self.stage} stage: the request's deadline passed after "
                                f"{self.clock.waited_now():.0f} s waiting for the device; retry "
                                "on a less busy agent", cases=tuple(self.results))
        return self.verdict(Status.TIMEOUT, f"{self.stage} stage passed its deadline; worker killed",
                            cases=tuple(self.results), log=_tail(self.worker.log_tail()))

    async def _toolchain_hang(self) -> Verdict | None:
        """TOOLCHAIN_ERROR when the worker, past its deadline, is stuck in the platform's
        compiler (its stacks say so); None otherwise (its own TIMEOUT or the system's)."""
        if self.clock.waiting_since or not self.h.platform.toolchain.files:
            return None  # waiting for the device, not running (or nothing compiles here)
        found = await toolchain_faults.hung(self.worker, self.h.platform.toolchain)
        return self._toolchain_verdict(found, f"{self.stage} stage") if found else None

    def _toolchain_verdict(self, found: ToolchainFault, where: str, log: str = "") -> Verdict:
        return self.verdict(Status.TOOLCHAIN_ERROR,
                            toolchain_faults.describe(found, self.h.platform.name, where),
                            cases=tuple(self.results), toolchain_fault=found,
                            log=_tail(log or self.worker.log_tail()))

    async def _died(self) -> Verdict:
        try:
            code: int | None = await asyncio.wait_for(self.worker.proc.wait(), timeout=5)
        except TimeoutError:
            code = None
        found = (toolchain_faults.crashed(self.worker, self.h.platform.toolchain)
                 if code is not None and code < 0 else None)
        if found is not None:
            return self._toolchain_verdict(found, f"{self.stage} stage")
        return self.verdict(Status.RUNTIME_ERROR,
                            f"worker {describe_exit(code)} during {self.stage} without a result"
                            f"{self.worker.death_note()}", log=_tail(self.worker.log_tail()))

    def _failed(self, failure: Failure) -> Verdict:
        """The candidate's code failed where the worker was to report: how, as a verdict."""
        if isinstance(failure, LoadError):
            what = {"syntax": "does not parse", "import": "fails to import",
                    "missing_entry": "lacks an entry point"}.get(failure.kind, "fails to load")
            return self.verdict(Status.COMPILE_ERROR, f"candidate {what}: {failure.message}",
                                log=_tail(failure.traceback))
        if isinstance(failure, CaseError):
            return self._case_failed(failure)
        if failure.harness_fault is not None:  # the worker's harness code, while timing
            return self._claimed_harness_fault(failure)
        if failure.toolchain_stage is not None:
            return self._toolchain_verdict(
                toolchain_faults.raised(failure.toolchain_stage, failure.message), "timing",
                failure.traceback)
        return self.verdict(Status.RUNTIME_ERROR, f"timing failed: {failure.message}",
                            cases=tuple(self.results), log=_tail(failure.traceback))

    def _claimed_harness_fault(self, failure: TimingError) -> Verdict:
        """The worker says its harness code raised while timing. The worker is the candidate's
        process, so the claim cannot clear the candidate (a hostile one would claim it to leave
        its failure unscored): it stays the candidate's RUNTIME_ERROR, with the part named, and
        is kept in :attr:`claim` for the evaluator to settle with the problem's own solution."""
        name = self.p.spec.benchmark_cases()[failure.index].name  # the index was awaited
        self.claim = harness_faults.WorkerClaim(failure.harness_fault or "", failure.index,
                                                f"timing case {name}", failure.message)
        log.warning("%s %s: worker reports a harness fault: %s", self.p.spec.ref,
                    self.p.candidate_hash[:12], self.claim.describe())
        return self.verdict(Status.RUNTIME_ERROR, f"timing failed: {self.claim.describe()}",
                            cases=tuple(self.results), log=_tail(failure.traceback))

    def _harness_verdict(self, message: str, trace: str) -> Verdict:
        """The harness's own code failed: the system's, whatever the candidate did before."""
        log.warning("%s %s: %s", self.p.spec.ref, self.p.candidate_hash[:12], message)
        return self.verdict(Status.INFRA_ERROR, message, cases=tuple(self.results),
                            log=_tail(trace))

    def _case_failed(self, error: CaseError) -> Verdict:
        name = self.p.names[error.index]
        if error.platform_limit:
            return self.verdict(Status.INFRA_ERROR,
                                f"case {name}: the {self.h.platform.name} platform cannot run "
                                f"this candidate ({error.message}); evaluate it on another "
                                "platform"[:1500], log=_tail(error.traceback))
        if error.toolchain_stage is not None:
            return self._toolchain_verdict(
                toolchain_faults.raised(error.toolchain_stage, error.message), f"case {name}",
                error.traceback)
        status = Status.COMPILE_ERROR if error.compile or error.signature else Status.RUNTIME_ERROR
        self.results.append(CaseResult(name=name, passed=False, hidden=self.p.hidden[error.index],
                                       mismatch=error.message[:1000]))
        what = ("wrong signature" if error.signature else
                "a kernel fails to compile" if status is Status.COMPILE_ERROR else "raised")
        crash = f"case {name}: {what}: {error.message}"
        earlier = [r for r in self.results[:-1] if not r.passed]
        if earlier:  # the first failure decides the status; the crash is recorded
            status = Status.WRONG_ANSWER
            crash = (f"{len(earlier)} case(s) wrong before a crash; first "
                     f"{earlier[0].name}: {earlier[0].mismatch}; then {crash}")
        return self.verdict(status, crash[:1500], cases=tuple(self.results),
                            log=_tail(error.traceback))


def _tail(text: str, limit: int = LOG_LIMIT) -> str:
    return text if len(text) <= limit else "...\n" + text[-limit:]


def describe_exit(code: int | None) -> str:
    if code is None:
        return "stopped answering"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}"
    return f"exited with code {code}"
