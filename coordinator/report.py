"""Reports: pure functions of stored rows, and their rendering (definitions: docs/reports.md).

Two kinds of run are stored. A sweep writes one ``trajectory_results`` row per finished
trajectory and every model call to ``llm_calls``; its report (:func:`build_report`) gives
accuracy and pass@k per (model, method, source, platform), the status funnel per (model,
method), and tokens, cost and GPU time per solved problem. ``kgb run`` writes only
``trajectories`` and ``verdicts``; its report is the per-trajectory table (:func:`result_rows`,
:func:`render_table`).

Every number is computed here from rows, never kept in the store, so a report can be rebuilt
(with other k, say) from any stored run.
"""

from __future__ import annotations

import math
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from rich.console import Console
from rich.table import Table

from coordinator.llm_calls import Unconfirmed
from coordinator.report_costs import CostRow, TrajectoryUsage, cost_rows, cost_total, llm_usage
from coordinator.report_metrics import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    MetricRow,
    ProblemOutcome,
    Scope,
    geomean,
    is_excluded,
    method_rounds,
    metric_rows,
    problem_outcomes,
    run_scope,
)
from coordinator.run_status import run_status
from coordinator.spot_check import Dispute
from coordinator.store import Store, TrajectoryResult, TrajectoryRow
from coordinator.track_report import TrackRow, track_rows
from coordinator.warning_report import WarningRow, warning_rows
from protos.records import Status

__all__ = ["REPORT_SCHEMA_VERSION", "CostRow", "RunReport", "TrajectoryUsage", "build_report",
           "cost_rows", "cost_total", "is_excluded", "llm_usage", "read_report"]

# The shape of ``kgb report --json`` (docs/reports.md); 2 added ``schema_version``, the
# unconfirmed calls and the reused verdicts of the cost rows, the agent track and the warnings;
# 3 the headline metrics over the named problems (``scope``, ``metrics``, ``bootstrap``), the run's
# ``state``, the cost rows' token split and wall time, and renamed ``groups[].accuracy`` (over
# attempted problems) to ``attempted_accuracy``.
REPORT_SCHEMA_VERSION = 3

# ---- kgb run: one row per trajectory ---------------------------------------------------------


@dataclass(frozen=True)
class ResultRow:
    operator: str
    source: str
    method: str
    label: str
    status: str
    speedup: float | None
    sol_percent: float | None
    message: str
    baseline: str = ""  # what the speed-up is over ("torch", "vllm", "cublas"; "" untimed)


def result_rows(rows: list[TrajectoryRow]) -> list[ResultRow]:
    out = []
    for r in rows:
        v = r.verdict
        out.append(ResultRow(
            operator=r.operator_id, source=r.operator_id.split("::", 1)[0], method=r.method,
            label=r.label, status=v.status.value if v else "PENDING",
            speedup=v.speedup if v else None, sol_percent=v.sol_percent if v else None,
            message=v.message if v else "", baseline=v.baseline if v else ""))
    return out


def status_counts(rows: list[ResultRow]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    return counts


def stdout_console() -> Console:
    """A stdout console; when stdout is not a terminal, wide enough that ids are never cut."""
    return Console() if sys.stdout.isatty() else Console(width=160)


def render_table(rows: list[ResultRow], title: str = "") -> Table:
    """A rich Table: operator, source, method, status, speedup, % of speed-of-light, and what
    each speed-up is over where anything was timed."""
    table = Table(title=title or None)
    over = any(r.baseline for r in rows)
    for col, kw in (("operator", {}), ("source", {}), ("method", {}), ("candidate", {}),
                    ("status", {}), ("speedup", {"justify": "right"}),
                    ("% SOL", {"justify": "right"}), *((("vs", {}),) if over else ())):
        table.add_column(col, no_wrap=col in ("operator", "status"), **kw)  # type: ignore[arg-type]
    for r in rows:
        style = "green" if r.status == "PASSED" else "red"
        table.add_row(r.operator, r.source, r.method, r.label, f"[{style}]{r.status}[/{style}]",
                      f"{r.speedup:.2f}x" if r.speedup else "-",
                      f"{r.sol_percent:.1f}%" if r.sol_percent else "-",
                      *((r.baseline or "-",) if over else ()))
    return table


def render_disputes(disputes: Sequence[Dispute]) -> Table:
    """PASSED verdicts a spot-check's second agent did not confirm (the candidate's verdict is
    the second agent's; docs/fleet.md): a person should look at both agents."""
    table = Table(title=f"disputed verdicts ({len(disputes)}): second agent's verdict kept")
    for col in ("operator", "candidate", "device", "PASSED by", "refuted by", "second verdict"):
        table.add_column(col, no_wrap=True)
    for d in disputes:
        table.add_row(f"{d.operator_id}@{d.operator_version}", d.candidate_hash[:12],
                      d.device_model, d.passed_by, d.refuted_by,
                      f"[red]{d.second_status.value}[/red]")
    return table


# ---- sweeps: accuracy and pass@k --------------------------------------------------------------

#: pass@k values reported by default: those not above the most scored samples of any problem.
DEFAULT_KS = (1, 5, 10, 20, 50, 100)


def problem_of(r: TrajectoryResult) -> str:
    """The problem a trajectory attempts: ``operator id@version`` (a new version is a new problem)."""
    return f"{r.key.operator_id}@{r.key.operator_version}"


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """The unbiased pass@k estimate for one problem with ``n`` samples of which ``c`` passed:
    ``1 - C(n-c, k) / C(n, k)`` (Chen et al. 2021); None when ``n < k`` (no unbiased estimate)."""
    if k < 1 or n < 0 or not 0 <= c <= n:
        raise ValueError(f"pass@k needs k >= 1 and 0 <= c <= n, got n={n} c={c} k={k}")
    if n < k:
        return None
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)  # exact integers, one correctly rounded division


@dataclass(frozen=True)
class PassAtK:
    """pass@k of a group: the mean over the ``problems`` that have at least k scored samples
    (a problem with fewer has no unbiased estimate and is left out); None when none has."""

    k: int
    value: float | None
    problems: int


def mean_pass_at_k(counts: Iterable[tuple[int, int]], k: int) -> PassAtK:
    """pass@k averaged over problems given as (samples, passed) pairs."""
    values = [v for n, c in counts if (v := pass_at_k(n, c, k)) is not None]
    return PassAtK(k, sum(values) / len(values) if values else None, len(values))


def default_ks(results: Iterable[TrajectoryResult]) -> tuple[int, ...]:
    """:data:`DEFAULT_KS` up to the largest number of scored samples any problem has (at least 1)."""
    per: Counter[tuple[str, str, str, str, str]] = Counter(
        (r.key.model, r.key.method, r.source, r.platform, problem_of(r))
        for r in results if not is_excluded(r))
    most = max(per.values(), default=1)
    return tuple(k for k in DEFAULT_KS if k <= most) or (1,)


@dataclass(frozen=True)
class GroupRow:
    """Attempts of one (model, method, source, platform); fractions are in [0, 1].

    ``trajectories`` counts every finished trajectory, ``excluded`` those not scored
    (:func:`is_excluded`), ``scored`` the rest. ``problems`` are problems with at least one
    scored trajectory and ``attempted_accuracy`` = ``solved_problems / problems`` (schema 2
    called it ``accuracy``; the headline accuracy, over the problems the sweep named, is
    :class:`~coordinator.report_metrics.MetricRow`'s). Speed numbers are per sample, over solved
    trajectories that carry a timing (the ``cpu`` platform never does): ``speedup_geomean`` is
    the geometric mean of their speedups over the baseline, ``sol_percent_mean`` the arithmetic mean
    of their % of speed-of-light, ``fast_1`` the fraction of scored trajectories that passed
    *and* beat the baseline (speedup > 1; None when nothing solved was timed). ``baseline``
    names what those speed-ups are over (``"cublas"``; ``"cublas+torch"`` where the group's
    differ; "" untimed)."""

    model: str
    method: str
    source: str
    platform: str
    trajectories: int
    excluded: int
    scored: int
    problems: int
    solved_problems: int
    solved_trajectories: int
    attempted_accuracy: float | None
    pass_at: tuple[PassAtK, ...]
    timed: int
    speedup_geomean: float | None
    sol_percent_mean: float | None
    fast_1: float | None
    baseline: str = ""


def group_rows(results: Iterable[TrajectoryResult], ks: Sequence[int]) -> list[GroupRow]:
    """One row per (model, method, source, platform), sorted by those."""
    groups: dict[tuple[str, str, str, str], list[TrajectoryResult]] = defaultdict(list)
    for r in results:
        groups[(r.key.model, r.key.method, r.source, r.platform)].append(r)
    return [_group_row(key, rows, ks) for key, rows in sorted(groups.items())]


def _group_row(key: tuple[str, str, str, str], rows: list[TrajectoryResult],
               ks: Sequence[int]) -> GroupRow:
    counts: dict[str, list[int]] = {}   # problem -> [scored samples, passed samples]
    excluded = 0
    for r in rows:
        if is_excluded(r):
            excluded += 1
            continue
        nc = counts.setdefault(problem_of(r), [0, 0])
        nc[0] += 1
        nc[1] += r.solved
    solved = [r for r in rows if r.solved]
    speedups = [r.speedup for r in solved if r.speedup is not None and r.speedup > 0]
    sols = [r.sol_percent for r in solved if r.sol_percent is not None]
    scored = len(rows) - excluded
    solved_problems = sum(1 for _n, c in counts.values() if c > 0)
    if scored == 0 or (solved and not speedups):
        fast_1: float | None = None
    else:
        fast_1 = sum(1 for s in speedups if s > 1.0) / scored
    pairs = [(n, c) for n, c in counts.values()]
    return GroupRow(
        model=key[0], method=key[1], source=key[2], platform=key[3], trajectories=len(rows),
        excluded=excluded, scored=scored, problems=len(counts), solved_problems=solved_problems,
        solved_trajectories=len(solved),
        attempted_accuracy=solved_problems / len(counts) if counts else None,
        pass_at=tuple(mean_pass_at_k(pairs, k) for k in ks), timed=len(speedups),
        speedup_geomean=geomean(speedups),
        sol_percent_mean=sum(sols) / len(sols) if sols else None, fast_1=fast_1,
        baseline="+".join(sorted({r.baseline for r in solved if r.speedup and r.baseline})))


# ---- sweeps: the status funnel -----------------------------------------------------------------

#: Funnel stages in order, with the label the table shows.
FUNNEL_STAGES: tuple[tuple[str, str], ...] = (
    ("trajectories", "trajectories"),
    ("candidate", "produced a candidate"),
    ("static_ok", "passed static policy"),
    ("compiled", "compiled"),
    ("ran", "ran"),
    ("correct", "correct"),
    ("not_cheating", "not cheating"),
    ("passed", "PASSED"),
)

# How many stages a judged trajectory reached, from its best candidate's status: each status is
# the first stage it failed. TIMEOUT and RUNTIME_ERROR may also come from the timing stage of a
# correct candidate, but the status does not say which, so both count as "did not run". A
# CHEAT_DETECTED candidate counts as correct: anti-cheat findings take precedence over the case
# results, so its outputs may have been right. A TOOLCHAIN_ERROR (the platform's compiler failed
# on code that passed the static policy) reached the static stage only, as a COMPILE_ERROR does.
_DEPTH = {Status.REJECTED: 2, Status.COMPILE_ERROR: 3, Status.TOOLCHAIN_ERROR: 3,
          Status.RUNTIME_ERROR: 4, Status.TIMEOUT: 4, Status.WRONG_ANSWER: 5,
          Status.CHEAT_DETECTED: 6, Status.PASSED: 8}


def funnel_depth(r: TrajectoryResult) -> int:
    """How many :data:`FUNNEL_STAGES` a scored trajectory reached (1: only "trajectories")."""
    if r.status is None or r.status is Status.INFRA_ERROR:
        return 2 if r.candidates > 0 else 1
    return _DEPTH[r.status]


@dataclass(frozen=True)
class FunnelStage:
    """How many scored trajectories reached a stage; ``fraction`` is of the funnel's top."""

    stage: str
    label: str
    count: int
    fraction: float | None


@dataclass(frozen=True)
class FunnelRow:
    """The funnel of one (model, method), or of the whole run (both "all").

    The stages count scored trajectories; ``excluded`` (system failures) are not in them.
    ``end_reasons`` counts why every trajectory ended, excluded ones too, by name."""

    model: str
    method: str
    stages: tuple[FunnelStage, ...]
    excluded: int
    end_reasons: tuple[tuple[str, int], ...]

    def count(self, stage: str) -> int:
        return next(s.count for s in self.stages if s.stage == stage)


def funnel(rows: Iterable[TrajectoryResult], model: str = "all", method: str = "all") -> FunnelRow:
    """The funnel of the given trajectories."""
    depths: list[int] = []
    excluded = 0
    ends: Counter[str] = Counter()
    for r in rows:
        ends[r.end_reason] += 1
        if is_excluded(r):
            excluded += 1
        else:
            depths.append(funnel_depth(r))
    top = len(depths)
    stages = []
    for i, (stage, label) in enumerate(FUNNEL_STAGES, start=1):
        n = sum(1 for d in depths if d >= i)
        stages.append(FunnelStage(stage, label, n, n / top if top else None))
    return FunnelRow(model, method, tuple(stages), excluded, tuple(sorted(ends.items())))


def funnel_rows(results: Iterable[TrajectoryResult]) -> list[FunnelRow]:
    """One funnel per (model, method), sorted."""
    groups: dict[tuple[str, str], list[TrajectoryResult]] = defaultdict(list)
    for r in results:
        groups[(r.key.model, r.key.method)].append(r)
    return [funnel(rows, *key) for key, rows in sorted(groups.items())]


# ---- the whole report --------------------------------------------------------------------------


@dataclass(frozen=True)
class RunReport:
    """A sweep's report. ``state`` is the run's effective state (:func:`run_status`): while it is
    ``running`` the report covers the trajectories stored so far (``state_why`` says so)."""

    run_id: str
    ks: tuple[int, ...]
    groups: tuple[GroupRow, ...]
    funnels: tuple[FunnelRow, ...]
    funnel_total: FunnelRow
    costs: tuple[CostRow, ...]
    cost_total: CostRow
    track: tuple[TrackRow, ...] = ()
    warnings: tuple[WarningRow, ...] = ()
    scope: Scope = Scope((), (), (), False, "not read")
    metrics: tuple[MetricRow, ...] = ()
    outcomes: tuple[ProblemOutcome, ...] = ()   # per problem, behind the metrics (not in JSON)
    state: str = "unknown"
    state_why: str = ""
    # billed tokens per (model, method, platform of the trajectory key): "" is shared generation
    platform_tokens: tuple[tuple[str, str, str, int], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """Plain JSON types only; field names as in the records, fractions in [0, 1]."""
        return {"schema_version": REPORT_SCHEMA_VERSION, "run": self.run_id, "report": "sweep",
                "state": self.state, "state_why": self.state_why, "scope": self.scope.to_json(),
                "bootstrap": {"resamples": BOOTSTRAP_RESAMPLES, "seed": BOOTSTRAP_SEED,
                              "level": 0.95},
                "metrics": [m.to_json() for m in self.metrics],
                "ks": list(self.ks),
                "groups": [asdict(g) for g in self.groups],
                "funnels": [asdict(f) for f in self.funnels],
                "funnel_total": asdict(self.funnel_total),
                "costs": [c.to_json() for c in self.costs],
                "cost_total": self.cost_total.to_json(),
                "track": [t.to_json() for t in self.track],
                "warnings": [asdict(w) for w in self.warnings]}


def build_report(run_id: str, results: Sequence[TrajectoryResult], usage: Sequence[TrajectoryUsage],
                 ks: Sequence[int] | None = None, unconfirmed: Sequence[Unconfirmed] = (),
                 config: dict[str, Any] | None = None) -> RunReport:
    """The report of one run from its ``trajectory_results`` rows, summed ``llm_calls`` rows,
    unconfirmed calls and recorded config (its spec names the denominator)."""
    if ks is not None and (not ks or any(k < 1 for k in ks)):
        raise ValueError(f"k values must be >= 1, got {list(ks)}")
    ks_t = tuple(sorted(set(ks))) if ks is not None else default_ks(results)
    costs = cost_rows(results, usage, unconfirmed)
    scope = run_scope(config, results)
    outcomes = problem_outcomes(results)
    return RunReport(run_id, ks_t, tuple(group_rows(results, ks_t)), tuple(funnel_rows(results)),
                     funnel(results), tuple(costs), cost_total(costs), tuple(track_rows(results)),
                     scope=scope,
                     metrics=tuple(metric_rows(outcomes, scope, method_rounds(config))),
                     outcomes=tuple(outcomes), platform_tokens=platform_tokens(usage))


def platform_tokens(usage: Iterable[TrajectoryUsage]) -> tuple[tuple[str, str, str, int], ...]:
    """Billed tokens per (model, method, platform): a per-platform trajectory's key names its
    platform; a shared-generation trajectory's names none (""), its tokens counted once."""
    sums: dict[tuple[str, str, str], int] = defaultdict(int)
    for u in usage:
        sums[(u.key.model, u.key.method, u.key.platform)] += u.prompt_tokens + u.completion_tokens
    return tuple((*k, n) for k, n in sorted(sums.items()))


def read_report(store: Store, run_id: str, ks: Sequence[int] | None = None) -> RunReport:
    """:func:`build_report` of a stored run. While its coordinator runs, the intents it has on
    the wire are not unconfirmed calls; once it is gone, every intent without a reply is."""
    status = run_status(store, run_id)
    unconfirmed = store.unconfirmed_calls(run_id, before=status.started if status.live else None)
    results = store.trajectory_results(run_id)
    report = build_report(run_id, results, llm_usage(store, run_id), ks, unconfirmed,
                          store.run_config(run_id))
    why = status.why
    if status.live:
        why = (f"the sweep is still {status.state}: this report covers the {len(results)} "
               "trajectories stored so far")
    return replace(report, warnings=tuple(warning_rows(results, store.newest_verdict)),
                   state=status.state, state_why=why)
