"""The device-agent fleet: which agents exist, which are healthy, where each evaluation goes,
and the one way every command judges a candidate.

One concept per module:

* :mod:`~coordinator.fleet.snapshots` — what the fleet knows of each agent
  (:class:`AgentSnapshot`, :class:`AgentState`) and of all of them (:class:`FleetSnapshot`);
* :mod:`~coordinator.fleet.config` — :class:`FleetConfig`: checks, leases, the retry budget;
* :mod:`~coordinator.fleet.roster` — the members: health checks (``grpc.health.v1`` and
  ``Describe`` every ``probe_interval_s``), registration leases, channels;
* :mod:`~coordinator.fleet.choice` — :func:`choose`: the least-loaded eligible agent, or why
  none (:class:`NoAgent`); :func:`backoff_delay`;
* :mod:`~coordinator.fleet.routing` — :class:`Fleet`: one evaluation routed with failover,
  retries, integrity checks and spot-checks;
* :mod:`~coordinator.fleet.evaluations` — :class:`Evaluations`: verdict reuse, de-duplication
  of identical evaluations in flight and admission, over a fleet; what ``kgb sweep``,
  ``kgb run``, :meth:`Fleet.evaluator` and :class:`AgentEvaluator` all go through;
* :mod:`~coordinator.fleet.registration` — the gRPC server agents register with.

Agents come from the sweep spec (:class:`~coordinator.sweep_spec.AgentSpec`) or register
themselves (``device_agent/registration.py``).

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
  its calls in flight move, and it gets no work for the life of the fleet. When every matching
  agent is quarantined and none can join (no registration server), evaluations give up at once.

One request id is used for every attempt of an evaluation (random, :func:`protos.request_ids.
fresh`, unless the caller derives one), so an agent that sees the call twice (a retry after a
lost answer) runs it once. Only when the attempts are spent, no agent can take the call within
``wait_for_agent_s``, or the deadline passes, does the evaluation end as an ``INFRA_ERROR``
verdict, which never counts against a model. Every gRPC call has a deadline.

A fleet belongs to the event loop that ran :meth:`Fleet.start`; there is no global state.
"""

from coordinator.fleet.choice import NoAgent, backoff_delay, choose
from coordinator.fleet.config import FleetConfig
from coordinator.fleet.evaluations import AgentEvaluator, Evaluations, FleetEvaluator, VerdictCache
from coordinator.fleet.roster import UnknownAgentError
from coordinator.fleet.routing import Attempt, AttemptOutcome, Fleet, Routed
from coordinator.fleet.snapshots import AgentSnapshot, AgentState, FleetSnapshot, PlatformSummary

__all__ = [
    "AgentEvaluator", "AgentSnapshot", "AgentState", "Attempt", "AttemptOutcome", "Evaluations",
    "Fleet", "FleetConfig", "FleetEvaluator", "FleetSnapshot", "NoAgent", "PlatformSummary",
    "Routed", "UnknownAgentError", "VerdictCache", "backoff_delay", "choose",
]
