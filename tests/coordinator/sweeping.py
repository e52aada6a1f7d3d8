"""Test helpers for sweeps: the loopback fake LLM, instant-verdict agents, specs, the CLI."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coordinator.local_agent import LocalAgent, with_repo_on_path

REPO = Path(__file__).resolve().parents[2]
FAKE_LLM = REPO / "bench" / "fake_llm.py"


@dataclass
class FakeLLM:
    proc: subprocess.Popen[str]
    port: int
    log: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats", timeout=10) as r:
            data: dict[str, Any] = json.loads(r.read())
        return data

    def billed(self) -> tuple[int, int]:
        """(billed replies, billed tokens) from its own log (flushed within half a second)."""
        time.sleep(0.8)
        lines = [json.loads(x) for x in self.log.read_text().splitlines() if x.strip()]
        return len(lines), sum(x["prompt_tokens"] + x["completion_tokens"] for x in lines)


@contextlib.contextmanager
def fake_llm(workdir: Path, *args: str) -> Iterator[FakeLLM]:
    log = workdir / "billing.jsonl"
    proc = subprocess.Popen([sys.executable, str(FAKE_LLM), "--log", str(log), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONPATH": with_repo_on_path(os.environ.get("PYTHONPATH"))})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("PORT "), line
        yield FakeLLM(proc, int(line.split()[1]), log)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextlib.contextmanager
def instant_agents(n: int, workdir: Path) -> Iterator[list[LocalAgent]]:
    """``n`` cpu agents in the instant-verdict test mode (static checks only, nothing runs)."""
    import asyncio

    agents = [LocalAgent(platform="cpu", workers=2, extra_args=("--instant-verdicts",),
                         log_path=workdir / f"agent{i}.log") for i in range(n)]
    try:
        for a in agents:
            a.start()
        for a in agents:
            asyncio.run(a.wait_serving(120))
        yield agents
    finally:
        for a in agents:
            a.stop()


def address(agent: LocalAgent) -> str:
    assert agent.address is not None
    return agent.address


def write_spec(path: Path, name: str, llm: FakeLLM | None, agents: list[str], *,
               operators: tuple[str, ...] = ("aten::add", "aten::mm"), samples: int = 3,
               methods: str = '[[methods]]\nname = "sample"\n', platform: str = "cpu",
               concurrency: int = 64, extra: str = "") -> Path:
    lines = [f'platforms = ["{platform}"]', f"operators = {json.dumps(list(operators))}",
             f"samples = {samples}", "", "[sweep]", f'name = "{name}"', "seed = 7", ""]
    if llm is not None:
        lines += ["[[endpoints]]", 'name = "fake"', 'kind = "openai"',
                  f'base_url = "{llm.base_url}"', 'api_key_env = ""', "max_retries = 3",
                  "backoff_base_s = 0.05", f"max_concurrency = {max(concurrency, 16)}", "",
                  "[[models]]", 'name = "fake-model"', 'endpoint = "fake"', 'model = "fake"',
                  "prices = { prompt = 1.0, completion = 2.0 }", ""]
    lines += [methods, ""]
    for a in agents:
        lines += ["[[agents]]", f'address = "{a}"', f'platform = "{platform}"', ""]
    lines += ["[concurrency]", f"generation_per_endpoint = {concurrency}", "", extra]
    path.write_text("\n".join(lines))
    return path


def kgb(*args: str, **kw: Any) -> subprocess.Popen[str]:
    """``kgb ARGS`` as its own process (a coordinator the test can signal or kill)."""
    env = {**os.environ, "PYTHONPATH": with_repo_on_path(os.environ.get("PYTHONPATH")),
           "RAY_AUTH_MODE": "disabled", "COLUMNS": "200"}
    return subprocess.Popen([sys.executable, "-m", "coordinator", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True,
                            **kw)


@contextlib.contextmanager
def process_group(proc: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    """Whatever happens, the coordinator's process group (Ray's processes) is killed after."""
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=30)


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")
