"""In-process fake device agents for fleet tests: a scripted ``Evaluate``, health that can be
made to fail, and a ``Describe`` with the device model and load a test asks for.

Honest fakes answer with :func:`honest_verdict` (what was sent, echoed); rogue ones (see
``test_fleet_integrity.py``) answer otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

import operators
from protos import convert
from protos.kgb.agent.v1 import agent_pb2_grpc
from protos.records import AgentDescription, DeviceInfo, EvalRequest, Status, SystemInfo, Verdict

Behaviour = Callable[[EvalRequest, grpc.aio.ServicerContext], Awaitable[Verdict]]
FAKE_MODEL = "cpu (fake)"
ADD = operators.get("aten::add")


class FakeAgent(agent_pb2_grpc.DeviceAgentServicer, health_pb2_grpc.HealthServicer):  # type: ignore[misc]
    """A DeviceAgent whose Evaluate a test scripts; its health check can be made to fail."""

    def __init__(self, behaviour: Behaviour, busy: int = 0, model: str = FAKE_MODEL,
                 platform: str = "cpu") -> None:
        self.behaviour = behaviour
        self.platform = platform
        self.busy = busy
        self.model = model
        self.calls: list[str] = []
        self.unhealthy = False
        self.baselines: dict[str, str] = {}  # what its Describe says the baselines are

    async def Check(self, request: health_pb2.HealthCheckRequest,
                    context: grpc.aio.ServicerContext) -> health_pb2.HealthCheckResponse:
        if self.unhealthy:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "fake: not answering")
        return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)

    async def Describe(self, request: object, context: grpc.aio.ServicerContext) -> object:
        suite = tuple((s.id, s.version) for s in operators.all_specs())
        return convert.description_to_proto(AgentDescription(
            agent_id="fake", harness_version="test",
            system=SystemInfo(platform=self.platform, device_model=self.model, baselines=self.baselines),
            devices=(DeviceInfo(0, self.model, capacity=1, busy=self.busy),), suite=suite,
            capacity=1, queue_depth=0, max_queue=8, timings_meaningful=False))

    async def Evaluate(self, request: object, context: grpc.aio.ServicerContext) -> object:
        req = convert.request_from_proto(request)  # type: ignore[arg-type]
        self.calls.append(req.request_id)
        return convert.verdict_to_proto(await self.behaviour(req, context))


@contextlib.asynccontextmanager
async def fake(behaviour: Behaviour, busy: int = 0, model: str = FAKE_MODEL,
               platform: str = "cpu") -> AsyncIterator[tuple[str, FakeAgent]]:
    agent = FakeAgent(behaviour, busy, model, platform)
    server = grpc.aio.server()
    agent_pb2_grpc.add_DeviceAgentServicer_to_server(agent, server)
    health_pb2_grpc.add_HealthServicer_to_server(agent, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}", agent
    finally:
        await server.stop(0)


@contextlib.contextmanager
def fake_in_thread(behaviour: Behaviour, model: str = FAKE_MODEL,
                   platform: str = "cpu") -> Iterator[tuple[str, FakeAgent]]:
    """:func:`fake` served from its own thread and event loop, for code under test that blocks
    (Ray drivers, CLI commands that call ``asyncio.run``)."""
    loop = asyncio.new_event_loop()
    ready: asyncio.Future[tuple[str, FakeAgent]] = loop.create_future()
    stop = asyncio.Event()

    async def serve() -> None:
        async with fake(behaviour, model=model, platform=platform) as served:
            ready.set_result(served)
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    try:
        yield asyncio.run_coroutine_threadsafe(_wait(ready), loop).result(timeout=10)
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=10)
        loop.close()


async def _wait(future: asyncio.Future[tuple[str, FakeAgent]]) -> tuple[str, FakeAgent]:
    return await future


def honest_verdict(req: EvalRequest, status: Status, message: str = "",
                   model: str = FAKE_MODEL) -> Verdict:
    """What an honest agent says about ``req``: the operator, version, candidate hash and
    evaluation mode (public only or not) it was sent and the device model it describes."""
    version = req.operator_version if req.operator_version is not None else \
        operators.get(req.operator_id).version
    return Verdict(status=status, operator_id=req.operator_id, operator_version=version,
                   candidate_hash=hashlib.sha256(req.source).hexdigest(),
                   request_id=req.request_id, device_model=model, message=message,
                   public_only=req.public_only)


async def passes_another_candidate(req: EvalRequest, context: grpc.aio.ServicerContext) -> Verdict:
    """A rogue: PASSED for anything, about a candidate it was not sent."""
    v = honest_verdict(req, Status.PASSED)
    return Verdict(status=v.status, operator_id=v.operator_id, operator_version=v.operator_version,
                   candidate_hash=hashlib.sha256(b"another " + req.source).hexdigest(),
                   request_id=v.request_id, device_model=v.device_model)
