"""The plots of ``kgb report --html``, drawn by matplotlib and returned as inline SVG text (no
files, no network): fast_p curves, the status funnel, accuracy vs tokens, the speed-up
distribution per source and, when several platforms ran, the portability heat map.

Each function is a pure function of a :class:`~coordinator.report.RunReport`; matplotlib's
object API is used (never pyplot), so no display or global state is involved.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from typing import Any

import matplotlib
from matplotlib.figure import Figure

from coordinator.report import FUNNEL_STAGES, RunReport
from coordinator.report_metrics import ALL, FAST_PS

matplotlib.rcParams["svg.fonttype"] = "none"     # text stays text: smaller, searchable
matplotlib.rcParams["svg.hashsalt"] = "kgb"      # stable ids: the same report, the same file


def _svg(fig: Figure) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _figure() -> Figure:
    return Figure(figsize=(6.4, 3.6), layout="constrained")


def _lines(fig: Figure, ax: Any, **labels: str) -> str:
    """A line plot's labels and, when it has lines, its legend; as SVG."""
    ax.set(**labels)
    if ax.lines:
        ax.legend(fontsize="small")
    return _svg(fig)


def _first_platform(report: RunReport) -> str:
    platforms = sorted({m.platform for m in report.metrics}, key=lambda p: (p != "cuda", p))
    return platforms[0] if platforms else "cuda"


def fast_p_plot(report: RunReport) -> str:
    fig = _figure()
    ax = fig.add_subplot()
    platform = _first_platform(report)
    for m in report.metrics:
        if m.source == ALL and m.platform == platform:
            ys = [m.fast(p) for p in FAST_PS]
            ax.plot(FAST_PS, [math.nan if y is None else 100 * y for y in ys], marker="o",
                    label=f"{m.model} {m.method}")
    return _lines(fig, ax, xlabel="p (speed-up threshold)", ylabel="fast_p (% of named problems)",
                  title=f"fast_p ({platform}, all sources)")


def funnel_plot(report: RunReport) -> str:
    fig = _figure()
    ax = fig.add_subplot()
    labels = [label for _s, label in FUNNEL_STAGES]
    for f in report.funnels:
        ax.plot(range(len(labels)), [s.count for s in f.stages], marker="o",
                label=f"{f.model} {f.method}")
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize="small")
    return _lines(fig, ax, ylabel="scored trajectories", title="status funnel")


def accuracy_tokens_plot(report: RunReport) -> str:
    fig = _figure()
    ax = fig.add_subplot()
    platform = _first_platform(report)
    tokens = {(c.model, c.method): c.total_tokens for c in report.costs}
    for m in report.metrics:
        if m.source == ALL and m.platform == platform and m.accuracy is not None:
            x = tokens.get((m.model, m.method), 0)
            ax.scatter([x], [100 * m.accuracy])
            ax.annotate(f"{m.model} {m.method}", (x, 100 * m.accuracy), fontsize="small")
    ax.set(xlabel="total tokens", ylabel="accuracy (%)", title="accuracy vs tokens")
    return _svg(fig)


def speedup_plot(report: RunReport) -> str:
    fig = _figure()
    ax = fig.add_subplot()
    by: dict[str, list[float]] = {}
    for o in report.outcomes:
        if o.solved and o.speedup is not None:
            by.setdefault(o.source, []).append(o.speedup)
    names = sorted(by)
    if names:
        ax.boxplot([by[n] for n in names], tick_labels=names)
        ax.set_yscale("log")
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set(ylabel="per-problem speed-up (log)", title="speed-up of solved problems per source")
    return _svg(fig)


def portability_plot(report: RunReport) -> str | None:
    """None when only one platform ran."""
    platforms = sorted({m.platform for m in report.metrics}, key=lambda p: (p != "cuda", p))
    if len(platforms) < 2:
        return None
    source = "aten" if "aten" in report.scope.sources else ALL
    pairs = sorted({(m.model, m.method) for m in report.metrics})
    acc = {(m.model, m.method, m.platform): m.accuracy for m in report.metrics if m.source == source}
    grid = [[100 * (acc.get((*p, pl)) or 0.0) for pl in platforms] for p in pairs]
    fig = Figure(figsize=(1.5 + 1.2 * len(platforms), 1.0 + 0.5 * len(pairs)), layout="constrained")
    ax = fig.add_subplot()
    img = ax.imshow(grid, cmap="viridis", vmin=0, vmax=100, aspect="auto")
    ax.set_xticks(range(len(platforms)), platforms)
    ax.set_yticks(range(len(pairs)), [f"{m} {meth}" for m, meth in pairs])
    for i, row in enumerate(grid):
        for j, v in enumerate(row):
            ax.text(j, i, f"{v:.1f}", ha="center", va="center", color="white", fontsize="small")
    fig.colorbar(img, ax=ax, label="accuracy (%)")
    ax.set_title(f"portability: accuracy per platform ({source})")
    return _svg(fig)


#: (id, caption, plot) of every plot; a plot returning None is left out.
PLOTS: tuple[tuple[str, str, Callable[[RunReport], str | None]], ...] = (
    ("plot-fast-p", "fast_p per method", fast_p_plot),
    ("plot-funnel", "status funnel", funnel_plot),
    ("plot-accuracy-tokens", "accuracy vs tokens per model", accuracy_tokens_plot),
    ("plot-speedup", "speed-up distribution per source", speedup_plot),
    ("plot-portability", "portability heat map", portability_plot),
)
