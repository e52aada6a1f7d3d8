"""What an evaluator lends each of its candidate runs (platform, layers, stage budgets, the
agent's own CPU work, launchers, metrics) and how a run reports back: kept apart from
:mod:`device_agent.candidate_run`, which drives the stages, so the evaluator that configures
runs needs none of the stage machinery to name these."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from device_agent.host_work import HostWork
from device_agent.launchers import LauncherBuilder
from device_agent.platforms import Platform
from protos.records import Status, Verdict

if TYPE_CHECKING:
    from device_agent.metrics import AgentMetrics


@dataclass(frozen=True)
class StageBudgets:
    """Per-stage deadlines in seconds (see docs/architecture.md). Each stage also ends
    ``margin_s`` before the client's deadline, so the client always receives a verdict."""

    load_s: float = 60.0
    correctness_s: float = 180.0
    timing_s: float = 240.0
    timing_case_budget_s: float = 2.0
    margin_s: float = 2.0
    # How long a candidate's correctness cases may keep the device's gate shared in a row; a
    # timer waits at most this (and the case in flight) for it. 0: one hold per case.
    check_hold_s: float = 0.25


@dataclass(frozen=True)
class Harness:
    """What an evaluator lends each of its runs."""

    platform: Platform
    layers: frozenset[str]
    budgets: StageBudgets
    host: HostWork  # the agent's own CPU work (comparisons)
    launchers: LauncherBuilder | None  # builds the Triton launchers workers report
    metrics: AgentMetrics | None

    def launchers_built(self, reported: list[Any]) -> int:
        """Hand the launchers a worker built itself to the agent's builder; returns how many."""
        if self.launchers is not None:
            self.launchers.request(reported)
        return len(reported)


class MakeVerdict(Protocol):
    """The verdict of the run's request, with ``status``, ``message`` and ``details``."""

    def __call__(self, status: Status, message: str, **details: Any) -> Verdict: ...


class WorkerLost(Exception):
    """A worker died (or stalled) before acknowledging its job: no candidate code had run."""
