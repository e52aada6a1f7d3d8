"""The fleet's members: which agents exist, what state each is in, and the channels to them.

A :class:`Roster` holds one :class:`Member` per agent: the spec's (static, never forgotten) and
those that register (leases renewed by heartbeats; ``coordinator/fleet/registration.py``
serves them). It checks every agent itself, every ``probe_interval_s``, with ``grpc.health.v1``
and ``Describe``, and keeps what it learns as the member's frozen
:class:`~coordinator.fleet.snapshots.AgentSnapshot`; every change goes through
:meth:`Roster.update`, which also wakes evaluations waiting for a state change or a free slot.
Routing (:class:`~coordinator.fleet.routing.Fleet`) reads and updates members; it never touches
health checks or leases.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from coordinator.fleet.config import FleetConfig
from coordinator.fleet.snapshots import AgentSnapshot, AgentState, FleetSnapshot
from coordinator.integrity import Guard
from coordinator.sweep_spec import AgentSpec
from protos.client import AgentClient, AgentError
from protos.records import AgentDescription
from protos.registration import Heartbeat, Lease, Registration
from protos.security import ClientAuth

log = logging.getLogger(__name__)


class UnknownAgentError(KeyError):
    """A heartbeat from an agent the fleet does not know (or no longer knows): register again."""


@dataclass(eq=False)
class Channel:
    """An agent client shared by calls and checks; closed once retired and unused."""

    client: AgentClient
    users: int = 0
    retired: bool = False


class Member:
    """One agent of the roster: its snapshot, how to dial it, and its channel."""

    def __init__(self, snap: AgentSnapshot, auth: ClientAuth | None = None) -> None:
        self.snap = snap
        self.auth = auth  # TLS and token to dial it with
        self.channel: Channel | None = None
        self.lost = asyncio.Event()    # set when health checks give the agent up
        self.probe_lock = asyncio.Lock()
        self.removed = False


class Roster:
    """The agents, their health and leases (see the module doc)."""

    def __init__(self, agents: Iterable[AgentSpec], config: FleetConfig, guard: Guard,
                 auth: ClientAuth | None = None,
                 on_round: Callable[[FleetSnapshot], None] | None = None) -> None:
        self.config = config
        self.guard = guard
        self._auth = auth
        self._on_round = on_round
        self._members: dict[str, Member] = {}
        for spec in agents:
            if spec.address in self._members:
                raise ValueError(f"agent {spec.address} is listed twice")
            self._members[spec.address] = Member(AgentSnapshot(
                address=spec.address, platform=spec.platform, expected_device=spec.device,
                static=True, changed_at=time.monotonic()), spec.auth.load() if spec.auth else auth)
        self._changed = asyncio.Event()
        self.closed = asyncio.Event()
        self._background: set[asyncio.Task[Any]] = set()
        self._channels: set[Channel] = set()
        self._loop_task: asyncio.Task[None] | None = None
        self.open = False  # agents may join by registering (a registration server, or one did)

    # ---- lifecycle -------------------------------------------------------------------------
    @property
    def started(self) -> bool:
        return self._loop_task is not None

    async def start(self) -> None:
        """Check every listed agent once, then keep checking in the background."""
        if self.closed.is_set():
            raise RuntimeError("this fleet was closed; make a new one")
        if self._loop_task is not None:
            return
        await asyncio.gather(*(self._probe(a) for a in list(self._members.values())))
        self._loop_task = asyncio.get_running_loop().create_task(self._run(), name="kgb-fleet")

    def close(self) -> None:
        """Stop: evaluations waiting on a member or a change give up (call :meth:`finish`)."""
        self.closed.set()
        self.notify()

    async def finish(self) -> None:
        """After :meth:`close`: stop checking and close every channel."""
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        if self._background:  # checks end within their deadlines; closes are quick
            _, pending = await asyncio.wait(set(self._background),
                                            timeout=2 * self.config.probe_timeout_s + 1)
            for task in pending:
                task.cancel()
        for member in self._members.values():
            member.channel = None
        for channel in list(self._channels):
            self._channels.discard(channel)
            await channel.client.close()

    # ---- what others read ------------------------------------------------------------------
    def members(self) -> list[Member]:
        return list(self._members.values())

    def get(self, address: str) -> Member | None:
        return self._members.get(address)

    def snapshot(self) -> FleetSnapshot:
        return FleetSnapshot(tuple(self._members[k].snap for k in sorted(self._members)),
                             time.time())

    def capacity(self, platform: str, device_model: str | None = None) -> int:
        """Workers of the matching agents that are UP (what a sweep sizes its in-flight work by)."""
        return sum(a.snap.capacity for a in self._members.values()
                   if a.snap.state is AgentState.UP and a.snap.matches(platform, device_model))

    async def wait_ready(self, platform: str, device_model: str | None = None, *,
                         timeout_s: float = 60.0) -> bool:
        """Wait until a matching agent is UP (e.g. before a sweep, for agents still registering)."""
        end = time.monotonic() + timeout_s
        while not self.closed.is_set():
            if self.capacity(platform, device_model) > 0:
                return True
            left = end - time.monotonic()
            if left <= 0:
                return False
            await self.wait_change(left)
        return False

    # ---- registration (called by coordinator/fleet/registration.py) --------------------------
    def register(self, registration: Registration) -> Lease:
        """Add or refresh a registered agent; it gets work once the fleet's own check passes.
        ValueError for a malformed registration."""
        reg = registration.check()
        self.open = True
        now = time.monotonic()
        load = reg.load
        member = self._members.get(reg.address)
        common: dict[str, Any] = dict(
            registered=True, deregistered=False, agent_id=reg.agent_id,
            harness_version=reg.harness_version, capacity=load.capacity, busy=load.busy,
            queue_depth=load.queue_depth, draining_reported=load.draining,
            foreign=max(0, load.busy + load.queue_depth - (member.snap.in_flight if member else 0)),
            lease_expires=now + self.config.lease_s, last_seen=time.time())
        if member is None:
            member = self._members[reg.address] = Member(AgentSnapshot(
                address=reg.address, platform=reg.platform, device_model=reg.device_model,
                changed_at=now, **common), self._auth)
            log.info("agent %s registered (%s, %s)", reg.address, reg.platform, reg.device_model)
        else:
            restarted = reg.agent_id != member.snap.agent_id
            if not member.snap.static:
                common.update(platform=reg.platform, device_model=reg.device_model)
            self.update(member, served=member.snap.served and not restarted, **common)
        self.notify()
        self.spawn(self._probe(member))
        return self.config.lease

    def heartbeat(self, heartbeat: Heartbeat) -> Lease:
        """Renew a registered agent's lease; UnknownAgentError when it must register again."""
        member = self._members.get(heartbeat.address)
        if (member is None or not member.snap.registered or member.snap.deregistered
                or member.snap.agent_id != heartbeat.agent_id):
            raise UnknownAgentError(f"agent {heartbeat.agent_id} at {heartbeat.address} is not "
                                    "registered; register again")
        snap, load = member.snap, heartbeat.load
        expired = snap.lease_expires is not None and time.monotonic() > snap.lease_expires
        self.update(member, lease_expires=time.monotonic() + self.config.lease_s,
                    last_seen=time.time(), capacity=load.capacity, busy=load.busy,
                    queue_depth=load.queue_depth,
                    foreign=max(0, load.busy + load.queue_depth - snap.in_flight),
                    draining_reported=load.draining)
        if load.draining and member.snap.state in (AgentState.UP, AgentState.STARTING):
            self.update(member, state=AgentState.DRAINING, reason="its heartbeat says it is draining")
        elif (expired or load.draining != snap.draining_reported
              or member.snap.state is AgentState.DOWN):
            self.spawn(self._probe(member))
        self.notify()
        return self.config.lease

    def deregister(self, agent_id: str, address: str) -> None:
        """The agent is shutting down: no new work; its calls in flight finish (idempotent)."""
        member = self._members.get(address)
        if member is None or member.snap.agent_id != agent_id:
            return
        log.info("agent %s deregistered", address)
        if member.snap.static:
            self.update(member, registered=False, lease_expires=None, state=AgentState.DRAINING,
                        reason="deregistered (shutting down)")
        else:
            self.update(member, deregistered=True, lease_expires=None, state=AgentState.DRAINING,
                        reason="deregistered (shutting down)")
            self.release(member)

    # ---- health ----------------------------------------------------------------------------
    async def _run(self) -> None:
        while not self.closed.is_set():
            self._expire()
            await asyncio.gather(*(self._probe(a) for a in list(self._members.values())))
            if self._on_round is not None:
                try:
                    self._on_round(self.snapshot())
                except Exception:  # noqa: BLE001 - a metrics callback must not stop health checks
                    log.exception("fleet on_round callback failed")
            await self.pause(self.config.probe_interval_s)

    def _expire(self) -> None:
        """Leases that ran out, and registered agents to forget."""
        now = time.monotonic()
        for member in list(self._members.values()):
            s = member.snap
            if s.registered and s.lease_expires is not None and now > s.lease_expires:
                why = f"no heartbeat for {self.config.lease_s:g}s"
                if s.static:  # listed in the spec: its own checks decide from now on
                    self.update(member, registered=False, lease_expires=None)
                elif s.state is not AgentState.DOWN:
                    self.update(member, state=AgentState.DOWN, reason=why)
                    self.lose(member)
            s = member.snap
            if (not s.static and s.state is AgentState.DOWN and s.in_flight == 0
                    and now - s.changed_at > self.config.forget_after_s):
                self._remove(member, "down too long")

    async def _probe(self, member: Member) -> None:
        if member.probe_lock.locked() or member.removed or self.closed.is_set():
            return
        async with member.probe_lock:
            # A DOWN agent is checked on a fresh channel: gRPC's reconnect back-off on an old one
            # grows to minutes and would hide an agent that came back. Others share the channel
            # their calls use, so a check sees what the calls see.
            channel = self.use_channel(member) if member.snap.state is not AgentState.DOWN else None
            client = (channel.client if channel is not None
                      else AgentClient(member.snap.address, member.auth))
            t = self.config.probe_timeout_s
            try:
                health = await client.health(timeout=t)
                description = await client.describe(timeout=t)
            except AgentError as exc:
                self._probe_failed(member, str(exc))
            except Exception as exc:  # noqa: BLE001 - a malformed answer is a failed check
                self._probe_failed(member, f"{type(exc).__name__}: {exc}")
            else:
                self._probe_ok(member, health, description)
            finally:
                if channel is not None:
                    self.drop_channel(channel)
                else:
                    await client.close()

    def _probe_ok(self, member: Member, health: str, d: AgentDescription) -> None:
        if member.removed:
            return
        s = member.snap
        restarted = bool(s.agent_id) and d.agent_id != s.agent_id
        busy = sum(x.busy for x in d.devices)
        state, reason = self._judge_state(s, health, d)
        self.update(member, state=state, reason=reason,
                    served=state is AgentState.UP or (s.served and not restarted),
                    agent_id=d.agent_id, device_model=d.system.device_model,
                    harness_version=d.harness_version, health=health, capacity=d.capacity,
                    busy=busy, queue_depth=d.queue_depth, max_queue=d.max_queue, probe_failures=0,
                    foreign=max(0, busy + d.queue_depth - s.in_flight), last_seen=time.time(),
                    suite=frozenset(d.suite), baselines=tuple(sorted(d.system.baselines.items())))

    def _judge_state(self, s: AgentSnapshot, health: str,
                     d: AgentDescription) -> tuple[AgentState, str]:
        """What a passed check makes of an agent (before quarantine, which overrides it)."""
        platform, model = d.system.platform, d.system.device_model
        restarted = bool(s.agent_id) and d.agent_id != s.agent_id
        expired = (s.registered and not s.static and s.lease_expires is not None
                   and time.monotonic() > s.lease_expires)
        if platform != s.platform:
            return AgentState.MISMATCH, f"reports platform {platform!r}, not {s.platform!r}"
        if s.expected_device and model.casefold() != s.expected_device.casefold():
            return AgentState.MISMATCH, f"reports device {model!r}, not {s.expected_device!r}"
        if expired:
            return AgentState.DOWN, s.reason or f"no heartbeat for {self.config.lease_s:g}s"
        if s.deregistered:
            return AgentState.DRAINING, s.reason
        if s.draining_reported:
            return AgentState.DRAINING, "its heartbeat says it is draining"
        if health == "SERVING":
            return AgentState.UP, ""
        if health == "NOT_SERVING" and s.served and not restarted:
            return AgentState.DRAINING, "health NOT_SERVING (shutting down)"
        if health == "NOT_SERVING":
            return AgentState.STARTING, "health NOT_SERVING (warming up)"
        return AgentState.DOWN, f"health {health}"

    def _probe_failed(self, member: Member, error: str) -> None:
        if member.removed:
            return
        s = member.snap
        failures = s.probe_failures + 1
        if failures >= self.config.down_after or s.state in (AgentState.UNKNOWN,
                                                             AgentState.STARTING, AgentState.DOWN):
            self.update(member, state=AgentState.DOWN, reason=error, probe_failures=failures)
            if failures >= self.config.down_after:
                self.lose(member)
        else:
            self.update(member, probe_failures=failures)

    def mark_down(self, member: Member, reason: str) -> None:
        """A call failed: no new work until a check passes, which starts now. Its other calls
        are not moved: they fail on their own if the agent is gone."""
        if member.snap.state is not AgentState.MISMATCH:
            self.update(member, state=AgentState.DOWN, reason=reason)
        self.spawn(self._probe(member))

    def lose(self, member: Member) -> None:
        """Give the agent up: calls waiting on it move to others."""
        member.lost.set()

    def quarantine(self, member: Member) -> None:
        """The guard quarantined the agent: it leaves routing at once and its calls move."""
        if member.snap.state is not AgentState.QUARANTINED:
            self.update(member, state=AgentState.QUARANTINED)
            self.lose(member)

    def only_quarantined(self, platform: str, device_model: str | None) -> bool:
        """Every matching agent is quarantined and no other can join (nothing registers with
        this fleet): waiting for one to come up is pointless."""
        if self.open:
            return False
        return all(a.snap.state is AgentState.QUARANTINED for a in self._members.values()
                   if a.snap.matches(platform, device_model))

    # ---- bookkeeping -----------------------------------------------------------------------
    def update(self, member: Member, **changes: Any) -> None:
        """Change a member's snapshot (a quarantined agent stays QUARANTINED whatever its checks
        say); wakes waiters when its state changed, a slot came free or a back-off ended."""
        old = member.snap
        quarantined = self.guard.quarantined(old.address)
        if quarantined is not None and "state" in changes:
            changes.update(state=AgentState.QUARANTINED, reason=quarantined)
        new = replace(old, **changes)
        if new.state is not old.state:
            new = replace(new, changed_at=time.monotonic())
            level = (logging.WARNING if new.state in (AgentState.DOWN, AgentState.MISMATCH,
                                                      AgentState.QUARANTINED) else logging.INFO)
            log.log(level, "agent %s: %s -> %s%s", old.address, old.state.value, new.state.value,
                    f" ({new.reason})" if new.reason else "")
            if new.state is AgentState.DOWN:
                self._retire_channel(member)
            if new.state is AgentState.UP and member.lost.is_set():
                member.lost = asyncio.Event()
        member.snap = new
        if (new.state is not old.state or new.in_flight < old.in_flight
                or new.busy_until != old.busy_until):
            self.notify()

    def _remove(self, member: Member, why: str) -> None:
        log.info("agent %s forgotten (%s)", member.snap.address, why)
        member.removed = True
        self._members.pop(member.snap.address, None)
        self._retire_channel(member)
        self.notify()

    def release(self, member: Member) -> None:
        """After a call on it ended: a deregistered agent with no calls left is forgotten."""
        s = member.snap
        if s.deregistered and not s.static and s.in_flight == 0 and not member.removed:
            self._remove(member, "deregistered")

    def use_channel(self, member: Member) -> Channel:
        if member.channel is None:
            member.channel = Channel(AgentClient(member.snap.address, member.auth))
            self._channels.add(member.channel)
        member.channel.users += 1
        return member.channel

    def drop_channel(self, channel: Channel) -> None:
        channel.users -= 1
        if channel.retired and channel.users == 0:
            self._close_channel(channel)

    def _retire_channel(self, member: Member) -> None:
        channel, member.channel = member.channel, None
        if channel is not None:
            channel.retired = True
            if channel.users == 0:
                self._close_channel(channel)

    def _close_channel(self, channel: Channel) -> None:
        if channel in self._channels:
            self._channels.discard(channel)
            self.spawn(channel.client.close())

    def notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def pause(self, seconds: float) -> None:
        """Sleep, ending early when the fleet closes. (Not ``asyncio.wait_for``: on Python 3.11 it
        can swallow a cancellation that meets the wake-up.)"""
        if seconds <= 0:
            return
        closed = asyncio.ensure_future(self.closed.wait())
        try:
            await asyncio.wait({closed}, timeout=seconds)
        finally:
            closed.cancel()

    async def wait_change(self, timeout: float) -> None:
        """Until an agent changes state, frees a slot or stops asking to back off; or timeout."""
        if timeout <= 0:
            return
        waiters = [asyncio.ensure_future(self._changed.wait()),
                   asyncio.ensure_future(self.closed.wait())]
        try:
            await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()

    def spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
