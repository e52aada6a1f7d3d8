"""Run states (``run_states``): where a run stands, who runs it, when that coordinator started
and until when its lease holds (renewed every few seconds while it lives): what ``kgb sweep
status`` checks to tell a running coordinator from a dead one. Kept apart from the result
tables: the methods are mixed into :class:`~coordinator.store.Store`, which provides the
connection and the transaction."""

from __future__ import annotations

import sqlite3
import time
from contextlib import AbstractContextManager

RUN_STATES_SCHEMA = """CREATE TABLE IF NOT EXISTS run_states (
    run_id TEXT PRIMARY KEY, state TEXT NOT NULL, detail TEXT NOT NULL, updated REAL NOT NULL,
    started REAL, lease_until REAL);
"""
# Columns added since the table was first created (see coordinator.store's ADDED_COLUMNS).
RUN_STATES_ADDED_COLUMNS = (
    ("run_states", "started", "REAL"),
    ("run_states", "lease_until", "REAL"),
)


class RunStateTables:
    """:class:`~coordinator.store.Store`'s methods over ``run_states``."""

    db: sqlite3.Connection

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def set_run_state(self, run_id: str, state: str, detail: str = "", *,
                      lease_s: float | None = None) -> None:
        """Record where a run stands (``running``, ``cancelling``, ``cancelled``, ``interrupted``,
        ``failed``, ``complete``): what ``kgb sweep status`` shows and ``cancel`` asks for.
        ``running`` starts a coordinator's tenure (``started``), with a lease of ``lease_s``
        seconds (renewed by :meth:`renew_lease`); ``cancelling`` keeps both; any other state
        ends the lease."""
        now = time.time()
        lease = now + lease_s if lease_s is not None else None
        with self._tx() as db:
            db.execute(
                "INSERT INTO run_states VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE "
                "SET state=excluded.state, detail=excluded.detail, updated=excluded.updated, "
                "started=CASE excluded.state WHEN 'running' THEN excluded.started "
                "WHEN 'cancelling' THEN run_states.started ELSE NULL END, "
                "lease_until=CASE excluded.state WHEN 'running' THEN excluded.lease_until "
                "WHEN 'cancelling' THEN run_states.lease_until ELSE NULL END",
                (run_id, state, detail, now, now if state == "running" else None, lease))

    def renew_lease(self, run_id: str, lease_s: float) -> tuple[str, str, float] | None:
        """Extend a running (or cancelling) run's lease to ``lease_s`` seconds from now; returns
        the run's state (the coordinator's poll for a cancel, in the same statement's round)."""
        with self._tx() as db:
            db.execute("UPDATE run_states SET lease_until = ? WHERE run_id = ? "
                       "AND state IN ('running', 'cancelling')", (time.time() + lease_s, run_id))
        return self.run_state(run_id)

    def run_lease(self, run_id: str) -> tuple[float | None, float | None]:
        """(when the running coordinator started, until when its lease holds); Nones when the
        run is not running or was recorded by a version without leases."""
        row = self.db.execute("SELECT started, lease_until FROM run_states WHERE run_id=?",
                              (run_id,)).fetchone()
        return (row[0], row[1]) if row else (None, None)

    def run_state(self, run_id: str) -> tuple[str, str, float] | None:
        """(state, detail, when) of a run, None when no state was ever recorded."""
        row = self.db.execute("SELECT state, detail, updated FROM run_states WHERE run_id=?",
                              (run_id,)).fetchone()
        return (row[0], row[1], float(row[2])) if row else None
