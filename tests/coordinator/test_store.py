"""The store: content-keyed, idempotent, reports as pure functions of rows."""

from __future__ import annotations

from pathlib import Path

from coordinator.report import result_rows, status_counts
from coordinator.store import Store
from protos.records import CaseTiming, Status, Verdict


def _v(status: Status = Status.PASSED, device: str = "NVIDIA H200") -> Verdict:
    return Verdict(status, "aten::add", 1, "h1", device_model=device, harness_version="0.1.0",
                   timings=(CaseTiming("c", True, 10.0, speedup=2.0, sol_percent=50.0),
                            CaseTiming("d", True, 10.0, speedup=0.5, sol_percent=50.0)))


def test_verdict_key_and_idempotent_writes(tmp_path: Path) -> None:
    s = Store.open_run(tmp_path / "run")
    assert s.add_verdict(_v())
    assert not s.add_verdict(_v(Status.WRONG_ANSWER))  # same key: kept, not duplicated
    assert s.verdict("aten::add", 1, "h1", "NVIDIA H200", "0.1.0").status is Status.PASSED  # type: ignore[union-attr]
    assert s.verdict("aten::add", 1, "h1", "cpu", "0.1.0") is None  # device model is in the key
    assert s.add_verdict(_v(device="cpu"))
    assert s.verdict("aten::add", 2, "h1", "NVIDIA H200", "0.1.0") is None  # so is the version


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
