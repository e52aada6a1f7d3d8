"""The agent's Prometheus endpoint (``--metrics-port``) on a real cpu agent, and its parts."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

import operators
from device_agent.evaluation import _stage_seconds
from device_agent.metrics import STAGES, AgentMetrics
from operators.aten.add import NEGATIVE_NO_ALPHA
from protos.client import AgentClient, BadRequest
from protos.records import EvalRequest, Status, Verdict
from tests.deploy.helpers import metrics_agent, sample, scrape

REPO = Path(__file__).resolve().parents[2]
ADD = operators.get("aten::add")


def test_stage_seconds_end_each_stage_when_the_next_begins() -> None:
    marks = [("static", 10.0), ("queued", 10.5), ("inputs", 11.0), ("queued", 11.5),
             ("load", 14.0), ("correctness", 15.0), ("done", 19.0), ("cleanup", 19.0)]
    assert _stage_seconds(marks, end=21.0) == {
        "static": 0.5, "queued": 3.0, "inputs": 0.5, "load": 1.0, "correctness": 4.0,
        "cleanup": 2.0}
    assert set(_stage_seconds(marks, 21.0)) <= set(STAGES)
    assert _stage_seconds([("static", 1.0)], end=1.25) == {"static": 0.25}
    assert _stage_seconds([("static", 1.0), ("done", 2.0)], 3.0, keep_done=True) == {
        "static": 1.0, "done": 1.0}


@dataclass
class _Pool:
    device_index: int
    busy: int = 0
    waiting: int = 0
    ready_count: int = 0
    starting: int = 0


def test_pool_gauges_are_read_at_scrape_time() -> None:
    m = AgentMetrics("cuda")
    pools = [_Pool(0), _Pool(1)]
    admitted = [0]
    m.watch(pools, lambda: admitted[0], max_queue=8)
    pools[1].waiting, pools[1].busy, pools[1].ready_count, pools[1].starting = 3, 4, 1, 2
    admitted[0] = 7
    v = m.registry.get_sample_value
    assert v("kgb_agent_queue_depth", {"platform": "cuda", "device": "1"}) == 3
    assert v("kgb_agent_running", {"platform": "cuda", "device": "1"}) == 4
    assert v("kgb_agent_queue_depth", {"platform": "cuda", "device": "0"}) == 0
    assert {s: v("kgb_agent_workers", {"platform": "cuda", "device": "1", "state": s})
            for s in ("ready", "busy", "starting")} == {"ready": 1, "busy": 4, "starting": 2}
    assert v("kgb_agent_admitted", {"platform": "cuda"}) == 7
    assert v("kgb_agent_max_queue", {"platform": "cuda"}) == 8
    m.timing_lock_waited(1, 0.2)
    m.evaluated(Status.PASSED, {"load": 1.0, "timing": 3.0, "bogus": 9.0})
    assert v("kgb_agent_timing_lock_wait_seconds_sum", {"platform": "cuda", "device": "1"}) == 0.2
    assert v("kgb_agent_stage_seconds_sum", {"platform": "cuda", "stage": "timing"}) == 3.0
    assert v("kgb_agent_stage_seconds_count", {"platform": "cuda", "stage": "bogus"}) is None


def test_agent_exports_evaluations_stages_queues_and_workers(tmp_path: Path,
                                                             agent_secret_env: None) -> None:
    """One worker, two candidates at once: the second waits, which the queue gauge must show."""
    with metrics_agent(tmp_path / "agent.log", workers=1) as agent:
        url = agent.metrics_url
        first = scrape(url)
        assert sample(first, "kgb_agent_serving", platform="cpu") == 1
        assert sample(first, "kgb_agent_workers", platform="cpu", device="0", state="ready") == 1
        assert sample(first, "kgb_agent_max_queue", platform="cpu") == 256
        info = [s for s in first["kgb_agent_info"].samples if s.value == 1]
        assert len(info) == 1 and info[0].labels["device_model"] not in ("", "unknown")
        assert all(sample(first, "kgb_agent_evaluations_total", platform="cpu", status=s.value) == 0
                   for s in Status)

        async def go() -> tuple[list[Verdict], bool]:
            async with AgentClient(agent.address) as client:
                with pytest.raises(BadRequest):
                    await client.evaluate(EvalRequest("bad", "aten::nope", b"x = 1"), timeout=30)
                tasks = [asyncio.ensure_future(client.evaluate(
                    EvalRequest(f"r{i}", "aten::add", src.encode()), timeout=240))
                    for i, src in enumerate((ADD.solution, NEGATIVE_NO_ALPHA, "def add(:\n"))]
                seen_queue = False
                while not all(t.done() for t in tasks[:2]):
                    now = await asyncio.to_thread(scrape, url)
                    if (sample(now, "kgb_agent_queue_depth", platform="cpu", device="0") == 1
                            and sample(now, "kgb_agent_running", platform="cpu", device="0") == 1
                            and sample(now, "kgb_agent_admitted", platform="cpu") == 2):
                        seen_queue = True
                    await asyncio.sleep(0.2)
                return list(await asyncio.gather(*tasks)), seen_queue

        verdicts, seen_queue = asyncio.run(go())
        assert [v.status for v in verdicts] == [Status.PASSED, Status.WRONG_ANSWER,
                                                Status.COMPILE_ERROR]
        assert seen_queue, "never saw one evaluation running and one queued"
        end = time.monotonic() + 120  # replacement workers start after each one is used
        while True:
            last = scrape(url)
            restarts = sample(last, "kgb_agent_worker_restarts_total", platform="cpu", device="0")
            if restarts == 2 or time.monotonic() > end:
                break
            time.sleep(0.5)
        assert restarts == 2, agent.agent.log_tail()
        assert sample(last, "kgb_agent_worker_start_seconds_count", platform="cpu") == 2
        assert sample(last, "kgb_agent_worker_start_failures_total", platform="cpu", device="0") == 0
        for status, n in ((Status.PASSED, 1), (Status.WRONG_ANSWER, 1), (Status.COMPILE_ERROR, 1),
                          (Status.RUNTIME_ERROR, 0)):
            assert sample(last, "kgb_agent_evaluations_total", platform="cpu",
                          status=status.value) == n
        assert sample(last, "kgb_agent_rejected_total", platform="cpu",
                      reason="invalid_argument") == 1
        counts = {s: sample(last, "kgb_agent_stage_seconds_count", platform="cpu", stage=s)
                  for s in STAGES}
        # The syntax error stops at the static stage; cpu never times.
        assert counts == {"static": 3, "inputs": 2, "queued": 2, "load": 2, "correctness": 2,
                          "timing": 0, "cleanup": 2}
        queued = sample(last, "kgb_agent_stage_seconds_sum", platform="cpu", stage="queued")
        assert queued is not None and queued > 0.5  # the second candidate waited for the worker
        assert sample(last, "kgb_agent_timing_lock_wait_seconds_count", platform="cpu",
                      device="0") == 0
        # The two used workers' CPU, read from /proc: starting (forked from the preloaded
        # forkserver: tens of ms) and running their candidates through the interpreter (seconds)
        # both cost some; the cpu platform runs no compiler.
        cpu = {(ph, pa): sample(last, "kgb_agent_worker_cpu_seconds_total", platform="cpu",
                                device="0", phase=ph, part=pa)
               for ph in ("start", "job") for pa in ("own", "compilers")}
        assert cpu[("start", "own")] > 0 and cpu[("job", "own")] > 0.1, cpu
        assert cpu[("start", "compilers")] == cpu[("job", "compilers")] == 0, cpu
        assert sample(last, "kgb_agent_queue_depth", platform="cpu", device="0") == 0
        assert sample(last, "kgb_agent_admitted", platform="cpu") == 0


def test_metrics_port_is_checked_and_a_taken_port_is_reported(agent_secret_env: None) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    bad = subprocess.run([sys.executable, "-m", "device_agent", "serve", "--metrics-port", "70000"],
                         capture_output=True, text=True, timeout=60, env=env)
    assert bad.returncode == 2 and "--metrics-port must be 0-65535" in bad.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "device_agent", "serve", "--platform", "cpu",
                            "--port", "0", "--metrics-port", str(port)],
                           capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 1, r.stderr
    assert f"cannot serve metrics on 127.0.0.1:{port}" in r.stderr
    assert "choose another --metrics-port" in r.stderr
