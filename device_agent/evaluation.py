"""Evaluating one candidate: the trusted half of the pipeline, run inside the agent process.

Stages (each with its own deadline, all ending before the client's):

1. static   — size, UTF-8, syntax, entry points defined (in the agent; no candidate code runs)
2. inputs   — public and hidden cases; the fp64 references are computed here and never leave
3. load     — a warm worker imports the candidate               (``load_s``)
4. correctness — the worker runs every case and sends raw outputs back; compared here
                                                                  (``correctness_s``)
5. timing   — under the device's exclusive timing lock, candidate vs baseline (``timing_s``)

Candidate failures become verdicts; only request errors raise (:class:`InvalidRequest`).
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import hashlib
import hmac
import itertools
import logging
import random
import secrets
import signal
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

import torch

import operators
from device_agent import static_policy
from device_agent.codec import CodecError
from device_agent.device_gate import DeviceGate
from device_agent.host_work import HostBudget, HostWork
from device_agent.launchers import LauncherBuilder
from device_agent.layers import LAYERS as _LAYER_DOCS
from device_agent.platforms import Platform
from device_agent.profiling import DeviceTime
from device_agent.profiling import judge as judge_device_time
from device_agent.workers import Worker, WorkerPool, WorkerStartError
from operators.checking import Layout, check, same_bits
from operators.invoke import from_wire
from operators.spec import Call, Expected, Kind, OperatorSpec, Tier
from protos.records import (
    CaseResult,
    CaseTiming,
    EvalRequest,
    Finding,
    Progress,
    Stage,
    Status,
    SystemInfo,
    Verdict,
)

if TYPE_CHECKING:
    from device_agent.metrics import AgentMetrics

log = logging.getLogger(__name__)
_T = TypeVar("_T")

HARNESS_VERSION = "0.1.0"
INSTANT_HARNESS_VERSION = HARNESS_VERSION + "+instant"
# Anti-cheat layers an agent runs; each can be switched off to prove the others on their own.
LAYERS = tuple(_LAYER_DOCS)
PROBED_CASES = 2  # informative cases that also get a ghost replay and a determinism re-run
MAX_SOURCE_BYTES = 1 << 20
LOG_LIMIT = 8000
WORKER_ATTEMPTS = 3  # workers tried for one job when each dies before taking it
WORKER_ACK_S = 30.0  # a live worker acknowledges its job at once; silence this long is a loss
LAUNCH_BOUND_US = 10.0
FLOOR_MARGIN = 1.10  # a time under the datasheet floor by more than this is impossible


class InvalidRequest(ValueError):
    """The request itself is wrong (unknown operator, bad version, ...): INVALID_ARGUMENT."""


@dataclass(frozen=True)
class StageBudgets:
    """Per-stage deadlines in seconds (see docs/architecture.md). Each stage also ends
    ``margin_s`` before the client's deadline, so the client always receives a verdict."""

    load_s: float = 60.0
    correctness_s: float = 180.0
    timing_s: float = 240.0
    timing_case_budget_s: float = 2.0
    margin_s: float = 2.0


@dataclass
class _Prepared:
    spec: OperatorSpec
    candidate_hash: str
    source: str
    calls: list[Call]
    expected: list[tuple[Expected, ...]]
    names: list[str]
    hidden: list[bool]
    case_objs: list[Any] = field(default_factory=list)
    probes: frozenset[int] = frozenset()  # cases whose outputs a no-op could not produce
    # Replay probe per probed case: the same case on new contents (inputs, answer).
    replays: dict[int, tuple[Call, tuple[Expected, ...]]] = field(default_factory=dict)


def candidate_hash(source: bytes) -> str:
    return hashlib.sha256(source).hexdigest()


def public_seed(spec: OperatorSpec, case_name: str) -> int:
    """Seeds of public cases are public and fixed: anyone can reproduce them."""
    digest = hashlib.sha256(f"{spec.ref}/{case_name}".encode()).digest()
    return int.from_bytes(digest[:7], "little")


def hidden_seed(secret: bytes, spec: OperatorSpec, cand_hash: str) -> int:
    """Seed of the hidden cases: HMAC of the agent's secret over the problem and the candidate.
    Reproducible by this agent, unknowable to the submitter."""
    mac = hmac.new(secret, f"{spec.ref}\x00{cand_hash}".encode(), hashlib.sha256).digest()
    return int.from_bytes(mac[:7], "little")


def _call_to_wire(c: Call) -> dict[str, Any]:
    return {"entry": c.entry, "args": c.args, "kwargs": c.kwargs,
            "outputs": [[o.where, o.key] for o in c.outputs],
            "mutable": sorted(c.mutable, key=str), "out_buffers": sorted(c.out_buffers, key=str)}


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


def _tail(text: str, limit: int = LOG_LIMIT) -> str:
    return text if len(text) <= limit else "...\n" + text[-limit:]


class Evaluator:
    """Runs the pipeline for one agent: its platform, its device pools, its secret."""

    def __init__(self, platform: Platform, pools: list[WorkerPool], secret: bytes,
                 budgets: StageBudgets | None = None,
                 layers: frozenset[str] = frozenset(LAYERS),
                 public_cache_bytes: int = 2 << 30, *, instant: bool = False,
                 host: HostWork | None = None, launchers: LauncherBuilder | None = None) -> None:
        self.layers = layers
        # Builds the Triton launchers workers report building themselves (Triton 3.6; None
        # where launchers are not built per signature).
        self.launchers = launchers
        # The agent's own CPU work (inputs, references, checks): bounded pools, few threads.
        self.host = host or HostWork(HostBudget.for_host(sum(pool.size for pool in pools)))
        # Instant-verdict test mode (coordinator benchmarks): static checks only, nothing runs.
        # Its verdicts carry their own harness version, so no store ever mixes them with real ones.
        self.instant = instant
        self.harness_version = INSTANT_HARNESS_VERSION if instant else HARNESS_VERSION
        self.platform = platform
        self.pools = pools
        self.secret = secret
        self.budgets = budgets or StageBudgets()
        self.tier = Tier.CPU if platform.name == "cpu" else Tier.FULL
        # One gate per device (the pool's): checking shares it, each timed case holds it alone.
        self.gates = [pool.gate for pool in pools]
        self.system = SystemInfo(platform=platform.name)
        self.datasheet = self.system  # the workers' own report: datasheet peaks, for the floor
        self._peaks: dict[str, Any] | None = None
        self.public_cache_bytes = public_cache_bytes
        self._public_cache: dict[str, list[tuple[Any, Call, tuple[Expected, ...]]]] = {}
        self._public_lock = threading.Lock()  # guards the cache and the per-problem locks
        self._public_locks: dict[str, threading.Lock] = {}
        self.metrics: AgentMetrics | None = None  # set by the server when it exports metrics

    def close(self) -> None:
        self.host.close()
        if self.launchers is not None:
            self.launchers.close()

    def _launchers_built(self, msg: dict[str, Any]) -> int:
        """Hand the launchers a worker built itself to the agent's builder; returns how many."""
        reported = msg.get("launchers")
        if not isinstance(reported, list):
            return 0
        if self.launchers is not None:
            self.launchers.request(reported)
        return len(reported)

    def use_peaks(self, measured: dict[str, Any] | None) -> None:
        """Use measured ceilings (bandwidth GB/s, per-dtype TFLOP/s) for speed-of-light."""
        self._peaks = measured
        self.system = self._with_peaks(self.system)

    def _with_peaks(self, system: SystemInfo) -> SystemInfo:
        if not self._peaks:
            return system
        tflops = dict(system.peak_tflops)
        tflops.update({k: float(v) for k, v in self._peaks.get("tflops", {}).items()})
        return replace(system, peak_bandwidth_gbps=float(self._peaks["bandwidth_gbps"]),
                       peak_tflops=tflops, peak_source="measured")

    # ---- request validation and static stage -------------------------------------------------
    def resolve(self, req: EvalRequest) -> OperatorSpec:
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

    def _verdict(self, spec: OperatorSpec, chash: str, req: EvalRequest, status: Status,
                 message: str, t0: float, **kw: Any) -> Verdict:
        return Verdict(status=status, operator_id=spec.id, operator_version=spec.version,
                       candidate_hash=chash, request_id=req.request_id,
                       device_model=self.system.device_model, harness_version=self.harness_version,
                       message=message, system=self.system,
                       wall_seconds=time.monotonic() - t0, **kw)

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
        defined = _static_entry_names(tree)
        missing = [e.name for e in spec.entry_points if e.name not in defined]
        if missing:
            return None, ("missing entry point(s): " + ", ".join(missing)
                          + f" (`kgb operators show {spec.id}` lists the signatures)")
        return text, ""

    def _public(self, spec: OperatorSpec) -> list[tuple[Any, Call, tuple[Expected, ...]]]:
        """Inputs and fp64 references of the public cases: the same for every candidate of a
        problem, so computed once and kept (up to ``public_cache_bytes``, least recently used
        dropped first). Nothing here is ever mutated: workers get copies."""
        with self._public_lock:
            computing = self._public_locks.setdefault(spec.ref, threading.Lock())
        with computing:  # one computation per problem, without holding up other problems
            with self._public_lock:
                hit = self._public_cache.pop(spec.ref, None)
            if hit is None:
                hit = []
                for c in spec.public_cases(self.tier):
                    call = spec.make_call(c, torch.Generator().manual_seed(public_seed(spec, c.name)))
                    hit.append((c, call, spec.reference(call)))
            with self._public_lock:
                self._public_cache[spec.ref] = hit  # most recently used last
                while (len(self._public_cache) > 1
                       and sum(_entry_bytes(v) for v in self._public_cache.values())
                       > self.public_cache_bytes):
                    self._public_cache.pop(next(iter(self._public_cache)))
            return hit

    def _prepare(self, spec: OperatorSpec, chash: str, text: str) -> _Prepared:
        public = self._public(spec)
        cases = [(c, False, public_seed(spec, c.name)) for c, _, _ in public]
        calls: list[Call] = [call for _, call, _ in public]
        expected: list[tuple[Expected, ...]] = [exp for _, _, exp in public]
        names: list[str] = [c.name for c, _, _ in public]
        hidden: list[bool] = [False] * len(public)
        hseed = hidden_seed(self.secret, spec, chash)
        for i, c in enumerate(spec.hidden_cases(random.Random(hseed), self.tier)):
            seed = (hseed + 7919 * (i + 1)) & ((1 << 62) - 1)
            cases.append((c, True, seed))
            call = spec.make_call(c, torch.Generator().manual_seed(seed))
            calls.append(call)
            expected.append(spec.reference(call))
            names.append(f"hidden#{len(names)}")
            hidden.append(True)
        case_objs = [c for c, _, _ in cases]
        if spec.kind is Kind.RANDOM:  # probed for fresh samples on a second call
            probes = [i for i in range(len(calls))
                      if all(e.judge is not None and e.value.numel() >= RANDOM_PROBE_MIN
                             for e in expected[i])]
            probes = probes[:PROBED_CASES]
        else:
            # The first PROBED_CASES informative cases (each test compares a whole output).
            probes = list(itertools.islice(
                (i for i in range(len(calls))
                 if _informative(spec, case_objs[i], calls[i], expected[i])), PROBED_CASES))
        replays = {}
        if "replay" in self.layers and spec.kind is not Kind.RANDOM:
            for i in probes:
                seed = cases[i][2] ^ 0x5EED_5EED
                alt = spec.make_call(case_objs[i], torch.Generator().manual_seed(seed))
                if _same_layout(alt, calls[i]):
                    alt = _replay_call(calls[i], alt)
                    replays[i] = (alt, spec.reference(alt))
        return _Prepared(spec, chash, text, calls, expected, names, hidden, case_objs,
                         frozenset(probes), replays)

    # ---- the pipeline ------------------------------------------------------------------------
    async def evaluate(self, req: EvalRequest, deadline: float,
                       progress: Callable[[Progress], None] | None = None) -> Verdict:
        """Evaluate ``req`` (already validated by :meth:`resolve`). ``deadline`` is a
        ``time.monotonic()`` instant; every stage ends ``margin_s`` before it."""
        marks: list[tuple[str, float]] = []  # (stage, when it was entered): log and metrics
        try:
            verdict = await self._evaluate(req, deadline, progress, marks)
        except asyncio.CancelledError:
            if self.metrics is not None:
                self.metrics.cancelled(_stage_seconds(marks, time.monotonic()))
            raise
        if self.metrics is not None:
            self.metrics.evaluated(verdict.status, _stage_seconds(marks, time.monotonic()))
        return verdict

    async def _evaluate(self, req: EvalRequest, deadline: float,
                        progress: Callable[[Progress], None] | None,
                        marks: list[tuple[str, float]]) -> Verdict:
        t0 = time.monotonic()
        spec = self.resolve(req)
        chash = candidate_hash(req.source)

        def enter(stage: str) -> None:
            if not marks or marks[-1][0] != stage:
                marks.append((stage, time.monotonic()))

        def report(stage: Stage, detail: str = "", done: int = 0, total: int = 0) -> None:
            enter(stage.name.lower())
            if progress is not None:
                progress(Progress(stage, detail, done, total))

        report(Stage.STATIC)
        text, err = self._static(spec, req.source)
        if text is None:
            return self._verdict(spec, chash, req, Status.COMPILE_ERROR, err, t0)
        if "static" in self.layers:
            violations = static_policy.check(text, spec.kind)
            if violations:
                more = f" (and {len(violations) - 1} more)" if len(violations) > 1 else ""
                return self._verdict(
                    spec, chash, req, Status.REJECTED,
                    f"static policy: {violations[0].describe()}{more}", t0,
                    findings=tuple(Finding("static", v.rule, v.describe()) for v in violations[:20]))
        if self.instant:
            return self._verdict(spec, chash, req, Status.PASSED,
                                 "instant-verdict test mode: static checks passed; the candidate "
                                 "was not run (harness " + self.harness_version + ")", t0)
        # Inputs and references are made only for candidates about to get a worker (they stay in
        # memory until the verdict, and making them costs the CPU the running ones need).
        report(Stage.QUEUED)
        admission = self.host.admission(sum(pool.size for pool in self.pools))

        def left() -> float:
            return max(0.1, deadline - time.monotonic() - self.budgets.margin_s)

        no_worker = "no worker became free before the deadline"
        try:
            await asyncio.wait_for(admission.acquire(), timeout=left())
        except (TimeoutError, asyncio.TimeoutError):  # distinct classes on Python 3.10
            return self._verdict(spec, chash, req, Status.INFRA_ERROR, no_worker, t0)
        try:
            enter("inputs")
            prepared = await self.host.prepare(self._prepare, spec, chash, text)
            report(Stage.QUEUED)
            for attempt in range(1, WORKER_ATTEMPTS + 1):
                pool_index = min(range(len(self.pools)),
                                 key=lambda i: self.pools[i].busy + self.pools[i].waiting)
                pool = self.pools[pool_index]
                try:
                    worker = await asyncio.wait_for(pool.acquire(), timeout=left())
                except (TimeoutError, asyncio.TimeoutError):  # distinct classes on Python 3.10
                    return self._verdict(spec, chash, req, Status.INFRA_ERROR, no_worker, t0)
                except WorkerStartError as exc:
                    return self._verdict(spec, chash, req, Status.INFRA_ERROR,
                                         f"worker could not start: {exc}", t0)
                if worker.ready.get("system"):
                    self.datasheet = SystemInfo(**worker.ready["system"])
                    self.system = self._with_peaks(self.datasheet)
                try:
                    verdict = await self._run(worker, pool_index, prepared, req, deadline, t0,
                                              report)
                    break
                except _WorkerLost as exc:  # the system's failure: another worker, same job
                    log.warning("%s %s: worker %d lost before taking the job (%s); attempt %d "
                                "of %d", spec.ref, chash[:12], worker.pid, exc, attempt,
                                WORKER_ATTEMPTS)
                    if self.metrics is not None:
                        self.metrics.worker_lost(pool_index, "before_job")
                    verdict = self._verdict(
                        spec, chash, req, Status.INFRA_ERROR,
                        f"{attempt} worker(s) died before taking the candidate; last: {exc}", t0)
                finally:
                    enter("cleanup")
                    await pool.release(worker)
        finally:
            admission.release()
        log.info("%s %s %s in %.1fs (%s)%s", spec.ref, chash[:12], verdict.status.name,
                 verdict.wall_seconds, _stage_durations(marks),
                 f"; {worker.cpu.describe()}" if worker.cpu is not None else "")
        return verdict

    def _gate_timeout(self, deadline: float) -> float:
        """How long a candidate may wait for its device: until its request's own deadline."""
        return max(0.001, deadline - self.budgets.margin_s - time.monotonic())

    @staticmethod
    def _material_wait(waited: float, t0: float, deadline: float) -> bool:
        """Whether time spent waiting for the device could have cost the candidate its request
        deadline: at least a second and a tenth of the request's whole budget."""
        return waited >= max(1.0, 0.1 * (deadline - t0))

    def _stage_deadline(self, budget: float, deadline: float) -> float:
        return min(time.monotonic() + budget, deadline - self.budgets.margin_s)

    async def _run(self, worker: Worker, pool_index: int, p: _Prepared, req: EvalRequest,
                   deadline: float, t0: float,
                   report: Callable[..., None]) -> Verdict:
        spec = p.spec
        nonce = secrets.token_hex(16)
        module_name = f"kgb_candidate_{p.candidate_hash[:16]}"
        path = worker.workdir / f"{module_name}.py"
        path.write_text(p.source, encoding="utf-8")

        def verdict(status: Status, message: str, **kw: Any) -> Verdict:
            return self._verdict(spec, p.candidate_hash, req, status, message, t0, **kw)

        # [seconds spent waiting for the device gate (they extend stage deadlines), the start
        # of the wait in progress or 0]
        waits = [0.0, 0.0]

        async def recv(stage_deadline: float) -> dict[str, Any]:
            timeout = stage_deadline - time.monotonic()
            if timeout <= 0:
                raise TimeoutError
            msg = await asyncio.wait_for(worker.recv(), timeout=timeout)
            if msg.get("nonce") != nonce:
                raise _Forged(f"message without the run's nonce: type={msg.get('type')!r}")
            return msg

        async def died(stage: str) -> Verdict:
            try:
                code: int | None = await asyncio.wait_for(worker.proc.wait(), timeout=5)
            except (TimeoutError, asyncio.TimeoutError):  # distinct classes on Python 3.10
                code = None
            how = _describe_exit(code)
            return verdict(Status.RUNTIME_ERROR, f"worker {how} during {stage} without a result"
                           f"{worker.death_note()}", log=_tail(worker.log_tail()))

        results: list[CaseResult] = []
        stage = "load"
        report(Stage.LOAD)
        await self._hand_over(worker, nonce, {
            "type": "job", "nonce": nonce, "operator_id": spec.id, "path": str(path),
            "module_name": module_name, "n_calls": len(p.calls), "layers": sorted(self.layers)},
            self._stage_deadline(self.budgets.load_s, deadline))
        try:
            msg = await recv(self._stage_deadline(self.budgets.load_s, deadline))
            if msg.get("type") == "load_error":
                what = {"syntax": "does not parse", "import": "fails to import",
                        "missing_entry": "lacks an entry point"}.get(msg.get("kind", ""), "fails to load")
                return verdict(Status.COMPILE_ERROR, f"candidate {what}: {msg.get('message', '')}",
                               log=_tail(str(msg.get("traceback", ""))))
            if msg.get("type") != "loaded":
                return verdict(Status.RUNTIME_ERROR, f"unexpected worker message {msg.get('type')!r}")

            stage = "correctness"
            report(Stage.CORRECTNESS, "", 0, len(p.calls))
            correctness_deadline = self._stage_deadline(self.budgets.correctness_s, deadline)

            async def checked(fn: Callable[..., _T], *args: Any) -> _T:
                """The agent's own comparison of a case: its time is the agent's load, not the
                candidate's, so it extends the stage's deadline (as waiting for the device
                does); the request's own deadline still bounds it."""
                nonlocal correctness_deadline
                began = time.monotonic()
                try:
                    return await self.host.check(fn, *args)
                finally:
                    correctness_deadline = min(correctness_deadline + time.monotonic() - began,
                                               deadline - self.budgets.margin_s)
            case_seconds: list[float] = []
            dry_seconds = held_seconds = 0.0  # for the log: compiling off the gate, holding it
            own_launchers = 0  # for the log: Triton launchers the worker had to build itself
            dry_stopped = ""  # the first dry run that stopped early, for the log
            unstable: list[Finding] = []  # determinism: a second run disagreed with the first
            gate = self.gates[pool_index]
            for i in range(len(p.calls)):
                probe = i in p.probes
                # The case goes over, and the worker runs it dry (compiling its kernels), before
                # the device is asked for: the gate is held only while the device works.
                await asyncio.wait_for(
                    worker.send({"type": "call", "nonce": nonce, "index": i,
                                 "call": _call_to_wire(p.calls[i]),
                                 "warm": self.platform.compiles_kernels,
                                 "ghost": probe and "ghost" in self.layers
                                 and spec.kind is Kind.COMPUTE,
                                 "repeat": probe and "determinism" in self.layers,
                                 "replay": _call_to_wire(p.replays[i][0])
                                 if i in p.replays else None}),
                    timeout=max(0.001, correctness_deadline - time.monotonic()))
                msg = await recv(correctness_deadline)
                if msg.get("type") == "warmed" and msg.get("index") == i:
                    dry_seconds += float(msg.get("seconds", 0.0))
                    own_launchers += self._launchers_built(msg)
                    if msg.get("stopped") and not dry_stopped:
                        dry_stopped = f"; case {p.names[i]}'s dry run stopped: {msg['stopped']}"
                    asked = waits[1] = time.monotonic()
                    async with gate.shared(self._gate_timeout(deadline)), \
                            _ends_inside(worker):  # not while timing
                        # Waiting for the device is the agent's load, not the candidate's time.
                        waits[1] = 0.0
                        waits[0] += time.monotonic() - asked
                        correctness_deadline = min(correctness_deadline + time.monotonic() - asked,
                                                   deadline - self.budgets.margin_s)
                        held = time.monotonic()
                        await worker.send({"type": "run", "nonce": nonce, "index": i})
                        msg = await recv(correctness_deadline)
                        held_seconds += time.monotonic() - held
                    if msg.get("type") == "ran" and msg.get("index") == i:
                        msg = await recv(correctness_deadline)  # the outputs, sent off the gate
                kind = msg.get("type")
                if kind == "case_error":
                    name = p.names[int(msg.get("index", i))]
                    if msg.get("platform_limit"):
                        return verdict(Status.INFRA_ERROR,
                                       f"case {name}: the {self.platform.name} platform cannot run "
                                       f"this candidate ({msg.get('message', '')}); evaluate it on "
                                       "another platform"[:1500],
                                       log=_tail(str(msg.get("traceback", ""))))
                    compile_time = msg.get("compile") or msg.get("signature")
                    status = Status.COMPILE_ERROR if compile_time else Status.RUNTIME_ERROR
                    results.append(CaseResult(name=name, passed=False, hidden=p.hidden[i],
                                              mismatch=str(msg.get("message", ""))[:1000]))
                    what = ("wrong signature" if msg.get("signature") else
                            "a kernel fails to compile" if status is Status.COMPILE_ERROR else "raised")
                    crash = f"case {name}: {what}: {msg.get('message', '')}"
                    earlier = [r for r in results[:-1] if not r.passed]
                    if earlier:  # the first failure decides the status; the crash is recorded
                        status = Status.WRONG_ANSWER
                        crash = (f"{len(earlier)} case(s) wrong before a crash; first "
                                 f"{earlier[0].name}: {earlier[0].mismatch}; then {crash}")
                    return verdict(status, crash[:1500], cases=tuple(results),
                                   log=_tail(str(msg.get("traceback", ""))))
                if kind != "case" or msg.get("index") != i:
                    return verdict(Status.RUNTIME_ERROR, f"unexpected worker message {kind!r}")
                findings = self._runtime_findings(p, i, msg)
                findings += await checked(self._ghost_findings, p, i, msg)
                if findings:
                    await _quiet_send(worker, {"type": "stop", "nonce": nonce})
                    return verdict(Status.CHEAT_DETECTED,
                                   " ; ".join(f.evidence for f in findings)[:1500],
                                   cases=tuple(results), findings=findings)
                results.append(await checked(self._check_case, p, i, msg))
                if results[-1].passed and "repeat_outputs" in msg:
                    differs = await checked(self._determinism_finding, p, i, msg)
                    if differs is not None:
                        unstable.append(differs)
                if results[-1].passed and i in p.replays:
                    stale = await checked(self._replay_finding, p, i, msg)
                    if stale is not None:
                        unstable.append(stale)
                case_seconds.append(float(msg.get("seconds", 0.0)))
                report(Stage.CORRECTNESS, p.names[i], i + 1, len(p.calls))

            log.debug("%s %s correctness: %d cases, dry runs %.2fs, device held %.2fs, "
                      "waited for the device %.2fs, launchers built by the worker %d%s",
                      spec.ref, p.candidate_hash[:12], len(results), dry_seconds, held_seconds,
                      waits[0], own_launchers, dry_stopped[:300])
            failed = [r for r in results if not r.passed]
            if failed:
                await _quiet_send(worker, {"type": "stop", "nonce": nonce})
                first = failed[0]
                return verdict(Status.WRONG_ANSWER,
                               f"{len(failed)} of {len(results)} cases wrong; first {first.name}: "
                               f"{first.mismatch}"[:1500], cases=tuple(results))

            if unstable:
                await _quiet_send(worker, {"type": "stop", "nonce": nonce})
                return verdict(Status.WRONG_ANSWER, unstable[0].evidence[:1500],
                               cases=tuple(results), findings=tuple(unstable))

            stage = "timing"
            timings: tuple[CaseTiming, ...] = ()
            if req.skip_timing:
                await _quiet_send(worker, {"type": "stop", "nonce": nonce})
            elif not self.platform.timings_meaningful:
                await _quiet_send(worker, {"type": "stop", "nonce": nonce})
                timings = tuple(
                    CaseTiming(name=p.names[i], meaningful=False, median_us=s * 1e6, samples=1)
                    for i, s in enumerate(case_seconds[:3]))
            else:
                report(Stage.TIMING)
                timings, drifts, during = await self._time(worker, gate, p, nonce, recv,
                                                             deadline, waits)
                if during:
                    return verdict(Status.CHEAT_DETECTED, during[0].evidence[:1500],
                                   cases=tuple(results), timings=timings, findings=during)
                too_fast = self._below_floor(p.spec, timings) if "timing" in self.layers else ()
                if too_fast:
                    return verdict(Status.CHEAT_DETECTED, too_fast[0].evidence,
                                   cases=tuple(results), timings=timings, findings=too_fast)
                drift = next((d for d in drifts if d), None) if "timing" in self.layers else None
                if drift is not None:
                    return verdict(Status.WRONG_ANSWER, drift, cases=tuple(results),
                                   timings=timings,
                                   findings=(Finding("timing", "recheck-after-timing", drift),))
            report(Stage.DONE)
            return verdict(Status.PASSED, f"all {len(results)} cases passed", cases=tuple(results),
                           timings=timings)
        except (TimeoutError, asyncio.TimeoutError):  # distinct classes on Python 3.10
            if waits[1] or (self._material_wait(waits[0], t0, deadline)
                            and time.monotonic() >= deadline - self.budgets.margin_s - 0.5):
                # The request's own deadline ran out while the candidate waited for the device:
                # an overloaded agent, never the candidate's fault. A candidate that hangs
                # through the deadline after a negligible wait is the candidate's TIMEOUT.
                return verdict(Status.INFRA_ERROR,
                               f"{stage} stage: the request's deadline passed after "
                               f"{waits[0] + (time.monotonic() - waits[1] if waits[1] else 0):.0f}"
                               " s waiting for the device; retry on a less busy "
                               "agent", cases=tuple(results))
            return verdict(Status.TIMEOUT, f"{stage} stage passed its deadline; worker killed",
                           cases=tuple(results), log=_tail(worker.log_tail()))
        except (EOFError, asyncio.IncompleteReadError, ConnectionError):
            return await died(stage)
        except CodecError as exc:
            return verdict(Status.RUNTIME_ERROR, f"malformed message from worker: {exc}",
                           cases=tuple(results), log=_tail(worker.log_tail()))
        except _Forged as exc:
            return verdict(Status.CHEAT_DETECTED, "result channel carried a forged message",
                           cases=tuple(results),
                           findings=(Finding("process", "result-channel-nonce", str(exc)),))
        except _TimingFailed as exc:
            return verdict(Status.RUNTIME_ERROR, f"timing failed: {exc.message}",
                           cases=tuple(results), log=_tail(exc.traceback))

    @staticmethod
    async def _hand_over(worker: Worker, nonce: str, job: dict[str, Any], deadline: float) -> None:
        """Give ``worker`` its job and wait for its acknowledgement, sent before any candidate
        code runs: a worker that dies or stalls before it is lost to the system, never the
        candidate's fault (raises :class:`_WorkerLost`)."""
        try:
            await worker.send(job)
            msg = await asyncio.wait_for(worker.recv(), timeout=max(0.001, min(
                WORKER_ACK_S, deadline - time.monotonic())))
        except (EOFError, asyncio.IncompleteReadError, ConnectionError, CodecError) as exc:
            raise _WorkerLost(f"{type(exc).__name__}, worker {_describe_exit(worker.proc.returncode)}"
                              f"{worker.death_note()}") from None
        except (TimeoutError, asyncio.TimeoutError):  # distinct classes on Python 3.10
            raise _WorkerLost(f"no acknowledgement within {WORKER_ACK_S:.0f}s") from None
        if msg.get("type") != "accepted" or msg.get("nonce") != nonce:
            raise _WorkerLost(f"unexpected first message {msg.get('type')!r}")

    def _runtime_findings(self, p: _Prepared, i: int, msg: dict[str, Any]) -> tuple[Finding, ...]:
        """What the worker's runtime layers saw during case ``i`` (empty when nothing)."""
        found: list[Finding] = []
        ops = [str(o) for o in (msg.get("guard") or [])]
        if ops and "runtime" in self.layers:
            listed = ", ".join(ops[:8])
            found.append(Finding(
                "runtime", "dispatch-guard",
                f"case {p.names[i]}: the entry point computed with torch ({listed}) outside "
                "Triton kernels; compute the answer in your own Triton kernels"))
        tampered = [str(t) for t in (msg.get("integrity") or [])]
        if tampered and "integrity" in self.layers:
            found.append(Finding(
                "integrity", "harness-tampered",
                f"case {p.names[i]}: the candidate changed the harness: " + "; ".join(tampered[:5])
                + ". Candidates may not patch torch, triton, timers or the harness, change "
                "numerics flags, or leave threads running"))
        if ("launches" in self.layers and p.spec.kind is Kind.COMPUTE
                and int(msg.get("own_launches", 0)) == 0 and _has_elements(msg.get("outputs"))
                # Doing nothing may be the right answer (saxpy with alpha = 0 leaves y as it
                # is, as cuBLAS does): only a case a no-op would fail demands a launch.
                and _informative(p.spec, p.case_objs[i], p.calls[i], p.expected[i])):
            found.append(Finding(
                "launches", "no-own-kernel",
                f"case {p.names[i]}: produced outputs without launching any @triton.jit kernel "
                "defined in the candidate; the answer must come from its own Triton kernels"))
        return tuple(found)

    def _ghost_findings(self, p: _Prepared, i: int, msg: dict[str, Any]) -> tuple[Finding, ...]:
        """Outputs still right with the candidate's own launches skipped: the answer came from
        somewhere other than its kernels (torch, a cache, the host)."""
        ghost = msg.get("ghost_outputs")
        if "ghost" not in self.layers or not isinstance(ghost, list):
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

    def _determinism_finding(self, p: _Prepared, i: int, msg: dict[str, Any]) -> Finding | None:
        """A second run, with freed memory refilled between the two, must agree with the first
        (bitwise where the problem demands it, else within the case's tolerance)."""
        first, second = msg.get("outputs"), msg.get("repeat_outputs")
        name = p.names[i]
        if not isinstance(second, list) or not isinstance(first, list) or len(second) != len(first):
            return Finding("determinism", "second-run-failed",
                           f"case {name}: the candidate failed when run a second time on the "
                           "same inputs")
        if p.spec.kind is Kind.RANDOM:
            # A random op must draw fresh samples on every call (PyTorch's generator advances).
            pairs = [(a, b) for a, b in zip(first, second, strict=True)
                     if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)]
            if pairs and all(a.shape == b.shape and same_bits(a, b) for a, b in pairs):
                return Finding("determinism", "repeats-samples",
                               f"case {name}: two calls on the same inputs returned the very same "
                               "samples; a random op must draw new ones on every call (advance "
                               "your seed or offset between calls)")
            return None
        for o, a, b, exp in zip(p.calls[i].outputs, first, second, p.expected[i], strict=True):
            if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) \
                    or not exp.by_value:
                continue
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
                               f"inputs ({detail}); the kernel reads memory it never wrote or "
                               "races")
        return None

    def _replay_finding(self, p: _Prepared, i: int, msg: dict[str, Any]) -> Finding | None:
        """The case run again in the *same* buffers refilled with new contents must give the
        new answer: a result cached by address, shape or object identity gives the old one."""
        alt, expected = p.replays[i]
        got = msg.get("replay_outputs")
        name = p.names[i]
        if not isinstance(got, list) or len(got) != len(expected):
            return Finding("replay", "second-call-failed",
                           f"case {name}: the candidate failed when called again on the same "
                           "buffers with new contents")
        for o, out, exp in zip(alt.outputs, got, expected, strict=True):
            m = check(from_wire(out), exp, p.spec.tolerance(p.case_objs[i], exp.dtype))
            if m is not None:
                return Finding("replay", "stale-result",
                               f"case {name}: called again on the same buffers refilled with new "
                               f"values, {o.describe()} is wrong ({m.summary}); results must not "
                               "be cached by pointer, shape or object")
        return None

    def _check_case(self, p: _Prepared, i: int, msg: dict[str, Any]) -> CaseResult:
        call, expected, name = p.calls[i], p.expected[i], p.names[i]
        outs = msg.get("outputs")
        if not isinstance(outs, list) or len(outs) != len(expected):
            return CaseResult(name, False, p.hidden[i], "worker returned the wrong number of outputs")
        case = p.case_objs[i]
        shared = msg.get("layouts")
        if not isinstance(shared, list) or len(shared) != len(expected):
            shared = [None] * len(expected)
        for o, got, exp, lay in zip(call.outputs, outs, expected, shared, strict=True):
            got = from_wire(got)
            if isinstance(got, dict):
                return CaseResult(name, False, p.hidden[i],
                                  f"{o.describe()}: expected a torch.Tensor, got "
                                  f"{got.get('not_a_tensor')} ({got.get('repr', '')})")
            layout = _layout(lay)
            if layout is None and exp.view_of is not None and isinstance(got, torch.Tensor) \
                    and got.numel() > 0:
                return CaseResult(name, False, p.hidden[i],
                                  f"{o.describe()}: the worker did not say where it lives")
            m = check(got, exp, p.spec.tolerance(case, exp.dtype), layout)
            if m is not None:
                return CaseResult(name, False, p.hidden[i], f"{o.describe()}: {m.summary}"[:1500],
                                  max_abs_error=m.max_abs_error, bad_elements=m.bad,
                                  total_elements=m.total)
        post = msg.get("post_inputs") or {}
        for key, before in call.tensor_args():
            if key in call.mutable:
                continue
            after = post.get(str(key))
            if not isinstance(after, torch.Tensor) or not same_bits(before, after):
                return CaseResult(name, False, p.hidden[i],
                                  f"input argument {key!r} was modified; it must stay intact")
        return CaseResult(name, True, p.hidden[i])

    async def _time(self, worker: Worker, gate: DeviceGate, p: _Prepared, nonce: str,
                    recv: Callable[[float], Any], deadline: float, waits: list[float],
                    ) -> tuple[tuple[CaseTiming, ...], list[str | None], tuple[Finding, ...]]:
        """Per benchmark case: the worker makes its input sets while the device is shared, then
        measures while this agent holds the device alone, then re-checks its outputs. Returns
        the timings, per case how the outputs after timing differ from the reference (None where
        they agree), and findings made while timing (harness tampering, reported times the wall
        clock cannot contain)."""
        bench = list(p.spec.benchmark_cases())
        seeds = [secrets.randbits(48) for _ in bench]
        timing_deadline = self._stage_deadline(self.budgets.timing_s, deadline)
        await worker.send({"type": "time", "nonce": nonce, "n_cases": len(bench),
                           "budget_s": self.budgets.timing_case_budget_s, "l2_bytes": 0})
        out: list[CaseTiming] = []
        drifts: list[str | None] = []  # per case: how the outputs after timing differ
        found: list[Finding] = []
        # The re-check call runs under the device's kernel profiler (the profile layer).
        profile = ("profile" in self.layers and p.spec.kind is Kind.COMPUTE
                   and bool(getattr(self.platform, "profiles_device", False)))

        async def expect(kind: str, index: int) -> dict[str, Any]:
            msg: dict[str, Any] = await recv(timing_deadline)
            if msg.get("type") == "timing_error":
                raise _TimingFailed(str(msg.get("message", "")), str(msg.get("traceback", "")))
            if msg.get("type") != kind or msg.get("index") != index:
                raise _TimingFailed(f"unexpected worker message {msg.get('type')!r}", "")
            return msg

        @contextlib.asynccontextmanager
        async def holding(mode: Callable[[float], Any]) -> AsyncIterator[tuple[float, float]]:
            """Hold the gate in ``mode`` (shared or exclusive); yields (asked, got). Time spent
            waiting is the agent's load: it extends the stage's deadline."""
            nonlocal timing_deadline
            asked = waits[1] = time.monotonic()
            async with mode(self._gate_timeout(deadline)), _ends_inside(worker):
                got = time.monotonic()
                waits[1] = 0.0
                waits[0] += got - asked
                timing_deadline = min(timing_deadline + got - asked,
                                      deadline - self.budgets.margin_s)
                yield asked, got

        for index, (case, seed) in enumerate(zip(bench, seeds, strict=True)):
            # The worker makes the input sets on the device while it is shared (on the cpu
            # platform, at "prepare", without the gate).
            t_build = time.monotonic()
            # On a compiling platform the worker first runs the case dry on benchmark-sized
            # allocations, so no kernel compiles while the device is held alone.
            await worker.send({"type": "prepare", "nonce": nonce, "index": index, "seed": seed,
                               "warm": self.platform.compiles_kernels})
            built = await expect("built", index)
            self._launchers_built(built)
            async with holding(gate.shared) as (asked, t_upload):
                await worker.send({"type": "upload", "nonce": nonce, "index": index})
                await expect("prepared", index)
            async with holding(gate.exclusive) as (asked_x, went):
                await worker.send({"type": "go", "nonce": nonce, "index": index})
                msg = await recv(timing_deadline)
                wall = time.monotonic() - went
            if self.metrics is not None:  # outside the exclusive window, which is being timed
                self.metrics.timing_lock_waited(self.gates.index(gate), went - asked_x)
            if msg.get("type") == "timing_error":
                raise _TimingFailed(str(msg.get("message", "")), str(msg.get("traceback", "")))
            if msg.get("type") != "timing" or msg.get("index") != index:
                raise _TimingFailed(f"unexpected worker message {msg.get('type')!r}", "")
            # One more call on pristine inputs, checked against the reference in the worker, with
            # the device shared: it does not hold up other timers.
            async with holding(gate.shared) as (asked_r, t_recheck):
                await worker.send({"type": "recheck", "nonce": nonce, "index": index,
                                   "profile": profile})
                rmsg = await recv(timing_deadline)
            if rmsg.get("type") == "timing_error":
                raise _TimingFailed(str(rmsg.get("message", "")), str(rmsg.get("traceback", "")))
            if rmsg.get("type") != "rechecked" or rmsg.get("index") != index:
                raise _TimingFailed(f"unexpected worker message {rmsg.get('type')!r}", "")
            log.debug("%s %s timing %s: build %.2fs (dry run %.2fs%s), upload wait %.2fs + %.2fs, "
                      "exclusive wait %.2fs + held %.2fs (measured %.2fs, %d samples), recheck "
                      "wait %.2fs + %.2fs", p.spec.ref, p.candidate_hash[:12], case.name,
                      asked - t_build, float(built.get("seconds", 0.0)),
                      f", stopped: {built['stopped']}" if built.get("stopped") else "",
                      t_upload - asked, asked_x - t_upload, went - asked_x, wall,
                      float(msg.get("wall_s", 0.0)), int(msg.get("samples", 0)),
                      t_recheck - asked_r, time.monotonic() - t_recheck)
            drift = rmsg.get("drift")
            drifts.append(str(drift)[:1500] if drift is not None else None)
            if profile and isinstance(rmsg.get("device_time"), dict):
                device_time = DeviceTime.from_wire(rmsg["device_time"])
                log.debug("%s %s %s: own kernels %.0f of %.0f µs device time", p.spec.ref,
                          p.candidate_hash[:12], case.name, device_time.own_us,
                          device_time.total_us)
                evidence = judge_device_time(device_time, case.name)
                if evidence is not None:
                    found.append(Finding("profile", "device-time-elsewhere", evidence))
            tampered = list(dict.fromkeys(
                str(t) for t in (msg.get("integrity") or []) + (rmsg.get("integrity") or [])))
            if tampered and "integrity" in self.layers:
                found.append(Finding("integrity", "harness-tampered",
                                     f"while timing {case.name}: " + "; ".join(tampered[:5])))
            reported_s = float(msg.get("samples_sum_us", 0.0)) * 1e-6
            if "timing" in self.layers and reported_s > wall * 1.02 + 0.001:
                found.append(Finding(
                    "timing", "wall-clock-mismatch",
                    f"while timing {case.name}: the worker reported {reported_s * 1e3:.1f} ms of "
                    f"timed calls within {wall * 1e3:.1f} ms of the agent's wall clock"))
            med = float(msg["median_us"])
            base = float(msg["baseline_median_us"])
            out.append(CaseTiming(
                name=case.name, meaningful=True, median_us=med,
                ci_low_us=float(msg["ci_low_us"]), ci_high_us=float(msg["ci_high_us"]),
                samples=int(msg["samples"]), baseline_median_us=base,
                speedup=base / med if med > 0 else None,
                sol_percent=self._sol_percent(p.spec, case, med),
                launch_bound=med < LAUNCH_BOUND_US,
                throttled_discarded=int(msg.get("throttled_discarded", 0)),
                sm_clock_mhz=_float_or_none(msg.get("sm_clock_mhz")),
                temperature_c=_float_or_none(msg.get("temperature_c"))))
            if found or (drifts[-1] is not None and "timing" in self.layers):
                break  # the verdict is decided: the remaining cases need no device time
        return tuple(out), drifts, tuple(found)

    def _floor_us(self, spec: OperatorSpec, case: Any) -> float | None:
        """The least time the case can take by the *datasheet* peaks plus ``FLOOR_MARGIN`` (never
        the measured peaks, which are lower): unique bytes over bandwidth, FLOPs over rate."""
        bw = self.datasheet.peak_bandwidth_gbps
        if not bw:
            return None
        cost = spec.cost(case)
        floor_s = cost.bytes / (bw * 1e9 * FLOOR_MARGIN)
        rate = self.datasheet.peak_tflops.get(cost.dtype)
        if rate and cost.flops:
            floor_s = max(floor_s, cost.flops / (rate * 1e12 * FLOOR_MARGIN))
        return floor_s * 1e6

    def _below_floor(self, spec: OperatorSpec, timings: tuple[CaseTiming, ...]) -> tuple[Finding, ...]:
        """A time the hardware cannot reach is evidence of work hidden from the timer."""
        cases = {c.name: c for c in spec.benchmark_cases()}
        found = []
        for t in timings:
            floor = self._floor_us(spec, cases[t.name]) if t.name in cases else None
            if t.meaningful and t.median_us is not None and floor is not None and t.median_us < floor:
                found.append(Finding(
                    "timing", "below-physical-floor",
                    f"case {t.name}: median {t.median_us:.2f} us is below the physical floor of "
                    f"{floor:.2f} us (datasheet peaks with a {FLOOR_MARGIN - 1:.0%} margin, "
                    "unique bytes only): work is hidden from the timer"))
        return tuple(found)

    def _sol_percent(self, spec: OperatorSpec, case: Any, median_us: float) -> float | None:
        bw = self.system.peak_bandwidth_gbps
        if not bw or median_us <= 0:
            return None
        cost = spec.cost(case)
        floor_s = cost.bytes / (bw * 1e9)
        rate = self.system.peak_tflops.get(cost.dtype)
        if rate and cost.flops:
            floor_s = max(floor_s, cost.flops / (rate * 1e12))
        return 100.0 * floor_s / (median_us * 1e-6)


class _WorkerLost(Exception):
    """A worker died (or stalled) before acknowledging its job: no candidate code had run."""


class _Forged(Exception):
    pass


@contextlib.asynccontextmanager
async def _ends_inside(worker: Worker) -> AsyncIterator[None]:
    """Inside a hold on the device: a worker that fails there (a deadline, a forged or malformed
    message, a crash) is killed there, and the hold is given back only after it exited. Its call
    may still be running on the device (a kernel that never returns) and its context's teardown
    uses the device: neither may overlap a case that a neighbour times next."""
    try:
        yield
    except (EOFError, asyncio.IncompleteReadError, ConnectionError):
        # The worker is gone already: let its shim report how it died before the kill.
        await worker.end(grace=1.0)
        raise
    except BaseException:
        await worker.end()
        raise


class _TimingFailed(Exception):
    def __init__(self, message: str, traceback: str) -> None:
        super().__init__(message)
        self.message = message
        self.traceback = traceback


async def _quiet_send(worker: Worker, msg: dict[str, Any]) -> None:
    try:
        await worker.send(msg)
    except (ConnectionError, OSError):
        pass


def _informative(spec: OperatorSpec, case: Any, call: Call, expected: tuple[Expected, ...]) -> bool:
    """Whether a candidate that does nothing would fail this case: every output has elements
    and differs from what doing nothing leaves there (the poison, or an in-place argument's
    original value). Only such cases can show that the answer came from the kernels."""
    from operators.checking import poison_value

    if not expected or not all(e.by_value and e.python is None for e in expected):
        return False
    args = dict(call.tensor_args())
    for o, exp in zip(call.outputs, expected, strict=True):
        if exp.value.numel() == 0:
            return False
        untouched = args.get(o.key) if o.where == "arg" and o.key in call.mutable else None
        if untouched is None:
            untouched = torch.full(tuple(exp.value.shape), poison_value(exp.dtype), dtype=exp.dtype)
        if check(untouched, exp, spec.tolerance(case, exp.dtype)) is None:
            return False
    return True


RANDOM_PROBE_MIN = 64  # elements: two honest draws of this many never coincide


def _layout(wire: Any) -> Layout | None:
    """The worker's ``[view_of, offset]`` for one output (None: not a tensor, or unknown)."""
    if not (isinstance(wire, list) and len(wire) == 2 and isinstance(wire[1], int)
            and (wire[0] is None or isinstance(wire[0], int | str))):
        return None
    return Layout(wire[0], wire[1])


def _entry_bytes(entry: list[tuple[Any, Call, tuple[Expected, ...]]]) -> int:
    total = 0
    for _, call, exp in entry:
        total += sum(t.numel() * t.element_size() for _, t in call.tensor_args())
        for e in exp:
            total += e.value.numel() * e.value.element_size()
            if e.scale is not None:
                total += e.scale.numel() * e.scale.element_size()
    return total


def _same_layout(a: Call, b: Call) -> bool:
    """Whether ``a``'s tensors can be copied into ``b``'s buffers (same keys, shapes, dtypes)."""
    ta, tb = dict(a.tensor_args()), dict(b.tensor_args())
    return ta.keys() == tb.keys() and all(
        ta[k].shape == tb[k].shape and ta[k].dtype == tb[k].dtype for k in ta)


def _replay_call(first: Call, alt: Call) -> Call:
    """What a replay really runs: ``alt``'s top-level tensors copied into the first call's
    buffers, every other argument — scalars, index tensors inside a list — the first call's
    own, since nothing refills those. The expected answer is computed from this call (from
    ``alt`` alone, an honest index_put with new index values in ``alt`` was flagged)."""
    new = dict(alt.tensor_args())
    args = tuple(new[i] if isinstance(a, torch.Tensor) else a for i, a in enumerate(first.args))
    kwargs = {k: new[k] if isinstance(v, torch.Tensor) else v for k, v in first.kwargs.items()}
    return Call(first.entry, args, kwargs, first.outputs, first.mutable, first.out_buffers)


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


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


def _has_elements(outputs: Any) -> bool:
    """Whether any returned output tensor has elements (empty outputs need no kernel)."""
    if not isinstance(outputs, list):
        return False
    return any(isinstance(o, torch.Tensor) and o.numel() > 0 for o in outputs)


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "stopped answering"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}"
    return f"exited with code {code}"
