"""``kgb run`` as users run it, and the metrics it serves."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import orjson

from coordinator.metrics import SweepMetrics
from coordinator.store import Store

REPO = Path(__file__).resolve().parents[2]


def test_kgb_run_end_to_end(tmp_path: Path, agent_secret_env: None) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    r = subprocess.run([sys.executable, "-m", "coordinator", "run", "--platform", "cpu",
                        "--op", "aten::add", "--op", "cublas::cublasSaxpy_v2",
                        "--runs-dir", str(tmp_path), "--run-id", "smoke", "--workers", "1"],
                       capture_output=True, timeout=600, env=env)
    out, err = r.stdout.decode(), r.stderr.decode()
    assert r.returncode == 0, err[-3000:]
    assert "aten::add" in out and "PASSED" in out and "% SOL" in out
    assert "metrics on http://127.0.0.1:" in err and "2 trajectories: PASSED 2" in err
    store = Store.open_run(tmp_path / "smoke")
    rows = store.trajectories("smoke")
    assert {row.operator_id for row in rows} == {"aten::add", "cublas::cublasSaxpy_v2"}
    assert all(row.verdict and row.verdict.status.value == "PASSED" for row in rows)
    assert (tmp_path / "smoke" / "agent.log").exists()
    rep = subprocess.run([sys.executable, "-m", "coordinator", "report", "smoke", "--runs-dir",
                          str(tmp_path), "--json"], capture_output=True, timeout=120, env=env)
    assert rep.returncode == 0
    assert [orjson.loads(x)["status"] for x in rep.stdout.splitlines()] == ["PASSED", "PASSED"]


def test_run_rejects_unknown_operator_and_method(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for extra, words in ((["--op", "aten::nope"], b"unknown operator"),
                         (["--method", "nope"], b"unknown generation method"),
                         (["--replay", str(tmp_path / "missing.jsonl")], b"cannot read")):
        r = subprocess.run([sys.executable, "-m", "coordinator", "run", "--runs-dir", str(tmp_path),
                            *extra], capture_output=True, timeout=120, env=env)
        assert r.returncode == 2 and words in r.stderr, r.stderr


def test_metrics_endpoint_serves_on_loopback() -> None:
    m = SweepMetrics()
    port = m.serve(0)
    m.candidates.labels("PASSED", "aten", "cpu", "reference").inc()
    m.trajectories_planned.set(3)
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    assert 'kgb_candidates_total{method="reference",platform="cpu",source="aten",status="PASSED"} 1.0' in body
    assert "kgb_sweep_trajectories 3.0" in body
