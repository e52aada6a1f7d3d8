"""``kgb report RUN --compare RUN2``: deltas with paired intervals, flipped problems, regressions
by McNemar and the paired bootstrap, versions matched by id, and runs over different problems
refused."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from coordinator.cli import kgb
from coordinator.report_compare import mcnemar_p
from coordinator.store import Store, TrajectoryKey, TrajectoryResult
from protos.records import Status

ATEN = 'suites = ["aten"]\n'


def result(run: str, op: str, status: Status, speedup: float | None, version: int = 1) -> TrajectoryResult:
    return TrajectoryResult(run, "cuda", TrajectoryKey(op, version, "sample", "m", 0), "aten",
                            "CANDIDATE", status, "h", speedup, None, 1, 1, 0, 0, 0.0, 1.0)


@pytest.fixture
def db(tmp_path: Path) -> str:
    """Run ``base`` solves aten::p0..p9 at 2x; ``worse`` solves only p0, p1 at 1x and runs p9 at
    version 2; ``vllm`` names another suite."""
    store = Store(tmp_path / "kgb.sqlite")
    store.add_run("base", {"spec": ATEN})
    store.add_run("worse", {"spec": ATEN})
    store.add_run("vllm", {"spec": 'suites = ["vllm"]'})
    for i in range(10):
        store.add_trajectory_result(result("base", f"aten::p{i}", Status.PASSED, 2.0))
        status = Status.PASSED if i < 2 else Status.WRONG_ANSWER
        store.add_trajectory_result(result("worse", f"aten::p{i}", status,
                                           1.0 if i < 2 else None, version=2 if i == 9 else 1))
    store.add_trajectory_result(TrajectoryResult(
        "vllm", "cuda", TrajectoryKey("vllm::v", 1, "sample", "m", 0), "vllm", "CANDIDATE",
        Status.PASSED, "h", 1.0, None, 1, 1, 0, 0, 0.0, 1.0))
    store.close()
    return str(tmp_path / "kgb.sqlite")


def invoke(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(kgb, list(args))
    return r.exit_code, r.stdout, r.stderr


def test_mcnemar_exact_p_values() -> None:
    assert mcnemar_p(8, 0) == pytest.approx(2 / 256)
    assert mcnemar_p(5, 1) == pytest.approx(14 / 64)
    assert mcnemar_p(3, 3) == 1.0 and mcnemar_p(0, 0) == 1.0


def test_a_significant_regression_is_flagged_and_fails_ci(db: str) -> None:
    code, out, err = invoke("report", "base", "--store", db, "--compare", "worse", "--json",
                            "--fail-on-regression")
    assert code == 1, err
    doc = orjson.loads(out)
    acc = next(d for d in doc["deltas"] if (d["source"], d["metric"]) == ("aten", "accuracy"))
    assert acc["base"] == pytest.approx(10 / 110) and acc["other"] == pytest.approx(2 / 110)
    assert acc["delta"] == pytest.approx(-8 / 110) and acc["p_value"] == pytest.approx(2 / 256)
    assert acc["regression"] and acc["ci"][1] < 0
    spd = next(d for d in doc["deltas"] if (d["source"], d["metric"]) == ("aten", "speedup"))
    assert (spd["delta"], spd["problems"], spd["regression"]) == (pytest.approx(0.5), 2, True)
    assert [f["problem"] for f in doc["flips"]] == [f"aten::p{i}" for i in range(2, 10)]
    assert doc["flips"][0]["base"] == "solved" and doc["flips"][0]["other"] == "failed"
    assert doc["versions"] == [{"operator": "aten::p9", "base": [1], "other": [2]}]
    assert doc["regressions"] == 4   # accuracy and speed-up, source aten and all


def test_no_regression_exits_0_and_the_table_shows_the_deltas(db: str) -> None:
    code, out, err = invoke("report", "worse", "--store", db, "--compare", "base",
                            "--fail-on-regression")
    assert code == 0, err
    assert "+7.3 pts" in out and "x2.00" in out and "aten::p9 v2 -> v1" in out
    assert "significant regressions: 0" in out
    code, _, _ = invoke("report", "base", "--store", db, "--compare", "base", "--fail-on-regression")
    assert code == 0


def test_runs_over_different_suites_are_refused_with_the_reason(db: str) -> None:
    code, _, err = invoke("report", "base", "--store", db, "--compare", "vllm")
    assert code == 2
    assert "runs over different problems cannot be compared" in err
    assert "base names aten 110 (aten)" in err and "vllm names vllm 50 (vllm)" in err


def test_compare_usage_errors(db: str) -> None:
    code, _, err = invoke("report", "base", "--store", db, "--fail-on-regression")
    assert code == 2 and "applies to --compare" in err
    code, _, err = invoke("report", "base", "--store", db, "--compare", "nope")
    assert code == 2 and "no run 'nope'" in err
