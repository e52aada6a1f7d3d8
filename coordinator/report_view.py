"""A sweep report as rich tables for the terminal (definitions: docs/reports.md): the headline
metrics over the named problems, the sequential Pass@K of methods run in rounds, the attempts
(pass@k), the status funnel, cost, the agent track and the warnings."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table

from coordinator.report import FUNNEL_STAGES, CostRow, PassAtK, RunReport
from coordinator.report_paper import multi_chip_tokens, sequential_rounds, to_rich
from coordinator.track_report import render_track
from coordinator.warning_report import render_warnings


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


def _ci(ci: tuple[float, float] | None, fmt: str) -> str:
    return "" if ci is None else f" [{fmt.format(ci[0])}, {fmt.format(ci[1])}]"


def _speed(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def headline_table(report: RunReport) -> Table:
    """Accuracy, speed-up and fast_p over the named problems, with 95 % bootstrap intervals."""
    scope = report.scope
    named = "named by the spec" if scope.recorded else "attempted (no spec recorded)"
    t = Table(title=f"run {report.run_id}: accuracy over the problems {named} [95% CI]")
    for col in ("model", "method", "source", "platform"):
        t.add_column(col, no_wrap=True)
    for col in ("named", "solved", "failed", "unatt.", "excl.", "toolchain", "accuracy",
                "speed-up", "common", "% SOL", "fast_0.8", "fast_1", "fast_1.5", "fast_2"):
        t.add_column(col, justify="right")
    for m in report.metrics:
        t.add_row(m.model, m.method, m.source, m.platform, str(m.named), str(m.solved),
                  str(m.failed), str(m.unattempted), str(m.excluded), str(m.toolchain),
                  _pct(m.accuracy) + _ci(m.accuracy_ci, "{:.0%}"),
                  _speed(m.speedup) + _ci(m.speedup_ci, "{:.2f}"),
                  f"{_speed(m.common_speedup)} ({m.common_problems})",
                  "-" if m.sol_percent is None else f"{m.sol_percent:.1f}%",
                  *(_pct(m.fast(p)) for p in (0.8, 1.0, 1.5, 2.0)))
    return t


def rounds_table(report: RunReport) -> Table | None:
    """Sequential Pass@K as ``--paper`` has it, percentages written as the headline's."""
    t = sequential_rounds(report, cell=_pct)
    return None if t is None else to_rich(t)


def _headline_notes(report: RunReport) -> list[RenderableType]:
    out: list[RenderableType] = []
    if report.state_why:
        out.append(f"[bold]state {report.state}[/bold]: {report.state_why}")
    if not report.scope.recorded:
        out.append(f"denominator: {report.scope.why}")
    return out


def render_report(report: RunReport) -> RenderableType:
    """The report as rich tables (headline, per-platform accuracy and speed-up when several
    platforms ran, attempts, funnel, cost, agent track) and lines of end reasons, warnings and
    unconfirmed calls."""
    acc = Table(title="attempts: accuracy over attempted problems and pass@k (per sample speed)")
    for col in ("model", "method", "source", "platform"):
        acc.add_column(col, no_wrap=True)
    for col in ("problems", "samples", "excl.", "attempted acc.", *(f"pass@{k}" for k in report.ks),
                "speedup", "% SOL", "fast_1"):
        acc.add_column(col, justify="right")
    acc.add_column("vs", no_wrap=True)  # what the speed-ups are over
    for g in report.groups:
        acc.add_row(g.model, g.method, g.source, g.platform, str(g.problems), str(g.scored),
                    str(g.excluded), _pct(g.attempted_accuracy),
                    *(_pass_cell(p, g.problems) for p in g.pass_at),
                    "-" if g.speedup_geomean is None else f"{g.speedup_geomean:.2f}x",
                    "-" if g.sol_percent_mean is None else f"{g.sol_percent_mean:.1f}%", _pct(g.fast_1),
                    g.baseline or "-")

    fun = Table(title="status funnel (scored trajectories reaching each stage)")
    fun.add_column("model", no_wrap=True)
    fun.add_column("method", no_wrap=True)
    for _stage, label in FUNNEL_STAGES:
        fun.add_column(label, justify="right")
    fun.add_column("excl.", justify="right")
    for i, f in enumerate((*report.funnels, report.funnel_total)):
        cells = [str(f.stages[0].count)] + [f"{s.count} ({_pct(s.fraction)})" for s in f.stages[1:]]
        fun.add_row(f.model, f.method, *cells, str(f.excluded), end_section=i == len(report.funnels) - 1)

    ends = ", ".join(f"{name} {n}" for name, n in report.funnel_total.end_reasons) or "none"
    rounds = rounds_table(report)
    chip = multi_chip_tokens(report)
    parts: list[RenderableType] = [*_headline_notes(report), headline_table(report),
                                   *((rounds,) if rounds is not None else ()),
                                   *([to_rich(chip)] if chip else []), acc, fun,
                                   _token_table(report), _cost_table(report),
                                   render_track(report.track),
                                   f"end reasons: {ends}", render_warnings(report.warnings)]
    t = report.cost_total
    if t.unconfirmed_calls:
        parts.append(f"unconfirmed: {t.unconfirmed_calls:,} calls were sent without a stored "
                     f"reply (possibly billed, not in the tokens and cost above): about "
                     f"{t.unconfirmed_tokens_estimate:,} tokens, "
                     f"${t.unconfirmed_cost_usd_estimate:,.4f} (docs/reports.md)")
    return Group(*parts)


def _token_table(report: RunReport) -> Table:
    shared = " (shared generation: each trajectory's once, whatever the platforms)" \
        if report.scope.generation == "shared" else ""
    t = Table(title="tokens: fresh, cached and cache-written input, output, reasoning (part of "
              f"output){shared}")
    t.add_column("model", no_wrap=True)
    t.add_column("method", no_wrap=True)
    for col in ("calls", "tokens", "fresh in", "cached in", "cache write", "out", "reasoning",
                "solved", "tokens/solved"):
        t.add_column(col, justify="right")
    for i, c in enumerate((*report.costs, report.cost_total)):
        t.add_row(c.model, c.method, f"{c.calls:,}", f"{c.total_tokens:,}",
                  f"{c.fresh_prompt_tokens:,}", f"{c.cached_tokens:,}",
                  _num(c.cache_write_tokens), f"{c.completion_tokens:,}",
                  f"{c.reasoning_tokens:,}", str(c.solved_problems), _num(c.tokens_per_solved),
                  end_section=i == len(report.costs) - 1)
    return t


def _cost_table(report: RunReport) -> Table:
    cost = Table(title="cost, wall and GPU time per solved problem")
    cost.add_column("model", no_wrap=True)
    cost.add_column("method", no_wrap=True)
    for col in ("cost", "unconfirmed", "wall h", "GPU s", "reused", "solved", "cost/solved",
                "wall h/solved", "GPU s/solved"):
        cost.add_column(col, justify="right")
    for i, c in enumerate((*report.costs, report.cost_total)):
        cost.add_row(c.model, c.method, _money(c.cost_usd, c),
                     f"{c.unconfirmed_calls:,}" if c.unconfirmed_calls else "-",
                     _num(c.wall_hours, ",.2f"), _num(c.gpu_seconds, ",.1f"),
                     f"{c.reused_verdicts:,}" if c.reused_verdicts else "-",
                     str(c.solved_problems), _money(c.cost_per_solved, c),
                     _num(c.wall_hours / c.solved_problems if c.solved_problems else None, ",.3f"),
                     _num(c.gpu_seconds_per_solved, ",.1f"),
                     end_section=i == len(report.costs) - 1)
    return cost
