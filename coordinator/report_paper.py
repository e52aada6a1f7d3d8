"""The published benchmark's tables from a stored sweep (``kgb report RUN --paper``), so our
numbers can sit beside the paper's (shape: shared/reference/published-benchmark.md; numbers:
docs/reports.md, "Headline metrics").

- **Multi-Source**: rows model x method; Acc (%) and Spd (the paper's speed-up) per source and
  overall, on NVIDIA (``cuda``; else the run's first platform).
- **Multi-Chip** (when several platforms ran): Acc and Spd over ATen per platform, and the
  accuracy drop vs NVIDIA in points.
- **Cost**: total tokens, tokens per success, total hours and dollars.
- **Per problem**: each problem's outcome per (model, method, platform).

Tables are plain cells (:class:`PaperTable`), rendered as Markdown, LaTeX or rich.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.table import Table

from coordinator.report import RunReport
from coordinator.report_metrics import ALL, MetricRow, ProblemOutcome

REFERENCE_PLATFORM = "cuda"
_SOURCE_NAMES = {"aten": "ATen", "vllm": "vLLM", "cublas": "cuBLAS", ALL: "Overall"}
FORMATS = ("text", "md", "latex")


@dataclass(frozen=True)
class PaperTable:
    name: str
    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def _acc(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _spd(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _pairs(report: RunReport) -> list[tuple[str, str]]:
    return sorted({(m.model, m.method) for m in report.metrics})


def _platforms(report: RunReport) -> list[str]:
    found = sorted({m.platform for m in report.metrics})
    return sorted(found, key=lambda p: p != REFERENCE_PLATFORM)


def _lookup(report: RunReport) -> dict[tuple[str, str, str, str], MetricRow]:
    return {(m.model, m.method, m.source, m.platform): m for m in report.metrics}


def multi_source(report: RunReport) -> PaperTable:
    platform = _platforms(report)[0] if report.metrics else REFERENCE_PLATFORM
    sources = [*sorted(report.scope.sources, key=lambda s: (s not in _SOURCE_NAMES, s)), ALL]
    header = ["Model", "Method"]
    for s in sources:
        name = _SOURCE_NAMES.get(s, s)
        header += [f"{name} Acc", f"{name} Spd"]
    by = _lookup(report)
    rows = []
    for model, method in _pairs(report):
        cells = [model, method]
        for s in sources:
            m = by.get((model, method, s, platform))
            cells += [_acc(m.accuracy if m else None), _spd(m.speedup if m else None)]
        rows.append(tuple(cells))
    return PaperTable("multi-source", f"Multi-Source ({platform}): accuracy % and speed-up",
                      tuple(header), tuple(rows))


def multi_chip(report: RunReport) -> PaperTable | None:
    """None when only one platform ran."""
    platforms = _platforms(report)
    if len(platforms) < 2:
        return None
    source = "aten" if "aten" in report.scope.sources else ALL
    ref = platforms[0]
    header = ["Model", "Method", *(f"{p} {x}" for p in platforms for x in ("Acc", "Spd")),
              *(f"{p} dAcc vs {ref}" for p in platforms[1:])]
    by = _lookup(report)
    rows = []
    for model, method in _pairs(report):
        got = [by.get((model, method, source, p)) for p in platforms]
        accs = [m.accuracy if m else None for m in got]
        cells = [model, method]
        for m in got:
            cells += [_acc(m.accuracy if m else None), _spd(m.speedup if m else None)]
        for a in accs[1:]:
            cells.append("-" if a is None or accs[0] is None else f"{100 * (a - accs[0]):+.1f}")
        rows.append(tuple(cells))
    return PaperTable("multi-chip", f"Multi-Chip ({_SOURCE_NAMES.get(source, source)}): "
                      "accuracy % and speed-up per platform", tuple(header), tuple(rows))


SHARED_NOTE = ("shared generation: one trajectory per problem, its final candidate judged on "
               "every platform; its tokens counted once")


def multi_chip_tokens(report: RunReport) -> PaperTable | None:
    """:func:`multi_chip` with billed tokens, as ``kgb report`` shows it: per platform under
    per-platform generation (each platform's trajectories are its own), one column under shared
    generation (a trajectory's tokens belong to no platform and are counted once). None when
    only one platform ran."""
    chip = multi_chip(report)
    if chip is None:
        return None
    platforms = _platforms(report)
    by: dict[tuple[str, str, str], int] = {(m, meth, p): n
                                           for m, meth, p, n in report.platform_tokens}
    shared = report.scope.generation == "shared"
    cols = [""] if shared else platforms
    header = [*chip.header, *(("Tokens (once)",) if shared
                              else tuple(f"{p} tokens" for p in platforms))]
    rows = [(*r, *(f"{by.get((r[0], r[1], c), 0):,}" for c in cols)) for r in chip.rows]
    note = SHARED_NOTE if shared else "per-platform generation: tokens per platform"
    return PaperTable(chip.name, f"{chip.title} ({note})", tuple(header), tuple(rows))


def cost_table(report: RunReport) -> PaperTable:
    rows = []
    for c in report.costs:
        per = c.tokens_per_solved
        rows.append((c.model, c.method, f"{c.total_tokens:,}", "-" if per is None else f"{per:,.0f}",
                     f"{c.wall_hours:.2f}", f"${c.cost_usd:,.2f}" if c.cost_known else "unknown"))
    return PaperTable("cost", "Cost: tokens, tokens per success (solved problem), hours, dollars",
                      ("Model", "Method", "Total tokens", "Tokens / success", "Total hours",
                       "Cost"), tuple(rows))


def _cell(o: ProblemOutcome | None) -> str:
    if o is None:
        return "-"
    if o.solved:
        return "pass" if o.speedup is None else f"{o.speedup:.2f}x"
    return {"excluded": "excl", "toolchain": "toolchain"}.get(o.state, "fail")


def problem_matrix(outcomes: Sequence[ProblemOutcome]) -> PaperTable:
    """Rows: every attempted problem; columns: (model, method, platform); cells: the speed-up
    of a solved problem (``pass`` untimed), ``fail``, ``excl``, ``toolchain`` or ``-`` (not
    attempted)."""
    cols = sorted({(o.model, o.method, o.platform) for o in outcomes})
    at = {(o.model, o.method, o.platform, o.problem): o for o in outcomes}
    problems = sorted({o.problem for o in outcomes})
    rows = tuple((p, *(_cell(at.get((*c, p))) for c in cols)) for p in problems)
    return PaperTable("problems", "Per problem: speed-up when solved",
                      ("Problem", *(" ".join(c) for c in cols)), rows)


def sequential_rounds(report: RunReport,
                      cell: Callable[[float | None], str] = _acc) -> PaperTable | None:
    """Sequential Pass@K of ``sample`` with ``rounds``: % of the named problems solved by round
    K (the accuracy's denominator), each written by ``cell``; None when no method ran in
    rounds."""
    rows = [m for m in report.metrics if m.pass_after_round]
    if not rows:
        return None
    most = max(len(m.pass_after_round) for m in rows)
    cells = tuple((m.model, m.method, m.source, m.platform, str(m.named),
                   *(cell(v) for v in m.pass_after_round),
                   *["-"] * (most - len(m.pass_after_round))) for m in rows)
    return PaperTable("rounds", "Sequential Pass@K: % of the named problems solved by round K",
                      ("Model", "Method", "Source", "Platform", "Named",
                       *(f"Round {k}" for k in range(1, most + 1))), cells)


def paper_tables(report: RunReport) -> list[PaperTable]:
    chip = multi_chip(report)
    rounds = sequential_rounds(report)
    return [multi_source(report), *([chip] if chip else []), *([rounds] if rounds else []),
            cost_table(report), problem_matrix(report.outcomes)]


# ---- rendering ---------------------------------------------------------------------------------


def to_markdown(t: PaperTable) -> str:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"
    align = ["---"] * 2 + ["--:"] * (len(t.header) - 2) if t.name != "problems" else \
        ["---"] + ["--:"] * (len(t.header) - 1)
    return "\n".join([f"**{t.title}**", "", line(t.header), "| " + " | ".join(align) + " |",
                      *(line(r) for r in t.rows)]) + "\n"


_LATEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                  "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                  "^": r"\textasciicircum{}"}


def latex_escape(text: str) -> str:
    return "".join(_LATEX_ESCAPES.get(ch, ch) for ch in text)


def to_latex(t: PaperTable) -> str:
    lead = 1 if t.name == "problems" else 2
    spec = "l" * lead + "r" * (len(t.header) - lead)
    body = [" & ".join(latex_escape(c) for c in r) + r" \\" for r in t.rows]
    return "\n".join([r"\begin{table}[t]", r"\centering", f"\\caption{{{latex_escape(t.title)}}}",
                      f"\\begin{{tabular}}{{{spec}}}", r"\toprule",
                      " & ".join(latex_escape(c) for c in t.header) + r" \\", r"\midrule", *body,
                      r"\bottomrule", r"\end{tabular}", r"\end{table}"]) + "\n"


def to_rich(t: PaperTable) -> Table:
    table = Table(title=t.title)
    for i, col in enumerate(t.header):
        table.add_column(col, justify="left" if i < 2 else "right", no_wrap=i == 0)
    for r in t.rows:
        table.add_row(*r)
    return table
