"""A real Prometheus scrapes a working coordinator and a cpu agent; every dashboard query answers.

Prometheus is the Debian package (``apt-get install prometheus``). When it is missing and the
test runs as root, the fixture installs it. When it cannot be installed or started, the test
**fails** in CI (``CI`` set) or as root, and skips elsewhere with the command to run.

The scrape configuration is ``deploy/prometheus.yml`` itself, with its targets pointed at this
test's processes and a 1 s scrape interval. The coordinator is a real ``kgb sweep run`` (its own
process, Ray and all) with LLM trajectory methods against the scripted LLM server (replies
by problem, temperature and turn, so the outcome is deterministic), evaluations on the real agent
and a dead agent in its fleet. Another client holds the agent's one worker with a hanging
candidate, an honest one of its own waiting, until the fleet's queue depth has been scraped (then
the hang is cancelled), so that gauge moves whatever the sweep's own timing. A rogue agent in
the fleet (answering PASSED about another candidate) is quarantined, so the integrity alarm
moves. ``--metrics-linger`` keeps its /metrics up after the sweep so the final counts are
scraped. Then every expression
of ``deploy/grafana/kgb.json`` (Grafana's variables substituted) must return at least one finite
value, and every variable query at least one label value.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import orjson
import pytest
import yaml

import operators
from coordinator.metrics import SweepMetrics
from coordinator.store import DB_NAME, Store
from operators.aten.add import NEGATIVE_NO_ALPHA
from protos.client import AgentClient
from protos.records import EvalRequest, Status
from tests.coordinator.fake_agents import fake_in_thread, passes_another_candidate
from tests.coordinator.sweeping import kgb, wait_for
from tests.deploy.helpers import (
    PROM_CONFIG,
    catalogue,
    debian_tool,
    expressions,
    metrics_agent,
    unavailable,
    variable_queries,
)
from tests.generators.fake_llm_server import FakeServer, fake_server

SCRAPE = "1s"
# Grafana's interval variables: longer than the whole test, so rates see every event.
WINDOW = "5m"
ADD = operators.get("aten::add")
SAXPY = operators.get("cublas::cublasSaxpy_v2")
CODER, REASONER = "fake-coder", "fake-reasoner"
DEAD_AGENT = "127.0.0.1:9"  # nothing listens on the discard port: an agent that is down


# -- Prometheus ---------------------------------------------------------------------------------


def _prometheus_binary() -> str:
    """``prometheus`` on PATH; as root, installed from the Debian package when missing."""
    return debian_tool("prometheus", "prometheus", "Prometheus")


def _unavailable(message: str) -> NoReturn:
    unavailable(message, "prometheus", "Prometheus")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Prometheus:
    url: str
    log: Path

    def get(self, path: str, **params: str | list[str]) -> Any:
        query = urllib.parse.urlencode(params, doseq=True)
        with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=30) as r:
            body = orjson.loads(r.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = self.get("/api/v1/query", query=expr)
        result = data["result"]
        return [{"metric": {}, "value": result}] if data["resultType"] == "scalar" else list(result)

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, ConnectionError):
        return False


@contextlib.contextmanager
def prometheus_server(workdir: Path, coordinator: str, agent: str) -> Iterator[Prometheus]:
    """Prometheus on loopback with deploy/prometheus.yml, targets replaced by ours."""
    binary = _prometheus_binary()
    config = yaml.safe_load(PROM_CONFIG.read_text())
    config["global"] = {"scrape_interval": SCRAPE, "scrape_timeout": SCRAPE,
                        "evaluation_interval": SCRAPE}
    targets = {"kgb-coordinator": coordinator, "kgb-agent": agent}
    assert {j["job_name"] for j in config["scrape_configs"]} == set(targets)
    for job in config["scrape_configs"]:
        job["static_configs"] = [{"targets": [targets[job["job_name"]]]}]
    path = workdir / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    log = workdir / "prometheus.log"
    for _attempt in range(3):  # the free port may be taken between choosing and binding
        port = _free_port()
        with open(log, "wb") as logf:
            proc = subprocess.Popen(
                [binary, f"--config.file={path}", f"--storage.tsdb.path={workdir / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1h"],
                stdout=logf, stderr=logf, stdin=subprocess.DEVNULL)
        prom = Prometheus(f"http://127.0.0.1:{port}", log)
        end = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < end and not _ready(prom.url):
            time.sleep(0.2)
        if proc.poll() is None and _ready(prom.url):
            break
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            _unavailable(f"Prometheus did not become ready within 60 s:\n{prom.log_tail()}")
        if "address already in use" not in prom.log_tail():
            _unavailable(f"Prometheus exited with code {proc.returncode}:\n{prom.log_tail()}")
    else:
        _unavailable(f"Prometheus found no free port:\n{prom.log_tail()}")
    try:
        yield prom
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# -- the coordinator's workload: a real `kgb sweep run` -------------------------------------------


def _fenced(source: str) -> str:
    return f"Here is the kernel.\n\n```python\n{source.strip()}\n```\n"


def _ok_openai(text: str, prompt: int, completion: int, cached: int, reasoning: int,
               delay: float) -> dict[str, Any]:
    return {"kind": "ok", "text": text, "delay_s": delay,
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion,
                      "prompt_tokens_details": {"cached_tokens": cached},
                      "completion_tokens_details": {"reasoning_tokens": reasoning}}}


def _anthropic(kind: str, text: str, given: int, output: int, read: int, delay: float) -> dict[str, Any]:
    return {"kind": kind, "text": text, "delay_s": delay,
            "usage": {"input_tokens": given, "output_tokens": output,
                      "cache_read_input_tokens": read}}


BROKEN_SAXPY = "import triton\n\ndef cublasSaxpy_v2(n, alpha, x:\n    return\n"
INLINE_ASM_ADD = (Path(__file__).parents[1] / "fixtures" / "candidates" / "add_inline_asm.py").read_text()
REFINE_T, SAMPLE_T = 0.0, 0.5  # the methods' temperatures: how the fake LLM tells them apart

# Replies by route (problem | temperature | turn), so the sweep's concurrent trajectories get the
# same replies whatever the order. Every coordinator metric moves: all token kinds; OK /
# TRUNCATED / BUDGET / RATE_LIMITED calls and a retried one (its first attempt billed, then
# dropped mid-reply: an unconfirmed call); PASSED / WRONG_ANSWER /
# COMPILE_ERROR / INFRA_ERROR verdicts and a reused one; six end reasons; two models, two
# methods, two sources; a dead agent in the fleet. Replies are delayed so the work spreads over
# many scrapes.
SCRIPT = {"endpoints": {
    "coder": {"routes": {
        f"{ADD.id}|{REFINE_T}|1": [_ok_openai(_fenced(NEGATIVE_NO_ALPHA), 1200, 700, 400, 100, 2.0)],
        f"{ADD.id}|{REFINE_T}|2": [_ok_openai(_fenced(ADD.solution), 1400, 720, 1200, 150, 1.0)],
        f"{ADD.id}|{SAMPLE_T}|1": [_ok_openai(_fenced(INLINE_ASM_ADD), 900, 400, 0, 0, 1.0)],
        f"{SAXPY.id}|{REFINE_T}|1": [_ok_openai(_fenced(BROKEN_SAXPY), 2700, 300, 0, 40, 2.5)],
        f"{SAXPY.id}|{SAMPLE_T}|1": [{"kind": "truncated", "text": "```python\nimport triton\n",
                                       "delay_s": 3.0, "usage": {"prompt_tokens": 700,
                                                                 "completion_tokens": 4096}}]}},
    "reasoner": {"routes": {
        f"{ADD.id}|{REFINE_T}|1": [{"kind": "error", "status": 429, "delay_s": 2.0}],
        # billed, then the connection drops mid-reply (an unconfirmed attempt); the retry answers
        f"{ADD.id}|{SAMPLE_T}|1": [_anthropic("drop", _fenced(ADD.solution), 1500, 600, 0, 1.0),
                                   _anthropic("ok", _fenced(ADD.solution), 1500, 600, 0, 1.5)],
        f"{SAXPY.id}|{REFINE_T}|1": [_anthropic("ok", _fenced(SAXPY.solution), 800, 300, 200, 1.5)],
        # the same file again once the first is judged: its verdict comes from the store
        f"{SAXPY.id}|{SAMPLE_T}|1": [_anthropic("ok", _fenced(SAXPY.solution), 800, 300, 0, 25.0)]}},
}}


HANG_ADD = (Path(__file__).parents[1] / "fixtures" / "candidates" / "add_hang_python.py").read_text()


class OtherClient:
    """Work on the agent from outside the sweep: a hanging candidate holds the agent's one worker
    and, just after it, an honest candidate waits for that worker, until :meth:`release` cancels
    the hang (cancelling frees the worker). The agent's queue is non-empty meanwhile, so the
    fleet's checks see it however the sweep's own calls interleave."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.outcome: tuple[BaseException | None, Status | None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._hang: asyncio.Future[Any] | None = None
        self._holding = threading.Event()
        self._thread = threading.Thread(target=self._run, name="other-client", daemon=True)

    def start(self) -> None:
        self._thread.start()
        assert self._holding.wait(30), "the other client never submitted its candidates"

    async def _both(self) -> tuple[BaseException | None, Status | None]:
        async with AgentClient(self.address) as c:
            self._loop = asyncio.get_running_loop()
            self._hang = asyncio.ensure_future(c.evaluate(
                EvalRequest("other-hang", ADD.id, HANG_ADD.encode()), timeout=280))
            await asyncio.sleep(0.5)  # the hang takes the worker; the honest one queues
            honest = asyncio.ensure_future(c.evaluate(
                EvalRequest("other-honest", ADD.id, ADD.solution.encode()), timeout=280))
            self._holding.set()
            hung = (await asyncio.gather(self._hang, return_exceptions=True))[0]
            return (hung if isinstance(hung, BaseException) else None), (await honest).status

    def _run(self) -> None:
        try:
            self.outcome = asyncio.run(self._both())
        finally:
            self._holding.set()

    def release(self) -> None:
        assert self._loop is not None and self._hang is not None
        self._loop.call_soon_threadsafe(self._hang.cancel)

    def join(self) -> tuple[BaseException | None, Status | None]:
        self._thread.join(timeout=240)
        assert self.outcome is not None, "the other client's evaluations never returned"
        return self.outcome


def _spec(path: Path, llm: FakeServer, agent: str, rogue: str) -> Path:
    path.write_text(f"""operators = ["{ADD.id}", "{SAXPY.id}"]
platforms = ["cpu"]

[sweep]
name = "prom"

[[endpoints]]
name = "coder"
kind = "openai"
base_url = "{llm.url('coder', 'openai')}"
api_key_env = ""
max_retries = 0
timeout_s = 60

[[endpoints]]
name = "reasoner"
kind = "anthropic"
base_url = "{llm.url('reasoner', 'anthropic')}"
api_key_env = ""
max_retries = 1
backoff_base_s = 0.05
timeout_s = 60

[[models]]
name = "{CODER}"
endpoint = "coder"
model = "{CODER}"
max_tokens = 4096
prices = {{ prompt = 1.0, completion = 4.0, cached_prompt = 0.5 }}

[[models]]
name = "{REASONER}"
endpoint = "reasoner"
model = "{REASONER}"
max_tokens = 4096
prices = {{ prompt = 3.0, completion = 15.0 }}

[[methods]]
name = "refine"
turns = 2
temperature = {REFINE_T}

[[methods]]
name = "sample"
n = 1
temperature = {SAMPLE_T}

[[agents]]
address = "{DEAD_AGENT}"
platform = "cpu"

[[agents]]
address = "{agent}"
platform = "cpu"

[[agents]]
address = "{rogue}"
platform = "cpu"

[budgets]
trajectory_max_tokens = 3000
""")
    return path


# -- getting Prometheus: fail in CI and as root, skip elsewhere ----------------------------------


def test_missing_prometheus_fails_as_root_or_in_ci_and_skips_elsewhere(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # neither prometheus nor apt-get
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(pytest.skip.Exception, match="apt-get install -y prometheus"):
        _prometheus_binary()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="Prometheus is required here"):
        _prometheus_binary()
    monkeypatch.delenv("CI")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    with pytest.raises(pytest.fail.Exception, match="Prometheus is required here"):
        _prometheus_binary()


def test_root_installs_prometheus_with_apt_get_updating_once_if_needed(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A fake apt-get whose first install fails (stale lists) until ``update`` ran."""
    calls = tmp_path / "calls"
    apt = tmp_path / "apt-get"
    apt.write_text(f"""#!/bin/sh
echo "$*" >> {calls}
case "$1" in
  update) touch {tmp_path}/updated ;;
  install) [ -e {tmp_path}/updated ] || {{ echo "E: Unable to locate package" >&2; exit 100; }}
           : > {tmp_path}/prometheus; chmod +x {tmp_path}/prometheus ;;
esac
""")
    apt.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/bin:/usr/bin")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda name: (
        str(tmp_path / name) if (tmp_path / name).exists() else None))
    assert _prometheus_binary() == str(tmp_path / "prometheus")
    assert calls.read_text().splitlines() == [
        "install -y --no-install-recommends prometheus", "update",
        "install -y --no-install-recommends prometheus"]


# -- the test -----------------------------------------------------------------------------------


def _substitute(expr: str) -> str:
    """Grafana's variables as the dashboard's defaults resolve them: All (``.*``) and a window."""
    expr = re.sub(r"\$\{?__(rate_interval|range|interval)\}?", WINDOW, expr)
    return re.sub(r"\$\{?(platform|model|method)\}?", ".*", expr)


def _finite(rows: list[dict[str, Any]]) -> bool:
    return any(math.isfinite(float(r["value"][1])) for r in rows)


def _label_values(prom: Prometheus, query: str) -> list[str]:
    m = re.fullmatch(r"label_values\((.+),\s*([a-zA-Z_]+)\)", query)
    assert m, query
    return list(prom.get(f"/api/v1/label/{m.group(2)}/values", **{"match[]": [m.group(1)]}))


def _wait_for(prom: Prometheus, expr: str, what: str, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while not prom.query(expr):
        assert time.monotonic() < end, f"{what}: no data for {expr}\n{prom.log_tail()}"
        time.sleep(0.5)


def test_every_dashboard_query_returns_data_from_a_real_prometheus(
        tmp_path: Path, agent_secret_env: None) -> None:
    coordinator = f"127.0.0.1:{_free_port()}"
    sweep: subprocess.Popen[str] | None = None
    try:
        with metrics_agent(tmp_path / "agent.log", workers=1, serving=False) as agent, \
                fake_server(SCRIPT, tmp_path) as llm, \
                prometheus_server(tmp_path, coordinator,
                                  urllib.parse.urlsplit(agent.metrics_url).netloc) as prom, \
                fake_in_thread(passes_another_candidate) as (rogue, _):
            asyncio.run(agent.agent.wait_serving(timeout=180))
            _wait_for(prom, 'kgb_agent_serving{job="kgb-agent"} == 1', "agent scraped while serving")
            other = OtherClient(agent.address)
            other.start()
            spec = _spec(tmp_path / "sweep.toml", llm, agent.address, rogue)
            sweep = kgb("sweep", "run", str(spec), "--metrics-port", coordinator.split(":")[1],
                        "--no-progress", "--metrics-linger", "300")
            _wait_for(prom, 'up{job="kgb-coordinator"} == 1', "coordinator scraped")
            _wait_for(prom, "max(max_over_time(kgb_fleet_queue_depth[5m])) > 0",
                      "the fleet saw the agent's queue", timeout=90)
            other.release()
            db = tmp_path / "runs" / "prom" / DB_NAME
            wait_for(lambda: _state(db) not in (None, "running"), 300, "the sweep to end")
            # the INFRA_ERROR trajectory (an interpreter limit) leaves the run resumable
            assert _state(db) == "incomplete"
            store = Store(db)
            try:
                results = store.trajectory_results("prom")
                verdicts = {r[0] for r in store.db.execute("SELECT status FROM verdicts")}
            finally:
                store.close()
            ends = sorted(r.end_reason for r in results)
            assert ends == ["BUDGET_SPENT", "CANDIDATE", "CANDIDATE", "EXTRACTION_FAILED",
                            "INFRA_ERROR", "LLM_ERROR", "SOLVED", "SOLVED"], \
                [(str(r.key), r.end_reason, r.detail) for r in results]
            assert {"COMPILE_ERROR", "WRONG_ANSWER", "PASSED"} <= verdicts, verdicts
            hung, honest = other.join()
            assert isinstance(hung, asyncio.CancelledError) and honest is Status.PASSED, (hung, honest)

            # Every coordinator metric was non-zero at some scrape.
            for name, (kind, _) in catalogue(SweepMetrics()).items():
                series = name + "_count" if kind == "histogram" else name
                _wait_for(prom, f"max(max_over_time({series}[{WINDOW}])) > 0", f"{name} moved")
            for expr in ('count(sum by (kind) (kgb_llm_tokens_total) > 0) == 4',
                         'count(sum by (status) (kgb_llm_requests_total) > 0) == 4',
                         'count(sum by (status) (kgb_candidates_total) > 0) == 4',
                         'count(sum by (source) (kgb_candidates_total) > 0) == 2',
                         'count(sum by (end_reason) (kgb_trajectories_total) > 0) == 6',
                         f'count(max_over_time(kgb_sweep_in_flight[{WINDOW}]) > 0) == 2',
                         'sum(kgb_verdicts_reused_total) >= 1',
                         'sum(kgb_fleet_agents_up) == 1 and sum(kgb_fleet_agents) == 3',
                         'sum(kgb_fleet_integrity_alarms_total{alarm="mismatch"}) == 1',
                         'sum(kgb_agent_evaluations_total{status="PASSED"}) >= 1'):
                _wait_for(prom, expr, "the workload's coverage", timeout=15)

            # Every dashboard expression and variable answers (the last scrapes may lag).
            failing: dict[str, Any] = {}
            end = time.monotonic() + 30
            pending = [(title, _substitute(expr)) for title, expr in expressions()]
            while pending:
                failing = {}
                for title, expr in pending:
                    rows = prom.query(expr)
                    if not _finite(rows):
                        failing[f"{title}: {expr}"] = rows
                pending = [(t, e) for t, e in pending if f"{t}: {e}" in failing]
                if not pending or time.monotonic() > end:
                    break
                time.sleep(1.0)
            assert not failing, f"dashboard queries without a finite value: {failing}"
            for name, query in variable_queries().items():
                assert _label_values(prom, query), f"variable {name}: {query} has no values"
            assert set(_label_values(prom, variable_queries()["model"])) == {CODER, REASONER}
    finally:
        if sweep is not None:
            sweep.terminate()
            try:
                sweep.wait(30)
            except subprocess.TimeoutExpired:
                sweep.kill()


def _state(db: Path) -> str | None:
    if not db.is_file():
        return None
    store = Store(db)
    try:
        st = store.run_state("prom")
    finally:
        store.close()
    return st[0] if st else None
