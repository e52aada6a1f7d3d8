"""Model calls in the store: the write-ahead journal (intents, then calls) and the reads over it.

The contract (DESIGN.md, "Store"): every model request is written as an **intent** before it
leaves and completed with its reply before the reply is used; a crash leaves intents without
replies, which reports show as **unconfirmed calls** (possibly billed) and never hide.

``llm_intents``: one row per send of one turn of one trajectory of a run, keyed (run,
trajectory, turn, attempt). ``attempt`` is 1 for a turn's first send and n + 1 for a send after
n intents of that turn that never got their reply (a killed coordinator): the re-sent call links
to what it re-sends by (run, trajectory, turn). The row holds the idempotency key (one per turn,
the same for every attempt: :func:`coordinator.recorded_provider.idempotency_key_of`), the
sha256 of the request body, the model id, what estimates its cost (the prompt's tokens estimated
from its size, ``max_tokens``, the model's prices per million tokens when it was sent), when it
was written and when its reply was stored (``completed``, NULL until then).

``llm_calls``: the whole :class:`~generators.llm.LLMCall` of (run, trajectory, turn) as JSON,
with its accounting in columns, plus ``idempotency_key``, ``intent`` (the attempt it completes;
0 for a call written without one: a ``BUDGET`` call, never sent, or a row of an older store) and
``unconfirmed_attempts`` (its HTTP attempts that were sent but got no whole reply and no usage —
a connection lost mid-reply: possibly billed, :attr:`AttemptRecord.unconfirmed`).

Both are written by :meth:`LLMCallTables.journal`: any mix of intents and calls in one
transaction committed with ``synchronous=FULL`` (the WAL is fsynced before it returns, so the
rows survive a power loss, not only a killed process); a call completes its intent in the same
transaction. The sweep's store writer group-commits what arrives together (one fsync per batch).

Unconfirmed calls of a run: intents never completed (not counting those of a coordinator still
running, which are on the wire) and unconfirmed attempts. Each is estimated at its prompt's
estimate plus the average completion of the run's billed calls of that model (its
``max_tokens`` when none is billed yet), priced at the prices recorded with its intent.
"""

from __future__ import annotations

import sqlite3
import time
from collections import defaultdict
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import orjson

from coordinator.call_json import llm_call_from_json, llm_call_to_json
from coordinator.trajectory_key import StoreError, TrajectoryKey
from generators.llm import LLMCall, Usage
from generators.providers.attempts import attempt_records

INTENTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS llm_intents (
    run_id TEXT NOT NULL, trajectory TEXT NOT NULL, turn INTEGER NOT NULL, attempt INTEGER NOT NULL,
    idempotency_key TEXT NOT NULL, request_hash TEXT NOT NULL, model TEXT NOT NULL,
    est_prompt_tokens INTEGER NOT NULL, max_tokens INTEGER, prompt_price REAL,
    completion_price REAL, created REAL NOT NULL, completed REAL,
    PRIMARY KEY (run_id, trajectory, turn, attempt));
"""
# Columns added to tables of earlier stores (ALTER TABLE ... ADD COLUMN, in this order).
ADDED_COLUMNS = (
    ("llm_calls", "idempotency_key", "TEXT NOT NULL DEFAULT ''"),
    ("llm_calls", "intent", "INTEGER NOT NULL DEFAULT 0"),
    ("llm_calls", "unconfirmed_attempts", "INTEGER NOT NULL DEFAULT 0"),
    ("llm_calls", "cache_write_tokens", "INTEGER NOT NULL DEFAULT 0"),
)
# Partial indexes: the open intents and the calls with unconfirmed attempts are few (what a
# crash left), so the reports find them without scanning a run's every call.
INDEXES = """
CREATE INDEX IF NOT EXISTS llm_intents_open ON llm_intents (run_id) WHERE completed IS NULL;
CREATE INDEX IF NOT EXISTS llm_calls_unconfirmed ON llm_calls (run_id) WHERE unconfirmed_attempts > 0;
"""


@dataclass(frozen=True)
class CallIntent:
    """A request about to leave: written (durably) before it is sent."""

    run_id: str
    trajectory: str             # the TrajectoryKey string
    turn: int
    attempt: int                # 1, or n + 1 after n intents of the turn without a reply
    idempotency_key: str
    request_hash: str           # sha256 of the request body (sorted keys)
    model: str                  # the model id sent
    est_prompt_tokens: int
    max_tokens: int | None = None
    prompt_price: float | None = None      # USD per million prompt tokens (None: unpriced)
    completion_price: float | None = None  # USD per million completion tokens


@dataclass(frozen=True)
class CallRecord:
    """A call to store for its turn, completing intent ``intent`` (0: none, never sent)."""

    run_id: str
    trajectory: str
    turn: int
    call: LLMCall
    intent: int = 0
    idempotency_key: str = ""


JournalEntry = CallIntent | CallRecord


@dataclass(frozen=True)
class LLMCallRow:
    turn: int
    call: LLMCall
    created: float


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


@dataclass(frozen=True)
class Unconfirmed:
    """The unconfirmed calls of one (model, method) of a run (model and method as in the
    trajectory key): possibly billed, never recorded as billed."""

    model: str
    method: str
    intents: int             # requests sent whose reply was never stored (a crash)
    resent: int              # of those, sent again by a later attempt of the same turn
    attempts: int            # attempts inside stored calls sent without a whole reply
    est_tokens: int
    est_cost_usd: float
    unpriced: int            # of the calls, those whose model had no price (cost unknown)

    @property
    def calls(self) -> int:
        return self.intents + self.attempts


def _unfinished(alias: str) -> str:
    """SQL: the trajectory of row ``alias`` is one a resume runs again: it has no result, or
    one of its results (a shared-generation trajectory has one per platform) is
    ``INFRA_ERROR``."""
    rows = f"SELECT 1 FROM trajectory_results r WHERE r.run_id = {alias}.run_id " \
        f"AND r.trajectory = {alias}.trajectory AND r.end_reason"
    return f" AND (NOT EXISTS ({rows} != 'INFRA_ERROR') OR EXISTS ({rows} = 'INFRA_ERROR'))"


def _check_turn(turn: Any) -> None:
    if isinstance(turn, bool) or not isinstance(turn, int) or turn < 1:
        raise StoreError(f"turn must be an int >= 1, got {turn!r}")


def _call_row(r: CallRecord) -> tuple[Any, ...]:
    key = TrajectoryKey.parse(r.trajectory)
    _check_turn(r.turn)
    call = r.call
    u = call.usage if call.usage is not None else Usage()
    unconfirmed = sum(1 for a in attempt_records(call) if a.unconfirmed)
    return (r.run_id, str(key), r.turn, call.provider, call.model, key.method, call.status.value,
            int(call.billed), u.prompt_tokens, u.completion_tokens, u.cached_tokens,
            u.reasoning_tokens, call.cost_usd, call.latency_s, call.attempts,
            orjson.dumps(llm_call_to_json(call)).decode(), time.time(), r.idempotency_key,
            r.intent, unconfirmed, u.cache_write_tokens)


_UPSERT_CALL = (
    "INSERT INTO llm_calls VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (run_id, trajectory, turn) DO UPDATE SET provider=excluded.provider, "
    "model=excluded.model, method=excluded.method, status=excluded.status, "
    "billed=excluded.billed, prompt_tokens=excluded.prompt_tokens, "
    "completion_tokens=excluded.completion_tokens, cached_tokens=excluded.cached_tokens, "
    "reasoning_tokens=excluded.reasoning_tokens, cost_usd=excluded.cost_usd, "
    "latency_s=excluded.latency_s, attempts=excluded.attempts, call=excluded.call, "
    "created=excluded.created, idempotency_key=excluded.idempotency_key, "
    "intent=excluded.intent, unconfirmed_attempts=excluded.unconfirmed_attempts, "
    "cache_write_tokens=excluded.cache_write_tokens "
    "WHERE llm_calls.status = 'BUDGET' AND excluded.status != 'BUDGET'")


class LLMCallTables:
    """:class:`~coordinator.store.Store`'s methods over ``llm_calls`` and ``llm_intents``
    (mixed into the store, which provides the connection and the durable transaction)."""

    db: sqlite3.Connection

    def _durable_tx(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    # ---- writes --------------------------------------------------------------------------------
    def journal(self, entries: Sequence[JournalEntry]) -> list[tuple[LLMCall, bool] | None]:
        """Write intents and calls in one durable transaction (one fsync: a group commit).
        For each intent None; for each call (the call stored for its turn, whether this one
        was written). Idempotent: an intent written again is kept; a call follows
        :meth:`add_llm_call`'s rule; either way a call completes its intent."""
        rows = [_call_row(e) if isinstance(e, CallRecord) else None for e in entries]
        for e in entries:
            if isinstance(e, CallIntent):
                TrajectoryKey.parse(e.trajectory)
                _check_turn(e.turn)
        out: list[tuple[LLMCall, bool] | None] = []
        with self._durable_tx() as db:
            for e, row in zip(entries, rows, strict=True):
                if isinstance(e, CallIntent):
                    db.execute("INSERT OR IGNORE INTO llm_intents VALUES "
                               "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)",
                               (e.run_id, e.trajectory, e.turn, e.attempt, e.idempotency_key,
                                e.request_hash, e.model, e.est_prompt_tokens, e.max_tokens,
                                e.prompt_price, e.completion_price, time.time()))
                    out.append(None)
                    continue
                assert row is not None
                out.append(self._write_call(db, e, row))
        return out

    def _write_call(self, db: sqlite3.Connection, r: CallRecord,
                    row: tuple[Any, ...]) -> tuple[LLMCall, bool]:
        if r.intent:
            db.execute("UPDATE llm_intents SET completed = ? WHERE run_id = ? AND trajectory = ? "
                       "AND turn = ? AND attempt = ? AND completed IS NULL",
                       (time.time(), row[0], row[1], r.turn, r.intent))
        if db.execute(_UPSERT_CALL, row).rowcount == 1:  # written: the stored call is this one
            return r.call, True
        stored = db.execute("SELECT call FROM llm_calls WHERE run_id=? AND trajectory=? AND turn=?",
                            (row[0], row[1], row[2])).fetchone()
        return llm_call_from_json(orjson.loads(stored[0])), False

    def add_intent(self, intent: CallIntent) -> None:
        """Write one intent durably (before its request leaves)."""
        self.journal([intent])

    def add_llm_call(self, run_id: str, trajectory: TrajectoryKey | str, turn: int,
                     call: LLMCall, *, intent: int = 0, idempotency_key: str = "") -> LLMCall:
        """Persist one model call (durably) and return the call the store holds for that turn.

        Exactly-once: when (run, trajectory, turn) is already stored, the stored call is kept
        and returned — unless it is a ``BUDGET`` call (never sent) and ``call`` is not, in
        which case ``call`` replaces it. ``intent``: the attempt of the intent it completes."""
        got = self.journal([CallRecord(run_id, str(trajectory), turn, call, intent,
                                       idempotency_key)])[0]
        assert got is not None
        return got[0]

    def add_llm_calls(self, items: Sequence[tuple[str, TrajectoryKey | str, int, LLMCall]]
                      ) -> list[tuple[LLMCall, bool]]:
        """:meth:`add_llm_call` for many calls in one durable transaction; for each (stored
        call, whether this call was written)."""
        got = self.journal([CallRecord(r, str(t), turn, c) for r, t, turn, c in items])
        return [g for g in got if g is not None]

    # ---- reads ---------------------------------------------------------------------------------
    def last_intents(self, run_id: str, trajectory: TrajectoryKey | str | None = None, *,
                     unfinished_only: bool = False) -> dict[str, dict[int, int]]:
        """The highest intent attempt of each turn, by trajectory key string (one trajectory's
        with ``trajectory``; with ``unfinished_only``, of the trajectories a resume runs again,
        as :meth:`stored_turns`): what a resumed turn's next attempt follows."""
        sql = "SELECT trajectory, turn, MAX(attempt) FROM llm_intents i WHERE run_id = ?"
        args: tuple[Any, ...] = (run_id,)
        if trajectory is not None:
            sql, args = sql + " AND trajectory = ?", (run_id, str(trajectory))
        if unfinished_only:
            sql += _unfinished("i")
        out: dict[str, dict[int, int]] = {}
        for traj, turn, attempt in self.db.execute(sql + " GROUP BY trajectory, turn", args):
            out.setdefault(traj, {})[int(turn)] = int(attempt)
        return out

    def last_intent(self, run_id: str, trajectory: TrajectoryKey | str, turn: int) -> int:
        """The highest intent attempt of one turn, 0 when none was written."""
        return self.last_intents(run_id, trajectory).get(str(trajectory), {}).get(turn, 0)

    def intents(self, run_id: str) -> list[tuple[str, int, int, str, float | None]]:
        """(trajectory, turn, attempt, idempotency key, completed) of every intent of a run."""
        return [(r[0], int(r[1]), int(r[2]), r[3], r[4]) for r in self.db.execute(
            "SELECT trajectory, turn, attempt, idempotency_key, completed FROM llm_intents "
            "WHERE run_id = ? ORDER BY trajectory, turn, attempt", (run_id,))]

    def unconfirmed_calls(self, run_id: str, *, before: float | None = None) -> list[Unconfirmed]:
        """A run's unconfirmed calls per (model, method), estimated (see the module doc).
        ``before``: count only intents written before then (a running coordinator's own open
        intents are on the wire, not unconfirmed)."""
        sql = ("SELECT i.trajectory, i.model, i.est_prompt_tokens, i.max_tokens, i.prompt_price, "
               "i.completion_price, EXISTS (SELECT 1 FROM llm_intents j WHERE j.run_id = i.run_id "
               "AND j.trajectory = i.trajectory AND j.turn = i.turn AND j.attempt > i.attempt) "
               "FROM llm_intents i WHERE i.run_id = ? AND i.completed IS NULL")
        args: tuple[Any, ...] = (run_id,)
        if before is not None:
            sql, args = sql + " AND i.created < ?", (run_id, before)
        open_rows = [(r[0], r[1], 1, 0, int(r[6]), r[2], r[3], r[4], r[5])
                     for r in self.db.execute(sql, args)]
        lost = [(r[0], r[1], 0, int(r[2]), 0, r[3], r[4], r[5], r[6]) for r in self.db.execute(
            "SELECT c.trajectory, c.model, c.unconfirmed_attempts, i.est_prompt_tokens, "
            "i.max_tokens, i.prompt_price, i.completion_price FROM llm_calls c LEFT JOIN "
            "llm_intents i ON i.run_id = c.run_id AND i.trajectory = c.trajectory "
            "AND i.turn = c.turn AND i.attempt = c.intent "
            "WHERE c.run_id = ? AND c.unconfirmed_attempts > 0", (run_id,))]
        if not open_rows and not lost:
            return []
        completion = {m: float(a) for m, a in self.db.execute(
            "SELECT model, AVG(completion_tokens) FROM llm_calls WHERE run_id = ? AND billed = 1 "
            "GROUP BY model", (run_id,))}
        return _summarise(open_rows + lost, completion)

    def stored_turns(self, run_id: str, *, unfinished_only: bool = False
                     ) -> dict[str, list[tuple[int, LLMCall]]]:
        """Every stored call of a run by trajectory key string, in turn order (a resume hands
        each unfinished trajectory its own). ``unfinished_only``: of the trajectories without a
        result, or whose result is ``INFRA_ERROR`` (what a resume runs again)."""
        extra = _unfinished("c") if unfinished_only else ""
        out: dict[str, list[tuple[int, LLMCall]]] = {}
        for traj, turn, call in self.db.execute(
                "SELECT trajectory, turn, call FROM llm_calls c WHERE run_id=?" + extra
                + " ORDER BY trajectory, turn", (run_id,)):
            out.setdefault(traj, []).append((int(turn), llm_call_from_json(orjson.loads(call))))
        return out

    def run_spend(self, run_id: str) -> tuple[int, float]:
        """(billed tokens, cost in USD) of a run's stored calls: what a resumed sweep's budget
        starts from."""
        row = self.db.execute("SELECT COALESCE(SUM(prompt_tokens + completion_tokens), 0), "
                              "COALESCE(SUM(cost_usd), 0) FROM llm_calls WHERE run_id=? AND billed=1",
                              (run_id,)).fetchone()
        return int(row[0]), float(row[1])

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


def _summarise(rows: list[tuple[Any, ...]], completion: dict[str, float]) -> list[Unconfirmed]:
    """Rows of (trajectory, model id, intents, attempts, resent, est prompt, max tokens, prompt
    price, completion price) per (label, method)."""
    acc: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0] * 6)
    for traj, model, intents, attempts, resent, prompt, max_tokens, p_price, c_price in rows:
        key = TrajectoryKey.parse(traj)
        n = intents + attempts
        out_tokens = completion.get(model, float(max_tokens or 0))
        tokens = (int(prompt or 0) + out_tokens) * n
        a = acc[(key.model, key.method)]
        a[0] += intents
        a[1] += resent
        a[2] += attempts
        a[3] += tokens
        if p_price is None or c_price is None:
            a[5] += n
        else:
            a[4] += (int(prompt or 0) * p_price + out_tokens * c_price) * n / 1e6
    return [Unconfirmed(m, meth, int(a[0]), int(a[1]), int(a[2]), int(round(a[3])), a[4], int(a[5]))
            for (m, meth), a in sorted(acc.items())]
