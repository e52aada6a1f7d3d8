"""The :class:`Fleet`: one evaluation routed to an agent, with failover, retries and checks.

Routing (:func:`~coordinator.fleet.choice.choose`): an evaluation for (platform, device model)
goes to the least-loaded agent that is UP, matches, serves the operator at the coordinator's
version, has not already failed this request, is not asking us to back off, and holds fewer of
our calls than ``slots_per_worker`` times its capacity. Failures (docs/fleet.md) are retried on
another agent or after a back-off, within ``attempts`` failed attempts and the deadline; every
verdict is vetted by the fleet's :class:`~coordinator.integrity.Guard` first. With
``spot_check`` > 0 a sample of PASSED verdicts is judged again by a second agent
(:mod:`coordinator.spot_check`).

This is where retries live, for every caller; stored verdicts and identical evaluations in
flight are :class:`~coordinator.fleet.evaluations.Evaluations`' business, one layer up.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import logging
import random
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, replace
from types import TracebackType
from typing import TYPE_CHECKING, Any

import operators
from coordinator.fleet.choice import QUARANTINED, NoAgent, backoff_delay, choose
from coordinator.fleet.config import FleetConfig
from coordinator.fleet.roster import Member, Roster
from coordinator.fleet.snapshots import AgentState, FleetSnapshot
from coordinator.integrity import AlarmKind, Guard
from coordinator.spot_check import Dispute, SpotOutcome, judge, sampled
from coordinator.sweep_spec import AgentSpec
from generators.evaluation import infra_verdict
from protos import request_ids
from protos.client import AgentBusy, AgentError, AgentUnreachable, BadRequest
from protos.integrity import Expected
from protos.records import EvalRequest, Status, Verdict, source_bytes
from protos.registration import Heartbeat, Lease, Registration
from protos.security import ClientAuth

if TYPE_CHECKING:
    from coordinator.fleet.evaluations import FleetEvaluator

log = logging.getLogger(__name__)


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


@dataclass(frozen=True)
class _Result:
    attempt: Attempt
    verdict: Verdict | None = None


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Read a cancelled call's outcome so asyncio does not log it as never retrieved."""
    if not task.cancelled():
        task.exception()


def _gave_up(req: EvalRequest, source: str, want: str, attempts: list[Attempt],
             why: str) -> Routed:
    """The INFRA_ERROR a request ends in when routing gives up: why, what it wanted and the
    last attempts."""
    tail = "; ".join(f"{a.agent}: {a.outcome.value}: {a.detail}" for a in attempts[-4:])
    message = f"{why} ({want}; {len(attempts)} attempt(s){': ' + tail if tail else ''})"
    return Routed(infra_verdict(req.operator_id, source, message), None, tuple(attempts),
                  req.request_id)


class Fleet:
    """Agents (a :class:`~coordinator.fleet.roster.Roster`) and least-loaded routing with
    failover. Belongs to the event loop that ran :meth:`start`; no global state."""

    def __init__(self, agents: Iterable[AgentSpec] = (), config: FleetConfig | None = None, *,
                 on_round: Callable[[FleetSnapshot], None] | None = None,
                 seed: int | None = None, guard: Guard | None = None,
                 auth: ClientAuth | None = None) -> None:
        """``auth``: TLS and token for agents without their own (``AgentSpec.auth``), which
        includes every registered agent."""
        self.config = config or FleetConfig()
        self.guard = guard or Guard()
        self.roster = Roster(agents, self.config, self.guard, auth, on_round)
        self._rng = random.Random(seed)
        self._running: set[asyncio.Task[Routed]] = set()

    # ---- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        """Check every listed agent once, then keep checking in the background."""
        await self.roster.start()

    async def close(self) -> None:
        """Stop checking; evaluations still running end as INFRA_ERROR; close every channel."""
        if self.roster.closed.is_set():
            return
        self.roster.close()
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)
        await self.roster.finish()

    async def __aenter__(self) -> Fleet:
        await self.start()
        return self

    async def __aexit__(self, t: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    # ---- what other parts read -------------------------------------------------------------
    def snapshot(self) -> FleetSnapshot:
        return self.roster.snapshot()

    def capacity(self, platform: str, device_model: str | None = None) -> int:
        """Workers of the matching agents that are UP (what a sweep sizes its in-flight work by)."""
        return self.roster.capacity(platform, device_model)

    async def wait_ready(self, platform: str, device_model: str | None = None, *,
                         timeout_s: float = 60.0) -> bool:
        """Wait until a matching agent is UP (e.g. before a sweep, for agents still registering)."""
        return await self.roster.wait_ready(platform, device_model, timeout_s=timeout_s)

    def evaluator(self, platform: str, device_model: str | None = None, *, timeout_s: float = 900.0,
                  skip_timing: bool = False) -> FleetEvaluator:
        """A :class:`generators.evaluation.Evaluator` through this fleet: stored verdicts aside,
        what every caller gets (:class:`~coordinator.fleet.evaluations.FleetEvaluator`)."""
        from coordinator.fleet.evaluations import Evaluations, FleetEvaluator

        return FleetEvaluator(Evaluations(self, timeout_s=timeout_s), platform, device_model,
                              skip_timing=skip_timing)

    # ---- registration (coordinator/fleet/registration.py) -------------------------------------
    def accept_registrations(self) -> None:
        """Agents may join by registering (a registration server serves this fleet): an
        evaluation whose agents are all quarantined waits for one, as when none is up."""
        self.roster.open = True

    def register(self, registration: Registration) -> Lease:
        return self.roster.register(registration)

    def heartbeat(self, heartbeat: Heartbeat) -> Lease:
        return self.roster.heartbeat(heartbeat)

    def deregister(self, agent_id: str, address: str) -> None:
        self.roster.deregister(agent_id, address)

    # ---- evaluation ------------------------------------------------------------------------
    async def evaluate(self, platform: str, operator_id: str, source: str, *,
                       device_model: str | None = None, timeout_s: float = 900.0,
                       skip_timing: bool = False, candidate_name: str = "",
                       request_id: str | None = None, public_only: bool = False) -> Routed:
        """Route one candidate to an agent and return its verdict; never raises for the candidate
        or the system (an unobtainable verdict is ``INFRA_ERROR``). Every attempt carries
        ``request_id`` (default: a fresh random one). ``public_only``: public cases only (an
        agent's verify); the agent's verdict must say so."""
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
        if not self.roster.started and not self.roster.closed.is_set():
            raise RuntimeError("Fleet.start() was not called")
        try:
            version = operators.get(operator_id).version
        except operators.UnknownOperatorError as exc:
            return Routed(infra_verdict(operator_id, source, f"not in this coordinator's suite: {exc}"),
                          None, (), "")
        if self.roster.closed.is_set():
            return Routed(infra_verdict(operator_id, source, "the fleet is closed"), None, (), "")
        req = EvalRequest(request_id=request_id or request_ids.fresh("fleet"),
                          operator_id=operator_id, source=source_bytes(source),
                          operator_version=version, candidate_name=candidate_name,
                          skip_timing=skip_timing, public_only=public_only,
                          platform=platform)
        task = asyncio.get_running_loop().create_task(
            self._fly(platform, device_model, req, source, timeout_s))
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return await task

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
        known = self.roster.get(first.agent)
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
        cfg, roster = self.config, self.roster
        deadline = time.monotonic() + timeout_s
        operator = (req.operator_id, req.operator_version)
        tried: set[str] = set(exclude)
        failures = 0
        waiting_since: float | None = None
        want = f"platform {platform!r}" + (f", device {device_model!r}" if device_model else "")
        give_up = functools.partial(_gave_up, req, source, want, attempts)
        while True:
            if roster.closed.is_set():
                return give_up("the fleet was closed")
            now = time.monotonic()
            if now >= deadline:
                return give_up(f"no verdict within {timeout_s:g}s")
            snaps = [a.snap for a in roster.members()]
            picked = choose(snaps, platform, device_model, operator, now=now,
                            slots_per_worker=cfg.slots_per_worker, rng=self._rng, exclude=tried)
            if isinstance(picked, NoAgent):
                if picked is NoAgent.ALL_TRIED:
                    return give_up(picked.value)
                if picked is NoAgent.NONE_UP and roster.only_quarantined(platform, device_model):
                    return give_up(f"{QUARANTINED}: {self._explain(platform, device_model, operator)}")
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
                await roster.wait_change(min([limit, *wake]) - now)
                continue
            waiting_since = None
            member = roster.get(picked.address)
            assert member is not None  # chosen from the members just now, without a wait
            result = await self._attempt(member, req, deadline)
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
            await roster.pause(min(delay, deadline - time.monotonic()))

    async def _attempt(self, member: Member, req: EvalRequest, deadline: float) -> _Result:
        roster = self.roster
        address = member.snap.address
        expected = Expected.of(req, member.snap.device_model)
        start = time.monotonic()
        timeout = deadline - start
        if self.config.attempt_timeout_s is not None:
            timeout = min(timeout, self.config.attempt_timeout_s)
        channel = roster.use_channel(member)
        roster.update(member, in_flight=member.snap.in_flight + 1)
        lost = member.lost
        call = asyncio.ensure_future(channel.client.evaluate(req, timeout=timeout))
        watchers = [asyncio.ensure_future(lost.wait()), asyncio.ensure_future(roster.closed.wait())]
        try:
            await asyncio.wait({call, *watchers}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in watchers:
                w.cancel()
            if not call.done():
                call.cancel()
                call.add_done_callback(_retrieve)
            roster.drop_channel(channel)
            roster.update(member, in_flight=member.snap.in_flight - 1)
            roster.release(member)

        def result(outcome: AttemptOutcome, detail: str, verdict: Verdict | None = None) -> _Result:
            return _Result(Attempt(address, outcome, detail, time.monotonic() - start), verdict)

        if not call.done() or call.cancelled():
            if roster.closed.is_set():
                return result(AttemptOutcome.CLOSED, "the fleet was closed")
            if self._quarantined(member):
                return result(AttemptOutcome.UNTRUSTED, "the agent was quarantined")
            return result(AttemptOutcome.LOST, "the agent stopped answering health checks")
        exc = call.exception()
        if exc is None:
            verdict = self.guard.vet(address, expected, call.result())
            if self._quarantined(member):
                return result(AttemptOutcome.UNTRUSTED, verdict.message)
            if verdict.status is Status.INFRA_ERROR:
                return result(AttemptOutcome.INFRA_VERDICT, verdict.message)
            return result(AttemptOutcome.VERDICT, verdict.status.value, verdict)
        if isinstance(exc, AgentBusy):
            roster.update(member, busy_until=time.monotonic() + max(exc.retry_after_s, 0.05))
            return result(AttemptOutcome.BUSY, str(exc))
        if isinstance(exc, BadRequest):
            return result(AttemptOutcome.REFUSED, str(exc))
        if isinstance(exc, AgentUnreachable):
            roster.mark_down(member, f"a call failed: {exc}")
            return result(AttemptOutcome.UNREACHABLE, str(exc))
        if not isinstance(exc, AgentError):
            log.warning("call to %s raised %s: %s", address, type(exc).__name__, exc)
        return result(AttemptOutcome.ERROR, f"{type(exc).__name__}: {exc}")

    def _quarantined(self, member: Member) -> bool:
        """Whether the guard quarantined the agent; one it has just quarantined leaves routing
        at once and its other calls move (whatever it answers them is discarded anyway)."""
        if self.guard.quarantined(member.snap.address) is None:
            return False
        self.roster.quarantine(member)
        return True

    def _explain(self, platform: str, device_model: str | None,
                 operator: tuple[str, int | None]) -> str:
        """The agents that match and why none took the call (for INFRA_ERROR messages)."""
        parts = []
        members = self.roster.members()
        for a in sorted((x.snap for x in members), key=lambda s: s.address):
            if a.platform != platform:
                continue
            if not a.matches(platform, device_model):
                parts.append(f"{a.address} has device {a.device_model or '?'!r}")
            elif a.state is AgentState.UP and operator not in a.suite:
                parts.append(f"{a.address} lacks {operator[0]}@{operator[1]}")
            else:
                parts.append(f"{a.address} {a.state.value}" + (f" ({a.reason})" if a.reason else ""))
        others = sorted({a.snap.platform for a in members} - {platform})
        if others:
            parts.append(f"other platforms: {', '.join(others)}")
        return "; ".join(parts) or "the fleet has no agents"
