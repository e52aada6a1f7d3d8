"""The result store: SQLite in WAL mode under ``runs/<run-id>/kgb.sqlite``.

Candidates are content-addressed (sha256 of the source). Verdicts are keyed by what decides
them: (operator id, operator version, candidate hash, device model, harness version) — so the
same candidate is never evaluated twice for the same key, whatever run asks. Trajectories link
a run's (operator, method, model, sample) to the candidate it produced. Every write is an
idempotent upsert, so a retry never duplicates a record. Disputes are PASSED verdicts that a
spot-check's second agent did not confirm (``coordinator/spot_check.py``): both agents and the
second status, kept so reports can show them.

LLM calls (``llm_calls``): every model call of a trajectory, keyed by (run id, trajectory key,
turn) — the trajectory key is :class:`TrajectoryKey`'s ``operator id@version/method/model/sample``
string and ``turn`` is 1-based. The whole :class:`~generators.llm.LLMCall` is kept as JSON (prompt
messages and template, status, text, usage, cost, latency, attempts, finish reason, error,
extra), with the accounting fields also in columns for the totals queries. A call is committed
before :meth:`Store.add_llm_call` returns, and its caller (``coordinator.recorded_provider``)
returns the call to the trajectory only after that — persist before use. Exactly-once: adding
the same (run, trajectory, turn) again keeps the first row and returns it; the one exception is a
``BUDGET`` row (never sent, nothing paid), which a call that was really sent for that turn
replaces — a resume with a larger budget may send what an earlier run held back.

Durability: the connection runs ``synchronous=NORMAL`` in WAL mode — a commit reaches the OS
before it returns, so it survives the coordinator being killed (SIGKILL, OOM); only an OS crash
or power loss can lose the last commits. That is fine for verdicts (a lost one is evaluated
again, no money spent) but not for LLM calls, where a lost row means paying for the tokens a
second time, so LLM-call writes switch the connection to ``synchronous=FULL`` for their
transaction: the WAL is fsynced at that commit and the call survives power loss too. The cost
is one fsync per model call — negligible next to the call's own latency.

A :class:`Store` holds one SQLite connection and is used from one thread (the coordinator's
event loop); several processes may share the file (WAL, a 30 s busy timeout).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from coordinator.spot_check import Dispute
from generators.llm import CallStatus, LLMCall, Message, Prompt, Role, Usage
from protos.records import Status, Verdict

SCHEMA_VERSION = 5  # 2: llm_calls; 3: trajectory_results; 4: run_states; 5: disputes (tables
#                    are added on open, so files of earlier versions stay readable)
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
CREATE TABLE IF NOT EXISTS llm_calls (
    run_id TEXT NOT NULL, trajectory TEXT NOT NULL, turn INTEGER NOT NULL,
    provider TEXT NOT NULL, model TEXT NOT NULL, method TEXT NOT NULL, status TEXT NOT NULL,
    billed INTEGER NOT NULL, prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL,
    cached_tokens INTEGER NOT NULL, reasoning_tokens INTEGER NOT NULL, cost_usd REAL NOT NULL,
    latency_s REAL NOT NULL, attempts INTEGER NOT NULL, call TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (run_id, trajectory, turn));
CREATE TABLE IF NOT EXISTS run_states (
    run_id TEXT PRIMARY KEY, state TEXT NOT NULL, detail TEXT NOT NULL, updated REAL NOT NULL);
CREATE TABLE IF NOT EXISTS trajectory_results (
    run_id TEXT NOT NULL, platform TEXT NOT NULL, trajectory TEXT NOT NULL,
    operator_id TEXT NOT NULL, operator_version INTEGER NOT NULL, source TEXT NOT NULL,
    method TEXT NOT NULL, model TEXT NOT NULL, sample INTEGER NOT NULL,
    end_reason TEXT NOT NULL, status TEXT NOT NULL, best_candidate_hash TEXT NOT NULL,
    speedup REAL, sol_percent REAL, turns INTEGER NOT NULL, candidates INTEGER NOT NULL,
    prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, cost_usd REAL NOT NULL,
    gpu_seconds REAL NOT NULL, detail TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (run_id, platform, trajectory));
CREATE TABLE IF NOT EXISTS disputes (
    operator_id TEXT NOT NULL, operator_version INTEGER NOT NULL, candidate_hash TEXT NOT NULL,
    device_model TEXT NOT NULL, passed_by TEXT NOT NULL, refuted_by TEXT NOT NULL,
    second_status TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (operator_id, operator_version, candidate_hash, device_model, passed_by, refuted_by));
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


@dataclass(frozen=True)
class TrajectoryKey:
    """What names one trajectory's calls: ``operator id@version/method/model/sample[@platform]``.

    ``method`` is the method's label in the sweep (e.g. ``refine`` or ``refine-t8``); it must not
    contain ``/`` (nor may the version part), so the string form parses back unambiguously —
    the model may (``org/model``). ``platform`` is set by sweeps (the same problem, method, model
    and sample on two platforms are two trajectories with their own calls); "" leaves it out."""

    operator_id: str
    operator_version: int
    method: str
    model: str
    sample: int
    platform: str = ""

    def __post_init__(self) -> None:
        if not self.method or "/" in self.method:
            raise StoreError(f"trajectory method label must be non-empty without '/', got {self.method!r}")
        if "@" in self.operator_id or "/" in self.operator_id:
            raise StoreError(f"operator id must not contain '@' or '/', got {self.operator_id!r}")
        if "/" in self.platform or "@" in self.platform:
            raise StoreError(f"platform must not contain '@' or '/', got {self.platform!r}")

    def __str__(self) -> str:
        where = f"@{self.platform}" if self.platform else ""
        return (f"{self.operator_id}@{self.operator_version}/{self.method}/{self.model}/"
                f"{self.sample}{where}")

    @classmethod
    def parse(cls, text: str) -> TrajectoryKey:
        try:
            ref, method, rest = text.split("/", 2)
            model, last = rest.rsplit("/", 1)
            sample, _, platform = last.partition("@")
            operator_id, version = ref.rsplit("@", 1)
            return cls(operator_id, int(version), method, model, int(sample), platform)
        except ValueError:
            raise StoreError(f"not a trajectory key (operator@version/method/model/sample"
                             f"[@platform]): {text!r}") from None


@dataclass(frozen=True)
class LLMCallRow:
    turn: int
    call: LLMCall
    created: float


@dataclass(frozen=True)
class TrajectoryResult:
    """The outcome of one finished trajectory of a sweep (one row of ``trajectory_results``).

    ``status`` is the verdict of the trajectory's best candidate (see
    :attr:`generators.trajectory.Trajectory.best`), None when no candidate was judged;
    ``best_candidate_hash`` is "" then. Tokens and cost are the billed totals of its calls;
    ``gpu_seconds`` sums the agents' wall time over every candidate it had evaluated.
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

    @property
    def solved(self) -> bool:
        return self.status is Status.PASSED


@dataclass(frozen=True)
class LLMTotals:
    """Accounting of one (run, model, method): every call, and what the billed ones used."""

    run_id: str
    model: str
    method: str
    calls: int
    billed_calls: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    cost_usd: float

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def llm_call_to_json(call: LLMCall) -> dict[str, Any]:
    """The whole call as JSON (enums as bare names); :func:`llm_call_from_json` reverses it."""
    u = call.usage
    return {
        "provider": call.provider, "model": call.model,
        "prompt": {"template": call.prompt.template, "operator_id": call.prompt.operator_id,
                   "messages": [{"role": m.role.value, "content": m.content}
                                for m in call.prompt.messages]},
        "status": call.status.value, "text": call.text,
        "usage": None if u is None else {
            "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
            "cached_tokens": u.cached_tokens, "reasoning_tokens": u.reasoning_tokens},
        "cost_usd": call.cost_usd, "latency_s": call.latency_s, "attempts": call.attempts,
        "finish_reason": call.finish_reason, "error": call.error, "response_id": call.response_id,
        "temperature": call.temperature, "max_tokens": call.max_tokens, "extra": dict(call.extra),
    }


def llm_call_from_json(data: dict[str, Any]) -> LLMCall:
    p = data["prompt"]
    u = data["usage"]
    return LLMCall(
        provider=data["provider"], model=data["model"],
        prompt=Prompt(messages=tuple(Message(Role(m["role"]), m["content"]) for m in p["messages"]),
                      template=p["template"], operator_id=p["operator_id"]),
        status=CallStatus(data["status"]), text=data["text"],
        usage=None if u is None else Usage(u["prompt_tokens"], u["completion_tokens"],
                                           u["cached_tokens"], u["reasoning_tokens"]),
        cost_usd=float(data["cost_usd"]), latency_s=float(data["latency_s"]),
        attempts=int(data["attempts"]), finish_reason=data["finish_reason"], error=data["error"],
        response_id=data["response_id"], temperature=data["temperature"],
        max_tokens=data["max_tokens"], extra={str(k): str(v) for k, v in data["extra"].items()},
    )


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
        self.db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))

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
        """Store a verdict; False when one with the same key already exists (kept as is)."""
        with self._tx() as db:
            cur = db.execute(
                "INSERT OR IGNORE INTO verdicts VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (v.operator_id, v.operator_version, v.candidate_hash, v.device_model,
                 v.harness_version, v.status.value, orjson.dumps(v.to_json()).decode(),
                 time.time()))
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

    def add_llm_call(self, run_id: str, trajectory: TrajectoryKey | str, turn: int,
                     call: LLMCall) -> LLMCall:
        """Persist one model call (durably) and return the call the store holds for that turn.

        Exactly-once: when (run, trajectory, turn) is already stored, the stored call is kept
        and returned — unless it is a ``BUDGET`` call (never sent) and ``call`` is not, in
        which case ``call`` replaces it."""
        return self.add_llm_calls([(run_id, trajectory, turn, call)])[0][0]

    def add_llm_calls(self, items: Sequence[tuple[str, TrajectoryKey | str, int, LLMCall]]
                      ) -> list[tuple[LLMCall, bool]]:
        """:meth:`add_llm_call` for many calls in one durable transaction (one fsync: a group
        commit, what the sweep's store writer does with the calls that arrive together).
        Returns (stored call, whether this call was written) for each."""
        rows = []
        for run_id, trajectory, turn, call in items:
            key = trajectory if isinstance(trajectory, TrajectoryKey) else TrajectoryKey.parse(trajectory)
            if isinstance(turn, bool) or not isinstance(turn, int) or turn < 1:
                raise StoreError(f"turn must be an int >= 1, got {turn!r}")
            u = call.usage if call.usage is not None else Usage()
            rows.append((run_id, str(key), turn, call.provider, call.model, key.method,
                         call.status.value, int(call.billed), u.prompt_tokens, u.completion_tokens,
                         u.cached_tokens, u.reasoning_tokens, call.cost_usd, call.latency_s,
                         call.attempts, orjson.dumps(llm_call_to_json(call)).decode(), time.time()))
        out: list[tuple[LLMCall, bool]] = []
        with self._durable_tx() as db:
            for row, (_, _, _, call) in zip(rows, items, strict=True):
                cur = db.execute(
                    "INSERT INTO llm_calls VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (run_id, trajectory, turn) DO UPDATE SET provider=excluded.provider, "
                    "model=excluded.model, method=excluded.method, status=excluded.status, "
                    "billed=excluded.billed, prompt_tokens=excluded.prompt_tokens, "
                    "completion_tokens=excluded.completion_tokens, "
                    "cached_tokens=excluded.cached_tokens, "
                    "reasoning_tokens=excluded.reasoning_tokens, cost_usd=excluded.cost_usd, "
                    "latency_s=excluded.latency_s, attempts=excluded.attempts, call=excluded.call, "
                    "created=excluded.created "
                    "WHERE llm_calls.status = 'BUDGET' AND excluded.status != 'BUDGET'", row)
                if cur.rowcount == 1:  # written: the stored call is this one
                    out.append((call, True))
                    continue
                stored = db.execute("SELECT call FROM llm_calls WHERE run_id=? AND trajectory=? "
                                    "AND turn=?", (row[0], row[1], row[2])).fetchone()
                out.append((llm_call_from_json(orjson.loads(stored[0])), False))
        return out

    def add_trajectory_result(self, r: TrajectoryResult) -> bool:
        """Store a finished trajectory; False when (run, platform, trajectory) is already stored
        (the first outcome is kept: a resumed sweep never rewrites a finished trajectory) —
        except an ``INFRA_ERROR`` outcome (the system's failure), which a later outcome replaces."""
        return self.add_trajectory_results([r])[0]

    def add_trajectory_results(self, results: Sequence[TrajectoryResult],
                               candidates: Sequence[tuple[str, str]] = ()) -> list[bool]:
        """:meth:`add_trajectory_result` for many, with their candidates' sources
        (``(hash, source)``), in one transaction."""
        out: list[bool] = []
        with self._tx() as db:
            for h, source in candidates:
                db.execute("INSERT OR IGNORE INTO candidates VALUES (?, ?, ?)", (h, source, time.time()))
            for r in results:
                cur = db.execute(
                    "INSERT INTO trajectory_results VALUES "
                    "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (run_id, platform, trajectory) DO UPDATE SET "
                    "end_reason=excluded.end_reason, status=excluded.status, "
                    "best_candidate_hash=excluded.best_candidate_hash, speedup=excluded.speedup, "
                    "sol_percent=excluded.sol_percent, turns=excluded.turns, "
                    "candidates=excluded.candidates, prompt_tokens=excluded.prompt_tokens, "
                    "completion_tokens=excluded.completion_tokens, cost_usd=excluded.cost_usd, "
                    "gpu_seconds=excluded.gpu_seconds, detail=excluded.detail, "
                    "created=excluded.created "
                    "WHERE trajectory_results.end_reason = 'INFRA_ERROR'",
                    (r.run_id, r.platform, str(r.key), r.key.operator_id, r.key.operator_version,
                     r.source, r.key.method, r.key.model, r.key.sample, r.end_reason,
                     "" if r.status is None else r.status.value, r.best_candidate_hash, r.speedup,
                     r.sol_percent, r.turns, r.candidates, r.prompt_tokens, r.completion_tokens,
                     r.cost_usd, r.gpu_seconds, r.detail, r.created or time.time()))
                out.append(cur.rowcount == 1)
        return out

    def set_run_state(self, run_id: str, state: str, detail: str = "") -> None:
        """Record where a run stands (``running``, ``cancelling``, ``cancelled``, ``interrupted``,
        ``failed``, ``complete``): what ``kgb sweep status`` shows and ``cancel`` asks for."""
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO run_states VALUES (?, ?, ?, ?)",
                       (run_id, state, detail, time.time()))

    # ---- reads -------------------------------------------------------------------------------
    def trajectory_results(self, run_id: str) -> list[TrajectoryResult]:
        """A run's finished trajectories, in (platform, trajectory) order."""
        rows = self.db.execute(
            "SELECT run_id, platform, trajectory, source, end_reason, status, best_candidate_hash, "
            "speedup, sol_percent, turns, candidates, prompt_tokens, completion_tokens, cost_usd, "
            "gpu_seconds, detail, created FROM trajectory_results WHERE run_id=? "
            "ORDER BY platform, trajectory", (run_id,)).fetchall()
        return [TrajectoryResult(r[0], r[1], TrajectoryKey.parse(r[2]), r[3], r[4],
                                 Status(r[5]) if r[5] else None, r[6], r[7], r[8], int(r[9]),
                                 int(r[10]), int(r[11]), int(r[12]), float(r[13]), float(r[14]),
                                 r[15], float(r[16])) for r in rows]

    def finished_trajectories(self, run_id: str, *, retry_infra: bool = False) -> set[tuple[str, str]]:
        """(platform, trajectory key string) of every finished trajectory of a run; with
        ``retry_infra``, those that ended ``INFRA_ERROR`` are left out (a resume runs them again)."""
        extra = " AND end_reason != 'INFRA_ERROR'" if retry_infra else ""
        return {(r[0], r[1]) for r in self.db.execute(
            "SELECT platform, trajectory FROM trajectory_results WHERE run_id=?" + extra, (run_id,))}

    def run_state(self, run_id: str) -> tuple[str, str, float] | None:
        """(state, detail, when) of a run, None when no state was ever recorded."""
        row = self.db.execute("SELECT state, detail, updated FROM run_states WHERE run_id=?",
                              (run_id,)).fetchone()
        return (row[0], row[1], float(row[2])) if row else None

    def run_config(self, run_id: str) -> dict[str, Any] | None:
        """The config a run was started with (:meth:`add_run`), None for an unknown run."""
        row = self.db.execute("SELECT config FROM runs WHERE run_id=?", (run_id,)).fetchone()
        return orjson.loads(row[0]) if row else None

    def run_spend(self, run_id: str) -> tuple[int, float]:
        """(billed tokens, cost in USD) of a run's stored calls: what a resumed sweep's budget
        starts from."""
        row = self.db.execute("SELECT COALESCE(SUM(prompt_tokens + completion_tokens), 0), "
                              "COALESCE(SUM(cost_usd), 0) FROM llm_calls WHERE run_id=? AND billed=1",
                              (run_id,)).fetchone()
        return int(row[0]), float(row[1])

    def stored_turns(self, run_id: str, *, unfinished_only: bool = False
                     ) -> dict[str, list[tuple[int, LLMCall]]]:
        """Every stored call of a run by trajectory key string, in turn order (a resume hands
        each unfinished trajectory its own). ``unfinished_only``: of the trajectories without a
        result, or whose result is ``INFRA_ERROR`` (what a resume runs again)."""
        extra = ("" if not unfinished_only else
                 " AND NOT EXISTS (SELECT 1 FROM trajectory_results r WHERE r.run_id = c.run_id "
                 "AND r.trajectory = c.trajectory AND r.end_reason != 'INFRA_ERROR')")
        out: dict[str, list[tuple[int, LLMCall]]] = {}
        for traj, turn, call in self.db.execute(
                "SELECT trajectory, turn, call FROM llm_calls c WHERE run_id=?" + extra
                + " ORDER BY trajectory, turn", (run_id,)):
            out.setdefault(traj, []).append((int(turn), llm_call_from_json(orjson.loads(call))))
        return out

    def verdict_for_any(self, operator_id: str, operator_version: int, candidate_hash: str,
                        keys: list[tuple[str, str]]) -> Verdict | None:
        """A stored verdict for the candidate under any of ``keys`` ((device model, harness
        version) pairs: the agents that could judge it now), else None."""
        for device_model, harness_version in keys:
            v = self.verdict(operator_id, operator_version, candidate_hash, device_model,
                             harness_version)
            if v is not None:
                return v
        return None

    def llm_call(self, run_id: str, trajectory: TrajectoryKey | str, turn: int) -> LLMCall | None:
        row = self.db.execute("SELECT call FROM llm_calls WHERE run_id=? AND trajectory=? AND turn=?",
                              (run_id, str(trajectory), turn)).fetchone()
        return llm_call_from_json(orjson.loads(row[0])) if row else None

    def llm_calls(self, run_id: str, trajectory: TrajectoryKey | str) -> list[LLMCallRow]:
        """A trajectory's stored calls in turn order."""
        rows = self.db.execute("SELECT turn, call, created FROM llm_calls WHERE run_id=? AND "
                               "trajectory=? ORDER BY turn", (run_id, str(trajectory))).fetchall()
        return [LLMCallRow(r[0], llm_call_from_json(orjson.loads(r[1])), r[2]) for r in rows]

    def llm_call_count(self, run_id: str | None = None) -> int:
        if run_id is None:
            return int(self.db.execute("SELECT COUNT(*) FROM llm_calls").fetchone()[0])
        return int(self.db.execute("SELECT COUNT(*) FROM llm_calls WHERE run_id=?",
                                   (run_id,)).fetchone()[0])

    def llm_totals(self, run_id: str | None = None) -> list[LLMTotals]:
        """Calls, tokens and cost per (run, model, method), sorted; one run's, or every run's.
        Token and cost sums count billed calls only (the others carry none)."""
        where, args = ("WHERE run_id=?", (run_id,)) if run_id is not None else ("", ())
        rows = self.db.execute(
            "SELECT run_id, model, method, COUNT(*), SUM(billed), SUM(prompt_tokens), "
            "SUM(completion_tokens), SUM(cached_tokens), SUM(reasoning_tokens), SUM(cost_usd) "
            f"FROM llm_calls {where} GROUP BY run_id, model, method "
            "ORDER BY run_id, model, method", args).fetchall()
        return [LLMTotals(r[0], r[1], r[2], int(r[3]), int(r[4]), int(r[5]), int(r[6]), int(r[7]),
                          int(r[8]), float(r[9])) for r in rows]

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
