"""Reports: pure functions of stored rows, and their rendering."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from rich.console import Console

from coordinator.store import TrajectoryRow


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


def render_table(rows: list[ResultRow], title: str = "") -> object:
    """A rich Table: operator, source, method, status, speedup, % of speed-of-light."""
    from rich.table import Table

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
