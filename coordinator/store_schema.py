"""What the store keys verdicts on beyond the candidate: the baseline they were timed against.

A speed-up over PyTorch is not one over vLLM's kernel or cuBLAS, so the verdicts table's key
holds the baseline (:func:`verdict_baseline`): "" for a verdict that timed nothing (its outcome
holds whatever the baseline, so any agent may reuse it), :data:`UNKNOWN_BASELINE` for a timed
verdict from an agent older than the field (reused by none). A store file from before the
column gets its verdicts table rebuilt on open (:func:`key_verdicts_on_baseline`).
"""

from __future__ import annotations

import sqlite3

from protos.records import Verdict

UNKNOWN_BASELINE = "unknown"  # timed before verdicts said against what: never reused

VERDICTS_TABLE = """CREATE TABLE IF NOT EXISTS verdicts (
    operator_id TEXT NOT NULL, operator_version INTEGER NOT NULL, candidate_hash TEXT NOT NULL,
    device_model TEXT NOT NULL, harness_version TEXT NOT NULL, baseline TEXT NOT NULL,
    status TEXT NOT NULL, verdict TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (operator_id, operator_version, candidate_hash, device_model, harness_version,
                 baseline));"""


def verdict_baseline(v: Verdict) -> str:
    """The baseline part of a verdict's key: what its timings were measured against; "" when
    nothing was timed, :data:`UNKNOWN_BASELINE` for a timed verdict that does not say."""
    if v.baseline:
        return v.baseline
    return UNKNOWN_BASELINE if any(t.meaningful for t in v.timings) else ""


# An old row's baseline, from its verdict JSON: the rule of :func:`verdict_baseline` in SQL.
_OLD_ROW_BASELINE = (
    "CASE WHEN COALESCE(json_extract(verdict, '$.baseline'), '') != '' "
    "THEN json_extract(verdict, '$.baseline') "
    "WHEN EXISTS (SELECT 1 FROM json_each(verdict, '$.timings') "
    f"WHERE json_extract(value, '$.meaningful')) THEN '{UNKNOWN_BASELINE}' ELSE '' END")


def key_verdicts_on_baseline(db: sqlite3.Connection) -> None:
    """Rebuild an older file's verdicts table with ``baseline`` in its primary key, each row's
    baseline read from its verdict (inside the open's transaction)."""
    if "baseline" in {r[1] for r in db.execute("PRAGMA table_info(verdicts)")}:
        return
    db.execute("ALTER TABLE verdicts RENAME TO verdicts_v5")
    db.execute(VERDICTS_TABLE)
    db.execute("INSERT INTO verdicts SELECT operator_id, operator_version, candidate_hash, "
               f"device_model, harness_version, {_OLD_ROW_BASELINE}, status, verdict, created "
               "FROM verdicts_v5")
    db.execute("DROP TABLE verdicts_v5")
