"""Evaluating one candidate: the trusted half of the pipeline, run inside the agent process.

Stages (each with its own deadline, all ending before the client's):

1. static   — size, UTF-8, syntax, entry points defined (in the agent; no candidate code runs)
2. inputs   — public and hidden cases; the fp64 references are computed here and never leave
3. load     — a warm worker imports the candidate               (``load_s``)
4. correctness — the worker runs every case and sends raw outputs back; compared here
                                                                  (``correctness_s``)
5. timing   — under the device's exclusive timing lock, candidate vs baseline (``timing_s``)

Stages 1, 2 and the queue are here; 3-5 are one candidate's run on its worker
(``device_agent.candidate_run``). Candidate failures become verdicts, and so do the harness's own
(``INFRA_ERROR``, :mod:`device_agent.harness_faults`); only request errors raise
(:class:`InvalidRequest`).
"""

from __future__ import annotations

import ast
import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import operators
from device_agent import static_policy
from device_agent.candidate_run import CandidateRun
from device_agent.case_inputs import CaseInputs, Prepared
from device_agent.fault_reproduction import Outcome, Reproductions
from device_agent.harness_faults import HarnessFault, WorkerClaim
from device_agent.host_work import HostBudget, HostWork
from device_agent.launchers import LauncherBuilder
from device_agent.layers import LAYERS as _LAYER_DOCS
from device_agent.platforms import Platform
from device_agent.run_harness import Harness, MakeVerdict, StageBudgets, WorkerLost
from device_agent.worker_pool import WorkerPool
from device_agent.worker_process import Worker, WorkerStartError
from operators.spec import OperatorSpec, Tier
from protos.records import (
    WARNING,
    EvalRequest,
    Finding,
    Progress,
    Stage,
    Status,
    SystemInfo,
    Verdict,
    candidate_id,
)

if TYPE_CHECKING:
    from device_agent.metrics import AgentMetrics

__all__ = ["HARNESS_VERSION", "LAYERS", "MAX_SOURCE_BYTES", "Evaluator", "InvalidRequest",
           "StageBudgets"]

log = logging.getLogger(__name__)

HARNESS_VERSION = "0.1.0"
INSTANT_HARNESS_VERSION = HARNESS_VERSION + "+instant"
# Anti-cheat layers an agent runs; each can be switched off to prove the others on their own.
LAYERS = tuple(_LAYER_DOCS)
MAX_SOURCE_BYTES = 1 << 20
MAX_WARNINGS = 20  # warning-level static findings recorded on a verdict
WORKER_ATTEMPTS = 3  # workers tried for one job when each dies before taking it
NO_WORKER = "no worker became free before the deadline"


class InvalidRequest(ValueError):
    """The request itself is wrong (unknown operator, bad version, ...): INVALID_ARGUMENT."""


def _static_entry_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    names.add(t.id)
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for a in node.names:
                names.add((a.asname or a.name).split(".")[0])
        elif isinstance(node, ast.If | ast.Try | ast.With):
            # Definitions under if/try/with count; we only check that the name can exist.
            sub = ast.Module(body=list(ast.iter_child_nodes(node)), type_ignores=[])  # type: ignore[arg-type]
            names |= _static_entry_names(sub)
    return names


class _Stages:
    """Where a request is: stage marks (for the log and metrics) and progress for the client."""

    def __init__(self, marks: list[tuple[str, float]],
                 progress: Callable[[Progress], None] | None) -> None:
        self.marks = marks  # (stage, when it was entered)
        self.progress = progress

    def enter(self, stage: str) -> None:
        if not self.marks or self.marks[-1][0] != stage:
            self.marks.append((stage, time.monotonic()))

    def report(self, stage: Stage, detail: str = "", done: int = 0, total: int = 0) -> None:
        self.enter(stage.name.lower())
        if self.progress is not None:
            self.progress(Progress(stage, detail, done, total))


class Evaluator:
    """Runs the pipeline for one agent: its platform, its device pools, its secret."""

    def __init__(self, platform: Platform, pools: list[WorkerPool], secret: bytes,
                 budgets: StageBudgets | None = None,
                 layers: frozenset[str] = frozenset(LAYERS),
                 public_cache_bytes: int = 2 << 30, *, instant: bool = False,
                 host: HostWork | None = None, launchers: LauncherBuilder | None = None,
                 metrics: AgentMetrics | None = None) -> None:
        self.platform = platform
        self.pools = pools
        self.layers = layers
        self.budgets = budgets or StageBudgets()
        # The agent's own CPU work (inputs, references, checks): bounded pools, few threads.
        self.host = host or HostWork(HostBudget.for_host(sum(pool.size for pool in pools)))
        # Builds the Triton launchers workers report building themselves (Triton 3.6; None
        # where launchers are not built per signature).
        self.launchers = launchers
        self.metrics = metrics
        self.harness = Harness(platform, layers, self.budgets, self.host, launchers, metrics)
        # Instant-verdict test mode (coordinator benchmarks): static checks only, nothing runs.
        # Its verdicts carry their own harness version, so no store ever mixes them with real ones.
        self.instant = instant
        self.harness_version = INSTANT_HARNESS_VERSION if instant else HARNESS_VERSION
        self.tier = Tier.CPU if platform.name == "cpu" else Tier.FULL
        self.inputs = CaseInputs(self.tier, secret, layers, public_cache_bytes)
        # The workers' own report of the device: datasheet peaks, for the physical floor.
        self.datasheet = SystemInfo(platform=platform.name)
        self._peaks: dict[str, Any] | None = None  # measured ceilings, for speed-of-light
        # Workers' claims of harness faults, settled by the problem's own solution.
        self.reproductions = Reproductions()

    def close(self) -> None:
        self.host.close()
        if self.launchers is not None:
            self.launchers.close()

    @property
    def system(self) -> SystemInfo:
        """The device as verdicts report it: the datasheet, with measured peaks where known."""
        if not self._peaks:
            return self.datasheet
        tflops = dict(self.datasheet.peak_tflops)
        tflops.update({k: float(v) for k, v in self._peaks.get("tflops", {}).items()})
        return replace(self.datasheet, peak_bandwidth_gbps=float(self._peaks["bandwidth_gbps"]),
                       peak_tflops=tflops, peak_source="measured")

    def learn_device(self, datasheet: SystemInfo) -> None:
        """The device as a worker describes it (model, driver, clocks, datasheet peaks)."""
        self.datasheet = datasheet

    def use_peaks(self, measured: dict[str, Any] | None) -> None:
        """Use measured ceilings (bandwidth GB/s, per-dtype TFLOP/s) for speed-of-light."""
        self._peaks = measured

    # ---- request validation and static stage -------------------------------------------------
    def resolve(self, req: EvalRequest) -> OperatorSpec:
        if req.platform and req.platform != self.platform.name:
            raise InvalidRequest(f"this agent serves platform {self.platform.name!r}, not "
                                 f"{req.platform!r}: the request was routed to the wrong agent")
        try:
            spec = operators.get(req.operator_id)
        except operators.UnknownOperatorError as exc:
            raise InvalidRequest(str(exc)) from None
        if req.operator_version is not None and req.operator_version != spec.version:
            raise InvalidRequest(f"{spec.id} is at version {spec.version} on this agent, "
                                 f"not {req.operator_version}")
        if self.platform.name not in spec.platforms:
            raise InvalidRequest(f"{spec.id} does not run on platform {self.platform.name}")
        if len(req.source) > MAX_SOURCE_BYTES:
            raise InvalidRequest(f"source is {len(req.source)} bytes; the limit is {MAX_SOURCE_BYTES}")
        if not req.source.strip():
            raise InvalidRequest("source is empty")
        return spec

    def _verdicts(self, spec: OperatorSpec, chash: str, req: EvalRequest,
                  t0: float, warnings: list[Finding]) -> MakeVerdict:
        """Verdicts for this request: what each repeats, its status and message its own;
        ``warnings`` (recorded findings that decide nothing) end every verdict's findings."""

        def make(status: Status, message: str, **details: Any) -> Verdict:
            system = self.system
            details["findings"] = (*details.get("findings", ()), *warnings)
            return Verdict(status=status, operator_id=spec.id, operator_version=spec.version,
                           candidate_hash=chash, request_id=req.request_id,
                           device_model=system.device_model,
                           harness_version=self.harness_version, message=message, system=system,
                           wall_seconds=time.monotonic() - t0, public_only=req.public_only,
                           **details)

        return make

    def _static(self, spec: OperatorSpec, source: bytes) -> tuple[str | None, str]:
        """(decoded source or None, error message). Policy violations are not handled here."""
        try:
            text = source.decode("utf-8")
        except UnicodeDecodeError as exc:
            return None, f"source is not valid UTF-8 ({exc.reason} at byte {exc.start})"
        try:
            tree = ast.parse(text)
        except SyntaxError as exc:
            return None, f"syntax error at line {exc.lineno}: {exc.msg}"
        except (RecursionError, MemoryError) as exc:
            # CPython's parser gives up on deep nesting with these (a line of a few thousand
            # unary minuses or calls, well under the size limit): the source's fault.
            return None, f"the source nests too deeply to parse ({type(exc).__name__})"
        except ValueError as exc:  # NUL bytes on Python 3.10 (a SyntaxError from 3.11.4 on)
            return None, f"the source does not parse: {exc}"
        defined = _static_entry_names(tree)
        missing = [e.name for e in spec.entry_points if e.name not in defined]
        if missing:
            return None, ("missing entry point(s): " + ", ".join(missing)
                          + f" (`kgb operators show {spec.id}` lists the signatures)")
        return text, ""

    def _static_stage(self, spec: OperatorSpec, source: bytes, verdict: MakeVerdict,
                      warnings: list[Finding]) -> str | Verdict:
        """The decoded source, or the verdict of a source that fails the static checks; the
        warning-level findings go to ``warnings`` (every later verdict records them)."""
        text, err = self._static(spec, source)
        if text is None:
            return verdict(Status.COMPILE_ERROR, err)
        if "static" not in self.layers:
            return text
        violations = static_policy.check(text, spec.kind)
        warnings += [Finding("static", v.rule, v.describe(), WARNING)
                     for v in violations if v.warning][:MAX_WARNINGS]
        rejected = [v for v in violations if not v.warning]
        if rejected:
            more = f" (and {len(rejected) - 1} more)" if len(rejected) > 1 else ""
            return verdict(
                Status.REJECTED, f"static policy: {rejected[0].describe()}{more}",
                findings=tuple(Finding("static", v.rule, v.describe()) for v in rejected[:20]))
        return text

    # ---- the pipeline ------------------------------------------------------------------------
    async def evaluate(self, req: EvalRequest, deadline: float,
                       progress: Callable[[Progress], None] | None = None) -> Verdict:
        """Evaluate ``req`` (already validated by :meth:`resolve`). ``deadline`` is a
        ``time.monotonic()`` instant; every stage ends ``margin_s`` before it."""
        stages = _Stages([], progress)
        try:
            verdict = await self._evaluate(req, deadline, stages)
        except asyncio.CancelledError:
            if self.metrics is not None:
                self.metrics.cancelled(_stage_seconds(stages.marks, time.monotonic()))
            raise
        if self.metrics is not None:
            self.metrics.evaluated(verdict.status, _stage_seconds(stages.marks, time.monotonic()))
        return verdict

    async def _evaluate(self, req: EvalRequest, deadline: float, stages: _Stages) -> Verdict:
        t0 = time.monotonic()
        spec = self.resolve(req)
        chash = candidate_id(req.source)
        warnings: list[Finding] = []
        verdict = self._verdicts(spec, chash, req, t0, warnings)
        stages.report(Stage.STATIC)
        text = self._static_stage(spec, req.source, verdict, warnings)
        if isinstance(text, Verdict):
            return text
        if self.instant:
            return verdict(Status.PASSED, "instant-verdict test mode: static checks passed; the "
                           "candidate was not run (harness " + self.harness_version + ")")
        # Inputs and references are made only for candidates about to get a worker (they stay in
        # memory until the verdict, and making them costs the CPU the running ones need).
        stages.report(Stage.QUEUED)
        admission = self.host.admission(sum(pool.size for pool in self.pools))
        try:
            await asyncio.wait_for(admission.acquire(), timeout=self._left(deadline))
        except TimeoutError:
            return verdict(Status.INFRA_ERROR, NO_WORKER)
        try:
            stages.enter("inputs")
            try:
                prepared = await self.host.prepare(self.inputs.prepare, spec, chash, text,
                                                   req.public_only)
            except HarnessFault as exc:  # the problem's code failed: the system's, not the model's
                log.warning("%s: making the cases failed: %s", spec.ref, exc)
                return verdict(Status.INFRA_ERROR, exc.describe(), log=exc.trace())
            stages.report(Stage.QUEUED)
            result, claim = await self._on_a_worker(prepared, req, deadline, t0, verdict, stages)
            if claim is None:
                return result
            return await self._settled(spec, claim, result, req, deadline, t0)
        finally:
            admission.release()

    async def _settled(self, spec: OperatorSpec, claim: WorkerClaim, claimed: Verdict,
                       req: EvalRequest, deadline: float, t0: float) -> Verdict:
        """The worker claimed a harness fault while timing: the problem's own solution on a
        fresh worker says whose it was (:mod:`device_agent.fault_reproduction`)."""
        settled = await self.reproductions.settle(
            spec.ref, claim, lambda: self._solution_run(spec, req, deadline))
        if settled.outcome is Outcome.REPRODUCED:
            log.warning("%s: %s; %s", spec.ref, claim.describe(reproduced=True), settled.describe())
            return replace(claimed, status=Status.INFRA_ERROR,
                           message=f"{claim.describe(reproduced=True)}; {settled.describe()}",
                           wall_seconds=time.monotonic() - t0)
        return replace(claimed, message=f"{claimed.message}; {settled.describe()}",
                       wall_seconds=time.monotonic() - t0)

    async def _solution_run(self, spec: OperatorSpec, req: EvalRequest,
                            deadline: float) -> tuple[Verdict, WorkerClaim | None]:
        """The problem's shipped solution on a fresh worker, public cases, timed (within the
        admission and deadline of the request that asked)."""
        sreq = replace(req, request_id=f"{req.request_id}/solution", source=spec.solution.encode(),
                       candidate_name="", skip_timing=False, public_only=True)
        chash, t0 = candidate_id(sreq.source), time.monotonic()
        make = self._verdicts(spec, chash, sreq, t0, [])
        try:
            p = await self.host.prepare(self.inputs.prepare, spec, chash, spec.solution, True)
        except HarnessFault as exc:
            return make(Status.INFRA_ERROR, exc.describe()), None
        return await self._on_a_worker(p, sreq, deadline, t0, make, _Stages([], None))

    def _left(self, deadline: float) -> float:
        return max(0.1, deadline - time.monotonic() - self.budgets.margin_s)

    async def _on_a_worker(self, p: Prepared, req: EvalRequest, deadline: float, t0: float,
                           verdict: MakeVerdict, stages: _Stages
                           ) -> tuple[Verdict, WorkerClaim | None]:
        """The candidate's run on the least loaded device's next worker; another worker (up
        to ``WORKER_ATTEMPTS``) when one dies before taking the job. With the verdict, the
        worker's claim of a harness fault while timing, if it made one."""
        result = verdict(Status.INFRA_ERROR, NO_WORKER)
        worker: Worker | None = None
        run: CandidateRun | None = None
        for attempt in range(1, WORKER_ATTEMPTS + 1):
            device = min(range(len(self.pools)),
                         key=lambda i: self.pools[i].busy + self.pools[i].waiting)
            pool = self.pools[device]
            try:
                worker = await asyncio.wait_for(pool.acquire(), timeout=self._left(deadline))
            except TimeoutError:
                return verdict(Status.INFRA_ERROR, NO_WORKER), None
            except WorkerStartError as exc:
                return verdict(Status.INFRA_ERROR, f"worker could not start: {exc}"), None
            if worker.ready is not None:
                self.learn_device(worker.ready.system)
            run = CandidateRun(self.harness, worker, device, pool.gate, p, verdict, stages.report,
                               system=self.system, datasheet=self.datasheet, deadline=deadline,
                               t0=t0, skip_timing=req.skip_timing)
            try:
                result = await run.run()
                break
            except WorkerLost as exc:  # the system's failure: another worker, same job
                log.warning("%s %s: worker %d lost before taking the job (%s); attempt %d of %d",
                            p.spec.ref, p.candidate_hash[:12], worker.pid, exc, attempt,
                            WORKER_ATTEMPTS)
                if self.metrics is not None:
                    self.metrics.worker_lost(device, "before_job")
                result = verdict(Status.INFRA_ERROR, f"{attempt} worker(s) died before taking "
                                 f"the candidate; last: {exc}")
            finally:
                stages.enter("cleanup")
                await pool.release(worker)
        log.info("%s %s %s in %.1fs (%s)%s", p.spec.ref, p.candidate_hash[:12], result.status.name,
                 result.wall_seconds, _stage_durations(stages.marks),
                 f"; {worker.cpu.describe()}" if worker is not None and worker.cpu is not None
                 else "")
        return result, run.claim if run is not None else None


def _stage_durations(marks: Sequence[tuple[str, float]]) -> str:
    """``static 0.0s, queued 1.2s, ...``: how long each reached stage lasted, in the order
    the stages were first reached."""
    return ", ".join(f"{n} {s:.1f}s" for n, s in _stage_seconds(marks, time.monotonic(),
                                                                 keep_done=True).items())


def _stage_seconds(marks: Sequence[tuple[str, float]], end: float,
                   keep_done: bool = False) -> dict[str, float]:
    """Seconds spent in each reached stage: a stage lasts until the next one is entered, and a
    stage entered twice (queued for admission, then for a worker) counts both spells. "done"
    only ends the stage before it (kept for the log with ``keep_done``)."""
    out: dict[str, float] = {}
    for (name, start), stop in zip(marks, [t for _, t in marks[1:]] + [end], strict=True):
        if name != "done" or keep_done:
            out[name] = out.get(name, 0.0) + stop - start
    return out
