"""The actors of one sweep as one group: :class:`SweepCluster`, used with ``async with``.

Entering starts every actor at once (their processes start in parallel): the
:class:`~coordinator.engine.storage.StoreWriter` and the
:class:`~coordinator.engine.router.FleetRouter` pinned to the driver's node, and the
:class:`~coordinator.engine.runner.TrajectoryRunner` group of each endpoint, placed round-robin
over the nodes alive (:func:`~coordinator.engine.placement.place`). It records the run as
``running``, starts the fleet (and its registration server) and tells each runner what the run
has spent so far. While it runs, it renews the run's lease in the store (``kgb sweep status``
tells a dead coordinator by it) and holds the runners' lifeline
(:mod:`~coordinator.engine.lifeline`: a runner whose driver is gone ends itself at once).
Leaving closes and kills them all, whatever happened; a run that did not reach
:meth:`SweepCluster.end` is recorded ``interrupted`` (it is resumable).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from types import TracebackType
from typing import Any, cast

import ray

from coordinator.engine.handles import (
    FleetRouterHandle,
    StoreWriterHandle,
    TrajectoryRunnerHandle,
    kill,
)
from coordinator.engine.lifeline import Lifeline
from coordinator.engine.options import SweepOptions, SweepStop
from coordinator.engine.placement import place
from coordinator.engine.router import FleetRouter
from coordinator.engine.runner import TrajectoryRunner
from coordinator.engine.storage import StoreWriter, store_path
from coordinator.sweep_spec import SweepSpec

log = logging.getLogger(__name__)

RUNNER_START_S = 120.0  # a runner pinned to a node must start within this
ACTORS = {"max_concurrency": 100_000, "num_cpus": 0}
LEASE_S = 15.0          # a running coordinator's lease in the store ...
LEASE_RENEW_S = 2.0     # ... renewed this often


def _here() -> Any:
    """Hard affinity to the driver's node."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)


class SweepCluster:
    """The store writer, the fleet router and the trajectory runners of one sweep."""

    def __init__(self, spec: SweepSpec, options: SweepOptions, endpoints: Sequence[str],
                 owner: str, stop: SweepStop) -> None:
        self.spec, self.options, self.owner, self.stop = spec, options, owner, stop
        self.endpoints = list(endpoints)
        self._writer: StoreWriterHandle | None = None
        self._router: FleetRouterHandle | None = None
        self.runners: dict[str, list[TrajectoryRunnerHandle]] = {}
        self.registry_address = ""
        self.state = "interrupted"  # until end() records another
        self.lifeline: Lifeline | None = None
        self._lease: asyncio.Task[None] | None = None
        self.last_state: tuple[str, str, float] | None = None  # as the last renewal read it

    # ---- setup -------------------------------------------------------------------------------
    async def __aenter__(self) -> SweepCluster:
        try:
            await self._start()
        except BaseException:
            await self._shutdown()
            raise
        return self

    async def _start(self) -> None:
        o = self.options
        db = str(store_path(o.store_dir))
        self.lifeline = Lifeline(ray.util.get_node_ip_address())
        writer = self._writer = cast(StoreWriterHandle, ray.remote(StoreWriter).options(
            scheduling_strategy=_here(), **ACTORS).remote(db, o.run_id))
        registry = None if o.registry_port is None else (o.registry_host, o.registry_port)
        router = self._router = cast(FleetRouterHandle, ray.remote(FleetRouter).options(
            scheduling_strategy=_here(), **ACTORS).remote(
            o.spec_text, o.spec_source, o.spec_dir, db, o.fleet, o.eval_timeout_s, registry,
            o.registry_access, o.agent_auth))
        placement = place(self.spec, self.endpoints, _nodes())
        self.runners = {e: [] for e in placement}
        runners = asyncio.gather(*(self._start_runner(e, len(nodes), i, node)
                                   for e, nodes in placement.items() for i, node in enumerate(nodes)))
        try:
            await self._record_start(writer)
            self._lease = asyncio.get_running_loop().create_task(self._renew_lease(writer))
            self.registry_address = await router.start.remote()
            await runners
        except BaseException:
            runners.cancel()  # the runners placed so far are in self.runners: torn down
            with contextlib.suppress(BaseException):
                await runners
            raise
        if self.registry_address:
            log.info("agent registry on %s", self.registry_address)
        tokens, cost, _ = await writer.spend.remote()
        await asyncio.gather(*(r.observe_spend.remote(tokens, cost) for r in self.all_runners()))

    async def _record_start(self, writer: StoreWriterHandle) -> None:
        o = self.options
        await writer.add_run.remote({"kind": o.kind, "spec": o.spec_text,
                                     "spec_source": o.spec_source, "spec_dir": o.spec_dir,
                                     "store": str(o.store_dir)})
        await writer.set_state.remote("running", self.owner, LEASE_S)

    async def _renew_lease(self, writer: StoreWriterHandle) -> None:
        """Every :data:`LEASE_RENEW_S`: extend the lease; remember the state (a cancel)."""
        while True:
            with contextlib.suppress(ray.exceptions.RayError):
                self.last_state = await writer.renew.remote(LEASE_S)
            await asyncio.sleep(LEASE_RENEW_S)

    async def _start_runner(self, endpoint: str, shards: int, shard: int, node: str) -> None:
        """A runner pinned to ``node``, added to :attr:`runners` once it answers. Pinned hard: a
        soft pin falls back to the driver's node whenever the head's view of the other node
        lags, which put every runner on one node in CI. If the node has gone meanwhile, the
        runner goes wherever Ray puts it."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        o = self.options
        group = self.runners[endpoint]
        assert self.lifeline is not None
        lifeline = self.lifeline.address

        def start(where: Any) -> TrajectoryRunnerHandle:
            r = cast(TrajectoryRunnerHandle, ray.remote(TrajectoryRunner).options(
                scheduling_strategy=where, **ACTORS).remote(
                o.spec_text, o.spec_source, o.spec_dir, o.run_id, endpoint, self._writer,
                self._router, lifeline, shards, shard))
            group.append(r)  # torn down with the others, whatever happens next
            return r

        if node:
            r = start(NodeAffinitySchedulingStrategy(node_id=node, soft=False))
            try:
                await asyncio.wait_for(r.ready.remote(), RUNNER_START_S)
                return
            except (ray.exceptions.RayError, asyncio.TimeoutError, TimeoutError):
                group.remove(r)
                kill(r)
        await start("DEFAULT").ready.remote()

    # ---- while it runs -----------------------------------------------------------------------
    @property
    def writer(self) -> StoreWriterHandle:
        if self._writer is None:
            raise RuntimeError("the sweep cluster has not started")
        return self._writer

    @property
    def router(self) -> FleetRouterHandle:
        if self._router is None:
            raise RuntimeError("the sweep cluster has not started")
        return self._router

    def all_runners(self) -> list[TrajectoryRunnerHandle]:
        return [r for group in self.runners.values() for r in group]

    async def drain(self, timeout_s: float) -> None:
        """Ask every runner to start no new model call and wait, up to ``timeout_s`` or until a
        second stop request, for the calls on the wire to be stored."""
        drains = asyncio.gather(*(r.drain.remote(timeout_s) for r in self.all_runners()),
                                return_exceptions=True)
        while not drains.done() and not self.stop.hard:
            await asyncio.wait({drains}, timeout=0.2)
        if not drains.done():
            drains.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await drains

    async def end(self, state: str, detail: str) -> None:
        """Record how the run ended (the state ``kgb sweep status`` shows)."""
        await self._stop_lease()
        await self.writer.set_state.remote(state, detail, None)
        self.state = state

    async def _stop_lease(self) -> None:
        if self._lease is not None:
            self._lease.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._lease
            self._lease = None

    # ---- teardown ----------------------------------------------------------------------------
    async def __aexit__(self, t: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self._shutdown()

    async def _shutdown(self) -> None:
        await self._stop_lease()
        for r in self.all_runners():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(r.close.remote(), 5)
            kill(r)
        if self._router is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._router.close.remote(), 10)
            kill(self._router)
        if self._writer is not None:
            if self.state == "interrupted":
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(
                        self._writer.set_state.remote("interrupted", self.stop.reason, None), 5)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._writer.close.remote(), 10)
            kill(self._writer)
        if self.lifeline is not None:  # last: a runner still attached would end itself
            self.lifeline.close()


def _nodes() -> list[str]:
    return sorted(str(n["NodeID"]) for n in ray.nodes() if n.get("Alive"))
