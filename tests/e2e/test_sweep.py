"""End to end: a real agent on loopback, ``kgb run``'s sweep through Ray, verdicts checked in
the store.

The eight reference solutions must PASS, every negative control must be WRONG_ANSWER, a syntax
error COMPILE_ERROR; running the sweep again reuses every stored verdict.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

import operators
from coordinator.cli import kgb
from coordinator.engine import SweepProgress, init_ray, run_sweep
from coordinator.local_run import local_sweep
from coordinator.store import Store
from protos.client import AgentClient
from protos.records import AgentDescription, Status

FOUNDATION = ("aten::add", "aten::softmax", "aten::mm", "aten::cumsum", "vllm::rms_norm",
              "vllm::rotary_embedding", "cublas::cublasSaxpy_v2", "cublas::cublasSgemm_v2")


@pytest.fixture(scope="module")
def ray_local() -> Iterator[None]:
    import ray

    init_ray(num_cpus=2)
    yield
    ray.shutdown()


def _describe(address: str) -> AgentDescription:
    async def go() -> AgentDescription:
        async with AgentClient(address) as c:
            return await c.describe()

    return asyncio.run(go())


def _sweep(run_id: str, store_dir: Path, methods: list[tuple[str, dict[str, str]]],
           agent: str) -> tuple[SweepProgress, int, int]:
    """(totals, verdicts evaluated now, verdicts reused from the store) of a local run."""
    spec, options = local_sweep(run_id, store_dir, FOUNDATION, methods, "cpu", agent)
    seen: list[tuple[Status, bool]] = []
    state, progress = asyncio.run(run_sweep(
        spec, options, on_outcome=lambda o, _: seen.extend((v.status, r) for v, r in o.verdicts)))
    assert state == "complete", progress
    assert all(s is not Status.INFRA_ERROR for s, _ in seen)
    return progress, sum(not r for _, r in seen), sum(r for _, r in seen)


def test_sweep_through_ray_stores_expected_verdicts(cpu_agent: str, ray_local: None,
                                                    tmp_path: Path) -> None:
    replay = tmp_path / "controls.jsonl"
    lines = []
    for op in FOUNDATION:
        for neg in operators.get(op).negatives:
            lines.append({"operator": op, "source": neg.source, "label": f"negative:{neg.name}"})
    lines.append({"operator": "aten::add", "source": "def add_Tensor(self, other:\n",
                  "label": "syntax-error"})
    replay.write_bytes(b"\n".join(orjson.dumps(x) for x in lines) + b"\n")
    methods = [("reference", {}), ("replay", {"path": str(replay)})]
    store_dir = tmp_path / "runs" / "e2e"
    progress, evaluated, reused = _sweep("e2e", store_dir, methods, cpu_agent)
    assert progress.planned == len(FOUNDATION) + len(lines)
    assert progress.infra == 0 and evaluated == progress.planned and reused == 0

    desc = _describe(cpu_agent)
    store = Store.open_run(store_dir)
    rows = store.trajectories("e2e")
    assert len(rows) == progress.planned
    for r in rows:
        assert r.verdict is not None, r
        expected = ("PASSED" if r.method == "reference" else
                    "COMPILE_ERROR" if r.label == "syntax-error" else "WRONG_ANSWER")
        assert r.verdict.status.value == expected, (r.operator_id, r.label, r.verdict.message)
        assert r.verdict.device_model == desc.system.device_model
    store.close()

    # The same sweep again: every verdict comes from the store, nothing is re-evaluated.
    again, evaluated, reused = _sweep("e2e-again", store_dir, methods, cpu_agent)
    assert reused == again.planned and evaluated == 0

    # kgb report reads the stored run.
    result = CliRunner().invoke(kgb, ["report", "e2e", "--runs-dir", str(tmp_path / "runs"),
                                      "--json"])
    assert result.exit_code == 0
    statuses = [orjson.loads(x)["status"] for x in result.stdout.splitlines()]
    assert statuses.count("PASSED") == len(FOUNDATION)
    assert statuses.count("WRONG_ANSWER") == len(lines) - 1
