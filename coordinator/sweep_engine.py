"""The sweep engine: a spec's trajectories on Ray, judged by an agent fleet, each exactly once.

Who does what (one Ray cluster; the driver is the ``kgb sweep run`` process):

* :class:`StoreWriter` — writes the run's model calls and results to its SQLite store, pinned to
  the driver's node. Model calls are group-committed: the calls that arrive while one commit is
  being fsynced go into the next, so persist-before-use costs one fsync per batch, not per call.
* :class:`FleetRouter` — the sweep's one :class:`~coordinator.fleet.Fleet` (agents from the spec,
  plus any that register on ``registry_port``), pinned to the driver's node. Before asking an
  agent it looks for a stored verdict from an agent of the same device model and harness
  version (never evaluate twice) and it stores each new verdict (and any spot-check dispute)
  before returning it, both on its own connection to the store; it bounds the evaluations in
  flight by the fleet's capacity. Its fleet checks every verdict against the request and
  spot-checks the spec's ``[fleet] spot_check`` fraction of PASSED verdicts (docs/fleet.md).
* :class:`Generator` — a few per model endpoint (:func:`generator_count`: one per node, and
  one per ``GENERATIONS_PER_GENERATOR`` generations in flight, so no event loop is the
  bottleneck), each with its share of the endpoint's concurrency and rate limits (the shares
  add up to the endpoint's exactly), and one for the candidate methods; spread over the
  cluster's nodes. Each runs many trajectories as asyncio tasks; the driver gives each new
  trajectory to the endpoint's least loaded generator.
* the driver (:func:`run_sweep`) — plans, skips what the store says is finished, hands out
  trajectories with at most ``generation_per_endpoint`` in flight per endpoint, takes results in
  completion order, stores them (batched), and feeds metrics and the progress bar. No global
  state: everything hangs off the objects one call creates.

Resume: trajectories with a stored result are skipped, except those that ended ``INFRA_ERROR``
(the system's failure, run again). An unfinished trajectory is started again with the calls
the store holds for it; :class:`~coordinator.recorded_provider.RecordedProvider` replays them
without sending (zero tokens), and its candidates' verdicts come from the store. The sweep
budget starts from what the run's stored calls billed.

Stopping (Ctrl-C, ``kgb sweep cancel``): no new trajectory and no new model call starts; calls
already sent are awaited and stored (they are paid for), then in-flight work is abandoned — it is
resumable. A second Ctrl-C stops at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray

import operators
from coordinator.fleet import AgentState, Fleet, FleetConfig
from coordinator.recorded_provider import RecordedProvider
from coordinator.registry_service import RegistryAccess
from coordinator.store import DB_NAME, Store, TrajectoryKey, TrajectoryResult
from coordinator.sweep_spec import PlannedTrajectory, SweepSpec, parse_spec
from generators.base import Candidate, Method
from generators.budget import Budget
from generators.evaluation import candidate_hash, infra_verdict
from generators.llm import CallStatus, LLMCall, Prompt
from generators.providers.base import EndpointConfig, Provider
from generators.trajectory import EndReason, Trajectory, TrajectoryContext, TrajectoryMethod
from protos.records import Status, Verdict
from protos.security import ClientAuthFiles

log = logging.getLogger(__name__)

CANDIDATES = ""  # the generator of candidate methods (reference, replay): no endpoint
MAX_SHARDS = 8  # generators per endpoint chosen for the cluster's nodes, at most
# An event loop kept this many generations in flight before its latency grew (on the 2-core dev
# box one generator held 1,200 at 2,660 trajectories/min, two at 3,120: docs/BENCHMARKS.md).
GENERATIONS_PER_GENERATOR = 600
GENERATOR_START_S = 120.0  # a generator pinned to a node must start within this
CALL_BATCH_S = 0.02  # a generator's model calls are sent to the store writer in 20 ms batches
STATE_POLL_S = 2.0
GC_YOUNG_THRESHOLD = 50_000  # allocations between young-generation collections (Python: 700)


class SweepStopped(Exception):
    """A trajectory was abandoned because the sweep is stopping (it is resumable)."""


# -- what travels back to the driver ------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """One trajectory as the driver sees it: the stored result's headline and, for metrics,
    the calls sent now (slimmed: no prompt or text) and the verdicts obtained."""

    planned: PlannedTrajectory
    result: TrajectoryResult | None          # None: failed or stopped (resumable)
    calls: tuple[LLMCall, ...] = ()          # calls sent in this process (replayed ones excluded)
    verdicts: tuple[tuple[Verdict, bool], ...] = ()  # (slim verdict, taken from the store)
    candidates: tuple[tuple[str, str], ...] = ()  # (hash, source) of the result's candidates
    error: str = ""                          # why result is None
    node: str = ""                           # the Ray node that ran it


@dataclass
class SweepProgress:
    """Running totals, handed to ``on_progress`` after every trajectory."""

    planned: int = 0
    skipped: int = 0          # finished before this process started (resume)
    done: int = 0             # finished by this process
    solved: int = 0
    failed: int = 0           # raised (system errors); resumable
    infra: int = 0            # ended INFRA_ERROR; a resume runs them again
    tokens: int = 0           # billed by calls sent by this process
    cost_usd: float = 0.0
    calls_sent: int = 0
    in_flight: int = 0
    evaluations: int = 0
    verdicts_reused: int = 0
    by_end: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    nodes: set[str] = field(default_factory=set)
    started: float = field(default_factory=time.monotonic)

    @property
    def remaining(self) -> int:
        return self.planned - self.skipped - self.done - self.failed


@dataclass(frozen=True)
class SweepOptions:
    """How one process runs a spec (what is not the spec's business)."""

    run_id: str
    store_dir: Path
    spec_text: str
    spec_source: str
    spec_dir: str = "."                     # relative paths in the spec are relative to this
    ray_address: str | None = None          # join this cluster; None: start a local one
    ray_num_cpus: int | None = None
    fleet: FleetConfig = FleetConfig()
    registry_port: int | None = None        # serve the agent registry here (0: a free port)
    registry_host: str = "127.0.0.1"
    registry_access: RegistryAccess = RegistryAccess()  # TLS and tokens of the registry
    agent_auth: ClientAuthFiles | None = None  # TLS and token for agents without their own
    eval_timeout_s: float = 900.0
    wait_for_agents_s: float = 60.0
    resume: bool = False


def store_path(store_dir: Path) -> Path:
    return Path(store_dir) / DB_NAME


def _slim_call(call: LLMCall) -> LLMCall:
    return dataclasses.replace(call, prompt=Prompt(messages=(), template=call.prompt.template,
                                                   operator_id=call.prompt.operator_id),
                               text="", extra={})


def _slim_verdict(v: Verdict) -> Verdict:
    return Verdict(status=v.status, operator_id=v.operator_id, operator_version=v.operator_version,
                   candidate_hash=v.candidate_hash, device_model=v.device_model,
                   harness_version=v.harness_version, wall_seconds=v.wall_seconds)


# -- the store writer ------------------------------------------------------------------------------


def quiet_gc() -> None:
    """For a long-running sweep process: what exists once it has started (modules, the problem
    registry, Ray's own objects) is frozen out of the cyclic collector, and the young generation
    is collected less often. Each full collection otherwise walked every one of those objects,
    holding the event loop for up to a second (measured in a generator with 1,200 trajectories
    in flight), and a held loop delays every reply and verdict waiting on it."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])


def _settle(batch: list[tuple[Any, asyncio.Future[Any]]], out: Sequence[Any] = (), *,
            error: BaseException | None = None) -> None:
    """Hand each waiter of a batch its result (in order), or all of them the batch's error."""
    for i, (_, fut) in enumerate(batch):
        if not fut.done():
            if error is not None:
                fut.set_exception(error)
            else:
                fut.set_result(out[i])


class _Batcher:
    """Collects items and applies ``fn(batch)`` to everything that arrived meanwhile, on the
    store's thread: one transaction (one fsync for calls) per batch."""

    def __init__(self, run: Callable[..., Any], fn: Callable[[list[Any]], list[Any]],
                 after: Callable[[list[Any], list[Any]], list[Any]] | None = None) -> None:
        self._run, self._fn, self._after = run, fn, after
        self._pending: list[tuple[Any, asyncio.Future[Any]]] = []
        self._busy = False

    async def submit(self, item: Any) -> Any:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append((item, fut))
        if not self._busy:
            self._busy = True
            asyncio.get_running_loop().create_task(self._drain())
        return await fut

    async def _drain(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                items = [b[0] for b in batch]
                try:
                    out = await self._run(self._fn, items)
                    if self._after is not None:
                        out = self._after(items, out)
                except Exception as exc:  # noqa: BLE001 - every waiter gets the store's error
                    _settle(batch, error=exc)
                    continue
                _settle(batch, out)
        finally:
            self._busy = False


class StoreWriter:
    """The run's store, written from one thread; see the module doc."""

    def __init__(self, path: str, run_id: str) -> None:
        self.run_id = run_id
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="kgb-store")
        self._store: Store = self._pool.submit(Store, Path(path)).result()
        self.tokens, self.cost = self._pool.submit(self._store.run_spend, run_id).result()
        self.commits = 0
        self._calls = _Batcher(self._run, self._store.add_llm_calls, self._count_calls)
        quiet_gc()

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def _count_calls(self, items: list[Any], out: list[tuple[LLMCall, bool]]) -> list[Any]:
        self.commits += 1
        for (run_id, _, _, _), (call, written) in zip(items, out, strict=True):
            if written and run_id == self.run_id and call.billed and call.usage is not None:
                self.tokens += call.usage.total_tokens
                self.cost += call.cost_usd
        return [(call, self.tokens, self.cost) for call, _ in out]

    async def add_llm_calls(self, items: list[tuple[str, str, int, LLMCall]]
                            ) -> list[tuple[LLMCall, int, float]]:
        """Persist calls (durably); for each, the stored call and the run's billed totals."""
        got: list[tuple[LLMCall, int, float]] = await asyncio.gather(
            *(self._calls.submit(item) for item in items))
        return got

    async def add_run(self, config: dict[str, Any]) -> None:
        await self._run(self._store.add_run, self.run_id, config)

    async def set_state(self, state: str, detail: str = "") -> None:
        await self._run(self._store.set_run_state, self.run_id, state, detail)

    async def state(self) -> tuple[str, str, float] | None:
        st: tuple[str, str, float] | None = await self._run(self._store.run_state, self.run_id)
        return st

    async def finished(self) -> set[tuple[str, str]]:
        done: set[tuple[str, str]] = await self._run(
            lambda: self._store.finished_trajectories(self.run_id, retry_infra=True))
        return done

    async def unfinished_turns(self) -> dict[str, list[tuple[int, LLMCall]]]:
        turns: dict[str, list[tuple[int, LLMCall]]] = await self._run(
            lambda: self._store.stored_turns(self.run_id, unfinished_only=True))
        return turns

    async def spend(self) -> tuple[int, float, int]:
        return self.tokens, self.cost, self.commits

    async def close(self) -> None:
        await self._run(self._store.close)
        self._pool.shutdown(wait=True)


# -- the fleet router ------------------------------------------------------------------------------


class FleetRouter:
    """The sweep's fleet; see the module doc."""

    def __init__(self, spec_text: str, spec_source: str, spec_dir: str, store_file: str,
                 fleet_config: FleetConfig, eval_timeout_s: float,
                 registry: tuple[str, int] | None, registry_access: RegistryAccess | None = None,
                 agent_auth: ClientAuthFiles | None = None) -> None:
        self.spec = parse_spec(spec_text, spec_source, base_dir=spec_dir)
        # Verdicts are the router's own table: read and written on its own connection (same
        # node as the writer; SQLite serialises the two), one thread, off the event loop.
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="kgb-verdicts")
        self._store: Store = self._pool.submit(Store, Path(store_file)).result()
        self.eval_timeout_s = eval_timeout_s
        if self.spec.fleet.spot_check is not None:
            fleet_config = dataclasses.replace(fleet_config, spot_check=self.spec.fleet.spot_check)
        # Credentials are read here, on the router's node, from the files named (never shipped
        # through Ray as values).
        self.fleet = Fleet(self.spec.agents, fleet_config,
                           auth=agent_auth.load() if agent_auth is not None else None)
        self._registry_at = registry
        self._registry_access = registry_access or RegistryAccess()
        self._registry: Any = None
        self._in_flight: dict[str, int] = {}
        self._rooms: dict[str, asyncio.Condition] = {}  # per platform: a slot came free
        self.evaluated = 0
        self.reused = 0
        quiet_gc()

    async def start(self) -> str:
        """Start checking agents (and serving the registry); returns the registry address or ""."""
        await self.fleet.start()
        if self._registry_at is not None:
            from coordinator.registry_service import RegistryServer

            self._registry = RegistryServer(self.fleet, *self._registry_at, access=self._registry_access)
            address: str = await self._registry.start()
            return address
        return ""

    async def wait_ready(self, platforms: list[str], timeout_s: float) -> dict[str, int]:
        """Wait (up to ``timeout_s``) for an agent of every platform; capacity per platform."""
        await asyncio.gather(*(self.fleet.wait_ready(p, timeout_s=timeout_s) for p in platforms))
        return {p: self.fleet.capacity(p) for p in platforms}

    def _limit(self, platform: str) -> int:
        fixed = self.spec.concurrency.evaluations_in_flight
        if fixed:
            return fixed
        return int(self.fleet.config.slots_per_worker * self.fleet.capacity(platform))

    async def evaluate(self, platform: str, device: str | None, operator_id: str, source: str,
                       label: str = "") -> tuple[Verdict, bool]:
        """(verdict, taken from the store). Never raises for the candidate or the system."""
        try:
            spec = operators.get(operator_id)
        except operators.UnknownOperatorError as exc:
            return infra_verdict(operator_id, source, str(exc)), False
        chash = candidate_hash(source)
        keys = sorted({(a.device_model, a.harness_version) for a in self.fleet.snapshot().agents
                       if a.state is AgentState.UP and a.matches(platform, device)
                       and a.harness_version})
        loop = asyncio.get_running_loop()
        if keys:
            stored = await loop.run_in_executor(self._pool, self._store.verdict_for_any, spec.id,
                                                spec.version, chash, keys)
            if stored is not None:
                self.reused += 1
                return stored, True
        await self._admit(platform)
        try:
            routed = await self.fleet.evaluate(platform, spec.id, source, device_model=device,
                                               timeout_s=self.eval_timeout_s, candidate_name=label)
        finally:
            self._in_flight[platform] -= 1
            room = self._rooms[platform]
            async with room:
                room.notify(1)
        v = routed.verdict
        if routed.dispute is not None:
            await loop.run_in_executor(self._pool, self._store.add_dispute, routed.dispute)
        if v.status is not Status.INFRA_ERROR:  # stored before the trajectory may use it
            await loop.run_in_executor(self._pool, self._store.add_verdict, v)
            self.evaluated += 1
        return v, False

    async def _admit(self, platform: str) -> None:
        """Wait for room: evaluations in flight stay within the fleet's slots, so none of them
        waits inside the fleet (where a long wait ends as INFRA_ERROR). With no capacity for
        longer than the fleet's own wait, let it through to fail fast (resumable)."""
        since = time.monotonic()
        room = self._rooms.setdefault(platform, asyncio.Condition())
        async with room:
            while self._in_flight.get(platform, 0) >= self._limit(platform):
                if (self._limit(platform) == 0
                        and time.monotonic() - since > self.fleet.config.wait_for_agent_s):
                    break
                # woken by a finished evaluation; re-checked each second as capacity changes
                with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
                    await asyncio.wait_for(room.wait(), timeout=1.0)
            self._in_flight[platform] = self._in_flight.get(platform, 0) + 1

    async def status(self) -> dict[str, Any]:
        snap = self.fleet.snapshot()
        return {"rows": snap.metric_rows(), "in_flight": sum(self._in_flight.values()),
                "evaluated": self.evaluated, "reused": self.reused,
                "alarms": self.fleet.guard.totals(),
                "agents": [(a.address, a.platform, a.state.value, a.capacity) for a in snap.agents]}

    async def close(self) -> None:
        if self._registry is not None:
            await self._registry.stop()
        await self.fleet.close()
        await asyncio.get_running_loop().run_in_executor(self._pool, self._store.close)
        self._pool.shutdown(wait=True)


# -- the generators --------------------------------------------------------------------------------


class _RemoteBatch:
    """Calls to one actor method that arrive within ``window_s`` of each other go as one list:
    with a thousand trajectories in flight, one Ray call carries several model calls."""

    def __init__(self, method: Any, window_s: float) -> None:
        self.method = method
        self.window_s = window_s
        self._pending: list[tuple[Any, asyncio.Future[Any]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def submit(self, item: Any) -> Any:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        self._pending.append((item, fut))
        if self._timer is None:
            self._timer = loop.call_later(self.window_s, self._send)
        return await fut

    def _send(self) -> None:
        self._timer = None
        batch, self._pending = self._pending, []
        task = asyncio.get_running_loop().create_task(self._go(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _go(self, batch: list[tuple[Any, asyncio.Future[Any]]]) -> None:
        try:
            out = await self.method.remote([item for item, _ in batch])
        except Exception as exc:  # noqa: BLE001 - every waiter gets the actor's error
            _settle(batch, error=exc)
            return
        _settle(batch, out)


class _RemoteCalls:
    """A trajectory's :class:`~coordinator.recorded_provider.CallLog` over the store writer,
    with the turns the store already holds for it (a resume) handed over up front."""

    def __init__(self, writes: _RemoteBatch, stored: dict[int, LLMCall],
                 budget: Budget | None) -> None:
        self.writes = writes
        self.stored = stored
        self.budget = budget

    async def llm_call(self, run_id: str, trajectory: TrajectoryKey, turn: int) -> LLMCall | None:
        return self.stored.get(turn)

    async def add_llm_call(self, run_id: str, trajectory: TrajectoryKey, turn: int,
                           call: LLMCall) -> LLMCall:
        stored, tokens, cost = await self.writes.submit((run_id, str(trajectory), turn, call))
        self.stored[turn] = stored
        if self.budget is not None:
            self.budget.observe(tokens, cost)  # the sweep's totals, from every generator
        assert isinstance(stored, LLMCall)
        return stored


class _SweepProvider(RecordedProvider):
    """Records like its parent; refuses to start a call once the sweep is stopping, and counts
    the calls on the wire (the stop waits for them: they are paid for)."""

    def __init__(self, owner: Generator, calls: _RemoteCalls, *args: Any) -> None:
        super().__init__(*args)
        self.owner = owner
        self.calls = calls

    async def complete(self, prompt: Prompt, *, model: str, temperature: float | None,
                       max_tokens: int | None, deadline_s: float,
                       idempotency_key: str | None = None) -> LLMCall:
        stored = self.calls.stored.get(self.turn + 1)
        if self.owner.draining and (stored is None or stored.status is CallStatus.BUDGET):
            raise SweepStopped("the sweep is stopping")
        self.owner.calls_on_wire += 1
        try:
            return await super().complete(prompt, model=model, temperature=temperature,
                                          max_tokens=max_tokens, deadline_s=deadline_s)
        finally:
            self.owner.calls_on_wire -= 1


class _RouterEvaluator:
    """:class:`generators.evaluation.Evaluator` over the router; remembers what it saw."""

    def __init__(self, router: Any, platform: str, device: str | None, label: str) -> None:
        self.router, self.platform, self.device, self.label = router, platform, device, label
        self.seen: list[tuple[Verdict, bool]] = []

    async def evaluate(self, operator_id: str, source: str) -> Verdict:
        v, reused = await self.router.evaluate.remote(self.platform, self.device, operator_id,
                                                      source, self.label)
        self.seen.append((v, reused))
        return v  # type: ignore[no-any-return]


class Generator:
    """Runs trajectories of one endpoint (or of the candidate methods); see the module doc."""

    def __init__(self, spec_text: str, spec_source: str, spec_dir: str, run_id: str,
                 endpoint: str, writer: Any, router: Any, shards: int = 1, shard: int = 0) -> None:
        self.spec = parse_spec(spec_text, spec_source, base_dir=spec_dir)
        self.run_id = run_id
        self.writer = writer
        self.router = router
        self.endpoint = endpoint
        self.provider: Provider | None = None
        if endpoint != CANDIDATES:
            from generators.providers import create as create_provider

            self.provider = create_provider(_shard(self.spec.endpoint(endpoint), shards, shard),
                                            self.spec.price_table(endpoint))
        self.methods = {m.label: m.build() for m in self.spec.methods}
        b = self.spec.budgets
        self.sweep_budget = (Budget(b.sweep_max_tokens, b.sweep_max_cost_usd, scope="sweep")
                             if b.sweep_max_tokens is not None or b.sweep_max_cost_usd is not None
                             else None)
        self.draining = False
        self.calls_on_wire = 0
        self.call_writes = _RemoteBatch(writer.add_llm_calls, CALL_BATCH_S)
        self.node = ray.get_runtime_context().get_node_id()
        quiet_gc()

    def observe_spend(self, tokens: int, cost: float) -> None:
        if self.sweep_budget is not None:
            self.sweep_budget.observe(tokens, cost)

    async def drain(self, timeout_s: float) -> int:
        """Start no new call; wait (up to ``timeout_s``) for the calls on the wire to be stored.
        Returns how many are still out."""
        self.draining = True
        end = time.monotonic() + timeout_s
        while self.calls_on_wire and time.monotonic() < end:
            await asyncio.sleep(0.05)
        return self.calls_on_wire

    async def run(self, p: PlannedTrajectory, stored: list[tuple[int, LLMCall]]) -> Outcome:
        try:
            return await self._run(p, stored)
        except SweepStopped as exc:
            return Outcome(p, None, error=str(exc), node=self.node)
        except Exception as exc:  # noqa: BLE001 - a system error ends this trajectory, not the sweep
            log.exception("trajectory %s failed", p)
            last = (str(exc).strip().splitlines() or [""])[-1]
            return Outcome(p, None, error=f"{type(exc).__name__}: {last}"[:300], node=self.node)

    async def _run(self, p: PlannedTrajectory, stored: list[tuple[int, LLMCall]]) -> Outcome:
        spec = operators.get(p.operator_id)
        method = self.methods[p.method]
        key = TrajectoryKey(spec.id, spec.version, p.method, p.model, p.sample, p.platform)
        device = next((a.device for a in self.spec.agents if a.platform == p.platform and a.device),
                      None)
        evaluator = _RouterEvaluator(self.router, p.platform, device, f"{p.method}/{p.sample}")
        if isinstance(method, Method):
            if self.draining:
                raise SweepStopped("the sweep is stopping")
            cand = method.generate(spec, p.sample)
            v = await evaluator.evaluate(spec.id, cand.source)
            result = _result(self.run_id, p.platform, key, spec.source.value, [(cand, v)],
                             EndReason.CANDIDATE, turns=0, calls=())
            return await self._finish(p, result, [cand], evaluator.seen, ())
        assert isinstance(method, TrajectoryMethod) and self.provider is not None
        model = self.spec.model(p.model)
        log_ = _RemoteCalls(self.call_writes, dict(stored), self.sweep_budget)
        rp = _SweepProvider(self, log_, self.provider, log_, self.run_id, key)
        b = self.spec.budgets
        ctx = TrajectoryContext(
            provider=rp, model=model.model, record=rp.record, platform=p.platform,
            temperature=model.temperature, max_tokens=model.max_tokens,
            evaluator=evaluator if method.needs_evaluator else None,
            trajectory_max_tokens=b.trajectory_max_tokens,
            trajectory_max_cost_usd=b.trajectory_max_cost_usd, sweep_budget=self.sweep_budget)
        traj = await method.run(spec, p.sample, ctx)
        pairs: list[tuple[Candidate, Verdict | None]] = [
            (Candidate(spec.id, s.candidate, p.method, p.sample, model=p.model,
                       label=f"turn {s.turn}"), s.verdict)
            for s in traj.steps if s.candidate is not None]
        end = traj.end
        if end is EndReason.CANDIDATE and pairs and pairs[-1][1] is None:
            # sample without an evaluator: the sweep judges the trajectory's candidate
            if self.draining:
                raise SweepStopped("the sweep is stopping")
            v = await evaluator.evaluate(spec.id, pairs[-1][0].source)
            pairs[-1] = (pairs[-1][0], v)
        sent = tuple(_slim_call(c) for c in traj.calls if c.extra.get("replayed") != "1")
        result = _result(self.run_id, p.platform, key, spec.source.value, pairs, end,
                         turns=len(traj.steps), calls=traj.calls, detail=traj.detail, traj=traj)
        return await self._finish(p, result, [c for c, _ in pairs], evaluator.seen, sent)

    async def _finish(self, p: PlannedTrajectory, result: TrajectoryResult,
                      cands: Sequence[Candidate], seen: list[tuple[Verdict, bool]],
                      sent: tuple[LLMCall, ...]) -> Outcome:
        """The driver stores the result (its calls and verdicts are stored already)."""
        return Outcome(p, result, sent, tuple((_slim_verdict(v), r) for v, r in seen),
                       tuple((c.candidate_hash, c.source) for c in cands), node=self.node)

    async def close(self) -> None:
        if self.provider is not None:
            await self.provider.aclose()


def _shard(config: EndpointConfig, shards: int, shard: int = 0) -> EndpointConfig:
    """Generator ``shard``'s share of an endpoint's limits: over all ``shards`` the shares add up
    to the endpoint's exactly (concurrency split as evenly as integers allow)."""
    if shards <= 1:
        return config
    base, extra = divmod(config.max_concurrency, shards)
    return dataclasses.replace(
        config, max_concurrency=base + (1 if shard < extra else 0),
        requests_per_minute=None if config.requests_per_minute is None
        else config.requests_per_minute / shards,
        tokens_per_minute=None if config.tokens_per_minute is None
        else config.tokens_per_minute / shards)


def generator_count(spec: SweepSpec, endpoint: str, nodes: int) -> int:
    """How many generators run ``endpoint``'s trajectories: the spec's
    ``generators_per_endpoint``, else one per node (up to ``MAX_SHARDS``) and at least one per
    ``GENERATIONS_PER_GENERATOR`` generations in flight; never more than the endpoint's
    ``max_concurrency`` (each needs an HTTP slot of its own). The candidate methods need one."""
    if endpoint == CANDIDATES:
        return 1
    c = spec.concurrency
    n = c.generators_per_endpoint or max(
        min(max(1, nodes), MAX_SHARDS),
        math.ceil(c.generation_per_endpoint / GENERATIONS_PER_GENERATOR))
    return max(1, min(n, spec.endpoint(endpoint).max_concurrency))


def _result(run_id: str, platform: str, key: TrajectoryKey, source: str,
            pairs: list[tuple[Candidate, Verdict | None]], end: EndReason, *, turns: int,
            calls: Sequence[LLMCall], detail: str = "", traj: Trajectory | None = None
            ) -> TrajectoryResult:
    """The stored row: the best judged candidate (fastest PASSED, latest among equals; else the
    last judged), billed totals, and the agents' time over every verdict."""
    judged = [(c, v) for c, v in pairs if v is not None]
    best: tuple[Candidate, Verdict] | None = None
    for c, v in judged:
        if v.status is Status.PASSED and (best is None or best[1].status is not Status.PASSED
                                          or (v.speedup or 0.0) >= (best[1].speedup or 0.0)):
            best = (c, v)
    if best is None and judged:
        best = judged[-1]
    if any(v.status is Status.INFRA_ERROR for _, v in judged) and (
            best is None or best[1].status is not Status.PASSED):
        end = EndReason.INFRA_ERROR  # the system failed to judge: resumable, never the model's
        detail = detail or next(v.message for _, v in judged if v.status is Status.INFRA_ERROR)
    billed = [c for c in calls if c.usage is not None and c.billed]
    return TrajectoryResult(
        run_id=run_id, platform=platform, key=key, source=source, end_reason=end.value,
        status=best[1].status if best else None,
        best_candidate_hash=best[0].candidate_hash if best else "",
        speedup=best[1].speedup if best else None, sol_percent=best[1].sol_percent if best else None,
        turns=turns, candidates=len(pairs),
        prompt_tokens=sum(c.usage.prompt_tokens for c in billed if c.usage),
        completion_tokens=sum(c.usage.completion_tokens for c in billed if c.usage),
        cost_usd=sum(c.cost_usd for c in calls),
        gpu_seconds=sum(v.wall_seconds for _, v in judged if v.status is not Status.INFRA_ERROR),
        detail=detail[:500])


# -- the driver ------------------------------------------------------------------------------------


def init_ray(address: str | None = None, num_cpus: int | None = None) -> None:
    """Join ``address`` or start Ray on loopback, without token auth (a local, trusted run)."""
    from coordinator.local_agent import with_repo_on_path

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    loopback = address is None or address.rsplit(":", 1)[0].strip("[]") in (
        "127.0.0.1", "localhost", "::1")
    if loopback:
        # Ray turns a loopback address into this machine's external one (and binds there)
        # unless told this is a single-machine cluster; it reads that flag when imported.
        import ray._private.ray_constants as ray_constants

        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
        ray_constants.ENABLE_RAY_CLUSTER = False
    if ray.is_initialized():
        return
    env = {"PYTHONPATH": with_repo_on_path(os.environ.get("PYTHONPATH")),
           "RAY_AUTH_MODE": os.environ["RAY_AUTH_MODE"]}
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                              "runtime_env": {"env_vars": env}}
    if address:
        ray.init(address=address, **kwargs)
    else:
        ray.init(num_cpus=num_cpus, _node_ip_address="127.0.0.1", **kwargs)


def _here() -> Any:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)


def _endpoint_of(spec: SweepSpec, p: PlannedTrajectory) -> str:
    return CANDIDATES if not p.model else spec.model(p.model).endpoint


class SweepStop:
    """Why the driver stops early: set by a signal handler or by a cancel seen in the store."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.reason = ""
        self.hard = False

    def request(self, reason: str) -> None:
        if self.event.is_set():
            self.hard = True  # a second request: stop at once
        self.reason = self.reason or reason
        self.event.set()


async def run_sweep(spec: SweepSpec, options: SweepOptions, *,
                    on_progress: Callable[[SweepProgress], None] | None = None,
                    on_outcome: Callable[[Outcome, SweepProgress], None] | None = None,
                    on_fleet: Callable[[dict[str, Any]], None] | None = None,
                    stop: SweepStop | None = None, owner: str = "") -> tuple[str, SweepProgress]:
    """Run (or resume) ``spec`` to the end or until stopped; Ray must be initialised.
    Returns the run's final state (``complete``, ``cancelled``, ``interrupted``, ``incomplete``)
    and the totals."""
    stop = stop or SweepStop()
    progress = SweepProgress()
    pin = {"scheduling_strategy": _here(), "num_cpus": 0}
    writer = ray.remote(StoreWriter).options(max_concurrency=100_000, **pin).remote(
        str(store_path(options.store_dir)), options.run_id)
    generators: dict[str, list[Any]] = {}
    router = None
    results: _ResultSink | None = None
    state = "interrupted"
    try:
        await writer.add_run.remote({"kind": "sweep", "spec": options.spec_text,
                                     "spec_source": options.spec_source,
                                     "spec_dir": options.spec_dir,
                                     "store": str(options.store_dir)})
        await writer.set_state.remote("running", owner or f"pid {os.getpid()}")
        registry = (None if options.registry_port is None
                    else (options.registry_host, options.registry_port))
        router = ray.remote(FleetRouter).options(max_concurrency=100_000, **pin).remote(
            options.spec_text, options.spec_source, options.spec_dir,
            str(store_path(options.store_dir)), options.fleet, options.eval_timeout_s, registry,
            options.registry_access, options.agent_auth)
        registry_address = await router.start.remote()
        if registry_address:
            log.info("agent registry on %s", registry_address)

        plan = spec.dispatch_order()
        progress.planned = len(plan)
        finished = await writer.finished.remote()
        keys = {p: _key_string(p) for p in plan}
        todo = [p for p in plan if (p.platform, keys[p]) not in finished]
        progress.skipped = len(plan) - len(todo)
        turns = await writer.unfinished_turns.remote() if progress.skipped or options.resume else {}
        tokens0, cost0, _ = await writer.spend.remote()

        platforms = sorted({p.platform for p in todo})
        if todo:
            await router.wait_ready.remote(platforms, options.wait_for_agents_s)

        queues: dict[str, list[PlannedTrajectory]] = {}
        for p in todo:
            queues.setdefault(_endpoint_of(spec, p), []).append(p)
        # An endpoint's trajectories run on generator_count() generators placed round-robin over
        # the nodes, each with its share of the endpoint's limits.
        nodes = sorted(str(n["NodeID"]) for n in ray.nodes() if n.get("Alive"))
        starts: dict[str, list[Any]] = {}
        placed = 0
        for endpoint in queues:
            shards = generator_count(spec, endpoint, len(nodes))
            starts[endpoint] = []
            for shard in range(shards):
                node = nodes[placed % len(nodes)] if nodes else ""
                placed += 1
                starts[endpoint].append(_start_generator(
                    options, endpoint, writer, router, shards, shard, node, tokens0, cost0))
        for endpoint, coros in starts.items():
            generators[endpoint] = list(await asyncio.gather(*coros))
        if on_progress:
            on_progress(progress)

        tasks: set[asyncio.Task[None]] = set()

        async def one(g: Any, load: list[int], p: PlannedTrajectory, sem: asyncio.Semaphore
                      ) -> None:
            try:
                outcome: Outcome = await g.run.remote(p, turns.get(keys[p], []))
            except Exception as exc:  # noqa: BLE001 - a lost generator: resumable
                last = (str(exc).strip().splitlines() or [""])[-1]
                outcome = Outcome(p, None, error=f"{type(exc).__name__}: {last}"[:300])
            finally:
                sem.release()
                load[0] -= 1
                progress.in_flight -= 1
            if outcome.result is not None and results is not None:
                await results.put(outcome)
            _account(progress, outcome)
            if on_outcome:
                on_outcome(outcome, progress)
            if on_progress:
                on_progress(progress)

        async def dispatch(endpoint: str, queue: list[PlannedTrajectory]) -> None:
            limit = (spec.concurrency.generation_per_endpoint if endpoint != CANDIDATES
                     else max(4, spec.concurrency.evaluations_in_flight or 64))
            sem = asyncio.Semaphore(limit)
            shards = generators[endpoint]
            loads = [[0] for _ in shards]  # trajectories in flight on each generator
            for p in queue:
                await sem.acquire()
                if stop.event.is_set():
                    sem.release()
                    return
                i = min(range(len(shards)), key=lambda j: loads[j][0])  # the least loaded
                loads[i][0] += 1
                progress.in_flight += 1
                t = asyncio.get_running_loop().create_task(one(shards[i], loads[i], p, sem))
                tasks.add(t)
                t.add_done_callback(tasks.discard)

        async def watch() -> None:
            while not stop.event.is_set():
                with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
                    await asyncio.wait_for(stop.event.wait(), STATE_POLL_S)
                st = await writer.state.remote()
                if st is not None and st[0] == "cancelling":
                    stop.request("cancelled")
                if on_fleet is not None and router is not None:
                    on_fleet(await router.status.remote())

        results = _ResultSink(store_path(options.store_dir))
        watcher = asyncio.get_running_loop().create_task(watch())
        dispatchers = [asyncio.get_running_loop().create_task(dispatch(e, q))
                       for e, q in queues.items()]
        stop_wait = asyncio.get_running_loop().create_task(stop.event.wait())
        all_dispatched: asyncio.Future[Any] = asyncio.gather(*dispatchers)
        await asyncio.wait({all_dispatched, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
        while tasks and not stop.event.is_set():
            await asyncio.wait(set(tasks) | {stop_wait}, return_when=asyncio.FIRST_COMPLETED)
        if stop.event.is_set():
            for d in dispatchers:
                d.cancel()
            if not stop.hard:  # calls on the wire are paid for: let them land in the store
                wire_s = max((e.timeout_s for e in spec.endpoints), default=60.0)
                drains = [g.drain.remote(wire_s) for g in _all(generators)]
                drain_all = asyncio.gather(*drains, return_exceptions=True)
                while not drain_all.done() and not stop.hard:
                    await asyncio.wait({drain_all}, timeout=0.2)
                if tasks and not stop.hard:
                    await asyncio.wait(set(tasks), timeout=5.0)
            for t in list(tasks):
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        watcher.cancel()
        stop_wait.cancel()
        sink, results = results, None
        await sink.close()
        if on_fleet is not None:
            with contextlib.suppress(Exception):
                on_fleet(await router.status.remote())
        if stop.event.is_set():
            state = "cancelled" if stop.reason == "cancelled" else "interrupted"
        elif progress.failed or progress.infra:
            state = "incomplete"
        else:
            state = "complete"
        detail = (f"{progress.skipped + progress.done} of {progress.planned} finished; "
                  f"{progress.failed} failed, {progress.infra} infra errors")
        await writer.set_state.remote(state, detail)
        return state, progress
    finally:
        if results is not None:  # an error on the way: keep what finished
            with contextlib.suppress(Exception):
                await results.close()
        for g in _all(generators):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(g.close.remote(), 5)
            ray.kill(g)
        if router is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(router.close.remote(), 10)
            ray.kill(router)
        if state == "interrupted":
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.set_state.remote("interrupted", stop.reason), 5)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(writer.close.remote(), 10)
        ray.kill(writer)


class _ResultSink:
    """The driver's writes of finished trajectories (with their candidates' sources): batched,
    one transaction per batch, on the store's own thread. A result is written after its calls
    and verdicts, so one lost in a crash is only run again (replayed calls, stored verdicts)."""

    FLUSH_S = 0.2

    def __init__(self, path: Path) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="kgb-results")
        self._store: Store = self._pool.submit(Store, path).result()
        self._pending: list[Outcome] = []
        self._task: asyncio.Task[None] | None = None

    async def put(self, outcome: Outcome) -> None:
        self._pending.append(outcome)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._flush_soon())

    async def _flush_soon(self) -> None:
        await asyncio.sleep(self.FLUSH_S)
        await self.flush()

    async def flush(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            rows = [o.result for o in batch if o.result is not None]
            cands = [c for o in batch for c in o.candidates]
            await asyncio.get_running_loop().run_in_executor(
                self._pool, self._store.add_trajectory_results, rows, cands)

    async def close(self) -> None:
        # Wait for a pending flush rather than cancel it: cancelling it while its batch waits
        # for the store's thread dropped that batch (19 of 200 results lost once in CI).
        if self._task is not None:
            await self._task
        await self.flush()
        await asyncio.get_running_loop().run_in_executor(self._pool, self._store.close)
        self._pool.shutdown(wait=True)


async def _start_generator(options: SweepOptions, endpoint: str, writer: Any, router: Any,
                           shards: int, shard: int, node: str, tokens: int, cost: float) -> Any:
    """A Generator actor pinned to ``node`` (round-robin placement over the nodes alive at the
    start), told what the run has spent so far. Pinned hard: a soft pin falls back to the
    driver's node whenever the head's view of the other node lags, which put every generator on
    one node in CI. If the node has gone meanwhile, the generator goes wherever Ray puts it."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    def start(where: Any) -> Any:
        return ray.remote(Generator).options(
            max_concurrency=100_000, num_cpus=0, scheduling_strategy=where).remote(
            options.spec_text, options.spec_source, options.spec_dir, options.run_id,
            endpoint, writer, router, shards, shard)

    if node:
        g = start(NodeAffinitySchedulingStrategy(node_id=node, soft=False))
        try:
            await asyncio.wait_for(g.observe_spend.remote(tokens, cost), GENERATOR_START_S)
            return g
        except (ray.exceptions.RayError, asyncio.TimeoutError, TimeoutError):
            ray.kill(g)
    g = start("DEFAULT")
    await g.observe_spend.remote(tokens, cost)
    return g


def _all(generators: dict[str, list[Any]]) -> list[Any]:
    return [g for shards in generators.values() for g in shards]


def _key_string(p: PlannedTrajectory) -> str:
    spec = operators.get(p.operator_id)
    return str(TrajectoryKey(spec.id, spec.version, p.method, p.model, p.sample, p.platform))


def _account(progress: SweepProgress, o: Outcome) -> None:
    if o.node:
        progress.nodes.add(o.node)
    for c in o.calls:
        progress.calls_sent += int(c.status is not CallStatus.BUDGET)
        if c.usage is not None and c.billed:
            progress.tokens += c.usage.total_tokens
        progress.cost_usd += c.cost_usd
    for _, reused in o.verdicts:
        progress.evaluations += 1
        progress.verdicts_reused += int(reused)
    r = o.result
    if r is None:
        if "stopping" not in o.error:
            progress.failed += 1
            if len(progress.errors) < 20:
                progress.errors.append(f"{o.planned.operator_id} {o.planned.method} "
                                       f"{o.planned.model} #{o.planned.sample}: {o.error}")
        return
    progress.done += 1
    progress.by_end[r.end_reason] = progress.by_end.get(r.end_reason, 0) + 1
    if r.end_reason == EndReason.INFRA_ERROR.value:
        progress.infra += 1
    if r.solved:
        progress.solved += 1
