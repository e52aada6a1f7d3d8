"""The agent track's columns of a sweep report: per (model, method), what each trajectory cost in
tokens, wall time and verify calls, and how often its final kernel passed the public cases but
failed hidden ones (definitions: docs/reports.md, "Agent track").

Every method gets a row — ``sample`` and ``refine`` show 0 verify calls — so ``agent`` (and
``agent-cli``, which stores the same columns) sit beside them. Pure functions of
``trajectory_results`` rows, like the rest of :mod:`coordinator.report`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from rich.table import Table

from coordinator.store import TrajectoryResult


@dataclass(frozen=True)
class TrackRow:
    """One (model, method): sums over its trajectories and the public-pass / hidden-fail rate.

    ``judged`` counts the trajectories whose final candidate got a verdict (the rate's
    denominator); ``wall_s`` sums the trajectories' own wall time (0 where it was not recorded:
    candidate methods, rows stored before it was)."""

    model: str
    method: str
    trajectories: int
    tokens: int
    wall_s: float
    verify_calls: int
    judged: int
    public_pass_hidden_fail: int

    def _mean(self, value: float) -> float | None:
        return value / self.trajectories if self.trajectories else None

    @property
    def tokens_per_trajectory(self) -> float | None:
        return self._mean(self.tokens)

    @property
    def wall_s_per_trajectory(self) -> float | None:
        return self._mean(self.wall_s)

    @property
    def verify_calls_per_trajectory(self) -> float | None:
        return self._mean(self.verify_calls)

    @property
    def public_pass_hidden_fail_rate(self) -> float | None:
        return self.public_pass_hidden_fail / self.judged if self.judged else None

    def to_json(self) -> dict[str, object]:
        return {"model": self.model, "method": self.method, "trajectories": self.trajectories,
                "tokens": self.tokens, "wall_s": self.wall_s, "verify_calls": self.verify_calls,
                "judged": self.judged, "public_pass_hidden_fail": self.public_pass_hidden_fail,
                "tokens_per_trajectory": self.tokens_per_trajectory,
                "wall_s_per_trajectory": self.wall_s_per_trajectory,
                "verify_calls_per_trajectory": self.verify_calls_per_trajectory,
                "public_pass_hidden_fail_rate": self.public_pass_hidden_fail_rate}


def track_rows(results: Iterable[TrajectoryResult]) -> list[TrackRow]:
    """One row per (model, method), sorted."""
    acc: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0, 0.0, 0, 0, 0])
    for r in results:
        a = acc[(r.key.model, r.key.method)]
        a[0] += 1
        a[1] += r.prompt_tokens + r.completion_tokens
        a[2] += r.wall_s
        a[3] += r.verify_calls
        a[4] += int(r.status is not None)
        a[5] += int(r.public_pass_hidden_fail)
    return [TrackRow(model, method, int(a[0]), int(a[1]), float(a[2]), int(a[3]), int(a[4]), int(a[5]))
            for (model, method), a in sorted(acc.items())]


def render_track(rows: Iterable[TrackRow]) -> Table:
    table = Table(title="agent track: per trajectory (mean), verify calls, public pass / hidden fail")
    table.add_column("model", no_wrap=True)
    table.add_column("method", no_wrap=True)
    for col in ("trajectories", "tokens", "wall s", "verify calls", "public pass, hidden fail"):
        table.add_column(col, justify="right")
    for r in rows:
        rate = r.public_pass_hidden_fail_rate
        table.add_row(r.model, r.method, str(r.trajectories), _num(r.tokens_per_trajectory, ",.0f"),
                      _num(r.wall_s_per_trajectory, ",.1f"), _num(r.verify_calls_per_trajectory, ".1f"),
                      "-" if rate is None else f"{r.public_pass_hidden_fail} ({100 * rate:.1f}%)")
    return table


def _num(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)
