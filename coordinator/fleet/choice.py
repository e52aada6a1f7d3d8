"""Choosing an agent for one evaluation (:func:`choose`, or why none: :class:`NoAgent`) and how
long to wait before the next attempt (:func:`backoff_delay`). Pure functions of snapshots."""

from __future__ import annotations

import enum
import random
from collections.abc import Collection, Sequence

from coordinator.fleet.snapshots import AgentSnapshot, AgentState


def backoff_delay(failures: int, base_s: float, max_s: float, rng: random.Random) -> float:
    """Exponential back-off with jitter: between half and all of ``base * 2**(failures-1)``,
    capped, so retries of many evaluations that failed together spread out."""
    ceiling = min(max_s, base_s * 2.0 ** max(0, failures - 1))
    return ceiling * rng.uniform(0.5, 1.0)


QUARANTINED = "every matching agent is quarantined"


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


