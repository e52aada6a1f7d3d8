"""``kgb report RUN --compare RUN2``: what changed between two sweeps over the same problems, and
whether it is more than noise (docs/reports.md, "Comparing two runs").

Per (model, method, source, platform) present in both runs: the accuracy delta with a paired
bootstrap interval over the named problems and an exact McNemar test on the problems that
flipped; the speed-up ratio over the problems both solved (timed) with a paired bootstrap
interval of the per-problem log ratio. A regression is a significant change for the worse at
:data:`ALPHA`: McNemar p < alpha with more problems lost than gained, or a speed-up ratio whose
whole interval lies below 1. Operators whose version differs are matched by id and listed.
Two runs that named different problems are refused: their accuracies share no denominator.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from rich.console import Group
from rich.table import Table

from coordinator.report import RunReport
from coordinator.report_metrics import ALL, ProblemOutcome, bootstrap_ci

ALPHA = 0.05


class CompareError(ValueError):
    """Two runs that cannot be compared; the message says why."""


@dataclass(frozen=True)
class MetricDelta:
    """One metric of one group in both runs. ``delta`` is other - base for accuracy and
    other / base (a ratio) for speed-up; ``ci`` its 95 % paired bootstrap interval; ``p_value``
    the McNemar test's (accuracy only); ``problems`` the paired problems behind it."""

    model: str
    method: str
    source: str
    platform: str
    metric: str
    base: float | None
    other: float | None
    delta: float | None
    ci: tuple[float, float] | None
    p_value: float | None
    problems: int
    regression: bool


@dataclass(frozen=True)
class Flip:
    model: str
    method: str
    platform: str
    problem: str
    base: str      # the problem's state in the base run (solved, failed, ..., unattempted)
    other: str


@dataclass(frozen=True)
class Comparison:
    base_run: str
    other_run: str
    deltas: tuple[MetricDelta, ...]
    flips: tuple[Flip, ...]
    versions: tuple[tuple[str, tuple[int, ...], tuple[int, ...]], ...]  # op id, base, other
    alpha: float = ALPHA

    @property
    def regressions(self) -> tuple[MetricDelta, ...]:
        return tuple(d for d in self.deltas if d.regression)

    def to_json(self) -> dict[str, Any]:
        return {"report": "compare", "base": self.base_run, "other": self.other_run,
                "alpha": self.alpha, "deltas": [asdict(d) for d in self.deltas],
                "flips": [asdict(f) for f in self.flips],
                "versions": [{"operator": op, "base": list(b), "other": list(o)}
                             for op, b, o in self.versions],
                "regressions": len(self.regressions)}


def mcnemar_p(lost: int, gained: int) -> float:
    """The exact two-sided McNemar p-value for ``lost`` and ``gained`` discordant pairs."""
    n = lost + gained
    if n == 0:
        return 1.0
    tail: float = sum(math.comb(n, i) for i in range(min(lost, gained) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def check_comparable(base: RunReport, other: RunReport) -> None:
    """Refuse two runs whose named problems differ (no shared denominator)."""
    a, b = base.scope, other.scope
    if (a.sizes, a.suites, a.listed) != (b.sizes, b.suites, b.listed):
        def says(r: RunReport) -> str:
            s = r.scope
            named = ", ".join(f"{src} {n}" for src, n in s.sizes) or "nothing"
            how = "+".join(s.suites + s.listed) if s.recorded else "no recorded spec"
            return f"{r.run_id} names {named} ({how})"
        raise CompareError(f"runs over different problems cannot be compared: {says(base)}; "
                           f"{says(other)}")


def _states(outs: Sequence[ProblemOutcome]) -> dict[tuple[str, str, str, str], str]:
    return {(o.model, o.method, o.platform, o.problem): o.state for o in outs}


def _accuracy_delta(key: tuple[str, str, str, str], named: int, base: Mapping[str, ProblemOutcome],
                    other: Mapping[str, ProblemOutcome]) -> MetricDelta:
    problems = sorted(set(base) | set(other))
    pairs = [(int(p in base and base[p].solved), int(p in other and other[p].solved))
             for p in problems]
    lost = sum(1 for b, o in pairs if b and not o)
    gained = sum(1 for b, o in pairs if o and not b)
    diffs = [float(o - b) for b, o in pairs] + [0.0] * max(0, named - len(pairs))
    b_acc = sum(b for b, _ in pairs) / named if named else None
    o_acc = sum(o for _, o in pairs) / named if named else None
    p = mcnemar_p(lost, gained)
    return MetricDelta(*key, "accuracy", b_acc, o_acc,
                       None if b_acc is None or o_acc is None else o_acc - b_acc,
                       bootstrap_ci(diffs, "mean"), p, named, p < ALPHA and lost > gained)


def _speedup_delta(key: tuple[str, str, str, str], base: Mapping[str, ProblemOutcome],
                   other: Mapping[str, ProblemOutcome]) -> MetricDelta:
    both: list[tuple[float, float]] = []
    for p in sorted(set(base) & set(other)):
        b_s, o_s = base[p].speedup, other[p].speedup
        if b_s is not None and o_s is not None:
            both.append((b_s, o_s))
    ratios = [o / b for b, o in both]
    b_g = math.exp(sum(math.log(b) for b, _ in both) / len(both)) if both else None
    o_g = math.exp(sum(math.log(o) for _, o in both) / len(both)) if both else None
    ratio = math.exp(sum(math.log(r) for r in ratios) / len(ratios)) if ratios else None
    ci = bootstrap_ci(ratios, "geomean")
    return MetricDelta(*key, "speedup", b_g, o_g, ratio, ci, None, len(ratios),
                       ci is not None and ci[1] < 1.0)


def _by_group(report: RunReport, source: str, platform: str,
              pair: tuple[str, str]) -> dict[str, ProblemOutcome]:
    return {o.problem: o for o in report.outcomes
            if (o.model, o.method, o.platform) == (*pair, platform)
            and (source == ALL or o.source == source)}


def compare(base: RunReport, other: RunReport,
            versions: tuple[Mapping[str, set[int]], Mapping[str, set[int]]]) -> Comparison:
    """Compare two reports over the same named problems (``versions``: each run's operator id
    -> versions it ran); raises :class:`CompareError` when they named different ones."""
    check_comparable(base, other)
    groups = sorted({(m.model, m.method, m.source, m.platform) for m in base.metrics}
                    & {(m.model, m.method, m.source, m.platform) for m in other.metrics})
    deltas: list[MetricDelta] = []
    for key in groups:
        b = _by_group(base, key[2], key[3], key[:2])
        o = _by_group(other, key[2], key[3], key[:2])
        deltas += [_accuracy_delta(key, base.scope.size(key[2]), b, o),
                   _speedup_delta(key, b, o)]
    sb, so = _states(base.outcomes), _states(other.outcomes)
    flips = [Flip(*k[:3], k[3], sb.get(k, "unattempted"), so.get(k, "unattempted"))
             for k in sorted(set(sb) | set(so))
             if (sb.get(k) == "solved") != (so.get(k) == "solved")]
    vb, vo = versions
    changed = tuple((op, tuple(sorted(vb[op])), tuple(sorted(vo[op])))
                    for op in sorted(set(vb) & set(vo)) if vb[op] != vo[op])
    return Comparison(base.run_id, other.run_id, tuple(deltas), tuple(flips), changed)


def operator_versions(results: Sequence[Any]) -> dict[str, set[int]]:
    """Each operator id of a run's ``trajectory_results`` rows -> the versions it ran."""
    out: dict[str, set[int]] = {}
    for r in results:
        out.setdefault(r.key.operator_id, set()).add(r.key.operator_version)
    return out


def _fmt(metric: str, x: float | None) -> str:
    if x is None:
        return "-"
    return f"{100 * x:.1f}%" if metric == "accuracy" else f"{x:.2f}x"


def _delta(d: MetricDelta) -> str:
    if d.delta is None:
        return "-"
    if d.metric == "accuracy":
        ci = f" [{100 * d.ci[0]:+.1f}, {100 * d.ci[1]:+.1f}]" if d.ci else ""
        return f"{100 * d.delta:+.1f} pts{ci}"
    ci = f" [{d.ci[0]:.2f}, {d.ci[1]:.2f}]" if d.ci else ""
    return f"x{d.delta:.2f}{ci}"


def render_comparison(c: Comparison) -> Group:
    t = Table(title=f"{c.other_run} vs {c.base_run}: deltas [95% paired bootstrap]; regression: "
                    f"McNemar (accuracy) or interval below 1 (speed-up) at alpha {c.alpha}")
    for col in ("model", "method", "source", "platform", "metric"):
        t.add_column(col, no_wrap=True)
    for col in (c.base_run, c.other_run, "delta", "p", "problems", "regression"):
        t.add_column(col, justify="right")
    for d in c.deltas:
        t.add_row(d.model, d.method, d.source, d.platform, d.metric, _fmt(d.metric, d.base),
                  _fmt(d.metric, d.other), _delta(d),
                  "-" if d.p_value is None else f"{d.p_value:.3g}", str(d.problems),
                  "[red]REGRESSION[/red]" if d.regression else "")
    flips = Table(title=f"problems that flipped ({len(c.flips)})")
    for col in ("model", "method", "platform", "problem", c.base_run, c.other_run):
        flips.add_column(col, no_wrap=True)
    for f in c.flips:
        flips.add_row(f.model, f.method, f.platform, f.problem, f.base, f.other)
    versions = "; ".join(f"{op} v{','.join(map(str, b))} -> v{','.join(map(str, o))}"
                         for op, b, o in c.versions) or "none"
    return Group(t, flips, f"operator versions that differ (matched by id): {versions}",
                 f"significant regressions: {len(c.regressions)}")
