"""The store: content-keyed, idempotent, reports as pure functions of rows."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import orjson

from coordinator.report import result_rows, status_counts
from coordinator.store import Store
from protos.records import CaseTiming, Status, Verdict


def _v(status: Status = Status.PASSED, device: str = "NVIDIA H200",
       baseline: str = "torch") -> Verdict:
    return Verdict(status, "aten::add", 1, "h1", device_model=device, harness_version="0.1.0",
                   timings=(CaseTiming("c", True, 10.0, speedup=2.0, sol_percent=50.0),
                            CaseTiming("d", True, 10.0, speedup=0.5, sol_percent=50.0)),
                   baseline=baseline)


def test_verdict_key_and_idempotent_writes(tmp_path: Path) -> None:
    s = Store.open_run(tmp_path / "run")
    assert s.add_verdict(_v())
    assert not s.add_verdict(_v(Status.WRONG_ANSWER))  # same key: kept, not duplicated
    assert s.verdict("aten::add", 1, "h1", "NVIDIA H200", "0.1.0", "torch").status is Status.PASSED  # type: ignore[union-attr]
    assert s.verdict("aten::add", 1, "h1", "cpu", "0.1.0", "torch") is None  # device model is in the key
    assert s.add_verdict(_v(device="cpu"))
    assert s.verdict("aten::add", 2, "h1", "NVIDIA H200", "0.1.0", "torch") is None  # so is the version


def test_a_verdict_timed_against_another_baseline_is_not_reused(tmp_path: Path) -> None:
    """A speed-up over PyTorch is not one over vLLM's kernel: the baseline is in the key, and
    both verdicts are kept. One that timed nothing holds whatever the baseline."""
    s = Store.open_run(tmp_path / "run")
    assert s.add_verdict(_v(baseline="torch"))
    key = ("aten::add", 1, "h1", "NVIDIA H200", "0.1.0")
    assert s.verdict(*key, "vllm") is None
    assert s.verdict_for_any("aten::add", 1, "h1", [("NVIDIA H200", "0.1.0", "vllm")]) is None
    assert s.add_verdict(replace(_v(baseline="vllm"), message="against vLLM"))
    assert s.verdict(*key, "vllm").message == "against vLLM"  # type: ignore[union-attr]
    assert s.verdict(*key, "torch").baseline == "torch"  # type: ignore[union-attr]
    untimed = Verdict(Status.WRONG_ANSWER, "aten::add", 1, "h2", device_model="NVIDIA H200",
                      harness_version="0.1.0")
    assert s.add_verdict(untimed)
    for baseline in ("torch", "vllm", "cublas"):
        assert s.verdict("aten::add", 1, "h2", "NVIDIA H200", "0.1.0", baseline) == untimed
    # Timed, but by an agent that did not say against what: reused by none.
    assert s.add_verdict(replace(_v(baseline=""), candidate_hash="h3"))
    assert all(s.verdict("aten::add", 1, "h3", "NVIDIA H200", "0.1.0", b) is None
               for b in ("", "torch", "vllm"))


def test_a_store_file_of_version_5_is_migrated_on_open(tmp_path: Path) -> None:
    """Verdicts of a version-5 file keep their rows (timed ones under an unknown baseline, so
    they are not reused as any), trajectory results get the column, and both take new rows."""
    db_path = tmp_path / "kgb.sqlite"
    db = sqlite3.connect(db_path)
    db.executescript(V5_TABLES)
    timed, untimed = _v(baseline=""), replace(_v(Status.COMPILE_ERROR), timings=(), baseline="")
    for v in (timed, replace(untimed, candidate_hash="h2")):
        db.execute("INSERT INTO verdicts VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                   (v.operator_id, 1, v.candidate_hash, v.device_model, v.harness_version,
                    v.status.value, orjson.dumps(v.to_json()).decode(), 1.0))
    db.execute("INSERT INTO trajectory_results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
               "?, ?, ?, ?, ?, ?, ?, ?)", ("r1", "cuda", "aten::add@1/m/x/0", "aten::add", 1,
                                            "aten", "m", "x", 0, "SOLVED", "PASSED", "h1", 2.0,
                                            50.0, 1, 1, 0, 0, 0.0, 1.0, "", 1.0))
    db.commit()
    db.close()
    for _ in range(2):  # the second open finds it migrated
        s = Store(db_path)
        rows = dict(s.db.execute("SELECT candidate_hash, baseline FROM verdicts").fetchall())
        assert rows == {"h1": "unknown", "h2": ""}
        assert s.verdict("aten::add", 1, "h1", "NVIDIA H200", "0.1.0", "torch") is None
        assert s.verdict("aten::add", 1, "h2", "NVIDIA H200", "0.1.0", "torch") is not None
        assert [r.baseline for r in s.trajectory_results("r1")] == [""]
        s.close()
    s = Store(db_path)
    assert not s.add_verdict(timed)  # it still does not say: the migrated row's key
    assert s.add_verdict(_v(baseline="torch"))
    assert s.verdict("aten::add", 1, "h1", "NVIDIA H200", "0.1.0", "torch").baseline == "torch"  # type: ignore[union-attr]


# The verdicts and trajectory_results tables as schema version 5 made them.
V5_TABLES = """
CREATE TABLE verdicts (
    operator_id TEXT NOT NULL, operator_version INTEGER NOT NULL, candidate_hash TEXT NOT NULL,
    device_model TEXT NOT NULL, harness_version TEXT NOT NULL, status TEXT NOT NULL,
    verdict TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (operator_id, operator_version, candidate_hash, device_model, harness_version));
CREATE TABLE trajectory_results (
    run_id TEXT NOT NULL, platform TEXT NOT NULL, trajectory TEXT NOT NULL,
    operator_id TEXT NOT NULL, operator_version INTEGER NOT NULL, source TEXT NOT NULL,
    method TEXT NOT NULL, model TEXT NOT NULL, sample INTEGER NOT NULL,
    end_reason TEXT NOT NULL, status TEXT NOT NULL, best_candidate_hash TEXT NOT NULL,
    speedup REAL, sol_percent REAL, turns INTEGER NOT NULL, candidates INTEGER NOT NULL,
    prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, cost_usd REAL NOT NULL,
    gpu_seconds REAL NOT NULL, detail TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (run_id, platform, trajectory));
"""


def test_trajectories_join_verdicts_and_survive_reopen(tmp_path: Path) -> None:
    s = Store.open_run(tmp_path / "run")
    s.add_run("r1", {"x": 1})
    s.add_candidate("h1", "src")
    s.add_candidate("h1", "src")
    for _ in range(2):
        s.add_trajectory("r1", "aten::add", "reference", "", 0, "reference", "h1")
        s.add_trajectory("r1", "aten::add", "replay", "", 0, "neg", "h2")
    s.add_verdict(_v())
    s.close()
    s = Store.open_run(tmp_path / "run")
    rows = result_rows(s.trajectories("r1"))
    assert [r.status for r in rows] == ["PASSED", "PENDING"]
    assert rows[0].speedup == 1.0  # geometric mean of 2.0 and 0.5
    assert status_counts(rows) == {"PASSED": 1, "PENDING": 1}
    assert s.source("h1") == "src" and s.run_ids() == ["r1"]
    assert s.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_trajectory_results_are_stored_once_and_read_back(tmp_path):
    from coordinator.store import TrajectoryKey, TrajectoryResult
    from protos.records import Status

    store = Store(tmp_path / "kgb.sqlite")
    key = TrajectoryKey("aten::add", 1, "refine", "org/model", 3)
    first = TrajectoryResult("r1", "cpu", key, "aten", "SOLVED", Status.PASSED, "ab" * 32, 1.5, 40.0,
                             2, 2, 100, 50, 0.25, 3.5, "")
    assert store.add_trajectory_result(first)
    later = TrajectoryResult("r1", "cpu", key, "aten", "TURNS_EXHAUSTED", Status.WRONG_ANSWER, "",
                             None, None, 4, 4, 900, 90, 1.0, 9.0, "")
    assert not store.add_trajectory_result(later)  # the first outcome is kept
    other = TrajectoryResult("r1", "cuda", key, "aten", "LLM_ERROR", None, "", None, None, 1, 0,
                             0, 0, 0.0, 0.0, "HTTP 500")
    assert store.add_trajectory_result(other)
    rows = store.trajectory_results("r1")
    assert [(r.platform, r.status, r.end_reason) for r in rows] == [
        ("cpu", Status.PASSED, "SOLVED"), ("cuda", None, "LLM_ERROR")]
    assert rows[0].key == key and rows[0].solved and not rows[1].solved
    assert rows[0].prompt_tokens == 100 and rows[0].speedup == 1.5 and rows[1].detail == "HTTP 500"
    assert store.finished_trajectories("r1") == {("cpu", str(key)), ("cuda", str(key))}
    assert store.trajectory_results("other") == []
