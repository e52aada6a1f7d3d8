"""The :class:`FleetRouter` actor: the sweep's one fleet, pinned to the driver's node.

It holds the :class:`~coordinator.fleet.Fleet` (the spec's agents, plus any that register on
``registry_port``) and judges every candidate of the sweep through
:class:`~coordinator.fleet.Evaluations` over the run's store (:class:`StoreVerdicts`): a
stored verdict from an agent of the same device model and harness version is reused, a new one
is stored (with any spot-check dispute) before it is returned, identical candidates in flight
share one evaluation, and the evaluations in flight stay within the fleet's slots (or the
spec's ``concurrency.evaluations_in_flight``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from coordinator.engine.process import quiet_gc
from coordinator.fleet import Evaluations, Fleet, FleetConfig
from coordinator.fleet.registration import RegistryAccess, RegistryServer
from coordinator.spot_check import Dispute
from coordinator.store import Store
from coordinator.sweep_spec import parse_spec
from protos.records import Verdict
from protos.security import ClientAuthFiles


class StoreVerdicts:
    """:class:`~coordinator.fleet.VerdictCache` over the run's store: the verdicts and
    disputes tables, on a connection of their own (same node as the store writer; SQLite
    serialises the two), one thread, off the event loop."""

    def __init__(self, store_file: str) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="kgb-verdicts")
        self._store: Store = self._pool.submit(Store, Path(store_file)).result()

    async def _run(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def lookup(self, operator_id: str, operator_version: int, candidate_hash: str,
                     keys: list[tuple[str, str, str]], public_only: bool = False) -> Verdict | None:
        found: Verdict | None = await self._run(functools.partial(
            self._store.verdict_for_any, public_only=public_only), operator_id,
            operator_version, candidate_hash, keys)
        return found

    async def keep(self, verdict: Verdict | None, dispute: Dispute | None) -> None:
        if dispute is not None:
            await self._run(self._store.add_dispute, dispute)
        if verdict is not None:
            await self._run(self._store.add_verdict, verdict)

    async def close(self) -> None:
        await self._run(self._store.close)
        self._pool.shutdown(wait=True)


class UnservedPlatformError(ValueError):
    """The sweep names a platform that no agent of the fleet serves."""


def unserved(wanted: list[str], served: list[str]) -> str | None:
    """Why the platforms ``wanted`` cannot all be judged by agents serving ``served``, or None."""
    missing = sorted(set(wanted) - set(served))
    if not missing:
        return None
    has = ", ".join(sorted(set(served))) or "none (no agent is known)"
    return (f"no agent in the fleet serves platform(s) {', '.join(missing)}; the fleet's agents "
            f"serve: {has}. Add an agent of that platform ([[agents]] or --register) or drop "
            "it from the spec's platforms")


class FleetRouter:
    """The sweep's fleet and its verdicts; see the module doc."""

    def __init__(self, spec_text: str, spec_source: str, spec_dir: str, store_file: str,
                 fleet_config: FleetConfig, eval_timeout_s: float,
                 registry: tuple[str, int] | None, registry_access: RegistryAccess | None = None,
                 agent_auth: ClientAuthFiles | None = None) -> None:
        spec = parse_spec(spec_text, spec_source, base_dir=spec_dir)
        if spec.fleet.spot_check is not None:
            fleet_config = dataclasses.replace(fleet_config, spot_check=spec.fleet.spot_check)
        # Credentials are read here, on the router's node, from the files named (never shipped
        # through Ray as values).
        self.fleet = Fleet(spec.agents, fleet_config,
                           auth=agent_auth.load() if agent_auth is not None else None)
        self.verdicts = StoreVerdicts(store_file)
        self.evaluations = Evaluations(self.fleet, self.verdicts, timeout_s=eval_timeout_s,
                                       in_flight_limit=spec.concurrency.evaluations_in_flight)
        self._registry = (None if registry is None else
                          RegistryServer(self.fleet, *registry, access=registry_access or RegistryAccess()))
        quiet_gc()

    async def start(self) -> str:
        """Start checking agents (and serving registration); returns its address or ""."""
        await self.fleet.start()
        if self._registry is not None:
            address: str = await self._registry.start()
            return address
        return ""

    async def wait_ready(self, platforms: list[str], timeout_s: float) -> dict[str, int]:
        """Wait (up to ``timeout_s``) for an agent of every platform; capacity per platform.
        :class:`UnservedPlatformError` when no agent of the fleet, up or not, serves one of
        them: the sweep fails before any trajectory runs, naming the platforms it has."""
        await asyncio.gather(*(self.fleet.wait_ready(p, timeout_s=timeout_s) for p in platforms))
        why = unserved(platforms, [a.platform for a in self.fleet.snapshot().agents])
        if why is not None:
            raise UnservedPlatformError(why)
        return {p: self.fleet.capacity(p) for p in platforms}

    async def evaluate(self, platform: str, device: str | None, operator_id: str, source: str,
                       label: str = "", public_only: bool = False) -> tuple[Verdict, bool]:
        """(verdict, taken from the store). Never raises for the candidate or the system.
        ``public_only``: an agent's verify (public cases only, kept under that mode)."""
        return await self.evaluations.evaluate(platform, operator_id, source,
                                               device_model=device, label=label,
                                               public_only=public_only)

    async def status(self) -> dict[str, Any]:
        snap = self.fleet.snapshot()
        e = self.evaluations
        return {"rows": snap.metric_rows(), "in_flight": e.in_flight,
                "evaluated": e.evaluated, "reused": e.reused, "shared": e.shared,
                "alarms": self.fleet.guard.totals(),
                "agents": [(a.address, a.platform, a.state.value, a.capacity) for a in snap.agents]}

    async def close(self) -> None:
        if self._registry is not None:
            await self._registry.stop()
        await self.fleet.close()
        await self.verdicts.close()
