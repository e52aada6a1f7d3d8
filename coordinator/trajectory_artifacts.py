"""A trajectory's artifacts in the store: what an ``agent-cli`` trajectory leaves besides its
calls and candidates — the CLI's version, its transcript, the tail of its stderr, the cross-check
of its own usage log against the proxy's books and every kernel ``verify`` saw
(:attr:`generators.trajectory.Trajectory.artifacts`, names ``cli_version``, ``transcript``,
``stderr``, ``usage_check``, ``verify/N``).

``trajectory_artifacts``: one row per (run, platform, trajectory key, name) with its text. They
are written in the transaction that stores the trajectory's result and only when that result is
written (:meth:`~coordinator.store.Store.add_trajectory_results`): a resumed sweep never mixes
two runs' transcripts, and a result that replaces an ``INFRA_ERROR`` one replaces its artifacts.

Each text is bounded to :data:`MAX_TEXT_BYTES` (1 MB of UTF-8) so one chatty CLI cannot bloat
the store: a longer one keeps its first and last halves around a line that says how many bytes
were cut (the start shows the setup, the end the CLI's result and usage).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass

from coordinator.trajectory_key import TrajectoryKey

MAX_TEXT_BYTES = 1_000_000
ARTIFACTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS trajectory_artifacts (
    run_id TEXT NOT NULL, platform TEXT NOT NULL, trajectory TEXT NOT NULL, name TEXT NOT NULL,
    text TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (run_id, platform, trajectory, name));
"""


@dataclass(frozen=True)
class Artifact:
    """One named text of one trajectory of a run."""

    run_id: str
    platform: str
    trajectory: str             # the TrajectoryKey string
    name: str
    text: str

    @property
    def owner(self) -> tuple[str, str, str]:
        return self.run_id, self.platform, self.trajectory


def bounded(text: str, limit: int = MAX_TEXT_BYTES) -> str:
    """``text`` if its UTF-8 fits ``limit`` bytes, else its first and last halves (cut on
    whole characters) joined by a line that says how many bytes were left out."""
    raw = text.encode("utf-8", errors="replace")
    if len(raw) <= limit:
        return text
    half = limit // 2
    head = raw[:half].decode("utf-8", errors="ignore")
    tail = raw[len(raw) - half:].decode("utf-8", errors="ignore")
    cut = len(raw) - len(head.encode()) - len(tail.encode())
    return f"{head}\n[... {cut} bytes cut by kgb: each artifact keeps at most {limit} ...]\n{tail}"


def artifacts_of(run_id: str, platform: str, key: TrajectoryKey,
                 named: Sequence[tuple[str, str]]) -> tuple[Artifact, ...]:
    """A trajectory's ``(name, text)`` pairs as rows to store, each text bounded."""
    return tuple(Artifact(run_id, platform, str(key), name, bounded(text)) for name, text in named)


def write_artifacts(db: sqlite3.Connection, rows: Sequence[Artifact],
                    written: set[tuple[str, str, str]]) -> None:
    """Inside the results' transaction: the artifacts of the trajectories whose result was
    ``written`` (run, platform, key) replace whatever those trajectories had; others are dropped
    (their stored result, and its artifacts, stand)."""
    db.executemany("DELETE FROM trajectory_artifacts WHERE run_id = ? AND platform = ? "
                   "AND trajectory = ?", sorted(written))
    keep = [a for a in rows if a.owner in written]
    now = time.time()
    db.executemany("INSERT OR REPLACE INTO trajectory_artifacts VALUES (?, ?, ?, ?, ?, ?)",
                   [(*a.owner, a.name, a.text, now) for a in keep])


def read_artifacts(db: sqlite3.Connection, run_id: str,
                   trajectory: TrajectoryKey | str | None = None) -> list[Artifact]:
    """A run's artifacts (one trajectory's with ``trajectory``), by platform, key and name."""
    sql = "SELECT run_id, platform, trajectory, name, text FROM trajectory_artifacts WHERE run_id = ?"
    args: tuple[str, ...] = (run_id,)
    if trajectory is not None:
        sql, args = sql + " AND trajectory = ?", (run_id, str(trajectory))
    return [Artifact(*r) for r in db.execute(sql + " ORDER BY platform, trajectory, name", args)]
