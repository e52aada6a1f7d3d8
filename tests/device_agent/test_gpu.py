"""On a GPU: every reference solution passes on the cuda platform with meaningful timings."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest

import operators
from coordinator.local_agent import LocalAgent
from protos.client import AgentClient
from protos.records import EvalRequest, Status

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cuda_agent(agent_secret_env: None) -> Iterator[str]:
    agent = LocalAgent(platform="cuda")
    address = agent.start()
    try:
        asyncio.run(agent.wait_serving(timeout=300))
        yield address
    finally:
        agent.stop()


@pytest.mark.parametrize("spec", operators.all_specs(), ids=lambda s: s.id)
def test_reference_passes_with_real_timings(cuda_agent: str, spec: operators.OperatorSpec) -> None:
    async def go() -> None:
        async with AgentClient(cuda_agent) as c:
            v = await c.evaluate(EvalRequest(uuid.uuid4().hex, spec.id, spec.solution.encode()),
                                 timeout=600)
            assert v.status is Status.PASSED, (v.message, v.log[-2000:])
            assert v.system.platform == "cuda" and v.device_model
            assert v.timings and all(t.meaningful and t.median_us and t.median_us > 0
                                     for t in v.timings)
            assert all(t.baseline_median_us and t.speedup for t in v.timings)

    asyncio.run(go())


def test_sticky_device_error_is_contained(cuda_agent: str) -> None:
    from pathlib import Path

    bad = (Path(__file__).resolve().parent.parent / "fixtures" / "candidates"
           / "add_sticky_device_error.py").read_bytes()
    spec = operators.get("aten::add")

    async def go() -> None:
        async with AgentClient(cuda_agent) as c:
            v = await c.evaluate(EvalRequest(uuid.uuid4().hex, spec.id, bad), timeout=300)
            assert v.status is Status.RUNTIME_ERROR, v.message
            ok = await c.evaluate(EvalRequest(uuid.uuid4().hex, spec.id, spec.solution.encode()),
                                  timeout=600)
            assert ok.status is Status.PASSED, ok.message

    asyncio.run(go())


def test_peak_measurement_is_plausible() -> None:
    from device_agent import peaks
    from device_agent.platforms.cuda import DATASHEET, CudaPlatform

    m = peaks.measure("cuda")
    sheet = DATASHEET.get(CudaPlatform().device_model())
    assert m["bandwidth_gbps"] > 500 and all(v > 1 for v in m["tflops"].values())
    if sheet is not None:
        assert peaks.believable(m, sheet.bandwidth_gbps)
        assert m["bandwidth_gbps"] > 0.6 * sheet.bandwidth_gbps
