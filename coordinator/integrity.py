"""Fleet integrity: every verdict an agent returns is checked before anything uses it.

A :class:`Guard` stands between the agents and whatever keeps their verdicts (the store, a
trajectory, a results file). :meth:`Guard.vet` compares a verdict with the request that was sent
(:mod:`protos.integrity`): one that answers another candidate, operator, version or device is
replaced by an ``INFRA_ERROR`` verdict (so it is neither the candidate's result nor stored),
an alarm is raised (a loud log line, a count per agent that ``SweepMetrics.integrity_alarms``
exports), and the agent is **quarantined**: every later verdict from it is
discarded the same way, and the fleet routes nothing more to it for the guard's lifetime — a
restart or a new registration at the same address does not lift it (a rogue agent would simply
do that). Spot-check disagreements (:mod:`coordinator.spot_check`) are alarms too, but
quarantine nobody: two agents disagree and the guard cannot tell which one lies.

Each fleet (the one of ``kgb sweep`` and ``kgb run``, and the fleet of one inside an
``AgentEvaluator``) holds one guard, and so does ``kgb eval``.
"""

from __future__ import annotations

import collections
import enum
import logging
import threading

from protos.integrity import Expected, mismatches, refusal
from protos.records import Status, Verdict

log = logging.getLogger(__name__)


class AlarmKind(str, enum.Enum):
    MISMATCH = "mismatch"            # a verdict answered another request: the agent is quarantined
    DISAGREEMENT = "disagreement"    # a spot-check's second agent did not confirm a PASSED


class Guard:
    """Vets verdicts, keeps the quarantine list, counts alarms per (agent, kind). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._quarantined: dict[str, str] = {}
        self._totals: collections.Counter[tuple[str, str]] = collections.Counter()

    def quarantined(self, agent: str) -> str | None:
        """Why ``agent`` is quarantined, or None when it is not."""
        with self._lock:
            return self._quarantined.get(agent)

    def vet(self, agent: str, expected: Expected, verdict: Verdict) -> Verdict:
        """``verdict`` when it answers ``expected`` and ``agent`` is trusted; otherwise an
        ``INFRA_ERROR`` verdict about ``expected`` (and, for a mismatch, an alarm and quarantine)."""
        why = self.quarantined(agent)
        if why is not None:
            return Verdict(status=Status.INFRA_ERROR, operator_id=expected.operator_id,
                           operator_version=expected.operator_version,
                           candidate_hash=expected.candidate_hash,
                           message=f"agent {agent} is quarantined ({why}); its verdict was discarded")
        found = mismatches(expected, verdict)
        if not found:
            return verdict
        refused = refusal(expected, verdict, agent, found)
        self.quarantine(agent, "answered for another request")
        self.alarm(AlarmKind.MISMATCH, agent, refused.message)
        return refused

    def quarantine(self, agent: str, reason: str) -> None:
        with self._lock:
            if agent in self._quarantined:
                return
            self._quarantined[agent] = reason
        log.error("agent %s QUARANTINED: %s; no more work goes to it", agent, reason)

    def alarm(self, kind: AlarmKind, agent: str, detail: str) -> None:
        """Count and log one alarm (ERROR level: someone must look)."""
        with self._lock:
            self._totals[(agent, kind.value)] += 1
        log.error("INTEGRITY ALARM (%s) agent %s: %s", kind.value, agent, detail)

    def totals(self) -> dict[tuple[str, str], int]:
        """Alarms so far per (agent, kind): cumulative, for ``SweepMetrics.integrity_alarms``."""
        with self._lock:
            return dict(self._totals)
