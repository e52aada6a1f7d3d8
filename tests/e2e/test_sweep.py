"""End to end: a real agent on loopback, a sweep through Ray, verdicts checked in the store.

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
from coordinator.store import Store
from coordinator.sweep import MethodSpec, SweepConfig, init_ray, run_sweep
from protos.client import AgentClient
from protos.records import AgentDescription

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
    config = SweepConfig(run_id="e2e", operators=FOUNDATION,
                         methods=(MethodSpec("reference"),
                                  MethodSpec("replay", (("path", str(replay)),))))
    store = Store.open_run(tmp_path / "runs" / "e2e")
    desc = _describe(cpu_agent)
    summary = run_sweep(config, cpu_agent, desc, store)
    assert summary.trajectories == len(FOUNDATION) + len(lines)
    assert summary.infra_errors == 0 and summary.evaluated == summary.trajectories

    rows = store.trajectories("e2e")
    assert len(rows) == summary.trajectories
    for r in rows:
        assert r.verdict is not None, r
        expected = ("PASSED" if r.method == "reference" else
                    "COMPILE_ERROR" if r.label == "syntax-error" else "WRONG_ANSWER")
        assert r.verdict.status.value == expected, (r.operator_id, r.label, r.verdict.message)
        assert r.verdict.device_model == desc.system.device_model

    # The same sweep again: every verdict comes from the store, nothing is re-evaluated.
    again = run_sweep(SweepConfig(run_id="e2e-again", operators=config.operators,
                                  methods=config.methods), cpu_agent, desc, store)
    assert again.reused == again.trajectories and again.evaluated == 0

    # kgb report reads the stored run.
    result = CliRunner().invoke(kgb, ["report", "e2e", "--runs-dir", str(tmp_path / "runs"),
                                      "--json"])
    assert result.exit_code == 0
    statuses = [orjson.loads(x)["status"] for x in result.stdout.splitlines()]
    assert statuses.count("PASSED") == len(FOUNDATION)
    assert statuses.count("WRONG_ANSWER") == len(lines) - 1
