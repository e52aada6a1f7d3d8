"""The sweep engine end to end: Ray, a loopback fake LLM in its own process, real agents.

What is proven here: every planned trajectory gets exactly one stored result; the store's books
equal the fake LLM's own billing log; a finished run resumed sends nothing; a killed coordinator
(SIGKILL) resumes without re-sending any stored call or re-evaluating any stored verdict; Ctrl-C
and ``kgb sweep cancel`` stop cleanly (calls on the wire are awaited and stored, so the books
still match exactly); a killed agent's work moves to the other one; a sweep runs on a multi-node
Ray cluster; and bad specs and bad run names are clear usage errors.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from coordinator.engine import (
    CANDIDATES,
    SweepOptions,
    init_ray,
    run_sweep,
    runner_count,
    shard_limits,
)
from coordinator.report import read_report
from coordinator.store import DB_NAME, Store
from coordinator.sweep_spec import load_spec
from protos.records import Status, Verdict
from tests.coordinator.sweeping import (
    address,
    fake_llm,
    instant_agents,
    kgb,
    wait_for,
    write_spec,
)

pytestmark = pytest.mark.usefixtures("agent_secret_env")


@pytest.fixture(scope="module")
def ray_local() -> Iterator[None]:
    import ray

    init_ray(num_cpus=2)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def two_agents(agent_secret_env: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    with instant_agents(2, tmp_path_factory.mktemp("agents")) as agents:
        yield [address(a) for a in agents]


def _run(spec_path: Path) -> tuple[str, object]:
    spec = load_spec(spec_path)
    options = SweepOptions(run_id=spec.name, store_dir=spec.store, spec_text=spec_path.read_text(),
                           spec_source=str(spec_path), spec_dir=str(spec_path.parent))
    return asyncio.run(run_sweep(spec, options))


def _books(store_dir: Path, run: str) -> tuple[int, int, int]:
    """(stored calls, billed tokens, trajectory results) of a run."""
    db = sqlite3.connect(store_dir / DB_NAME)
    try:
        calls = db.execute("SELECT COUNT(*) FROM llm_calls WHERE run_id=?", (run,)).fetchone()[0]
        tokens = db.execute("SELECT COALESCE(SUM(prompt_tokens + completion_tokens), 0) FROM "
                            "llm_calls WHERE run_id=? AND billed=1", (run,)).fetchone()[0]
        results = db.execute("SELECT COUNT(*) FROM trajectory_results WHERE run_id=?",
                             (run,)).fetchone()[0]
        return int(calls), int(tokens), int(results)
    finally:
        db.close()


def _finished_so_far(store_dir: Path, run: str) -> int:
    """Trajectory results stored so far, 0 before the store exists: the sweep creates the
    database file a moment before its tables, and a poll can fall in between."""
    if not (store_dir / DB_NAME).is_file():
        return 0
    try:
        return _books(store_dir, run)[2]
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return 0
        raise


def _stable_books(store_dir: Path, run: str) -> tuple[int, int, int]:
    """The books once nothing has changed for three seconds (actors outliving their driver for
    a moment may still store a reply they had received)."""
    last, since = _books(store_dir, run), time.monotonic()
    while time.monotonic() - since < 3.0:
        time.sleep(0.5)
        now = _books(store_dir, run)
        if now != last:
            last, since = now, time.monotonic()
    return last


def test_a_sweep_judges_every_trajectory_once_and_its_books_match_the_llms(
        ray_local: None, two_agents: list[str], tmp_path: Path) -> None:
    with fake_llm(tmp_path, "--latency-s", "0.2", "--prompt-tokens", "3000",
                  "--completion-tokens", "700") as llm:
        spec_path = write_spec(tmp_path / "s.toml", "books", llm, two_agents, samples=4,
                               methods='[[methods]]\nname = "sample"\n\n'
                                       '[[methods]]\nname = "reference"\n')
        state, progress = _run(spec_path)
        assert state == "complete", progress
        spec = load_spec(spec_path)
        planned = len(spec.plan())
        assert planned == 2 * (4 + 1)
        calls, tokens, results = _books(spec.store, "books")
        billed_calls, billed_tokens = llm.billed()
        assert (calls, tokens) == (billed_calls, billed_tokens) == (8, 8 * 3700)
        assert results == planned
        store = Store(spec.store / DB_NAME)
        try:
            rows = store.trajectory_results("books")
            assert {r.end_reason for r in rows} == {"CANDIDATE"}
            assert all(r.status is not None and r.status.value == "PASSED" for r in rows)
            assert all(r.key.platform == "cpu" for r in rows)
            # costs from the spec's prices: $1 and $2 per 1M prompt and completion tokens
            assert sum(r.cost_usd for r in rows) == pytest.approx(8 * (3000 * 1 + 700 * 2) / 1e6)
            assert store.run_state("books")[0] == "complete"  # type: ignore[index]
        finally:
            store.close()

        # run again: nothing is sent, nothing evaluated
        state, progress = _run(spec_path)
        assert state == "complete"
        assert progress.skipped == planned and progress.done == 0  # type: ignore[attr-defined]
        assert llm.billed() == (billed_calls, billed_tokens)


def test_refine_is_judged_by_a_real_agent(ray_local: None, cpu_agent: str, tmp_path: Path) -> None:
    """Not the instant mode: the fake LLM's reply (the reference solution) runs on a cpu agent."""
    with fake_llm(tmp_path, "--latency-s", "0.05") as llm:
        spec_path = write_spec(tmp_path / "s.toml", "real", llm, [cpu_agent],
                               operators=("aten::add",), samples=1,
                               methods='[[methods]]\nname = "refine"\nturns = 2\n')
        state, _ = _run(spec_path)
        assert state == "complete"
        store = Store(load_spec(spec_path).store / DB_NAME)
        try:
            (row,) = store.trajectory_results("real")
            assert row.end_reason in ("SOLVED", "TARGET_REACHED") and row.turns == 1
            (raw,) = store.db.execute("SELECT verdict FROM verdicts WHERE candidate_hash=?",
                                      (row.best_candidate_hash,)).fetchone()
            v = Verdict.from_json(orjson.loads(raw))
            assert v.status is Status.PASSED and v.cases and "+instant" not in v.harness_version
        finally:
            store.close()


@pytest.mark.slow
def test_sample_in_rounds_gets_the_evaluator_and_its_report_counts_rounds(
        ray_local: None, two_agents: list[str], tmp_path: Path) -> None:
    """``sample`` with ``rounds``: the sweep hands it the evaluator, so each round is judged as
    it ends (the fake LLM's first reply passes: SOLVED in round 1, nothing re-sampled)."""
    with fake_llm(tmp_path, "--latency-s", "0.05") as llm:
        spec_path = write_spec(tmp_path / "s.toml", "rounds", llm, two_agents, samples=1,
                               methods='[[methods]]\nname = "sample"\nrounds = 3\n'
                                       'round_temperature = 0.7\n')
        state, _ = _run(spec_path)
        assert state == "complete"
        store = Store(load_spec(spec_path).store / DB_NAME)
        try:
            rows = store.trajectory_results("rounds")
            assert [(r.end_reason, r.turns) for r in rows] == [("SOLVED", 1)] * 2
            firsts = [store.llm_call("rounds", r.key, 1) for r in rows]
            assert [c.temperature for c in firsts if c is not None] == [0.0, 0.0]
            report = read_report(store, "rounds")
        finally:
            store.close()
        after = {m.source: m.pass_after_round for m in report.metrics}
        assert after["all"] == (1.0, 1.0, 1.0) and llm.billed()[0] == 2


def test_a_killed_coordinator_resumes_without_resending_or_reevaluating(
        two_agents: list[str], tmp_path: Path) -> None:
    """SIGKILL to the coordinator's process group mid-sweep, then resume: every stored call is
    replayed, every result and verdict exactly once, and the LLM's own books equal the store's."""
    with fake_llm(tmp_path, "--latency-s", "1.0") as llm:
        # two runners share the endpoint: the books must hold across them too
        spec_path = write_spec(tmp_path / "s.toml", "killed", llm, two_agents, samples=30,
                               concurrency=8, extra="runners_per_endpoint = 2")
        store_dir = load_spec(spec_path).store
        proc = kgb("sweep", "run", str(spec_path), "--metrics-port", "0", "--no-progress")
        wait_for(lambda: _finished_so_far(store_dir, "killed") >= 10,
                 120, "ten finished trajectories")
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and the Ray processes it started
        proc.wait(30)
        calls_at_kill, _, results_at_kill = _stable_books(store_dir, "killed")
        assert 10 <= results_at_kill < 60
        requests_before = llm.stats()["requests"]

        resumed = kgb("sweep", "resume", str(store_dir), "--metrics-port", "0", "--no-progress")
        out, _ = resumed.communicate(timeout=300)
        assert resumed.returncode == 0, out
        calls, tokens, results = _books(store_dir, "killed")
        assert results == 60 and calls == 60
        # resume sent exactly the calls the store lacked: stored ones were replayed, not re-sent
        assert llm.stats()["requests"] - requests_before == 60 - calls_at_kill
        # exactly-once records: one result per trajectory, one verdict per candidate
        db = sqlite3.connect(store_dir / DB_NAME)
        try:
            distinct = db.execute("SELECT COUNT(DISTINCT best_candidate_hash) FROM "
                                  "trajectory_results WHERE run_id='killed'").fetchone()[0]
            verdicts = db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0]
        finally:
            db.close()
        assert distinct == verdicts == 60
        # zero tokens spent twice: a reply billed but not yet stored when the kill landed was
        # asked again under its idempotency key, and the fake LLM (which honours keys) did not
        # bill it again
        assert llm.billed() == (calls, tokens)


@pytest.mark.parametrize("how", ["ctrl-c", "cancel"])
def test_stopping_waits_for_calls_on_the_wire_and_resume_completes_with_exact_books(
        how: str, two_agents: list[str], tmp_path: Path) -> None:
    # 24 trajectories, 3 at a time, 3 s each: about 24 s of work, so a cancel sent after the
    # fourth result (a new process, then the coordinator's 2 s poll) lands well before the end
    with fake_llm(tmp_path, "--latency-s", "3.0") as llm:
        spec_path = write_spec(tmp_path / "s.toml", f"stop-{how}", llm, two_agents, samples=12,
                               concurrency=3)
        store_dir = load_spec(spec_path).store
        run = f"stop-{how}"
        proc = kgb("sweep", "run", str(spec_path), "--metrics-port", "0", "--no-progress")
        wait_for(lambda: _finished_so_far(store_dir, run) >= 4,
                 120, "four finished trajectories")
        if how == "ctrl-c":
            proc.send_signal(signal.SIGINT)
        else:
            cancel = kgb("sweep", "cancel", str(store_dir))
            out, _ = cancel.communicate(timeout=60)
            assert cancel.returncode == 0 and "cancel requested" in out, out
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == (130 if how == "ctrl-c" else 0), out
        assert "continue with: kgb sweep resume" in out
        store = Store(store_dir / DB_NAME)
        try:
            state = store.run_state(run)
        finally:
            store.close()
        assert state is not None and state[0] == ("interrupted" if how == "ctrl-c" else "cancelled")
        calls, tokens, results = _books(store_dir, run)
        assert results < 24
        assert llm.billed() == (calls, tokens)  # nothing on the wire was lost

        status = kgb("sweep", "status", str(store_dir))
        out, _ = status.communicate(timeout=60)
        assert "of 24 finished" in out and state[0] in out, out

        resumed = kgb("sweep", "resume", str(store_dir), "--metrics-port", "0", "--no-progress")
        out, _ = resumed.communicate(timeout=300)
        assert resumed.returncode == 0, out
        calls, tokens, results = _books(store_dir, run)
        assert results == 24 and calls == 24
        assert llm.billed() == (24, tokens)


def test_a_killed_agents_work_moves_to_the_other(ray_local: None, tmp_path: Path) -> None:
    with instant_agents(2, tmp_path) as agents, \
            fake_llm(tmp_path, "--latency-s", "0.3") as llm:
        spec_path = write_spec(tmp_path / "s.toml", "agent-dies", llm,
                               [address(a) for a in agents], samples=40, concurrency=8,
                               operators=("aten::add",))
        store_dir = load_spec(spec_path).store

        async def go() -> tuple[str, object]:
            spec = load_spec(spec_path)
            options = SweepOptions(run_id=spec.name, store_dir=spec.store,
                                   spec_text=spec_path.read_text(), spec_source=str(spec_path),
                                   spec_dir=str(spec_path.parent))
            task = asyncio.ensure_future(run_sweep(spec, options))
            while _finished_so_far(store_dir, "agent-dies") < 5:
                await asyncio.sleep(0.1)
            agents[0].proc.send_signal(signal.SIGKILL)  # type: ignore[union-attr]
            return await task

        state, progress = asyncio.run(go())
        assert state == "complete", progress
        assert progress.infra == 0 and progress.failed == 0  # type: ignore[attr-defined]
        calls, _, results = _books(store_dir, "agent-dies")
        assert results == 40 and calls == 40


def test_a_sweep_runs_on_a_multi_node_ray_cluster(two_agents: list[str], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Two Ray nodes on this machine (a head and a worker, each its own raylet); the coordinator
    joins with --ray-address and its trajectory runners spread over both."""
    from ray.cluster_utils import Cluster

    # a cluster on loopback (the node processes read this when they start)
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1,
                                                            "node_ip_address": "127.0.0.1"})
    try:
        cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
        cluster.wait_for_nodes()
        with fake_llm(tmp_path, "--latency-s", "0.2") as llm:
            spec_path = write_spec(tmp_path / "s.toml", "cluster", llm, two_agents, samples=5,
                                   methods='[[methods]]\nname = "sample"\n\n'
                                           '[[methods]]\nname = "reference"\n')
            proc = kgb("sweep", "run", str(spec_path), "--ray-address", cluster.address,
                       "--metrics-port", "0", "--no-progress")
            out, _ = proc.communicate(timeout=300)
            assert proc.returncode == 0, out
            assert "on 2 Ray nodes" in out, out
            calls, _, results = _books(load_spec(spec_path).store, "cluster")
            assert results == 12 and calls == 10
    finally:
        cluster.shutdown()


def test_bad_specs_and_runs_are_usage_errors(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from coordinator.cli import kgb as cli

    runner = CliRunner()
    bad = tmp_path / "bad.toml"
    bad.write_text('operators = ["aten::add"]\n[sweep]\nname = "x"\n[[methods]]\nname = "sampel"\n')
    r = runner.invoke(cli, ["sweep", "run", str(bad)])
    assert r.exit_code == 2 and "methods[0]" in r.output and "sample" in r.output, r.output
    r = runner.invoke(cli, ["sweep", "run", str(tmp_path / "missing.toml")])
    assert r.exit_code == 2 and "cannot read" in r.output
    r = runner.invoke(cli, ["sweep", "resume", "nope", "--runs-dir", str(tmp_path)])
    assert r.exit_code == 2 and "no run 'nope'" in r.output
    r = runner.invoke(cli, ["sweep", "status", "nope", "--runs-dir", str(tmp_path)])
    assert r.exit_code == 2

    # a spec whose run already exists is not started again
    spec_path = write_spec(tmp_path / "s.toml", "exists", None, ["127.0.0.1:9"],
                           methods='[[methods]]\nname = "reference"\n')
    store = Store(load_spec(spec_path).store / DB_NAME)
    store.add_run("exists", {"kind": "sweep", "spec": spec_path.read_text()})
    store.set_run_state("exists", "interrupted")
    store.close()
    r = runner.invoke(cli, ["sweep", "run", str(spec_path)])
    assert r.exit_code == 2 and "kgb sweep resume" in r.output and "interrupted" in r.output
    r = runner.invoke(cli, ["sweep", "cancel", str(load_spec(spec_path).store)])
    assert r.exit_code == 0 and "not running" in r.output


def test_sweep_help_teaches_the_commands() -> None:
    from click.testing import CliRunner

    from coordinator.cli import kgb as cli

    r = CliRunner().invoke(cli, ["sweep", "--help"])
    assert r.exit_code == 0
    for word in ("run", "resume", "status", "cancel", "report"):
        assert f"kgb sweep {word}" in r.output or f"kgb {word}" in r.output


def test_the_ten_million_token_sweep_books_equal_the_llms_log(tmp_path: Path) -> None:
    """The CI size of bench/sweep_scale.py's billion-token sweep: 200 trajectories of 50,000
    tokens each on four instant-verdict agents; the store's totals equal the fake LLM's log."""
    import json
    import sys

    from tests.coordinator.sweeping import REPO

    out = tmp_path / "tokens.json"
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "sweep_scale.py"), "tokens",
                           "--tokens", "1e7", "--latency", "0.05", "--in-flight", "100",
                           "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    r = json.loads(out.read_text())
    assert r["exit"] == 0, r["tail"]
    assert r["books_equal"] and r["store_tokens"] == r["llm_billed_tokens"] == 10_000_000, r
    assert r["results"] == r["trajectories"] == 200


def _spec_with(tmp_path: Path, concurrency: int, extra: str = "") -> Any:
    llm: Any = SimpleNamespace(base_url="http://127.0.0.1:9/v1")
    return load_spec(write_spec(tmp_path / "s.toml", "count", llm, [], concurrency=concurrency,
                                extra=extra))


def test_runners_per_endpoint_follow_nodes_and_trajectories_in_flight(tmp_path: Path) -> None:
    # one per node (up to 8), at least one per 600 trajectories in flight, the spec's own count
    # when given (under its old key too); never more than the endpoint's HTTP slots; one for the
    # candidate methods
    assert runner_count(_spec_with(tmp_path, 64), "fake", 1) == 1
    assert runner_count(_spec_with(tmp_path, 64), "fake", 3) == 3
    assert runner_count(_spec_with(tmp_path, 64), "fake", 20) == 8
    assert runner_count(_spec_with(tmp_path, 1200), "fake", 1) == 2
    assert runner_count(_spec_with(tmp_path, 1201), "fake", 1) == 3
    assert runner_count(_spec_with(tmp_path, 64, "runners_per_endpoint = 5"), "fake", 1) == 5
    assert runner_count(_spec_with(tmp_path, 64, "generators_per_endpoint = 5"), "fake", 1) == 5
    few = _spec_with(tmp_path, 16, "runners_per_endpoint = 40")  # max_concurrency is 16
    assert runner_count(few, "fake", 1) == 16
    assert runner_count(few, CANDIDATES, 4) == 1


def test_runners_share_an_endpoints_limits_exactly(tmp_path: Path) -> None:
    config = dataclasses.replace(_spec_with(tmp_path, 64).endpoint("fake"), max_concurrency=10,
                                 requests_per_minute=90.0, tokens_per_minute=1000.0)
    parts = [shard_limits(config, 3, i) for i in range(3)]
    assert [p.max_concurrency for p in parts] == [4, 3, 3]
    assert sum(p.requests_per_minute or 0 for p in parts) == pytest.approx(90.0)
    assert sum(p.tokens_per_minute or 0 for p in parts) == pytest.approx(1000.0)
    assert shard_limits(config, 1, 0) == config
