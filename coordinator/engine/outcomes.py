"""What a finished trajectory sends back to the driver, and the driver's running totals.

A :class:`~coordinator.engine.runner.TrajectoryRunner` turns each trajectory into an
:class:`Outcome`: the result row to store (:func:`trajectory_result` builds it), plus, for
metrics only, slimmed copies of the verdicts it obtained. The driver folds outcomes into one
:class:`SweepProgress` (:func:`account`); model calls reach it as the store writer commits them
(:func:`account_calls`), not with the trajectory, so a call counts once and at once.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from coordinator.store import TrajectoryKey, TrajectoryLink, TrajectoryResult
from coordinator.sweep_spec import PlannedTrajectory
from coordinator.trajectory_artifacts import Artifact
from generators.base import Candidate
from generators.llm import CallStatus, LLMCall
from generators.trajectory import EndReason
from protos.records import Status, Verdict


@dataclass(frozen=True)
class Outcome:
    """One trajectory as the driver sees it: the stored result's headline and, for metrics,
    the verdicts obtained."""

    planned: PlannedTrajectory
    result: TrajectoryResult | None          # None: failed or stopped (resumable)
    verdicts: tuple[tuple[Verdict, bool], ...] = ()  # (slim verdict, reused: not evaluated for it)
    candidates: tuple[tuple[str, str], ...] = ()  # (hash, source) of the result's candidates
    label: str = ""                          # a candidate method's candidate: its label
    error: str = ""                          # why result is None
    node: str = ""                           # the Ray node that ran it
    artifacts: tuple[Artifact, ...] = ()     # agent-cli: stored with the result (bounded)
    more: tuple[TrajectoryResult, ...] = ()  # shared generation: the other platforms' rows
    # shared generation, for metrics: (platform, slim verdict, reused) of those platforms
    more_verdicts: tuple[tuple[str, Verdict, bool], ...] = ()

    def results(self) -> list[TrajectoryResult]:
        """Every row to store: the result and, with shared generation, one per other platform
        (stored together, so a trajectory is finished on all its platforms or on none)."""
        return [] if self.result is None else [self.result, *self.more]

    def link(self) -> TrajectoryLink | None:
        """A candidate method's trajectory and its one candidate (``kgb run``'s table row)."""
        if not self.label or self.result is None or not self.candidates:
            return None
        p = self.planned
        return TrajectoryLink(self.result.run_id, p.operator_id, p.method, p.model, p.sample,
                              self.label, self.candidates[-1][0])


@dataclass
class SweepProgress:
    """Running totals, handed to ``on_progress`` after every trajectory."""

    planned: int = 0
    skipped: int = 0          # finished before this process started (resume)
    done: int = 0             # finished by this process
    solved: int = 0
    failed: int = 0           # raised (system errors); resumable
    infra: int = 0            # ended INFRA_ERROR; a resume runs them again
    tokens: int = 0           # billed by calls this process stored
    cost_usd: float = 0.0
    calls_sent: int = 0
    in_flight: int = 0
    evaluations: int = 0      # verdicts obtained (reused ones included)
    verdicts_reused: int = 0  # taken from the store or shared with an identical evaluation
    by_end: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    nodes: set[str] = field(default_factory=set)
    started: float = field(default_factory=time.monotonic)

    @property
    def remaining(self) -> int:
        return self.planned - self.skipped - self.done - self.failed


def slim_verdict(v: Verdict) -> Verdict:
    return Verdict(status=v.status, operator_id=v.operator_id, operator_version=v.operator_version,
                   candidate_hash=v.candidate_hash, device_model=v.device_model,
                   harness_version=v.harness_version, wall_seconds=v.wall_seconds)


def failure(planned: PlannedTrajectory, exc: BaseException, node: str = "") -> Outcome:
    """A trajectory that raised (a system error, resumable): the last line of the error."""
    last = (str(exc).strip().splitlines() or [""])[-1]
    return Outcome(planned, None, error=f"{type(exc).__name__}: {last}"[:300], node=node)


def account_calls(progress: SweepProgress, calls: Sequence[LLMCall]) -> None:
    """Fold calls this process stored into the totals."""
    for c in calls:
        progress.calls_sent += int(c.status is not CallStatus.BUDGET)
        if c.usage is not None and c.billed:
            progress.tokens += c.usage.total_tokens
        progress.cost_usd += c.cost_usd


def account(progress: SweepProgress, o: Outcome) -> None:
    """Fold one outcome into the totals."""
    if o.node:
        progress.nodes.add(o.node)
    for reused in [r for _, r in o.verdicts] + [r for _, _, r in o.more_verdicts]:
        progress.evaluations += 1
        progress.verdicts_reused += int(reused)
    r = o.result
    if r is None:
        if "stopping" not in o.error:
            progress.failed += 1
            if len(progress.errors) < 20:
                progress.errors.append(f"{o.planned.operator_id} {o.planned.method} "
                                       f"{o.planned.model} #{o.planned.sample}: {o.error}")
        return
    progress.done += 1
    progress.by_end[r.end_reason] = progress.by_end.get(r.end_reason, 0) + 1
    if r.end_reason == EndReason.INFRA_ERROR.value:
        progress.infra += 1
    if r.solved:
        progress.solved += 1


def _best(judged: list[tuple[Candidate, Verdict]]) -> tuple[Candidate, Verdict] | None:
    """The fastest PASSED candidate (the latest among equals), else the last judged."""
    best: tuple[Candidate, Verdict] | None = None
    for c, v in judged:
        if v.status is Status.PASSED and (best is None or best[1].status is not Status.PASSED
                                          or (v.speedup or 0.0) >= (best[1].speedup or 0.0)):
            best = (c, v)
    if best is None and judged:
        best = judged[-1]
    return best


def public_pass_hidden_fail(v: Verdict | None) -> bool:
    """Whether a final verdict passed every public case it ran and failed a hidden one: the
    overfitting (or cheating) signal reports show per method."""
    if v is None or v.public_only or v.status is Status.PASSED:
        return False
    public = [c for c in v.cases if not c.hidden]
    return bool(public) and all(c.passed for c in public) and \
        any(c.hidden and not c.passed for c in v.cases)


def trajectory_result(run_id: str, platform: str, key: TrajectoryKey, source: str,
                      pairs: list[tuple[Candidate, Verdict | None]], end: EndReason, *,
                      turns: int, calls: Sequence[LLMCall],
                      seen: Sequence[tuple[Verdict, bool]] = (), detail: str = "",
                      checks: int = 0, wall_s: float = 0.0) -> TrajectoryResult:
    """The stored row: the best judged candidate, billed totals, and the agents' time: of the
    evaluations made for it (``seen``: each verdict obtained, an agent's public-case checks
    included, and whether it was reused) in ``gpu_seconds``, of the reused ones apart.
    ``checks`` counts an agent's verify calls (their verdicts are never its result). A failure
    to judge that no PASSED outweighs ends it ``INFRA_ERROR``."""
    judged = [(c, v) for c, v in pairs if v is not None]
    best = _best(judged)
    if any(v.status is Status.INFRA_ERROR for _, v in judged) and (
            best is None or best[1].status is not Status.PASSED):
        end = EndReason.INFRA_ERROR  # the system failed to judge: resumable, never the model's
        detail = detail or next(v.message for _, v in judged if v.status is Status.INFRA_ERROR)
    billed = [c for c in calls if c.usage is not None and c.billed]
    judged_now = [(v, reused) for v, reused in seen if v.status is not Status.INFRA_ERROR]
    return TrajectoryResult(
        run_id=run_id, platform=platform, key=key, source=source, end_reason=end.value,
        status=best[1].status if best else None,
        best_candidate_hash=best[0].candidate_hash if best else "",
        speedup=best[1].speedup if best else None, sol_percent=best[1].sol_percent if best else None,
        turns=turns, candidates=len(pairs),
        prompt_tokens=sum(c.usage.prompt_tokens for c in billed if c.usage),
        completion_tokens=sum(c.usage.completion_tokens for c in billed if c.usage),
        cost_usd=sum(c.cost_usd for c in calls),
        gpu_seconds=sum(v.wall_seconds for v, reused in judged_now if not reused),
        reused_verdicts=sum(1 for _, reused in judged_now if reused),
        reused_gpu_seconds=sum(v.wall_seconds for v, reused in judged_now if reused),
        detail=detail[:500], wall_s=wall_s, verify_calls=checks,
        public_pass_hidden_fail=public_pass_hidden_fail(best[1] if best else None),
        baseline=best[1].baseline if best else "")
