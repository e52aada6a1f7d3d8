"""Evaluated once (issue #21, point 6), end to end: ``kgb sweep run`` in its own process (Ray and
all) against the scripted LLM server, judged by a fake agent in this process that counts its
evaluations and says each took :data:`WALL_S`.

Six trajectories get two distinct candidates (three each, concurrently): the agent evaluates
each distinct candidate once, its evaluation count equals the store's new verdicts, and the
report counts GPU seconds once per evaluation with the reuses apart. A second sweep sharing the
store gets the same candidates again: no evaluation at all, every verdict a reuse.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import grpc
import orjson
import pytest

import operators
from coordinator.store import DB_NAME, Store
from protos.records import EvalRequest, Status, Verdict
from tests.coordinator.fake_agents import fake_in_thread, honest_verdict
from tests.coordinator.sweeping import kgb, write_spec
from tests.generators.fake_llm_server import fake_server
from tests.generators.llm_helpers import wire_usage

pytestmark = pytest.mark.usefixtures("agent_secret_env")

ADD = operators.get("aten::add")
WALL_S = 1.5
SAMPLES = 6


async def _slow_pass(req: EvalRequest, context: grpc.aio.ServicerContext) -> Verdict:
    await asyncio.sleep(0.5)  # long enough for identical candidates to meet in flight
    # the harness version the fake describes: the key a stored verdict is found under
    return replace(honest_verdict(req, Status.PASSED), wall_seconds=WALL_S, harness_version="test")


def _reply(tag: str) -> dict[str, Any]:
    code = f"{ADD.solution.strip()}\n# variant {tag}\n"
    return {"kind": "ok", "text": f"Here.\n\n```python\n{code}```\n",
            "usage": wire_usage("openai", 100, 50)}


def _sweep(tmp_path: Path, name: str, url: str, agent: str, store: Path) -> Path:
    path = write_spec(tmp_path / f"{name}.toml", name, SimpleNamespace(base_url=url),  # type: ignore[arg-type]
                      [agent], operators=(ADD.id,), samples=SAMPLES, concurrency=SAMPLES)
    path.write_text(path.read_text().replace(f'name = "{name}"',
                                             f'name = "{name}"\nstore = "{store}"'))
    return path


def _run(spec: Path) -> None:
    p = kgb("sweep", "run", str(spec), "--metrics-port", "0", "--no-progress")
    out, _ = p.communicate(timeout=300)
    assert p.returncode == 0, out


def _costs(store_dir: Path, run: str) -> dict[str, Any]:
    p = kgb("report", "--store", str(store_dir / DB_NAME), run, "--json")
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 0, out
    total: dict[str, Any] = orjson.loads(out.splitlines()[0])["cost_total"]
    return total


def _verdicts(store_dir: Path) -> int:
    store = Store(store_dir / DB_NAME)
    try:
        return int(store.db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0])
    finally:
        store.close()


def test_identical_candidates_are_evaluated_once_and_gpu_seconds_counted_once(
        tmp_path: Path) -> None:
    script = {"endpoints": {"ep": {"replies": [_reply(t) for t in "ababab"],
                                   "default": _reply("a")}}}
    store_dir = tmp_path / "shared-store"
    with fake_server(script, tmp_path) as server, fake_in_thread(_slow_pass) as (address, agent):
        url = server.url("ep", "openai")
        _run(_sweep(tmp_path, "first", url, address, store_dir))
        first = _costs(store_dir, "first")
        # two distinct candidates: two evaluations, two stored verdicts, four reuses
        assert len(agent.calls) == _verdicts(store_dir) == 2
        assert (first["trajectories"], first["reused_verdicts"]) == (SAMPLES, SAMPLES - 2)
        assert first["gpu_seconds"] == pytest.approx(2 * WALL_S)
        assert first["reused_gpu_seconds"] == pytest.approx((SAMPLES - 2) * WALL_S)

        # a second sweep sharing the store: every verdict comes from it, nothing is evaluated
        _run(_sweep(tmp_path, "second", url, address, store_dir))
        second = _costs(store_dir, "second")
        assert len(agent.calls) == _verdicts(store_dir) == 2
        assert (second["reused_verdicts"], second["gpu_seconds"]) == (SAMPLES, 0.0)
        assert second["reused_gpu_seconds"] == pytest.approx(SAMPLES * WALL_S)
