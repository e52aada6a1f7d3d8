"""Bad input (issue #28): ``EvaluateRequest`` carries the platform its sender routed for; an agent
of another platform answers INVALID_ARGUMENT, and its own platform (or none) is judged."""

from __future__ import annotations

import asyncio

import pytest

import operators
from protos.client import AgentClient, BadRequest
from protos.records import EvalRequest, Status

ADD = operators.get("aten::add")


def test_a_request_for_another_platform_is_invalid_argument(cpu_agent: str) -> None:
    async def go() -> None:
        async with AgentClient(cpu_agent) as c:
            with pytest.raises(BadRequest, match="serves platform 'cpu', not 'rocm'"):
                await c.evaluate(EvalRequest("misrouted-1", ADD.id, ADD.solution.encode(),
                                             platform="rocm"), timeout=120)
            v = await c.evaluate(EvalRequest("misrouted-2", ADD.id, ADD.solution.encode(),
                                             platform="cpu"), timeout=300)
            assert v.status is Status.PASSED, v.message

    asyncio.run(go())
