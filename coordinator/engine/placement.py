"""How many trajectory runners an endpoint gets, where they go, and each one's share of the
endpoint's limits (pure functions of the spec and the cluster's nodes)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from coordinator.sweep_spec import PlannedTrajectory, SweepSpec
from generators.providers.base import EndpointConfig

CANDIDATES = ""  # the runner of candidate methods (reference, replay): no endpoint
MAX_SHARDS = 8  # runners per endpoint chosen for the cluster's nodes, at most
# An event loop kept this many trajectories in flight before its latency grew (on the 2-core
# dev box one runner held 1,200 at 2,660 trajectories/min, two at 3,120: docs/BENCHMARKS.md).
TRAJECTORIES_PER_RUNNER = 600


def endpoint_of(spec: SweepSpec, p: PlannedTrajectory) -> str:
    """The endpoint whose runners run ``p`` (:data:`CANDIDATES` for a candidate method)."""
    return CANDIDATES if not p.model else spec.model(p.model).endpoint


def endpoints(spec: SweepSpec, plan: Sequence[PlannedTrajectory]) -> list[str]:
    """The endpoints ``plan`` uses, in the order they first appear in it."""
    return list(dict.fromkeys(endpoint_of(spec, p) for p in plan))


def runner_count(spec: SweepSpec, endpoint: str, nodes: int) -> int:
    """How many runners run ``endpoint``'s trajectories: the spec's
    ``concurrency.runners_per_endpoint``, else one per node (up to ``MAX_SHARDS``) and at least
    one per ``TRAJECTORIES_PER_RUNNER`` trajectories in flight; never more than the endpoint's
    ``max_concurrency`` (each needs an HTTP slot of its own). The candidate methods need one."""
    if endpoint == CANDIDATES:
        return 1
    c = spec.concurrency
    n = c.runners_per_endpoint or max(
        min(max(1, nodes), MAX_SHARDS),
        math.ceil(c.generation_per_endpoint / TRAJECTORIES_PER_RUNNER))
    return max(1, min(n, spec.endpoint(endpoint).max_concurrency))


def shard_limits(config: EndpointConfig, shards: int, shard: int = 0) -> EndpointConfig:
    """Runner ``shard``'s share of an endpoint's limits: over all ``shards`` the shares add up
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


def place(spec: SweepSpec, used: Sequence[str], nodes: Sequence[str]) -> dict[str, list[str]]:
    """The node of each runner of each endpoint: round-robin over ``nodes`` across endpoints
    ("" when Ray lists no node: Ray places it)."""
    out: dict[str, list[str]] = {}
    placed = 0
    for endpoint in used:
        out[endpoint] = []
        for _ in range(runner_count(spec, endpoint, len(nodes))):
            out[endpoint].append(nodes[placed % len(nodes)] if nodes else "")
            placed += 1
    return out
