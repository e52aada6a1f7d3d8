"""``kgb report`` on awkward input: a sweep still running, a store from an older harness (no
spec recorded, tables without the newer columns), and a run id that does not exist."""

from __future__ import annotations

import os
import socket
import sqlite3
from pathlib import Path

import orjson
from click.testing import CliRunner

from coordinator.cli import kgb
from coordinator.store import Store, TrajectoryKey, TrajectoryResult
from protos.records import Status
from tests.helpers import OLD_RESULTS_TABLE


def invoke(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(kgb, list(args))
    return r.exit_code, r.stdout, r.stderr


def result(op: str, status: Status, run: str = "live") -> TrajectoryResult:
    return TrajectoryResult(run, "cuda", TrajectoryKey(op, 1, "sample", "m", 0), "aten",
                            "CANDIDATE", status, "h", 2.0 if status is Status.PASSED else None,
                            None, 1, 1, 10, 5, 0.0, 1.0)


def test_a_running_sweep_is_reported_from_what_is_stored_and_says_so(tmp_path: Path) -> None:
    store = Store.open_run(tmp_path / "runs" / "live")
    store.add_run("live", {"kind": "sweep", "spec": 'suites = ["aten"]'})
    store.set_run_state("live", "running", f"pid {os.getpid()} on {socket.gethostname()}",
                        lease_s=600)
    store.add_trajectory_result(result("aten::add", Status.PASSED))
    store.close()
    code, out, err = invoke("report", "live", "--runs-dir", str(tmp_path / "runs"), "--json")
    assert code == 0, err
    doc = orjson.loads(out)
    assert doc["state"] == "running" and "covers the 1 trajectories stored so far" in doc["state_why"]
    m = next(x for x in doc["metrics"] if x["source"] == "aten")
    assert (m["named"], m["solved"], m["unattempted"]) == (110, 1, 109)
    code, out, _ = invoke("report", "live", "--runs-dir", str(tmp_path / "runs"))
    assert code == 0 and "still running" in out and "110" in out


def test_a_store_from_an_older_harness_is_reported_with_the_attempted_denominator(
        tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute(OLD_RESULTS_TABLE)
    for i, status in enumerate(("PASSED", "WRONG_ANSWER")):
        db.execute("INSERT INTO trajectory_results VALUES ('old', 'cuda', ?, ?, 1, 'aten', "
                   "'sample', 'm', 0, 'SOLVED', ?, 'h', 1.5, NULL, 1, 1, 10, 5, 0.0, 1.0, '', 1.0)",
                   (f"aten::op{i}@1/sample/m/0", f"aten::op{i}", status))
    db.commit()
    db.close()
    code, out, err = invoke("report", "old", "--store", str(path), "--json")
    assert code == 0, err
    doc = orjson.loads(out)
    assert doc["scope"]["recorded"] is False and "older harness" in doc["scope"]["why"]
    m = next(x for x in doc["metrics"] if x["source"] == "aten")
    assert (m["named"], m["solved"], m["accuracy"], m["speedup"]) == (2, 1, 0.5, 1.5)
    assert doc["state"] == "unknown"
    code, out, _ = invoke("report", "old", "--store", str(path))
    assert code == 0 and "denominator: the run recorded no sweep spec" in out


def test_a_run_that_does_not_exist_is_a_usage_error_listing_the_known_ones(tmp_path: Path) -> None:
    store = Store.open_run(tmp_path / "runs" / "live")
    store.add_run("live", {"kind": "sweep"})
    store.close()
    code, _, err = invoke("report", "nope", "--store", str(tmp_path / "runs" / "live" / "kgb.sqlite"))
    assert code == 2 and "no run 'nope'" in err and "known runs: live" in err
