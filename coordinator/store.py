"""The result store: SQLite in WAL mode under ``runs/<run-id>/kgb.sqlite``.

Candidates are content-addressed (sha256 of the source). Verdicts are keyed by what decides
them: (operator id, operator version, candidate hash, device model, harness version) — so the
same candidate is never evaluated twice for the same key, whatever run asks. Trajectories link
a run's (operator, method, model, sample) to the candidate it produced. Every write is an
idempotent upsert, so a retry never duplicates a record.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import orjson

from protos.records import Verdict

SCHEMA_VERSION = 1
DB_NAME = "kgb.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, created REAL NOT NULL, config TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS candidates (
    candidate_hash TEXT PRIMARY KEY, source TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS trajectories (
    run_id TEXT NOT NULL, operator_id TEXT NOT NULL, method TEXT NOT NULL, model TEXT NOT NULL,
    sample INTEGER NOT NULL, label TEXT NOT NULL, candidate_hash TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (run_id, operator_id, method, model, sample));
CREATE TABLE IF NOT EXISTS verdicts (
    operator_id TEXT NOT NULL, operator_version INTEGER NOT NULL, candidate_hash TEXT NOT NULL,
    device_model TEXT NOT NULL, harness_version TEXT NOT NULL, status TEXT NOT NULL,
    verdict TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (operator_id, operator_version, candidate_hash, device_model, harness_version));
"""


class StoreError(RuntimeError):
    pass


@dataclass(frozen=True)
class TrajectoryRow:
    operator_id: str
    method: str
    model: str
    sample: int
    label: str
    candidate_hash: str
    verdict: Verdict | None


class Store:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.db = sqlite3.connect(path, timeout=30, isolation_level=None)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open store {path}: {exc}") from None
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(_SCHEMA)
        self.db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))

    @classmethod
    def open_run(cls, run_dir: Path) -> Store:
        return cls(run_dir / DB_NAME)

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    # ---- writes (idempotent) -----------------------------------------------------------------
    def add_run(self, run_id: str, config: dict[str, object]) -> None:
        with self._tx() as db:
            db.execute("INSERT OR IGNORE INTO runs VALUES (?, ?, ?)",
                       (run_id, time.time(), orjson.dumps(config).decode()))

    def add_candidate(self, candidate_hash: str, source: str) -> None:
        with self._tx() as db:
            db.execute("INSERT OR IGNORE INTO candidates VALUES (?, ?, ?)",
                       (candidate_hash, source, time.time()))

    def add_trajectory(self, run_id: str, operator_id: str, method: str, model: str, sample: int,
                       label: str, candidate_hash: str) -> None:
        with self._tx() as db:
            db.execute("INSERT OR IGNORE INTO trajectories VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                       (run_id, operator_id, method, model, sample, label, candidate_hash,
                        time.time()))

    def add_verdict(self, v: Verdict) -> bool:
        """Store a verdict; False when one with the same key already exists (kept as is)."""
        with self._tx() as db:
            cur = db.execute(
                "INSERT OR IGNORE INTO verdicts VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (v.operator_id, v.operator_version, v.candidate_hash, v.device_model,
                 v.harness_version, v.status.value, orjson.dumps(v.to_json()).decode(),
                 time.time()))
            return cur.rowcount == 1

    # ---- reads -------------------------------------------------------------------------------
    def verdict(self, operator_id: str, operator_version: int, candidate_hash: str,
                device_model: str, harness_version: str) -> Verdict | None:
        row = self.db.execute(
            "SELECT verdict FROM verdicts WHERE operator_id=? AND operator_version=? AND "
            "candidate_hash=? AND device_model=? AND harness_version=?",
            (operator_id, operator_version, candidate_hash, device_model, harness_version)).fetchone()
        return Verdict.from_json(orjson.loads(row[0])) if row else None

    def source(self, candidate_hash: str) -> str | None:
        row = self.db.execute("SELECT source FROM candidates WHERE candidate_hash=?",
                              (candidate_hash,)).fetchone()
        return row[0] if row else None

    def run_ids(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT run_id FROM runs ORDER BY created")]

    def trajectories(self, run_id: str) -> list[TrajectoryRow]:
        """Every trajectory of a run with its newest verdict (None while unevaluated)."""
        rows = self.db.execute(
            "SELECT t.operator_id, t.method, t.model, t.sample, t.label, t.candidate_hash, "
            "(SELECT v.verdict FROM verdicts v WHERE v.operator_id = t.operator_id "
            " AND v.candidate_hash = t.candidate_hash ORDER BY v.created DESC LIMIT 1) "
            "FROM trajectories t WHERE t.run_id = ? "
            "ORDER BY t.operator_id, t.method, t.model, t.sample", (run_id,)).fetchall()
        return [TrajectoryRow(r[0], r[1], r[2], r[3], r[4], r[5],
                              Verdict.from_json(orjson.loads(r[6])) if r[6] else None)
                for r in rows]
