"""The result store: SQLite in WAL mode under ``runs/<run-id>/kgb.sqlite``.

Candidates are content-addressed (sha256 of the source). Verdicts are keyed by what decides
them: (operator id, operator version, candidate hash, device model, harness version, baseline)
— so the same candidate is never evaluated twice for the same key, whatever run asks, and a
speed-up over PyTorch is never taken for one over vLLM's kernel or cuBLAS
(:mod:`coordinator.store_schema`). Trajectories link
a run's (operator, method, model, sample) to the candidate it produced. Every write is an
idempotent upsert, so a retry never duplicates a record. Disputes are PASSED verdicts that a
spot-check's second agent did not confirm (``coordinator/spot_check.py``): both agents and the
second status, kept so reports can show them.

Verdicts of an evaluation mode that is never a score — ``public`` (an agent's ``verify``: public
cases only, ``Verdict.public_only``) — are kept in ``mode_verdicts``, whose key is the verdicts'
key plus the mode: :meth:`Store.add_verdict` files a verdict by its mode, and a lookup names the
mode it wants, so a public-only verdict is never read back as a final one (nor the reverse).

LLM calls and their intents (``llm_calls``, ``llm_intents``; :mod:`coordinator.llm_calls`, mixed
into :class:`Store`): every model call of a trajectory, keyed by (run id, trajectory key, turn) —
the trajectory key is :class:`TrajectoryKey`'s ``operator id@version/method/model/sample`` string
and ``turn`` is 1-based — written as an intent before its request leaves and as the whole
:class:`~generators.llm.LLMCall` (tool calls included; :mod:`coordinator.call_json`) once its
reply is there, before it is used. Exactly-once: adding
the same (run, trajectory, turn) again keeps the first row and returns it; the one exception is a
``BUDGET`` row (never sent, nothing paid), which a call that was really sent for that turn
replaces — a resume with a larger budget may send what an earlier run held back.

Durability: the connection runs ``synchronous=NORMAL`` in WAL mode — a commit reaches the OS
before it returns, so it survives the coordinator being killed (SIGKILL, OOM); only an OS crash
or power loss can lose the last commits. That is fine for verdicts (a lost one is evaluated
again, no money spent) but not for model calls and intents, where a lost row means tokens paid
and not accounted, so their writes switch the connection to ``synchronous=FULL`` for their
transaction (:meth:`Store._durable_tx`): the WAL is fsynced at that commit. The sweep's store
writer commits what arrives together in one such transaction (one fsync per batch).

An ``agent-cli`` trajectory's artifacts (CLI version, transcript, the kernels ``verify`` saw) are
stored with its result in ``trajectory_artifacts`` (:mod:`coordinator.trajectory_artifacts`).

Run states (``run_states``; :mod:`coordinator.run_states`, mixed into :class:`Store`): where a
run stands, who runs it, when that coordinator started and until when its lease holds.

Schema changes are additive: tables and indexes are created when missing and columns added to
the tables of older files (:data:`ADDED_COLUMNS`), in one transaction at open, so a store of an
earlier version is migrated by opening it (older rows take the columns' defaults).

A :class:`Store` holds one SQLite connection and is used from one thread (the coordinator's
event loop); several processes may share the file (WAL, a 30 s busy timeout).
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from coordinator.call_json import llm_call_from_json as llm_call_from_json
from coordinator.call_json import llm_call_to_json as llm_call_to_json
from coordinator.llm_calls import ADDED_COLUMNS as LLM_ADDED_COLUMNS
from coordinator.llm_calls import INDEXES, INTENTS_SCHEMA, LLMCallRow, LLMCallTables, LLMTotals
from coordinator.run_states import RUN_STATES_ADDED_COLUMNS, RUN_STATES_SCHEMA, RunStateTables
from coordinator.spot_check import Dispute
from coordinator.store_schema import VERDICTS_TABLE, key_verdicts_on_baseline, verdict_baseline
from coordinator.trajectory_artifacts import ARTIFACTS_SCHEMA, Artifact, read_artifacts, write_artifacts
from coordinator.trajectory_key import StoreError, TrajectoryKey
from protos.records import Status, Verdict

__all__ = ["DB_NAME", "SCHEMA_VERSION", "LLMCallRow", "LLMTotals", "Store", "StoreError",
           "TrajectoryKey", "TrajectoryLink", "TrajectoryResult", "TrajectoryRow",
           "llm_call_from_json", "llm_call_to_json"]

SCHEMA_VERSION = 6  # 2: llm_calls; 3: trajectory_results; 4: run_states; 5: disputes;
#                    6: llm_intents, call and lease columns, reused verdicts, mode_verdicts,
#                    the agent track's columns and trajectory_artifacts (added on open:
#                    older files migrate)
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
""" + VERDICTS_TABLE + """
CREATE TABLE IF NOT EXISTS mode_verdicts (
    mode TEXT NOT NULL, operator_id TEXT NOT NULL, operator_version INTEGER NOT NULL,
    candidate_hash TEXT NOT NULL, device_model TEXT NOT NULL, harness_version TEXT NOT NULL,
    status TEXT NOT NULL, verdict TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (mode, operator_id, operator_version, candidate_hash, device_model,
                 harness_version));
CREATE TABLE IF NOT EXISTS llm_calls (
    run_id TEXT NOT NULL, trajectory TEXT NOT NULL, turn INTEGER NOT NULL,
    provider TEXT NOT NULL, model TEXT NOT NULL, method TEXT NOT NULL, status TEXT NOT NULL,
    billed INTEGER NOT NULL, prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL,
    cached_tokens INTEGER NOT NULL, reasoning_tokens INTEGER NOT NULL, cost_usd REAL NOT NULL,
    latency_s REAL NOT NULL, attempts INTEGER NOT NULL, call TEXT NOT NULL, created REAL NOT NULL,
    idempotency_key TEXT NOT NULL DEFAULT '', intent INTEGER NOT NULL DEFAULT 0,
    unconfirmed_attempts INTEGER NOT NULL DEFAULT 0, cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, trajectory, turn));
""" + RUN_STATES_SCHEMA + """CREATE TABLE IF NOT EXISTS trajectory_results (
    run_id TEXT NOT NULL, platform TEXT NOT NULL, trajectory TEXT NOT NULL,
    operator_id TEXT NOT NULL, operator_version INTEGER NOT NULL, source TEXT NOT NULL,
    method TEXT NOT NULL, model TEXT NOT NULL, sample INTEGER NOT NULL,
    end_reason TEXT NOT NULL, status TEXT NOT NULL, best_candidate_hash TEXT NOT NULL,
    speedup REAL, sol_percent REAL, turns INTEGER NOT NULL, candidates INTEGER NOT NULL,
    prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, cost_usd REAL NOT NULL,
    gpu_seconds REAL NOT NULL, detail TEXT NOT NULL, created REAL NOT NULL,
    reused_verdicts INTEGER NOT NULL DEFAULT 0, reused_gpu_seconds REAL NOT NULL DEFAULT 0,
    wall_s REAL NOT NULL DEFAULT 0, verify_calls INTEGER NOT NULL DEFAULT 0,
    public_pass_hidden_fail INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, platform, trajectory));
CREATE TABLE IF NOT EXISTS disputes (
    operator_id TEXT NOT NULL, operator_version INTEGER NOT NULL, candidate_hash TEXT NOT NULL,
    device_model TEXT NOT NULL, passed_by TEXT NOT NULL, refuted_by TEXT NOT NULL,
    second_status TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (operator_id, operator_version, candidate_hash, device_model, passed_by, refuted_by));
""" + INTENTS_SCHEMA + ARTIFACTS_SCHEMA
# Columns added since a table was first created, in the order they were added (an older file
# gets them by ALTER TABLE, at the end of the table, as a new file has them).
ADDED_COLUMNS = (
    *LLM_ADDED_COLUMNS,
    *RUN_STATES_ADDED_COLUMNS,
    ("trajectory_results", "reused_verdicts", "INTEGER NOT NULL DEFAULT 0"),
    ("trajectory_results", "reused_gpu_seconds", "REAL NOT NULL DEFAULT 0"),
    ("trajectory_results", "wall_s", "REAL NOT NULL DEFAULT 0"),
    ("trajectory_results", "verify_calls", "INTEGER NOT NULL DEFAULT 0"),
    ("trajectory_results", "public_pass_hidden_fail", "INTEGER NOT NULL DEFAULT 0"),
    ("trajectory_results", "baseline", "TEXT NOT NULL DEFAULT ''"),
)
PUBLIC = "public"  # the mode of a public-only verdict (an agent's verify)
_RESULT_COLUMNS = ("run_id, platform, trajectory, operator_id, operator_version, source, method, "
                   "model, sample, end_reason, status, best_candidate_hash, speedup, sol_percent, "
                   "turns, candidates, prompt_tokens, completion_tokens, cost_usd, gpu_seconds, "
                   "detail, created, reused_verdicts, reused_gpu_seconds, wall_s, verify_calls, "
                   "public_pass_hidden_fail, baseline")


@dataclass(frozen=True)
class TrajectoryLink:
    """A trajectory of a candidate method and the one candidate it produced (a row of
    ``trajectories``): what ``kgb run``'s table lists, with the candidate's label."""

    run_id: str
    operator_id: str
    method: str
    model: str
    sample: int
    label: str
    candidate_hash: str


@dataclass(frozen=True)
class TrajectoryRow(TrajectoryLink):
    """A link with its candidate's newest verdict (None while unevaluated)."""

    verdict: Verdict | None = None


@dataclass(frozen=True)
class TrajectoryResult:
    """The outcome of one finished trajectory of a sweep (one row of ``trajectory_results``).

    ``status`` is the verdict of the trajectory's best candidate (see
    :attr:`generators.trajectory.Trajectory.best`), None when no candidate was judged;
    ``best_candidate_hash`` is "" then. Tokens and cost are the billed totals of its calls;
    ``gpu_seconds`` sums the agents' wall time over the evaluations made for it (each
    evaluation counted once, by the trajectory that asked for it first); ``reused_verdicts`` and
    ``reused_gpu_seconds`` count the verdicts it took from the store or shared with an identical
    evaluation in flight, and the agent time they had cost whoever asked first.
    """

    run_id: str
    platform: str
    key: TrajectoryKey
    source: str                 # the problem's source: aten, vllm or cublas
    end_reason: str             # a generators.trajectory.EndReason value
    status: Status | None
    best_candidate_hash: str
    speedup: float | None
    sol_percent: float | None
    turns: int
    candidates: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    gpu_seconds: float
    detail: str = ""
    created: float = 0.0
    reused_verdicts: int = 0
    reused_gpu_seconds: float = 0.0
    wall_s: float = 0.0                 # the trajectory's wall time (0: not recorded)
    verify_calls: int = 0               # an agent's public-case checks
    public_pass_hidden_fail: bool = False  # the final verdict passed public, failed hidden cases
    baseline: str = ""  # what the best candidate's speed-up is over (its verdict's baseline)

    @property
    def solved(self) -> bool:
        return self.status is Status.PASSED


class Store(LLMCallTables, RunStateTables):
    """One SQLite connection to a store file; see the module doc."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        try:  # a new store is its owner's alone (an agent-cli workspace runs as another uid)
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            pass
        except OSError as exc:
            raise StoreError(f"cannot create store {path}: {exc}") from None
        try:
            self.db = sqlite3.connect(path, timeout=30, isolation_level=None)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open store {path}: {exc}") from None
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(_SCHEMA)
        with self._tx() as db:
            _migrate(db)
            db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                       (str(SCHEMA_VERSION),))

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

    @contextmanager
    def _durable_tx(self) -> Iterator[sqlite3.Connection]:
        """A transaction whose commit is fsynced (``synchronous=FULL``): it survives power loss."""
        self.db.execute("PRAGMA synchronous=FULL")
        try:
            with self._tx() as db:
                yield db
        finally:
            self.db.execute("PRAGMA synchronous=NORMAL")

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
        """Store a verdict under its mode (a public-only one in ``mode_verdicts``); False when
        one with the same key already exists (kept as is)."""
        key = (v.operator_id, v.operator_version, v.candidate_hash, v.device_model,
               v.harness_version)
        rest = (v.status.value, orjson.dumps(v.to_json()).decode(), time.time())
        with self._tx() as db:
            if v.public_only:
                cur = db.execute("INSERT OR IGNORE INTO mode_verdicts VALUES "
                                 "(?, ?, ?, ?, ?, ?, ?, ?, ?)", (PUBLIC, *key, *rest))
            else:
                cur = db.execute("INSERT OR IGNORE INTO verdicts VALUES "
                                 "(?, ?, ?, ?, ?, ?, ?, ?, ?)", (*key, verdict_baseline(v), *rest))
            return cur.rowcount == 1

    def add_dispute(self, d: Dispute) -> bool:
        """Record a spot-check disagreement; False when the same one is already recorded."""
        with self._tx() as db:
            cur = db.execute(
                "INSERT OR IGNORE INTO disputes VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (d.operator_id, d.operator_version, d.candidate_hash, d.device_model, d.passed_by,
                 d.refuted_by, d.second_status.value, time.time()))
            return cur.rowcount == 1

    def disputes(self) -> list[Dispute]:
        """Every recorded spot-check disagreement, oldest first."""
        rows = self.db.execute(
            "SELECT operator_id, operator_version, candidate_hash, device_model, passed_by, "
            "refuted_by, second_status FROM disputes ORDER BY created").fetchall()
        return [Dispute(r[0], int(r[1]), r[2], r[3], r[4], r[5], Status(r[6])) for r in rows]

    def add_trajectory_result(self, r: TrajectoryResult) -> bool:
        """Store a finished trajectory; False when (run, platform, trajectory) is already stored
        (the first outcome is kept: a resumed sweep never rewrites a finished trajectory) —
        except an ``INFRA_ERROR`` outcome (the system's failure), which a later outcome replaces."""
        return self.add_trajectory_results([r])[0]

    def add_trajectory_results(self, results: Sequence[TrajectoryResult],
                               candidates: Sequence[tuple[str, str]] = (),
                               links: Sequence[TrajectoryLink] = (),
                               artifacts: Sequence[Artifact] = ()) -> list[bool]:
        """:meth:`add_trajectory_result` for many, with their candidates' sources
        (``(hash, source)``), candidate methods' links and the artifacts of the results written
        (:mod:`coordinator.trajectory_artifacts`), in one transaction."""
        out: list[bool] = []
        with self._tx() as db:
            for h, source in candidates:
                db.execute("INSERT OR IGNORE INTO candidates VALUES (?, ?, ?)", (h, source, time.time()))
            for k in links:
                db.execute("INSERT OR IGNORE INTO trajectories VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                           (k.run_id, k.operator_id, k.method, k.model, k.sample, k.label,
                            k.candidate_hash, time.time()))
            for r in results:
                cur = db.execute(
                    f"INSERT INTO trajectory_results ({_RESULT_COLUMNS}) VALUES "
                    "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                    "?, ?) "
                    "ON CONFLICT (run_id, platform, trajectory) DO UPDATE SET "
                    "end_reason=excluded.end_reason, status=excluded.status, "
                    "best_candidate_hash=excluded.best_candidate_hash, speedup=excluded.speedup, "
                    "sol_percent=excluded.sol_percent, turns=excluded.turns, "
                    "candidates=excluded.candidates, prompt_tokens=excluded.prompt_tokens, "
                    "completion_tokens=excluded.completion_tokens, cost_usd=excluded.cost_usd, "
                    "gpu_seconds=excluded.gpu_seconds, detail=excluded.detail, "
                    "created=excluded.created, reused_verdicts=excluded.reused_verdicts, "
                    "reused_gpu_seconds=excluded.reused_gpu_seconds, wall_s=excluded.wall_s, "
                    "verify_calls=excluded.verify_calls, "
                    "public_pass_hidden_fail=excluded.public_pass_hidden_fail, "
                    "baseline=excluded.baseline "
                    "WHERE trajectory_results.end_reason = 'INFRA_ERROR'",
                    (r.run_id, r.platform, str(r.key), r.key.operator_id, r.key.operator_version,
                     r.source, r.key.method, r.key.model, r.key.sample, r.end_reason,
                     "" if r.status is None else r.status.value, r.best_candidate_hash, r.speedup,
                     r.sol_percent, r.turns, r.candidates, r.prompt_tokens, r.completion_tokens,
                     r.cost_usd, r.gpu_seconds, r.detail, r.created or time.time(),
                     r.reused_verdicts, r.reused_gpu_seconds, r.wall_s, r.verify_calls,
                     int(r.public_pass_hidden_fail), r.baseline))
                out.append(cur.rowcount == 1)
            write_artifacts(db, artifacts, {(r.run_id, r.platform, str(r.key))
                                            for r, w in zip(results, out, strict=True) if w})
        return out

    # ---- reads -------------------------------------------------------------------------------
    def trajectory_results(self, run_id: str) -> list[TrajectoryResult]:
        """A run's finished trajectories, in (platform, trajectory) order."""
        rows = self.db.execute(
            "SELECT run_id, platform, trajectory, source, end_reason, status, best_candidate_hash, "
            "speedup, sol_percent, turns, candidates, prompt_tokens, completion_tokens, cost_usd, "
            "gpu_seconds, detail, created, reused_verdicts, reused_gpu_seconds, wall_s, "
            "verify_calls, public_pass_hidden_fail, baseline FROM trajectory_results WHERE run_id=? "
            "ORDER BY platform, trajectory",
            (run_id,)).fetchall()
        return [TrajectoryResult(r[0], r[1], TrajectoryKey.parse(r[2]), r[3], r[4],
                                 Status(r[5]) if r[5] else None, r[6], r[7], r[8], int(r[9]),
                                 int(r[10]), int(r[11]), int(r[12]), float(r[13]), float(r[14]),
                                 r[15], float(r[16]), int(r[17]), float(r[18]), float(r[19]),
                                 int(r[20]), bool(r[21]), r[22]) for r in rows]

    def trajectory_artifacts(self, run_id: str,
                             trajectory: TrajectoryKey | str | None = None) -> list[Artifact]:
        return read_artifacts(self.db, run_id, trajectory)

    def finished_trajectories(self, run_id: str, *, retry_infra: bool = False) -> set[tuple[str, str]]:
        """(platform, trajectory key string) of every finished trajectory of a run; with
        ``retry_infra``, those that ended ``INFRA_ERROR`` are left out (a resume runs them again)."""
        extra = " AND end_reason != 'INFRA_ERROR'" if retry_infra else ""
        return {(r[0], r[1]) for r in self.db.execute(
            "SELECT platform, trajectory FROM trajectory_results WHERE run_id=?" + extra, (run_id,))}

    def run_config(self, run_id: str) -> dict[str, Any] | None:
        """The config a run was started with (:meth:`add_run`), None for an unknown run."""
        row = self.db.execute("SELECT config FROM runs WHERE run_id=?", (run_id,)).fetchone()
        return orjson.loads(row[0]) if row else None

    def verdict_for_any(self, operator_id: str, operator_version: int, candidate_hash: str,
                        keys: list[tuple[str, str, str]], *,
                        public_only: bool = False) -> Verdict | None:
        """A stored verdict for the candidate under any of ``keys`` ((device model, harness
        version, baseline) of the agents that could judge it now), else None; ``public_only``:
        a verdict of the public mode (an agent's verify), never a final one."""
        for device_model, harness_version, baseline in keys:
            v = self.verdict(operator_id, operator_version, candidate_hash, device_model,
                             harness_version, baseline, public_only=public_only)
            if v is not None:
                return v
        return None

    def verdict(self, operator_id: str, operator_version: int, candidate_hash: str,
                device_model: str, harness_version: str, baseline: str = "", *,
                public_only: bool = False) -> Verdict | None:
        """The verdict an agent timing against ``baseline`` would give: one timed against it,
        else one that timed nothing (baseline ""); a public-only one from ``mode_verdicts``."""
        key = (operator_id, operator_version, candidate_hash, device_model, harness_version)
        where = ("operator_id=? AND operator_version=? AND candidate_hash=? AND device_model=? "
                 "AND harness_version=?")
        if public_only:
            row = self.db.execute(f"SELECT verdict FROM mode_verdicts WHERE mode=? AND {where}",
                                  (PUBLIC, *key)).fetchone()
        else:
            row = self.db.execute(f"SELECT verdict FROM verdicts WHERE {where} AND baseline IN "
                                  "(?, '') ORDER BY baseline = '' LIMIT 1",
                                  (*key, baseline)).fetchone()
        return Verdict.from_json(orjson.loads(row[0])) if row else None

    def newest_verdict(self, operator_id: str, candidate_hash: str) -> Verdict | None:
        """The newest verdict on a candidate for a problem, on any device or harness."""
        row = self.db.execute(
            "SELECT verdict FROM verdicts WHERE operator_id=? AND candidate_hash=? "
            "ORDER BY created DESC LIMIT 1", (operator_id, candidate_hash)).fetchone()
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
        return [TrajectoryRow(run_id, r[0], r[1], r[2], r[3], r[4], r[5],
                              Verdict.from_json(orjson.loads(r[6])) if r[6] else None)
                for r in rows]


def _migrate(db: sqlite3.Connection) -> None:
    """Add the columns an older file lacks (inside the open's transaction, so two processes
    opening one old file do not both add them), then the indexes over them."""
    key_verdicts_on_baseline(db)
    for table, column, decl in ADDED_COLUMNS:
        have = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
        if column not in have:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")
    for statement in filter(None, (x.strip() for x in INDEXES.split(";"))):
        db.execute(statement)
