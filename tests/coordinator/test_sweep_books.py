"""Every token accounted through crashes (issue #21), end to end: ``kgb sweep run`` in its own
process (Ray and all) against the scripted LLM server, whose log says what it billed under
which idempotency key.

* The coordinator is SIGKILLed while calls are on the wire (between send and store). The
  server bills those calls anyway (a provider bills what it generated); the store holds their
  intents without replies. ``kgb sweep status`` says ``interrupted`` and counts them,
  ``kgb report --json`` carries them as ``unconfirmed_calls``, and the resume re-sends each as
  its intent's next attempt. The books, by idempotency key, balance before and after the resume
  (tests/coordinator/books.py states the rule). /metrics agrees with the store mid-run and after
  the resume (counters: what that process stored; gauges: the run's stored totals).
* Nothing calls a model after its coordinator is gone: with every request answered 429 (the
  runners retry for many seconds), the driver is SIGKILLed and no request reaches the endpoint
  a second later.
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

import operators
from coordinator.store import DB_NAME, Store
from coordinator.sweep_spec import load_spec
from tests.coordinator.books import books
from tests.coordinator.sweeping import (
    address,
    instant_agents,
    kgb,
    process_group,
    wait_for,
    write_spec,
)
from tests.generators.fake_llm_server import FakeServer, fake_server
from tests.generators.llm_helpers import wire_usage

pytestmark = pytest.mark.usefixtures("agent_secret_env")

ADD = operators.get("aten::add")
REPLY = f"Here it is.\n\n```python\n{ADD.solution.strip()}\n```\n"


@pytest.fixture(scope="module")
def agent(agent_secret_env: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with instant_agents(1, tmp_path_factory.mktemp("agents")) as agents:
        yield address(agents[0])


def _spec(tmp_path: Path, name: str, server: FakeServer, agent: str, samples: int,
          concurrency: int, retries: int = 3) -> Path:
    llm: Any = SimpleNamespace(base_url=server.url("ep", "openai"))
    path = write_spec(tmp_path / f"{name}.toml", name, llm, [agent], operators=(ADD.id,),
                      samples=samples, concurrency=concurrency)
    path.write_text(path.read_text().replace("max_retries = 3", f"max_retries = {retries}"))
    return path


def _metrics_port(proc: subprocess.Popen[str]) -> int:
    assert proc.stdout is not None
    for _ in range(20):
        line = proc.stdout.readline()
        found = re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", line)
        if found:
            return int(found.group(1))
    raise AssertionError("the coordinator did not say where its metrics are")


def _scrape(port: int) -> dict[str, float]:
    """Sums per metric name (and per kind for the token metrics) of /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            name = s.name
            if name.startswith(("kgb_llm_tokens", "kgb_run_llm_tokens")) and \
                    s.labels.get("kind") not in ("prompt", "completion"):
                continue
            out[name] = out.get(name, 0.0) + s.value
    return out


def _stored(db: Path, run: str, since: float = 0.0) -> dict[str, float]:
    """The store's calls, billed tokens and cost of the run (of calls created after ``since``)."""
    if not db.is_file():
        return {"calls": 0, "tokens": 0, "cost": 0.0, "results": 0, "fresh_intents": 0}
    c = sqlite3.connect(db, timeout=30)
    try:
        calls, tokens, cost = c.execute(
            "SELECT COUNT(*), COALESCE(SUM(prompt_tokens + completion_tokens), 0), "
            "COALESCE(SUM(cost_usd), 0) FROM llm_calls WHERE run_id = ? AND created > ?",
            (run, since)).fetchone()
        results = c.execute("SELECT COUNT(*) FROM trajectory_results WHERE run_id = ?",
                            (run,)).fetchone()[0]
        fresh = c.execute("SELECT COUNT(*) FROM llm_intents WHERE run_id = ? AND completed IS "
                          "NULL AND created > ?", (run, time.time() - 1.0)).fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return {"calls": 0, "tokens": 0, "cost": 0.0, "results": 0, "fresh_intents": 0}
    finally:
        c.close()
    return {"calls": calls, "tokens": tokens, "cost": cost, "results": results,
            "fresh_intents": fresh}


def _agree(port: int, db: Path, run: str, *, counters_since: float, timeout: float) -> None:
    """Wait until /metrics equals the store: the counters what was stored after
    ``counters_since``, the gauges the run's totals."""
    last: tuple[Any, ...] = ()
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        m, mine, total = _scrape(port), _stored(db, run, counters_since), _stored(db, run)
        last = (m, mine, total)
        if (m.get("kgb_llm_requests_total") == mine["calls"] > 0
                and m.get("kgb_llm_tokens_total") == mine["tokens"]
                and m.get("kgb_llm_cost_usd_total", 0.0) == pytest.approx(mine["cost"])
                and m.get("kgb_run_llm_calls") == total["calls"]
                and m.get("kgb_run_llm_tokens") == total["tokens"]
                and m.get("kgb_run_llm_cost_usd", 0.0) == pytest.approx(total["cost"])):
            return
        time.sleep(0.3)
    raise AssertionError(f"/metrics never agreed with the store: {last}")


def _cli(*args: str) -> str:
    p = kgb(*args)
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 0, out
    return out


def test_a_kill_between_send_and_store_leaves_unconfirmed_calls_and_the_books_balance(
        agent: str, tmp_path: Path) -> None:
    reply = {"kind": "ok", "text": REPLY, "usage": wire_usage("openai", 1000, 200, 100, 50),
             "delay_s": 4.0, "bill": "always"}
    with fake_server({"endpoints": {"ep": {"default": reply}}}, tmp_path) as server:
        spec_path = _spec(tmp_path, "killed", server, agent, samples=16, concurrency=4)
        store_dir = load_spec(spec_path).store
        db = store_dir / DB_NAME
        with process_group(kgb("sweep", "run", str(spec_path), "--metrics-port", "0",
                        "--no-progress")) as proc:
            port = _metrics_port(proc)
            wait_for(lambda: _stored(db, "killed")["results"] >= 4, 180, "four results")
            # mid-run: /metrics equals the store (the run goes on meanwhile)
            _agree(port, db, "killed", counters_since=0.0, timeout=30)
            assert proc.poll() is None and _stored(db, "killed")["results"] < 16
            # kill while calls are on the wire: intents written within the last second
            # (their replies come 4 s after they were sent)
            wait_for(lambda: _stored(db, "killed")["fresh_intents"] >= 1, 60, "calls on the wire")
            os.kill(proc.pid, signal.SIGKILL)
        time.sleep(5.0)  # the server bills what was on the wire (4 s after each request)
        stored_before = _stored(db, "killed")
        store = Store(db)
        try:
            before = books(server, store, "killed")
        finally:
            store.close()
        assert before.problems() == [], before.problems()
        lost = before.billed_unrecorded
        assert lost >= 1 and sum(before.unconfirmed.values()) >= lost

        status = _cli("sweep", "status", str(store_dir), "--json")
        st = orjson.loads(status.splitlines()[-1])
        assert (st["state"], st["stored_state"]) == ("interrupted", "running"), st
        assert st["unconfirmed_calls"] == sum(before.unconfirmed.values()) and st["why"]
        assert st["unconfirmed_tokens_estimate"] >= st["unconfirmed_calls"] * 1000
        text = _cli("sweep", "status", str(store_dir))
        assert "interrupted" in text and "unconfirmed:" in text
        assert f"kgb sweep resume {store_dir.resolve()}" in text
        report = orjson.loads(_cli("report", str(store_dir), "--json").splitlines()[0])
        assert report["schema_version"] == 3
        assert report["cost_total"]["unconfirmed_calls"] == st["unconfirmed_calls"]
        assert report["cost_total"]["billed_calls"] == stored_before["calls"]

        resume_started = time.time()
        with process_group(kgb("sweep", "resume", str(store_dir), "--metrics-port", "0",
                        "--no-progress", "--metrics-linger", "60")) as resumed:
            port = _metrics_port(resumed)
            wait_for(lambda: _stored(db, "killed")["results"] == 16, 240, "the resume's end")
            # after the resume: the counters hold what this process stored, once; the gauges
            # the run's totals over both processes, and the unconfirmed calls it started with
            _agree(port, db, "killed", counters_since=resume_started, timeout=30)
            assert _scrape(port)["kgb_run_llm_unconfirmed_calls"] == st["unconfirmed_calls"]
        time.sleep(5.0)
        store = Store(db)
        try:
            after = books(server, store, "killed")
            resent = store.db.execute("SELECT COUNT(*) FROM llm_calls WHERE run_id = 'killed' "
                                      "AND intent = 2 AND json_extract(call, '$.extra.resends') "
                                      "= '1'").fetchone()[0]
            unconfirmed = store.unconfirmed_calls("killed")
        finally:
            store.close()
    assert after.problems() == [], after.problems()
    # every call lost in the kill was sent again as its intent's second attempt, linked to it
    assert resent == sum(u.intents for u in unconfirmed) == st["unconfirmed_calls"]
    assert sum(u.resent for u in unconfirmed) == resent


def test_no_request_reaches_the_endpoint_a_second_after_the_driver_dies(
        agent: str, tmp_path: Path) -> None:
    """Every request is answered 429 with Retry-After 0.2 s and the endpoint retries 100 times:
    the runners would keep calling for many seconds. Only the driver is killed (Ray's
    processes live on): its runners must stop at once."""
    limited = {"kind": "error", "status": 429, "headers": {"Retry-After": "0.2"}}
    with fake_server({"endpoints": {"ep": {"default": limited}}}, tmp_path) as server:
        spec_path = _spec(tmp_path, "orphans", server, agent, samples=8, concurrency=4,
                          retries=100)
        with process_group(kgb("sweep", "run", str(spec_path), "--metrics-port", "0",
                        "--no-progress")) as proc:
            wait_for(lambda: len(server.requests()) >= 8, 180, "calls being retried")
            killed = time.time()
            os.kill(proc.pid, signal.SIGKILL)
            time.sleep(4.0)  # Ray's processes still run: anything not stopped would call now
            late = [r["t_start"] - killed for r in server.requests() if r["t_start"] > killed + 1.0]
        assert late == [], f"requests {late} s after the driver died"
