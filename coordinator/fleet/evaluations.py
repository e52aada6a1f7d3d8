"""The one way a candidate is judged: :class:`Evaluations` over a
:class:`~coordinator.fleet.routing.Fleet`.

Every caller goes through it: the sweep's fleet router (``kgb sweep`` and ``kgb run``),
:meth:`Fleet.evaluator <coordinator.fleet.routing.Fleet.evaluator>`, and :class:`AgentEvaluator`
(what a method gets outside a sweep). So each of these is written once:

1. **reuse** — a verdict the cache (the run's store) holds for the candidate, from an agent of
   the same device model and harness version as one that could judge it now, timed against the
   baseline that agent would time it against (or timing nothing), is returned and never
   recomputed; the cache is asked before an evaluation waits for its slot and **again once
   the slot is granted**, since an identical evaluation (another flight key naming the same
   device model, another run sharing the store) may have been kept meanwhile;
2. **de-duplication** — identical evaluations in flight (platform, device model,
   operator@version, timing mode, candidate) share one flight; the first caller's verdict is
   its evaluation, the others' a reuse (``reused``: no agent time spent for them), so GPU
   seconds are counted once per evaluation;
3. **admission** — evaluations in flight stay within the fleet's slots, so none waits inside the
   fleet, where a long wait ends as ``INFRA_ERROR``;
4. **retries** — the fleet's: failover, back-off, integrity checks, spot-checks;
5. **keeping** — a new verdict (and any spot-check dispute) is kept before it is returned;
   ``INFRA_ERROR`` never is (it is retried).

A ``public_only`` evaluation (an agent's ``verify``: public cases only) is its own mode
throughout: its flight key, its request id (mode ``public``), the verdict the agent must return
(``Verdict.public_only``, checked by the fleet's guard), and the cache, which keeps and looks
it up under that mode — so it is never reused as a final verdict, nor a final one for it.

``generators`` may not import the coordinator: it declares the one-method
:class:`generators.evaluation.Evaluator` protocol, which :class:`FleetEvaluator` and
:class:`AgentEvaluator` implement.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Protocol

import operators
from coordinator.fleet.config import FleetConfig
from coordinator.fleet.routing import Fleet
from coordinator.fleet.snapshots import AgentState
from coordinator.spot_check import Dispute
from coordinator.sweep_spec import AgentSpec
from generators.evaluation import infra_verdict
from protos.records import Status, Verdict, baseline_for, candidate_id
from protos.request_ids import RequestIds


class VerdictCache(Protocol):
    """Where verdicts are kept (a run's store): looked up before an agent is asked."""

    async def lookup(self, operator_id: str, operator_version: int, candidate_hash: str,
                     keys: list[tuple[str, str, str]], public_only: bool = False) -> Verdict | None:
        """A kept verdict of that mode under any of ``keys`` ((device model, harness version,
        baseline))."""
        ...

    async def keep(self, verdict: Verdict | None, dispute: Dispute | None) -> None:
        """Keep a new verdict (under its mode) and a spot-check dispute (either may be None)."""
        ...


# (operator id, version, candidate hash, mode) -> the request id every attempt carries; the mode
# is "timed", "notime" or "public"
RequestIdFn = Callable[[str, int, str, str], str]
_FlightKey = tuple[str, str, str, int, bool, bool, str]


def mode_of(skip_timing: bool, public_only: bool) -> str:
    """The evaluation mode's name in request ids."""
    return "public" if public_only else "notime" if skip_timing else "timed"


@dataclass
class _Flight:
    task: asyncio.Task[tuple[Verdict, bool]]
    waiters: int = 0


class Evaluations:
    """Judges candidates through ``fleet`` (see the module doc). ``in_flight_limit`` caps the
    evaluations in flight per platform (0: ``slots_per_worker`` x the fleet's capacity);
    ``request_id`` makes each evaluation's request id (default: the fleet's random one)."""

    def __init__(self, fleet: Fleet, cache: VerdictCache | None = None, *,
                 timeout_s: float = 900.0, in_flight_limit: int = 0,
                 request_id: RequestIdFn | None = None) -> None:
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
        self.fleet, self.cache, self.timeout_s = fleet, cache, timeout_s
        self.in_flight_limit = in_flight_limit
        self.request_id = request_id
        self._flights: dict[_FlightKey, _Flight] = {}
        self._in_flight: dict[str, int] = {}
        self._rooms: dict[str, asyncio.Condition] = {}  # per platform: a slot came free
        self.evaluated = 0  # new verdicts (not INFRA_ERROR)
        self.reused = 0     # taken from the cache
        self.shared = 0     # callers that joined an identical evaluation in flight

    @property
    def in_flight(self) -> int:
        return sum(self._in_flight.values())

    async def evaluate(self, platform: str, operator_id: str, source: str, *,
                       device_model: str | None = None, skip_timing: bool = False,
                       label: str = "", public_only: bool = False) -> tuple[Verdict, bool]:
        """(verdict, reused: taken from the cache or shared with an identical evaluation in
        flight). Never raises for the candidate or the system."""
        try:
            spec = operators.get(operator_id)
        except operators.UnknownOperatorError as exc:
            return infra_verdict(operator_id, source, f"not in this coordinator's suite: {exc}"), False
        chash = candidate_id(source)
        key: _FlightKey = (platform, (device_model or "").casefold(), spec.id, spec.version,
                           skip_timing, public_only, chash)
        flight = self._flights.get(key)
        joined = flight is not None
        if flight is None:
            task = asyncio.get_running_loop().create_task(self._judge(
                platform, device_model, spec.id, spec.version, source, skip_timing, label,
                public_only))
            flight = self._flights[key] = _Flight(task)

            def landed(_: asyncio.Task[tuple[Verdict, bool]], f: _Flight = flight) -> None:
                if self._flights.get(key) is f:
                    del self._flights[key]

            task.add_done_callback(landed)
        flight.waiters += 1
        try:
            v, reused = await asyncio.shield(flight.task)
        except asyncio.CancelledError:
            if flight.waiters <= 1 and not flight.task.done():
                flight.task.cancel()
            raise
        finally:
            flight.waiters -= 1
        if joined and v.status is not Status.INFRA_ERROR:
            self.shared += 1
            return v, True
        return v, reused

    async def _judge(self, platform: str, device_model: str | None, operator_id: str,
                     version: int, source: str, skip_timing: bool,
                     label: str, public_only: bool = False) -> tuple[Verdict, bool]:
        chash = candidate_id(source)
        cache = None if skip_timing else self.cache  # the store keeps timed verdicts only
        stored = await self._lookup(cache, platform, device_model, operator_id, version, chash,
                                    public_only)
        if stored is not None:
            return stored, True
        mode = mode_of(skip_timing, public_only)
        rid = self.request_id(operator_id, version, chash, mode) if self.request_id else None
        async with self._admitted(platform):
            # again: an identical evaluation may have been kept while this one waited
            stored = await self._lookup(cache, platform, device_model, operator_id, version,
                                        chash, public_only)
            if stored is not None:
                return stored, True
            routed = await self.fleet.evaluate(platform, operator_id, source,
                                               device_model=device_model, timeout_s=self.timeout_s,
                                               skip_timing=skip_timing, candidate_name=label,
                                               request_id=rid, public_only=public_only)
        v = routed.verdict
        judged = v.status is not Status.INFRA_ERROR
        if cache is not None:  # kept before anything may use it
            await cache.keep(v if judged else None, routed.dispute)
        self.evaluated += int(judged)
        return v, False

    async def _lookup(self, cache: VerdictCache | None, platform: str, device_model: str | None,
                      operator_id: str, version: int, chash: str,
                      public_only: bool) -> Verdict | None:
        """A kept verdict of the same evaluation mode (a verify's check never stands for a
        final score, nor the reverse)."""
        if cache is None:
            return None
        stored = await cache.lookup(operator_id, version, chash,
                                    self._judges(platform, device_model, operator_id),
                                    public_only)
        if stored is None or stored.public_only != public_only:
            return None
        self.reused += 1
        return stored

    def _judges(self, platform: str, device_model: str | None,
                operator_id: str) -> list[tuple[str, str, str]]:
        """(device model, harness version, the baseline it times ``operator_id`` against) of
        the agents that could judge a candidate now."""
        return sorted({(a.device_model, a.harness_version,
                        baseline_for(dict(a.baselines), operator_id))
                       for a in self.fleet.snapshot().agents
                       if a.state is AgentState.UP and a.matches(platform, device_model)
                       and a.harness_version})

    def _limit(self, platform: str) -> int:
        if self.in_flight_limit:
            return self.in_flight_limit
        return int(self.fleet.config.slots_per_worker * self.fleet.capacity(platform))

    @contextlib.asynccontextmanager
    async def _admitted(self, platform: str) -> AsyncIterator[None]:
        """Wait for a free slot among the agents that are up; the wait does not count against
        the evaluation's deadline. With no agent up there is no slot to wait for: the call goes
        on to the fleet, which waits for an agent itself (``wait_for_agent_s``, within the
        deadline) and says why none came."""
        room = self._rooms.setdefault(platform, asyncio.Condition())
        async with room:
            while 0 < self._limit(platform) <= self._in_flight.get(platform, 0):
                # woken by a finished evaluation; re-checked each second as capacity changes
                with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
                    await asyncio.wait_for(room.wait(), timeout=1.0)
            self._in_flight[platform] = self._in_flight.get(platform, 0) + 1
        try:
            yield
        finally:
            self._in_flight[platform] -= 1
            async with room:
                room.notify(1)


class FleetEvaluator:
    """:class:`generators.evaluation.Evaluator` over :class:`Evaluations`: one platform (and
    device model), one deadline per candidate. Returns ``INFRA_ERROR`` verdicts, never raises."""

    def __init__(self, evaluations: Evaluations, platform: str, device_model: str | None = None,
                 *, skip_timing: bool = False, public_only: bool = False) -> None:
        self.evaluations = evaluations
        self.platform = platform
        self.device_model = device_model
        self.skip_timing = skip_timing
        self.public_only = public_only

    def __repr__(self) -> str:
        return (f"FleetEvaluator({self.platform!r}, device_model={self.device_model!r}, "
                f"timeout_s={self.evaluations.timeout_s})")

    async def evaluate(self, operator_id: str, source: str) -> Verdict:
        v, _ = await self.evaluations.evaluate(self.platform, operator_id, source,
                                               device_model=self.device_model,
                                               skip_timing=self.skip_timing,
                                               public_only=self.public_only)
        return v


class AgentEvaluator:
    """:class:`generators.evaluation.Evaluator` on the one agent at ``address``: a fleet of one
    (its platform is what the agent describes on first use) behind :class:`Evaluations`, so the
    fleet's retries and integrity checks apply and identical evaluations in flight share one.

    The request id is derived from the problem, its version, the candidate's content, the timing
    mode and ``run`` with the coordinator's secret (:class:`protos.request_ids.RequestIds`,
    loaded on first use unless given), so the agent's idempotency makes two trajectories that
    produce the same file share one evaluation, while nobody without the secret can predict the
    id and bind a verdict to it first. An agent that answers for another request is quarantined
    and not asked again. Every failure is an ``INFRA_ERROR`` verdict; it never raises.
    """

    def __init__(self, address: str, timeout_s: float = 600.0, *, skip_timing: bool = False,
                 run: str = "", request_ids: RequestIds | None = None,
                 config: FleetConfig | None = None, public_only: bool = False) -> None:
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
        self.address = address
        self.timeout_s = timeout_s
        self.skip_timing = skip_timing
        self.public_only = public_only  # an agent's verifier: public cases only
        self.run = run
        self.config = config
        self._ids = request_ids
        self._fleet: Fleet | None = None
        self._evaluations: FleetEvaluator | None = None
        self._connecting = asyncio.Lock()

    def __repr__(self) -> str:
        return f"AgentEvaluator({self.address!r}, timeout_s={self.timeout_s})"

    def _request_id(self, operator_id: str, version: int, chash: str, mode: str) -> str:
        if self._ids is None:
            self._ids = RequestIds.load()
        return self._ids.derive(operator_id=operator_id, operator_version=version,
                                candidate_hash=chash, mode=mode, run=self.run, prefix="gen")

    async def _connect(self) -> FleetEvaluator | str:
        """The evaluator of the fleet of one, or why the agent cannot be reached."""
        from protos.client import AgentClient, AgentError  # grpc only where an agent is used

        async with self._connecting:
            if self._evaluations is not None:
                return self._evaluations
            try:
                async with AgentClient(self.address) as client:
                    platform = (await client.describe(timeout=min(self.timeout_s, 30.0))).system.platform
            except AgentError as exc:
                return f"agent at {self.address}: {type(exc).__name__}: {exc}"
            self._fleet = Fleet([AgentSpec(self.address, platform)], self.config)
            await self._fleet.start()
            evaluations = Evaluations(self._fleet, timeout_s=self.timeout_s,
                                      request_id=self._request_id)
            self._evaluations = FleetEvaluator(evaluations, platform, skip_timing=self.skip_timing,
                                               public_only=self.public_only)
            return self._evaluations

    async def evaluate(self, operator_id: str, source: str) -> Verdict:
        try:
            operators.get(operator_id)
        except operators.UnknownOperatorError as exc:
            return infra_verdict(operator_id, source, f"not in this suite: {exc}")
        evaluator = await self._connect()
        if isinstance(evaluator, str):
            return infra_verdict(operator_id, source, evaluator)
        assert self._fleet is not None
        why = self._fleet.guard.quarantined(self.address)
        if why is not None:
            return infra_verdict(operator_id, source, f"agent at {self.address} is not trusted: {why}")
        return await evaluator.evaluate(operator_id, source)

    async def close(self) -> None:
        if self._fleet is not None:
            await self._fleet.close()
            self._fleet = self._evaluations = None

    async def __aenter__(self) -> AgentEvaluator:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
