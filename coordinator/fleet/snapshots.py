"""What the fleet knows about its agents: one frozen :class:`AgentSnapshot` per agent (what its
health checks, ``Describe`` and registration said, and our calls on it), and
:class:`FleetSnapshot`, all of them at once (for metrics and ``kgb sweep`` status)."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass


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
    # What each problem's baseline times against there (its Describe's ``system.baselines``).
    baselines: tuple[tuple[str, str], ...] = ()

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


