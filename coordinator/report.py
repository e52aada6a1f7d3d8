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
from dataclasses import asdict, dataclass
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.table import Table

from coordinator.spot_check import Dispute
from coordinator.store import Store, TrajectoryKey, TrajectoryResult, TrajectoryRow
from generators.trajectory import EndReason
from protos.records import Status

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


def result_rows(rows: list[TrajectoryRow]) -> list[ResultRow]:
    out = []
    for r in rows:
        v = r.verdict
        out.append(ResultRow(
            operator=r.operator_id, source=r.operator_id.split("::", 1)[0], method=r.method,
            label=r.label, status=v.status.value if v else "PENDING",
            speedup=v.speedup if v else None, sol_percent=v.sol_percent if v else None,
            message=v.message if v else ""))
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
    """A rich Table: operator, source, method, status, speedup, % of speed-of-light."""
    table = Table(title=title or None)
    for col, kw in (("operator", {}), ("source", {}), ("method", {}), ("candidate", {}),
                    ("status", {}), ("speedup", {"justify": "right"}),
                    ("% SOL", {"justify": "right"})):
        table.add_column(col, no_wrap=col in ("operator", "status"), **kw)  # type: ignore[arg-type]
    for r in rows:
        style = "green" if r.status == "PASSED" else "red"
        table.add_row(r.operator, r.source, r.method, r.label, f"[{style}]{r.status}[/{style}]",
                      f"{r.speedup:.2f}x" if r.speedup else "-",
                      f"{r.sol_percent:.1f}%" if r.sol_percent else "-")
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


def is_excluded(r: TrajectoryResult) -> bool:
    """True for an unsolved trajectory that the system, not the model, ended (an INFRA_ERROR end
    or best verdict): DESIGN.md never counts INFRA_ERROR against a model, so it is not scored.
    A solved trajectory always counts, whatever ended it afterwards."""
    return not r.solved and (r.end_reason == EndReason.INFRA_ERROR.value
                             or r.status is Status.INFRA_ERROR)


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


def _geomean(values: Sequence[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


@dataclass(frozen=True)
class GroupRow:
    """Accuracy of one (model, method, source, platform); fractions are in [0, 1].

    ``trajectories`` counts every finished trajectory, ``excluded`` those not scored
    (:func:`is_excluded`), ``scored`` the rest. ``problems`` are problems with at least one
    scored trajectory and ``accuracy`` = ``solved_problems / problems`` (a problem is solved
    when one of its samples passed). Speed numbers are over solved trajectories that carry a
    timing (the ``cpu`` platform never does): ``speedup_geomean`` is the geometric mean of their
    speedups over PyTorch, ``sol_percent_mean`` the arithmetic mean of their % of speed-of-light,
    ``fast_1`` the fraction of scored trajectories that passed *and* beat PyTorch (speedup > 1;
    None when nothing solved was timed)."""

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
    accuracy: float | None
    pass_at: tuple[PassAtK, ...]
    timed: int
    speedup_geomean: float | None
    sol_percent_mean: float | None
    fast_1: float | None


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
        accuracy=solved_problems / len(counts) if counts else None,
        pass_at=tuple(mean_pass_at_k(pairs, k) for k in ks), timed=len(speedups),
        speedup_geomean=_geomean(speedups),
        sol_percent_mean=sum(sols) / len(sols) if sols else None, fast_1=fast_1)


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
# results, so its outputs may have been right.
_DEPTH = {Status.REJECTED: 2, Status.COMPILE_ERROR: 3, Status.RUNTIME_ERROR: 4, Status.TIMEOUT: 4,
          Status.WRONG_ANSWER: 5, Status.CHEAT_DETECTED: 6, Status.PASSED: 8}


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


# ---- sweeps: tokens, cost and GPU time per solved problem --------------------------------------


@dataclass(frozen=True)
class TrajectoryUsage:
    """A trajectory's rows of ``llm_calls``, summed. Tokens and cost are the columns' sums (only
    billed calls carry any); ``unpriced_calls`` are billed calls whose model had no price, whose
    cost is unknown rather than 0."""

    key: TrajectoryKey
    calls: int
    billed_calls: int
    unpriced_calls: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    cost_usd: float


def llm_usage(store: Store, run_id: str) -> list[TrajectoryUsage]:
    """Every trajectory's model calls of a run, summed in SQL (one row per trajectory), read-only.

    The trajectory key, not the call's model column, names model and method, so calls group
    exactly as ``trajectory_results`` does. Whether a call was priced lives in the call's JSON
    (``extra.price``); it is parsed only for billed calls that cost 0."""
    rows = store.db.execute(
        "SELECT trajectory, COUNT(*), SUM(billed), "
        "SUM(CASE WHEN billed AND cost_usd = 0 AND json_extract(call, '$.extra.price') = 'unknown' "
        "THEN 1 ELSE 0 END), SUM(prompt_tokens), SUM(completion_tokens), SUM(cached_tokens), "
        "SUM(reasoning_tokens), SUM(cost_usd) FROM llm_calls WHERE run_id = ? "
        "GROUP BY trajectory ORDER BY trajectory", (run_id,)).fetchall()
    return [TrajectoryUsage(TrajectoryKey.parse(r[0]), int(r[1]), int(r[2]), int(r[3]), int(r[4]),
                            int(r[5]), int(r[6]), int(r[7]), float(r[8])) for r in rows]


@dataclass(frozen=True)
class CostRow:
    """What one (model, method) spent (both "all" for the run's total).

    Calls, tokens and cost come from ``llm_calls`` (every call of the run, finished trajectory
    or not, so they equal that table's totals); ``trajectories``, ``gpu_seconds`` and
    ``solved_problems`` from ``trajectory_results``. A solved problem is a (platform, problem)
    with at least one passing sample; the total row sums the rows' solved problems."""

    model: str
    method: str
    calls: int
    billed_calls: int
    unpriced_calls: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    cost_usd: float
    trajectories: int
    gpu_seconds: float
    solved_problems: int

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def cost_known(self) -> bool:
        """False when some billed call was not priced: ``cost_usd`` is then a lower bound."""
        return self.unpriced_calls == 0

    def _per_solved(self, value: float) -> float | None:
        return value / self.solved_problems if self.solved_problems else None

    @property
    def tokens_per_solved(self) -> float | None:
        return self._per_solved(self.total_tokens)

    @property
    def cost_per_solved(self) -> float | None:
        return self._per_solved(self.cost_usd)

    @property
    def gpu_seconds_per_solved(self) -> float | None:
        return self._per_solved(self.gpu_seconds)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "total_tokens": self.total_tokens, "cost_known": self.cost_known,
                "tokens_per_solved": self.tokens_per_solved, "cost_per_solved": self.cost_per_solved,
                "gpu_seconds_per_solved": self.gpu_seconds_per_solved}


_USAGE_FIELDS = ("calls", "billed_calls", "unpriced_calls", "prompt_tokens", "completion_tokens",
                 "cached_tokens", "reasoning_tokens", "cost_usd")


def cost_rows(results: Iterable[TrajectoryResult], usage: Iterable[TrajectoryUsage]) -> list[CostRow]:
    """One row per (model, method) seen in either table, sorted."""
    sums: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: dict.fromkeys(_USAGE_FIELDS, 0))
    for u in usage:
        acc = sums[(u.key.model, u.key.method)]
        for f in _USAGE_FIELDS:
            acc[f] += getattr(u, f)
    trajectories: Counter[tuple[str, str]] = Counter()
    gpu: dict[tuple[str, str], float] = defaultdict(float)
    solved: dict[tuple[str, str], set[tuple[str, str]]] = defaultdict(set)
    for r in results:
        key = (r.key.model, r.key.method)
        trajectories[key] += 1
        gpu[key] += r.gpu_seconds
        if r.solved:
            solved[key].add((r.platform, problem_of(r)))
    out = []
    for key in sorted(set(sums) | set(trajectories)):
        acc = sums[key]
        out.append(CostRow(
            key[0], key[1], int(acc["calls"]), int(acc["billed_calls"]), int(acc["unpriced_calls"]),
            int(acc["prompt_tokens"]), int(acc["completion_tokens"]), int(acc["cached_tokens"]),
            int(acc["reasoning_tokens"]), float(acc["cost_usd"]), trajectories[key], gpu[key],
            len(solved[key])))
    return out


def cost_total(rows: Iterable[CostRow]) -> CostRow:
    """The sum of cost rows (model and method "all")."""
    rows = list(rows)
    return CostRow(
        "all", "all", calls=sum(r.calls for r in rows), billed_calls=sum(r.billed_calls for r in rows),
        unpriced_calls=sum(r.unpriced_calls for r in rows),
        prompt_tokens=sum(r.prompt_tokens for r in rows),
        completion_tokens=sum(r.completion_tokens for r in rows),
        cached_tokens=sum(r.cached_tokens for r in rows),
        reasoning_tokens=sum(r.reasoning_tokens for r in rows),
        cost_usd=sum(r.cost_usd for r in rows), trajectories=sum(r.trajectories for r in rows),
        gpu_seconds=sum(r.gpu_seconds for r in rows),
        solved_problems=sum(r.solved_problems for r in rows))


# ---- the whole report --------------------------------------------------------------------------


@dataclass(frozen=True)
class RunReport:
    run_id: str
    ks: tuple[int, ...]
    groups: tuple[GroupRow, ...]
    funnels: tuple[FunnelRow, ...]
    funnel_total: FunnelRow
    costs: tuple[CostRow, ...]
    cost_total: CostRow

    def to_json(self) -> dict[str, Any]:
        """Plain JSON types only; field names as in the records, fractions in [0, 1]."""
        return {"run": self.run_id, "report": "sweep", "ks": list(self.ks),
                "groups": [asdict(g) for g in self.groups],
                "funnels": [asdict(f) for f in self.funnels],
                "funnel_total": asdict(self.funnel_total),
                "costs": [c.to_json() for c in self.costs],
                "cost_total": self.cost_total.to_json()}


def build_report(run_id: str, results: Sequence[TrajectoryResult], usage: Sequence[TrajectoryUsage],
                 ks: Sequence[int] | None = None) -> RunReport:
    """The report of one run from its ``trajectory_results`` and summed ``llm_calls`` rows."""
    if ks is not None and (not ks or any(k < 1 for k in ks)):
        raise ValueError(f"k values must be >= 1, got {list(ks)}")
    ks_t = tuple(sorted(set(ks))) if ks is not None else default_ks(results)
    costs = cost_rows(results, usage)
    return RunReport(run_id, ks_t, tuple(group_rows(results, ks_t)), tuple(funnel_rows(results)),
                     funnel(results), tuple(costs), cost_total(costs))


def read_report(store: Store, run_id: str, ks: Sequence[int] | None = None) -> RunReport:
    """:func:`build_report` of a stored run."""
    return build_report(run_id, store.trajectory_results(run_id), llm_usage(store, run_id), ks)


# ---- rendering ----------------------------------------------------------------------------------


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _pass_cell(p: PassAtK, problems: int) -> str:
    cell = _pct(p.value)
    return cell if p.value is None or p.problems == problems else f"{cell} ({p.problems}/{problems})"


def _money(usd: float | None, row: CostRow) -> str:
    if usd is None:
        return "-"
    if row.billed_calls and row.unpriced_calls == row.billed_calls:
        return "unknown"
    return ("" if row.cost_known else ">=") + (f"${usd:,.2f}" if usd >= 1 else f"${usd:.4f}")


def _num(x: float | None, fmt: str = ",.0f") -> str:
    return "-" if x is None else format(x, fmt)


def render_report(report: RunReport) -> RenderableType:
    """The report as three rich tables (accuracy, funnel, cost) and a line of end reasons."""
    acc = Table(title=f"run {report.run_id}: accuracy (solved problems / problems) and pass@k")
    for col in ("model", "method", "source", "platform"):
        acc.add_column(col, no_wrap=True)
    for col in ("problems", "samples", "excl.", "accuracy", *(f"pass@{k}" for k in report.ks),
                "speedup", "% SOL", "fast_1"):
        acc.add_column(col, justify="right")
    for g in report.groups:
        acc.add_row(g.model, g.method, g.source, g.platform, str(g.problems), str(g.scored),
                    str(g.excluded), _pct(g.accuracy), *(_pass_cell(p, g.problems) for p in g.pass_at),
                    "-" if g.speedup_geomean is None else f"{g.speedup_geomean:.2f}x",
                    "-" if g.sol_percent_mean is None else f"{g.sol_percent_mean:.1f}%", _pct(g.fast_1))

    fun = Table(title="status funnel (scored trajectories reaching each stage)")
    fun.add_column("model", no_wrap=True)
    fun.add_column("method", no_wrap=True)
    for _stage, label in FUNNEL_STAGES:
        fun.add_column(label, justify="right")
    fun.add_column("excl.", justify="right")
    for i, f in enumerate((*report.funnels, report.funnel_total)):
        cells = [str(f.stages[0].count)] + [f"{s.count} ({_pct(s.fraction)})" for s in f.stages[1:]]
        fun.add_row(f.model, f.method, *cells, str(f.excluded), end_section=i == len(report.funnels) - 1)

    cost = Table(title="tokens, cost and GPU time per solved problem")
    cost.add_column("model", no_wrap=True)
    cost.add_column("method", no_wrap=True)
    for col in ("calls", "tokens", "cost", "GPU s", "solved", "tokens/solved", "cost/solved",
                "GPU s/solved"):
        cost.add_column(col, justify="right")
    for i, c in enumerate((*report.costs, report.cost_total)):
        cost.add_row(c.model, c.method, f"{c.calls:,}", f"{c.total_tokens:,}", _money(c.cost_usd, c),
                     _num(c.gpu_seconds, ",.1f"), str(c.solved_problems), _num(c.tokens_per_solved),
                     _money(c.cost_per_solved, c), _num(c.gpu_seconds_per_solved, ",.1f"),
                     end_section=i == len(report.costs) - 1)
    ends = ", ".join(f"{name} {n}" for name, n in report.funnel_total.end_reasons) or "none"
    return Group(acc, fun, cost, f"end reasons: {ends}")
