"""Warnings in a sweep's report: recorded findings that decided nothing.

A static rule that a runtime layer backs up records a warning-level finding instead of rejecting
(docs/anticheat.md); ``kgb report`` counts them per (model, method) on each trajectory's best
candidate, so a method whose kernels lean on such patterns shows it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from coordinator.store import TrajectoryResult
from protos.records import Verdict


@dataclass(frozen=True)
class WarningRow:
    """Warning-level findings on the best candidates of one (model, method): ``warned`` of its
    ``judged`` best candidates carry ``warnings`` in all."""

    model: str
    method: str
    judged: int
    warned: int
    warnings: int


def warning_rows(results: Iterable[TrajectoryResult],
                 verdict_of: Callable[[str, str], Verdict | None]) -> list[WarningRow]:
    """Per (model, method), the warnings of each trajectory's best candidate's verdict
    (``verdict_of(operator_id, candidate_hash)``)."""
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    for r in results:
        v = verdict_of(r.key.operator_id, r.best_candidate_hash) if r.best_candidate_hash else None
        if v is None:
            continue
        n = sum(1 for f in v.findings if f.warning)
        c = counts[(r.key.model, r.key.method)]
        c[0], c[1], c[2] = c[0] + 1, c[1] + (n > 0), c[2] + n
    return [WarningRow(m, meth, *c) for (m, meth), c in sorted(counts.items())]


def render_warnings(rows: Iterable[WarningRow]) -> str:
    warned = "; ".join(f"{w.model} {w.method}: {w.warnings} on {w.warned} of {w.judged} best "
                       "candidates" for w in rows if w.warnings) or "none"
    return f"static warnings: {warned}"
