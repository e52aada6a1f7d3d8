"""The driver: :func:`run_sweep`, the one way a spec is run (``kgb sweep`` and ``kgb run``).

It plans, skips what the store says is finished, hands each endpoint's trajectories to its
least loaded runner with at most ``generation_per_endpoint`` in flight, takes outcomes in
completion order, stores them (batched, :class:`~coordinator.engine.storage.ResultSink`) and
feeds the callbacks: each outcome, and every :data:`CALLS_POLL_S` the model calls the store
writer has committed since (each once, as it was stored) with the run's stored totals. The
actors are a :class:`~coordinator.engine.cluster.SweepCluster`; no
global state: everything hangs off the objects one call creates.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import operators
from coordinator.engine.books import RecordedCall, StoredTotals
from coordinator.engine.cluster import SweepCluster
from coordinator.engine.handles import TrajectoryRunnerHandle
from coordinator.engine.options import SweepOptions, SweepStop
from coordinator.engine.outcomes import Outcome, SweepProgress, account, account_calls, failure
from coordinator.engine.placement import CANDIDATES, endpoint_of, endpoints
from coordinator.engine.storage import ResultSink, store_path
from coordinator.store import TrajectoryKey
from coordinator.sweep_spec import PlannedTrajectory, SweepSpec
from generators.llm import LLMCall

STATE_POLL_S = 2.0  # how often the driver looks for a cancel in the store and at the fleet
CALLS_POLL_S = 0.5  # how often it takes the calls the store writer committed


@dataclass(frozen=True)
class Callbacks:
    """What the caller is told: totals after every trajectory, each outcome, the fleet."""

    on_progress: Callable[[SweepProgress], None] | None = None
    on_outcome: Callable[[Outcome, SweepProgress], None] | None = None
    on_fleet: Callable[[dict[str, Any]], None] | None = None
    on_calls: Callable[[list[RecordedCall], StoredTotals], None] | None = None

    def calls(self, new: list[RecordedCall], totals: StoredTotals | None) -> None:
        if self.on_calls is not None and totals is not None:
            self.on_calls(new, totals)

    def progress(self, p: SweepProgress) -> None:
        if self.on_progress is not None:
            self.on_progress(p)

    def outcome(self, o: Outcome, p: SweepProgress) -> None:
        if self.on_outcome is not None:
            self.on_outcome(o, p)
        self.progress(p)


@dataclass(frozen=True)
class _Work:
    """What this process runs: the plan's unfinished trajectories, their key strings, and the
    model calls and intents the store already holds for them (a resume replays the calls and
    sends a turn whose intent got no reply as that intent's next attempt)."""

    todo: list[PlannedTrajectory]
    keys: dict[PlannedTrajectory, str]
    turns: dict[str, list[tuple[int, LLMCall]]]
    intents: dict[str, dict[int, int]]

    def stored(self, p: PlannedTrajectory) -> list[tuple[int, LLMCall]]:
        return self.turns.get(self.keys[p], [])

    def last_intents(self, p: PlannedTrajectory) -> dict[int, int]:
        return self.intents.get(self.keys[p], {})


def _key_string(p: PlannedTrajectory) -> str:
    spec = operators.get(p.operator_id)
    return str(TrajectoryKey(spec.id, spec.version, p.method, p.model, p.sample, p.key_platform))


async def _load_work(plan: list[PlannedTrajectory], cluster: SweepCluster,
                     resume: bool) -> _Work:
    finished = await cluster.writer.finished.remote()
    keys = {p: _key_string(p) for p in plan}
    todo = [p for p in plan if any((q, keys[p]) not in finished for q in p.platforms)]
    again = len(todo) < len(plan) or resume
    turns = await cluster.writer.unfinished_turns.remote() if again else {}
    intents = await cluster.writer.unfinished_intents.remote() if again else {}
    return _Work(todo, keys, turns, intents)


async def run_sweep(spec: SweepSpec, options: SweepOptions, *,
                    on_progress: Callable[[SweepProgress], None] | None = None,
                    on_outcome: Callable[[Outcome, SweepProgress], None] | None = None,
                    on_fleet: Callable[[dict[str, Any]], None] | None = None,
                    on_calls: Callable[[list[RecordedCall], StoredTotals], None] | None = None,
                    stop: SweepStop | None = None, owner: str = "") -> tuple[str, SweepProgress]:
    """Run (or resume) ``spec`` to the end or until stopped; Ray must be initialised.
    Returns the run's final state (``complete``, ``cancelled``, ``interrupted``, ``incomplete``)
    and the totals."""
    stop = stop or SweepStop()
    calls = Callbacks(on_progress, on_outcome, on_fleet, on_calls)
    progress = SweepProgress()
    plan = spec.dispatch_order()
    progress.planned = len(plan)
    async with SweepCluster(spec, options, endpoints(spec, plan), owner or f"pid {os.getpid()}",
                            stop) as cluster:
        work = await _load_work(plan, cluster, options.resume)
        progress.skipped = len(plan) - len(work.todo)
        if work.todo:
            await cluster.router.wait_ready.remote(sorted({q for p in work.todo for q in p.platforms}),
                                                   options.wait_for_agents_s)
        calls.progress(progress)
        async with ResultSink(store_path(options.store_dir)) as sink:
            await _Dispatch(spec, cluster, work, progress, stop, calls, sink).run()
        await _take_calls(cluster, progress, calls)  # the last ones committed
        if on_fleet is not None:
            with contextlib.suppress(Exception):
                on_fleet(await cluster.router.status.remote())
        state = _final_state(progress, stop)
        await cluster.end(state, f"{progress.skipped + progress.done} of {progress.planned} "
                                 f"finished; {progress.failed} failed, {progress.infra} infra errors")
    return state, progress


async def _take_calls(cluster: SweepCluster, progress: SweepProgress, calls: Callbacks) -> None:
    """The calls the writer committed since the last take: into the totals and callbacks."""
    new, totals = await cluster.writer.take_recorded.remote()
    account_calls(progress, [r.call for r in new])
    calls.calls(new, totals)
    if new:
        calls.progress(progress)


def _final_state(progress: SweepProgress, stop: SweepStop) -> str:
    if stop.event.is_set():
        return "cancelled" if stop.reason == "cancelled" else "interrupted"
    return "incomplete" if progress.failed or progress.infra else "complete"


class _Dispatch:
    """Hands the work out per endpoint and takes outcomes back in completion order; on a stop,
    lets the calls on the wire land (unless told to stop at once) and abandons the rest."""

    def __init__(self, spec: SweepSpec, cluster: SweepCluster, work: _Work,
                 progress: SweepProgress, stop: SweepStop, calls: Callbacks,
                 sink: ResultSink) -> None:
        self.spec, self.cluster, self.work, self.progress = spec, cluster, work, progress
        self.stop, self.calls, self.sink = stop, calls, sink
        self.tasks: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        queues: dict[str, list[PlannedTrajectory]] = {}
        for p in self.work.todo:
            queues.setdefault(endpoint_of(self.spec, p), []).append(p)
        loop = asyncio.get_running_loop()
        watcher = loop.create_task(self._watch())
        taker = loop.create_task(self._take())
        feeders = [loop.create_task(self._feed(e, q)) for e, q in queues.items()]
        stopped = loop.create_task(self.stop.event.wait())
        try:
            all_fed: asyncio.Future[Any] = asyncio.gather(*feeders)
            await asyncio.wait({all_fed, stopped}, return_when=asyncio.FIRST_COMPLETED)
            while self.tasks and not self.stop.event.is_set():
                await asyncio.wait(set(self.tasks) | {stopped}, return_when=asyncio.FIRST_COMPLETED)
            if self.stop.event.is_set():
                await self._abandon(feeders)
        finally:
            watcher.cancel()
            taker.cancel()
            stopped.cancel()

    async def _feed(self, endpoint: str, queue: list[PlannedTrajectory]) -> None:
        c = self.spec.concurrency
        limit = (c.generation_per_endpoint if endpoint != CANDIDATES
                 else max(4, c.evaluations_in_flight or 64))
        sem = asyncio.Semaphore(limit)
        runners = self.cluster.runners[endpoint]
        loads = [0] * len(runners)  # trajectories in flight on each runner
        for p in queue:
            await sem.acquire()
            if self.stop.event.is_set():
                sem.release()
                return
            i = min(range(len(runners)), key=loads.__getitem__)  # the least loaded

            def release(i: int = i) -> None:
                sem.release()
                loads[i] -= 1

            loads[i] += 1
            self.progress.in_flight += 1
            t = asyncio.get_running_loop().create_task(self._one(runners[i], p, release))
            self.tasks.add(t)
            t.add_done_callback(self.tasks.discard)

    async def _one(self, runner: TrajectoryRunnerHandle, p: PlannedTrajectory,
                   release: Callable[[], None]) -> None:
        try:
            outcome = await runner.run.remote(p, self.work.stored(p), self.work.last_intents(p))
        except Exception as exc:  # noqa: BLE001 - a lost runner: resumable
            outcome = failure(p, exc)
        finally:
            release()
            self.progress.in_flight -= 1
        if outcome.result is not None:
            await self.sink.put(outcome)
        account(self.progress, outcome)
        self.calls.outcome(outcome, self.progress)

    async def _watch(self) -> None:
        """A cancel recorded in the store (``kgb sweep cancel``) stops the sweep; the fleet's
        state goes to ``on_fleet``."""
        while not self.stop.event.is_set():
            with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
                await asyncio.wait_for(self.stop.event.wait(), STATE_POLL_S)
            st = self.cluster.last_state  # read by the cluster's lease renewal
            if st is not None and st[0] == "cancelling":
                self.stop.request("cancelled")
            if self.calls.on_fleet is not None:
                self.calls.on_fleet(await self.cluster.router.status.remote())

    async def _take(self) -> None:
        """Every :data:`CALLS_POLL_S`: the calls committed meanwhile (the metrics' counters)."""
        while True:
            await asyncio.sleep(CALLS_POLL_S)
            with contextlib.suppress(Exception):
                await _take_calls(self.cluster, self.progress, self.calls)

    async def _abandon(self, feeders: list[asyncio.Task[None]]) -> None:
        for f in feeders:
            f.cancel()
        if not self.stop.hard:  # calls on the wire are paid for: let them land in the store
            await self.cluster.drain(max((e.timeout_s for e in self.spec.endpoints), default=60.0))
            if self.tasks and not self.stop.hard:
                await asyncio.wait(set(self.tasks), timeout=5.0)
        for t in list(self.tasks):
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
