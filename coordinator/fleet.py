"""The device-agent fleet: which agents exist, which are healthy, and where each evaluation goes.

Agents come from the sweep spec (:class:`~coordinator.sweep_spec.AgentSpec`) or register
themselves (``coordinator/registry_service.py``, ``device_agent/registration.py``). The fleet
checks every agent itself, every ``probe_interval_s``, with ``grpc.health.v1`` (SERVING or not)
and ``Describe`` (platform, device model, harness and suite versions, capacity, queue depth), and
keeps what it learns as one frozen :class:`AgentSnapshot` per agent.

Routing (:func:`choose`): an evaluation for (platform, device model) goes to the least-loaded
agent that is UP, matches, serves the operator at the coordinator's version, has not already
failed this request, is not asking us to back off, and holds fewer of our calls than
``slots_per_worker`` times its capacity. Load is our calls on it plus the work others gave it
(its reported busy + queued, less our calls at the time of that report), per worker.

Failures (docs/fleet.md):

* candidate verdicts (``REJECTED`` ... ``PASSED``) are results, returned once, never retried;
* ``RESOURCE_EXHAUSTED``: the agent is skipped for the delay it asks for; not a failure;
* ``UNAVAILABLE``, lost connection, deadline: the agent is marked DOWN (no new work), checked
  at once, and the call moves to another agent after a jittered exponential back-off;
* ``INVALID_ARGUMENT`` or an ``INFRA_ERROR`` verdict from an agent: that agent is not asked
  again for this request, another one is;
* an agent that fails ``down_after`` health checks in a row is lost: calls still waiting on it
  move too (a hung host never answers them); a DRAINING agent keeps its calls and gets no new
  ones;
* a verdict that answers another request (candidate hash, operator, version or device model not
  what was sent, :mod:`coordinator.integrity`) is discarded, alarmed, and its agent QUARANTINED:
  its calls in flight move, and it gets no work for the life of the fleet.

With ``spot_check`` > 0 a sample of PASSED verdicts is judged again by a second agent of the same
platform and device model (:mod:`coordinator.spot_check` holds the rule when they disagree).

One random request id (:func:`protos.request_ids.fresh`) is used for every attempt of an
evaluation, so an agent that sees the call twice
(a retry after a lost answer) runs it once. Identical concurrent evaluations (same platform,
device, operator and candidate) share one flight. Only when the attempts are spent, no agent
can take the call within ``wait_for_agent_s``, or the deadline passes, does the evaluation end
as an ``INFRA_ERROR`` verdict, which never counts against a model. Every gRPC call has a
deadline.

A fleet belongs to the event loop that ran :meth:`Fleet.start`; there is no global state.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any

import operators
from coordinator.integrity import AlarmKind, Guard
from coordinator.spot_check import Dispute, SpotOutcome, judge, sampled
from coordinator.sweep_spec import AgentSpec
from generators.evaluation import candidate_hash, infra_verdict
from protos import request_ids
from protos.client import AgentBusy, AgentClient, AgentError, AgentUnreachable, BadRequest
from protos.integrity import Expected
from protos.records import AgentDescription, EvalRequest, Status, Verdict
from protos.registry import Heartbeat, Lease, Registration
from protos.security import ClientAuth

log = logging.getLogger(__name__)


class AgentState(str, enum.Enum):
    UNKNOWN = "UNKNOWN"      # not checked yet
    STARTING = "STARTING"    # answers, NOT_SERVING and never served: its workers are warming up
    UP = "UP"                # SERVING: gets work
    DRAINING = "DRAINING"    # shutting down: finishes the calls it has, gets no new ones
    DOWN = "DOWN"            # unreachable, failed a call, or its heartbeats stopped
    MISMATCH = "MISMATCH"    # reports another platform or device model than it was listed with
    QUARANTINED = "QUARANTINED"  # answered for another request: never routed to again


@dataclass(frozen=True)
class AgentSnapshot:
    """One agent as the fleet last saw it. Times named ``*_until``/``*_expires``/``changed_at``
    are ``time.monotonic()``; ``last_seen`` is wall-clock time."""

    address: str
    platform: str                       # the platform it is routed for (spec or registration)
    expected_device: str | None = None  # the device model its spec entry demands
    static: bool = False                # listed in the sweep spec (never forgotten)
    registered: bool = False            # holds a registration lease
    state: AgentState = AgentState.UNKNOWN
    reason: str = ""                    # why it is not UP
    agent_id: str = ""
    device_model: str = ""
    harness_version: str = ""
    health: str = ""                    # the last grpc.health answer
    capacity: int = 0
    busy: int = 0
    queue_depth: int = 0
    max_queue: int = 0
    in_flight: int = 0                  # this fleet's calls on it now
    foreign: int = 0                    # others' work on it at its last report (busy + queued - ours)
    probe_failures: int = 0             # consecutive failed health checks
    draining_reported: bool = False     # its last heartbeat said so
    deregistered: bool = False
    served: bool = False                # has been UP since its agent id last changed
    busy_until: float = 0.0
    lease_expires: float | None = None
    last_seen: float | None = None
    changed_at: float = 0.0
    suite: frozenset[tuple[str, int]] = frozenset()

    @property
    def load(self) -> float:
        """Calls per worker: ours now plus others' as last reported. (Its reported total would
        still count our calls that have since finished, until the next check.)"""
        if self.capacity <= 0:
            return math.inf
        return (self.in_flight + self.foreign) / self.capacity

    def slots(self, slots_per_worker: float) -> int:
        """How many of our calls it may hold at once (one running, the rest queued warm)."""
        return max(1, math.ceil(self.capacity * slots_per_worker))

    def matches(self, platform: str, device_model: str | None) -> bool:
        if self.platform != platform:
            return False
        return device_model is None or self.device_model.casefold() == device_model.casefold()


@dataclass(frozen=True)
class PlatformSummary:
    platform: str
    agents: int
    up: int
    draining: int
    down: int
    capacity: int       # summed over agents that are UP
    queue_depth: int    # as they last reported, agents that are UP
    in_flight: int      # this fleet's calls


@dataclass(frozen=True)
class FleetSnapshot:
    agents: tuple[AgentSnapshot, ...]
    taken_at: float  # wall clock

    def platforms(self) -> dict[str, PlatformSummary]:
        out: dict[str, PlatformSummary] = {}
        for platform in sorted({a.platform for a in self.agents}):
            mine = [a for a in self.agents if a.platform == platform]
            up = [a for a in mine if a.state is AgentState.UP]
            out[platform] = PlatformSummary(
                platform=platform, agents=len(mine), up=len(up),
                draining=sum(a.state is AgentState.DRAINING for a in mine),
                down=sum(a.state is AgentState.DOWN for a in mine),
                capacity=sum(a.capacity for a in up), queue_depth=sum(a.queue_depth for a in up),
                in_flight=sum(a.in_flight for a in mine))
        return out

    def metric_rows(self) -> list[tuple[str, str, bool, int, int]]:
        """(platform, device model, up, queue depth, running) per agent, as
        :meth:`coordinator.metrics.SweepMetrics.fleet` takes them (agent-reported counts)."""
        return [(a.platform, a.device_model or a.expected_device or "", a.state is AgentState.UP,
                 a.queue_depth, a.busy) for a in self.agents]


@dataclass(frozen=True)
class FleetConfig:
    """Health checking, leases and the retry budget. Defaults suit a real fleet; tests shrink
    the intervals."""

    probe_interval_s: float = 2.0     # health check of every agent
    probe_timeout_s: float = 3.0      # deadline of each health/Describe call
    down_after: int = 2               # failed checks in a row before an agent's calls move
    lease_s: float = 10.0             # registered agents: no heartbeat this long -> DOWN
    forget_after_s: float = 60.0      # registered agents DOWN this long are forgotten
    attempts: int = 4                 # failed attempts (not busy answers) per evaluation
    backoff_base_s: float = 0.2
    backoff_max_s: float = 5.0
    wait_for_agent_s: float = 30.0    # how long an evaluation waits when no agent can take it
    slots_per_worker: float = 2.0
    attempt_timeout_s: float | None = None  # per-attempt deadline (None: what is left)
    spot_check: float = 0.0           # fraction of PASSED verdicts judged again by a second agent

    def __post_init__(self) -> None:
        for name in ("probe_interval_s", "probe_timeout_s", "lease_s", "forget_after_s",
                     "backoff_base_s", "backoff_max_s", "slots_per_worker"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ValueError(f"FleetConfig.{name} must be a number > 0, got {value!r}")
        if not (math.isfinite(self.wait_for_agent_s) and self.wait_for_agent_s >= 0):
            raise ValueError(f"FleetConfig.wait_for_agent_s must be >= 0, got {self.wait_for_agent_s!r}")
        if self.attempts < 1 or self.down_after < 1:
            raise ValueError("FleetConfig.attempts and down_after must be >= 1")
        if self.attempt_timeout_s is not None and not self.attempt_timeout_s > 0:
            raise ValueError(f"FleetConfig.attempt_timeout_s must be > 0, got {self.attempt_timeout_s!r}")
        if not 0.0 <= self.spot_check <= 1.0:
            raise ValueError(f"FleetConfig.spot_check must be within [0, 1], got {self.spot_check!r}")

    @property
    def lease(self) -> Lease:
        return Lease(lease_s=self.lease_s, heartbeat_interval_s=self.lease_s / 3)


def backoff_delay(failures: int, base_s: float, max_s: float, rng: random.Random) -> float:
    """Exponential back-off with jitter: between half and all of ``base * 2**(failures-1)``,
    capped, so retries of many evaluations that failed together spread out."""
    ceiling = min(max_s, base_s * 2.0 ** max(0, failures - 1))
    return ceiling * rng.uniform(0.5, 1.0)


class NoAgent(str, enum.Enum):
    """Why :func:`choose` found no agent."""

    NO_MATCH = "no agent of this platform and device model is known"
    NONE_UP = "no matching agent is up with this operator version"
    ALL_TRIED = "every matching agent already failed this request"
    ALL_FULL = "every matching agent is full or asked to back off"


def choose(agents: Sequence[AgentSnapshot], platform: str, device_model: str | None,
           operator: tuple[str, int | None] | None, *, now: float, slots_per_worker: float,
           rng: random.Random, exclude: Collection[str] = ()) -> AgentSnapshot | NoAgent:
    """The least-loaded agent that may take an evaluation now, else why none may."""
    matching = [a for a in agents if a.matches(platform, device_model)]
    if not matching:
        return NoAgent.NO_MATCH
    up = [a for a in matching if a.state is AgentState.UP and a.capacity > 0
          and (operator is None or operator in a.suite)]
    if not up:
        return NoAgent.NONE_UP
    untried = [a for a in up if a.address not in exclude]
    if not untried:
        return NoAgent.ALL_TRIED
    free = [a for a in untried if a.busy_until <= now and a.in_flight < a.slots(slots_per_worker)]
    if not free:
        return NoAgent.ALL_FULL
    lowest = min(a.load for a in free)
    return rng.choice([a for a in free if a.load == lowest])


class AttemptOutcome(str, enum.Enum):
    VERDICT = "verdict"              # a candidate verdict: the result
    INFRA_VERDICT = "infra-verdict"  # the agent returned INFRA_ERROR: try another agent
    BUSY = "busy"                    # RESOURCE_EXHAUSTED: skipped for its retry hint
    REFUSED = "refused"              # INVALID_ARGUMENT from this agent: try another
    UNREACHABLE = "unreachable"      # UNAVAILABLE / DEADLINE_EXCEEDED: agent marked DOWN
    LOST = "lost"                    # the agent stopped answering health checks mid-call
    UNTRUSTED = "untrusted"          # the verdict answered another request, or the agent is
    #                                  quarantined: discarded, try another agent
    ERROR = "error"                  # any other system error (INTERNAL, ...)
    CLOSED = "closed"                # the fleet was closed


@dataclass(frozen=True)
class Attempt:
    agent: str
    outcome: AttemptOutcome
    detail: str
    seconds: float


@dataclass(frozen=True)
class Routed:
    """An evaluation's verdict, the agent that gave it (None when the fleet gave up) and every
    attempt made on the way; with a spot-check, its outcome and any dispute to record."""

    verdict: Verdict
    agent: str | None
    attempts: tuple[Attempt, ...]
    request_id: str
    spot_check: SpotOutcome | None = None
    dispute: Dispute | None = None


class UnknownAgentError(KeyError):
    """A heartbeat from an agent the fleet does not know (or no longer knows): register again."""


@dataclass(eq=False)
class _Channel:
    """An agent client shared by calls and checks; closed once retired and unused."""

    client: AgentClient
    users: int = 0
    retired: bool = False


class _Agent:
    def __init__(self, snap: AgentSnapshot, auth: ClientAuth | None = None) -> None:
        self.snap = snap
        self.auth = auth  # TLS and token to dial it with
        self.channel: _Channel | None = None
        self.lost = asyncio.Event()    # set when health checks give the agent up
        self.probe_lock = asyncio.Lock()
        self.removed = False


@dataclass
class _Flight:
    task: asyncio.Task[Routed]
    waiters: int = 0


@dataclass(frozen=True)
class _Result:
    attempt: Attempt
    verdict: Verdict | None = None


_FlightKey = tuple[str, str, str, int, bool, str]


class Fleet:
    """Agents, their health, and least-loaded routing with failover (see the module doc)."""

    def __init__(self, agents: Iterable[AgentSpec] = (), config: FleetConfig | None = None, *,
                 on_round: Callable[[FleetSnapshot], None] | None = None,
                 seed: int | None = None, guard: Guard | None = None,
                 auth: ClientAuth | None = None) -> None:
        """``auth``: TLS and token for agents without their own (``AgentSpec.auth``), which
        includes every registered agent."""
        self.config = config or FleetConfig()
        self.guard = guard or Guard()
        self._auth = auth
        self._on_round = on_round
        self._rng = random.Random(seed)
        self._agents: dict[str, _Agent] = {}
        for spec in agents:
            if spec.address in self._agents:
                raise ValueError(f"agent {spec.address} is listed twice")
            self._agents[spec.address] = _Agent(AgentSnapshot(
                address=spec.address, platform=spec.platform, expected_device=spec.device,
                static=True, changed_at=time.monotonic()), spec.auth.load() if spec.auth else auth)
        self._changed = asyncio.Event()
        self._closed = asyncio.Event()
        self._flights: dict[_FlightKey, _Flight] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._channels: set[_Channel] = set()
        self._loop_task: asyncio.Task[None] | None = None

    # ---- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        """Check every listed agent once, then keep checking in the background."""
        if self._closed.is_set():
            raise RuntimeError("this fleet was closed; make a new one")
        if self._loop_task is not None:
            return
        await asyncio.gather(*(self._probe(a) for a in list(self._agents.values())))
        self._loop_task = asyncio.get_running_loop().create_task(self._run(), name="kgb-fleet")

    async def close(self) -> None:
        """Stop checking; evaluations still running end as INFRA_ERROR; close every channel."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._notify()
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        flights = [f.task for f in self._flights.values()]
        if flights:
            await asyncio.gather(*flights, return_exceptions=True)
        if self._background:  # checks end within their deadlines; closes are quick
            _, pending = await asyncio.wait(set(self._background),
                                            timeout=2 * self.config.probe_timeout_s + 1)
            for task in pending:
                task.cancel()
        for agent in self._agents.values():
            agent.channel = None
        for channel in list(self._channels):
            self._channels.discard(channel)
            await channel.client.close()

    async def __aenter__(self) -> Fleet:
        await self.start()
        return self

    async def __aexit__(self, t: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    # ---- what other parts read -------------------------------------------------------------
    def snapshot(self) -> FleetSnapshot:
        return FleetSnapshot(tuple(self._agents[k].snap for k in sorted(self._agents)), time.time())

    def capacity(self, platform: str, device_model: str | None = None) -> int:
        """Workers of the matching agents that are UP (what a sweep sizes its in-flight work by)."""
        return sum(a.snap.capacity for a in self._agents.values()
                   if a.snap.state is AgentState.UP and a.snap.matches(platform, device_model))

    async def wait_ready(self, platform: str, device_model: str | None = None, *,
                         timeout_s: float = 60.0) -> bool:
        """Wait until a matching agent is UP (e.g. before a sweep, for agents still registering)."""
        end = time.monotonic() + timeout_s
        while not self._closed.is_set():
            if self.capacity(platform, device_model) > 0:
                return True
            left = end - time.monotonic()
            if left <= 0:
                return False
            await self._wait_change(left)
        return False

    def evaluator(self, platform: str, device_model: str | None = None, *, timeout_s: float = 900.0,
                  skip_timing: bool = False) -> FleetEvaluator:
        """A :class:`generators.evaluation.Evaluator` that routes through this fleet."""
        return FleetEvaluator(self, platform, device_model, timeout_s=timeout_s, skip_timing=skip_timing)

    # ---- evaluation ------------------------------------------------------------------------
    async def evaluate(self, platform: str, operator_id: str, source: str, *,
                       device_model: str | None = None, timeout_s: float = 900.0,
                       skip_timing: bool = False, candidate_name: str = "") -> Routed:
        """Route one candidate to an agent and return its verdict; never raises for the candidate
        or the system (an unobtainable verdict is ``INFRA_ERROR``)."""
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
        if self._loop_task is None and not self._closed.is_set():
            raise RuntimeError("Fleet.start() was not called")
        try:
            version = operators.get(operator_id).version
        except operators.UnknownOperatorError as exc:
            return Routed(infra_verdict(operator_id, source, f"not in this coordinator's suite: {exc}"),
                          None, (), "")
        chash = candidate_hash(source)
        key: _FlightKey = (platform, (device_model or "").casefold(), operator_id, version,
                           skip_timing, chash)
        flight = self._flights.get(key)
        if flight is None:
            if self._closed.is_set():
                return Routed(infra_verdict(operator_id, source, "the fleet is closed"), None, (), "")
            req = EvalRequest(request_id=request_ids.fresh("fleet"),
                              operator_id=operator_id,
                              source=source.encode("utf-8", "surrogateescape"),
                              operator_version=version, candidate_name=candidate_name,
                              skip_timing=skip_timing)
            task = asyncio.get_running_loop().create_task(
                self._fly(platform, device_model, req, source, timeout_s))
            flight = self._flights[key] = _Flight(task)

            def landed(_: asyncio.Task[Routed], key: _FlightKey = key, f: _Flight = flight) -> None:
                if self._flights.get(key) is f:
                    del self._flights[key]

            task.add_done_callback(landed)
        flight.waiters += 1
        try:
            return await asyncio.shield(flight.task)
        except asyncio.CancelledError:
            if flight.waiters <= 1 and not flight.task.done():
                flight.task.cancel()
            raise
        finally:
            flight.waiters -= 1

    async def _fly(self, platform: str, device_model: str | None, req: EvalRequest, source: str,
                   timeout_s: float) -> Routed:
        attempts: list[Attempt] = []
        try:
            routed = await self._route(platform, device_model, req, source, timeout_s, attempts)
            if routed.agent is not None and routed.verdict.status is Status.PASSED \
                    and sampled(self.config.spot_check, self._rng):
                routed = await self._spot_check(platform, routed, req, source, timeout_s)
            return routed
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a fleet bug must not be charged to a candidate
            log.exception("routing %s failed", req.request_id)
            return Routed(infra_verdict(req.operator_id, source,
                                        f"fleet error: {type(exc).__name__}: {exc}"),
                          None, tuple(attempts), req.request_id)

    async def _spot_check(self, platform: str, first: Routed, req: EvalRequest, source: str,
                          timeout_s: float) -> Routed:
        """Judge a PASSED again on another agent of the same device model, with a fresh request
        id and a full deadline of its own (a shorter one could time out a sound candidate)."""
        assert first.agent is not None
        known = self._agents.get(first.agent)
        model = (known.snap.device_model if known is not None else "") or first.verdict.device_model
        again = replace(req, request_id=request_ids.fresh("spot"))
        attempts: list[Attempt] = []
        second = await self._route(platform, model or None, again, source, timeout_s, attempts,
                                   exclude={first.agent})
        verdict, outcome, dispute = judge(first.verdict, first.agent, second.verdict, second.agent)
        if dispute is not None:
            for agent in (dispute.passed_by, dispute.refuted_by):
                self.guard.alarm(AlarmKind.DISAGREEMENT, agent, verdict.message)
        log.info("spot-check of %s (%s on %s): %s", req.request_id, first.verdict.status.value,
                 first.agent, outcome.value)
        return Routed(verdict, second.agent if dispute is not None else first.agent,
                      first.attempts + tuple(attempts), first.request_id, outcome, dispute)

    async def _route(self, platform: str, device_model: str | None, req: EvalRequest, source: str,
                     timeout_s: float, attempts: list[Attempt],
                     exclude: Collection[str] = ()) -> Routed:
        cfg = self.config
        deadline = time.monotonic() + timeout_s
        operator = (req.operator_id, req.operator_version)
        tried: set[str] = set(exclude)
        failures = 0
        waiting_since: float | None = None
        want = f"platform {platform!r}" + (f", device {device_model!r}" if device_model else "")

        def give_up(why: str) -> Routed:
            tail = "; ".join(f"{a.agent}: {a.outcome.value}: {a.detail}" for a in attempts[-4:])
            message = f"{why} ({want}; {len(attempts)} attempt(s){': ' + tail if tail else ''})"
            return Routed(infra_verdict(req.operator_id, source, message), None, tuple(attempts),
                          req.request_id)

        while True:
            if self._closed.is_set():
                return give_up("the fleet was closed")
            now = time.monotonic()
            if now >= deadline:
                return give_up(f"no verdict within {timeout_s:g}s")
            snaps = [a.snap for a in self._agents.values()]
            picked = choose(snaps, platform, device_model, operator, now=now,
                            slots_per_worker=cfg.slots_per_worker, rng=self._rng, exclude=tried)
            if isinstance(picked, NoAgent):
                if picked is NoAgent.ALL_TRIED:
                    return give_up(picked.value)
                limit = deadline
                if picked in (NoAgent.NO_MATCH, NoAgent.NONE_UP):
                    waiting_since = now if waiting_since is None else waiting_since
                    limit = min(deadline, waiting_since + cfg.wait_for_agent_s)
                    if now >= limit:
                        return give_up(f"{picked.value} after waiting {cfg.wait_for_agent_s:g}s: "
                                       f"{self._explain(platform, device_model, operator)}")
                else:
                    waiting_since = None
                wake = [s.busy_until for s in snaps if s.busy_until > now]
                await self._wait_change(min([limit, *wake]) - now)
                continue
            waiting_since = None
            agent = self._agents[picked.address]
            result = await self._attempt(agent, req, deadline)
            attempts.append(result.attempt)
            outcome = result.attempt.outcome
            if result.verdict is not None:
                return Routed(result.verdict, picked.address, tuple(attempts), req.request_id)
            if outcome is AttemptOutcome.CLOSED:
                return give_up("the fleet was closed")
            if outcome is AttemptOutcome.BUSY:
                continue
            if outcome in (AttemptOutcome.INFRA_VERDICT, AttemptOutcome.REFUSED,
                           AttemptOutcome.UNTRUSTED):
                tried.add(picked.address)
            failures += 1
            if failures >= cfg.attempts:
                return give_up(f"no verdict after {failures} failed attempt(s)")
            delay = backoff_delay(failures, cfg.backoff_base_s, cfg.backoff_max_s, self._rng)
            await self._pause(min(delay, deadline - time.monotonic()))

    async def _attempt(self, agent: _Agent, req: EvalRequest, deadline: float) -> _Result:
        address = agent.snap.address
        expected = Expected.of(req, agent.snap.device_model)
        start = time.monotonic()
        timeout = deadline - start
        if self.config.attempt_timeout_s is not None:
            timeout = min(timeout, self.config.attempt_timeout_s)
        channel = self._use_channel(agent)
        self._set(agent, in_flight=agent.snap.in_flight + 1)
        lost = agent.lost
        call = asyncio.ensure_future(channel.client.evaluate(req, timeout=timeout))
        watchers = [asyncio.ensure_future(lost.wait()), asyncio.ensure_future(self._closed.wait())]
        try:
            await asyncio.wait({call, *watchers}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in watchers:
                w.cancel()
            if not call.done():
                call.cancel()
                call.add_done_callback(_retrieve)
            self._drop_channel(channel)
            self._set(agent, in_flight=agent.snap.in_flight - 1)
            self._after_release(agent)

        def result(outcome: AttemptOutcome, detail: str, verdict: Verdict | None = None) -> _Result:
            return _Result(Attempt(address, outcome, detail, time.monotonic() - start), verdict)

        if not call.done() or call.cancelled():
            if self._closed.is_set():
                return result(AttemptOutcome.CLOSED, "the fleet was closed")
            if self._quarantined(agent):
                return result(AttemptOutcome.UNTRUSTED, "the agent was quarantined")
            return result(AttemptOutcome.LOST, "the agent stopped answering health checks")
        exc = call.exception()
        if exc is None:
            verdict = self.guard.vet(address, expected, call.result())
            if self._quarantined(agent):
                return result(AttemptOutcome.UNTRUSTED, verdict.message)
            if verdict.status is Status.INFRA_ERROR:
                return result(AttemptOutcome.INFRA_VERDICT, verdict.message)
            return result(AttemptOutcome.VERDICT, verdict.status.value, verdict)
        if isinstance(exc, AgentBusy):
            self._set(agent, busy_until=time.monotonic() + max(exc.retry_after_s, 0.05))
            return result(AttemptOutcome.BUSY, str(exc))
        if isinstance(exc, BadRequest):
            return result(AttemptOutcome.REFUSED, str(exc))
        if isinstance(exc, AgentUnreachable):
            self._mark_down(agent, f"a call failed: {exc}")
            return result(AttemptOutcome.UNREACHABLE, str(exc))
        if not isinstance(exc, AgentError):
            log.warning("call to %s raised %s: %s", address, type(exc).__name__, exc)
        return result(AttemptOutcome.ERROR, f"{type(exc).__name__}: {exc}")

    def _quarantined(self, agent: _Agent) -> bool:
        """Whether the guard quarantined the agent; one it has just quarantined leaves routing
        at once and its other calls move (whatever it answers them is discarded anyway)."""
        if self.guard.quarantined(agent.snap.address) is None:
            return False
        if agent.snap.state is not AgentState.QUARANTINED:
            self._set(agent, state=AgentState.QUARANTINED)
            self._lose(agent)
        return True

    def _explain(self, platform: str, device_model: str | None,
                 operator: tuple[str, int | None]) -> str:
        """The agents that match and why none took the call (for INFRA_ERROR messages)."""
        parts = []
        for a in sorted((x.snap for x in self._agents.values()), key=lambda s: s.address):
            if a.platform != platform:
                continue
            if not a.matches(platform, device_model):
                parts.append(f"{a.address} has device {a.device_model or '?'!r}")
            elif a.state is AgentState.UP and operator not in a.suite:
                parts.append(f"{a.address} lacks {operator[0]}@{operator[1]}")
            else:
                parts.append(f"{a.address} {a.state.value}" + (f" ({a.reason})" if a.reason else ""))
        others = sorted({a.snap.platform for a in self._agents.values()} - {platform})
        if others:
            parts.append(f"other platforms: {', '.join(others)}")
        return "; ".join(parts) or "the fleet has no agents"

    # ---- registration (called by coordinator/registry_service.py) ----------------------------
    def register(self, registration: Registration) -> Lease:
        """Add or refresh a registered agent; it gets work once the fleet's own check passes.
        ValueError for a malformed registration."""
        reg = registration.check()
        now = time.monotonic()
        load = reg.load
        agent = self._agents.get(reg.address)
        common: dict[str, Any] = dict(
            registered=True, deregistered=False, agent_id=reg.agent_id,
            harness_version=reg.harness_version, capacity=load.capacity, busy=load.busy,
            queue_depth=load.queue_depth, draining_reported=load.draining,
            foreign=max(0, load.busy + load.queue_depth - (agent.snap.in_flight if agent else 0)),
            lease_expires=now + self.config.lease_s, last_seen=time.time())
        if agent is None:
            agent = self._agents[reg.address] = _Agent(AgentSnapshot(
                address=reg.address, platform=reg.platform, device_model=reg.device_model,
                changed_at=now, **common), self._auth)
            log.info("agent %s registered (%s, %s)", reg.address, reg.platform, reg.device_model)
        else:
            restarted = reg.agent_id != agent.snap.agent_id
            if not agent.snap.static:
                common.update(platform=reg.platform, device_model=reg.device_model)
            self._set(agent, served=agent.snap.served and not restarted, **common)
        self._notify()
        self._spawn(self._probe(agent))
        return self.config.lease

    def heartbeat(self, heartbeat: Heartbeat) -> Lease:
        """Renew a registered agent's lease; UnknownAgentError when it must register again."""
        agent = self._agents.get(heartbeat.address)
        if (agent is None or not agent.snap.registered or agent.snap.deregistered
                or agent.snap.agent_id != heartbeat.agent_id):
            raise UnknownAgentError(f"agent {heartbeat.agent_id} at {heartbeat.address} is not "
                                    "registered; register again")
        snap, load = agent.snap, heartbeat.load
        expired = snap.lease_expires is not None and time.monotonic() > snap.lease_expires
        self._set(agent, lease_expires=time.monotonic() + self.config.lease_s, last_seen=time.time(),
                  capacity=load.capacity, busy=load.busy, queue_depth=load.queue_depth,
                  foreign=max(0, load.busy + load.queue_depth - snap.in_flight),
                  draining_reported=load.draining)
        if load.draining and agent.snap.state in (AgentState.UP, AgentState.STARTING):
            self._set(agent, state=AgentState.DRAINING, reason="its heartbeat says it is draining")
        elif expired or load.draining != snap.draining_reported or agent.snap.state is AgentState.DOWN:
            self._spawn(self._probe(agent))
        self._notify()
        return self.config.lease

    def deregister(self, agent_id: str, address: str) -> None:
        """The agent is shutting down: no new work; its calls in flight finish (idempotent)."""
        agent = self._agents.get(address)
        if agent is None or agent.snap.agent_id != agent_id:
            return
        log.info("agent %s deregistered", address)
        if agent.snap.static:
            self._set(agent, registered=False, lease_expires=None, state=AgentState.DRAINING,
                      reason="deregistered (shutting down)")
        else:
            self._set(agent, deregistered=True, lease_expires=None, state=AgentState.DRAINING,
                      reason="deregistered (shutting down)")
            self._after_release(agent)

    # ---- health ----------------------------------------------------------------------------
    async def _run(self) -> None:
        cfg = self.config
        while not self._closed.is_set():
            self._expire()
            await asyncio.gather(*(self._probe(a) for a in list(self._agents.values())))
            if self._on_round is not None:
                try:
                    self._on_round(self.snapshot())
                except Exception:  # noqa: BLE001 - a metrics callback must not stop health checks
                    log.exception("fleet on_round callback failed")
            await self._pause(cfg.probe_interval_s)

    def _expire(self) -> None:
        """Leases that ran out, and registered agents to forget."""
        now = time.monotonic()
        for agent in list(self._agents.values()):
            s = agent.snap
            if s.registered and s.lease_expires is not None and now > s.lease_expires:
                why = f"no heartbeat for {self.config.lease_s:g}s"
                if s.static:  # listed in the spec: its own checks decide from now on
                    self._set(agent, registered=False, lease_expires=None)
                elif s.state is not AgentState.DOWN:
                    self._set(agent, state=AgentState.DOWN, reason=why)
                    self._lose(agent)
            s = agent.snap
            if (not s.static and s.state is AgentState.DOWN and s.in_flight == 0
                    and now - s.changed_at > self.config.forget_after_s):
                self._remove(agent, "down too long")

    async def _probe(self, agent: _Agent) -> None:
        if agent.probe_lock.locked() or agent.removed or self._closed.is_set():
            return
        async with agent.probe_lock:
            # A DOWN agent is checked on a fresh channel: gRPC's reconnect back-off on an old one
            # grows to minutes and would hide an agent that came back. Others share the channel
            # their calls use, so a check sees what the calls see.
            channel = self._use_channel(agent) if agent.snap.state is not AgentState.DOWN else None
            client = channel.client if channel is not None else AgentClient(agent.snap.address, agent.auth)
            t = self.config.probe_timeout_s
            try:
                health = await client.health(timeout=t)
                description = await client.describe(timeout=t)
            except AgentError as exc:
                self._probe_failed(agent, str(exc))
            except Exception as exc:  # noqa: BLE001 - a malformed answer is a failed check
                self._probe_failed(agent, f"{type(exc).__name__}: {exc}")
            else:
                self._probe_ok(agent, health, description)
            finally:
                if channel is not None:
                    self._drop_channel(channel)
                else:
                    await client.close()

    def _probe_ok(self, agent: _Agent, health: str, d: AgentDescription) -> None:
        if agent.removed:
            return
        s = agent.snap
        restarted = bool(s.agent_id) and d.agent_id != s.agent_id
        served = s.served and not restarted
        platform, model = d.system.platform, d.system.device_model
        common: dict[str, Any] = dict(
            agent_id=d.agent_id, device_model=model, harness_version=d.harness_version,
            health=health, capacity=d.capacity, busy=sum(x.busy for x in d.devices),
            queue_depth=d.queue_depth, max_queue=d.max_queue, probe_failures=0,
            foreign=max(0, sum(x.busy for x in d.devices) + d.queue_depth - s.in_flight),
            last_seen=time.time(), suite=frozenset(d.suite))
        expired = (s.registered and not s.static and s.lease_expires is not None
                   and time.monotonic() > s.lease_expires)
        if platform != s.platform:
            state, reason = AgentState.MISMATCH, f"reports platform {platform!r}, not {s.platform!r}"
        elif s.expected_device and model.casefold() != s.expected_device.casefold():
            state, reason = AgentState.MISMATCH, f"reports device {model!r}, not {s.expected_device!r}"
        elif expired:
            state, reason = AgentState.DOWN, s.reason or f"no heartbeat for {self.config.lease_s:g}s"
        elif s.deregistered:
            state, reason = AgentState.DRAINING, s.reason
        elif s.draining_reported:
            state, reason = AgentState.DRAINING, "its heartbeat says it is draining"
        elif health == "SERVING":
            state, reason = AgentState.UP, ""
            served = True
        elif health == "NOT_SERVING" and served:
            state, reason = AgentState.DRAINING, "health NOT_SERVING (shutting down)"
        elif health == "NOT_SERVING":
            state, reason = AgentState.STARTING, "health NOT_SERVING (warming up)"
        else:
            state, reason = AgentState.DOWN, f"health {health}"
        self._set(agent, state=state, reason=reason, served=served, **common)

    def _probe_failed(self, agent: _Agent, error: str) -> None:
        if agent.removed:
            return
        s = agent.snap
        failures = s.probe_failures + 1
        if failures >= self.config.down_after or s.state in (AgentState.UNKNOWN, AgentState.STARTING,
                                                             AgentState.DOWN):
            self._set(agent, state=AgentState.DOWN, reason=error, probe_failures=failures)
            if failures >= self.config.down_after:
                self._lose(agent)
        else:
            self._set(agent, probe_failures=failures)

    def _mark_down(self, agent: _Agent, reason: str) -> None:
        """A call failed: no new work until a check passes, which starts now. Its other calls
        are not moved: they fail on their own if the agent is gone."""
        if agent.snap.state is not AgentState.MISMATCH:
            self._set(agent, state=AgentState.DOWN, reason=reason)
        self._spawn(self._probe(agent))

    def _lose(self, agent: _Agent) -> None:
        """Give the agent up: calls waiting on it move to others."""
        agent.lost.set()

    # ---- bookkeeping -----------------------------------------------------------------------
    def _set(self, agent: _Agent, **changes: Any) -> None:
        old = agent.snap
        quarantined = self.guard.quarantined(old.address)
        if quarantined is not None and "state" in changes:  # whatever its checks say
            changes.update(state=AgentState.QUARANTINED, reason=quarantined)
        new = replace(old, **changes)
        if new.state is not old.state:
            new = replace(new, changed_at=time.monotonic())
            level = (logging.WARNING if new.state in (AgentState.DOWN, AgentState.MISMATCH,
                                                      AgentState.QUARANTINED) else logging.INFO)
            log.log(level, "agent %s: %s -> %s%s", old.address, old.state.value, new.state.value,
                    f" ({new.reason})" if new.reason else "")
            if new.state is AgentState.DOWN:
                self._retire_channel(agent)
            if new.state is AgentState.UP and agent.lost.is_set():
                agent.lost = asyncio.Event()
        agent.snap = new
        if new.state is not old.state or new.in_flight < old.in_flight or new.busy_until != old.busy_until:
            self._notify()

    def _remove(self, agent: _Agent, why: str) -> None:
        log.info("agent %s forgotten (%s)", agent.snap.address, why)
        agent.removed = True
        self._agents.pop(agent.snap.address, None)
        self._retire_channel(agent)
        self._notify()

    def _after_release(self, agent: _Agent) -> None:
        if agent.snap.deregistered and not agent.snap.static and agent.snap.in_flight == 0 \
                and not agent.removed:
            self._remove(agent, "deregistered")

    def _use_channel(self, agent: _Agent) -> _Channel:
        if agent.channel is None:
            agent.channel = _Channel(AgentClient(agent.snap.address, agent.auth))
            self._channels.add(agent.channel)
        agent.channel.users += 1
        return agent.channel

    def _drop_channel(self, channel: _Channel) -> None:
        channel.users -= 1
        if channel.retired and channel.users == 0:
            self._close_channel(channel)

    def _retire_channel(self, agent: _Agent) -> None:
        channel, agent.channel = agent.channel, None
        if channel is not None:
            channel.retired = True
            if channel.users == 0:
                self._close_channel(channel)

    def _close_channel(self, channel: _Channel) -> None:
        if channel in self._channels:
            self._channels.discard(channel)
            self._spawn(channel.client.close())

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def _pause(self, seconds: float) -> None:
        """Sleep, ending early when the fleet closes. (Not ``asyncio.wait_for``: on Python 3.11 it
        can swallow a cancellation that meets the wake-up.)"""
        if seconds <= 0:
            return
        closed = asyncio.ensure_future(self._closed.wait())
        try:
            await asyncio.wait({closed}, timeout=seconds)
        finally:
            closed.cancel()

    async def _wait_change(self, timeout: float) -> None:
        """Until an agent changes state, frees a slot or stops asking to back off; or timeout."""
        if timeout <= 0:
            return
        waiters = [asyncio.ensure_future(self._changed.wait()), asyncio.ensure_future(self._closed.wait())]
        try:
            await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Read a cancelled call's outcome so asyncio does not log it as never retrieved."""
    if not task.cancelled():
        task.exception()


class FleetEvaluator:
    """:class:`generators.evaluation.Evaluator` over a :class:`Fleet`: one platform (and device
    model), one deadline per candidate. Returns ``INFRA_ERROR`` verdicts, never raises."""

    def __init__(self, fleet: Fleet, platform: str, device_model: str | None = None, *,
                 timeout_s: float = 900.0, skip_timing: bool = False) -> None:
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
        self.fleet = fleet
        self.platform = platform
        self.device_model = device_model
        self.timeout_s = timeout_s
        self.skip_timing = skip_timing

    def __repr__(self) -> str:
        return (f"FleetEvaluator({self.platform!r}, device_model={self.device_model!r}, "
                f"timeout_s={self.timeout_s})")

    async def evaluate(self, operator_id: str, source: str) -> Verdict:
        routed = await self.fleet.evaluate(self.platform, operator_id, source,
                                           device_model=self.device_model, timeout_s=self.timeout_s,
                                           skip_timing=self.skip_timing)
        return routed.verdict


