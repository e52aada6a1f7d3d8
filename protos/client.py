"""An asyncio client for a device agent, speaking domain records.

Used by ``kgb eval``, the coordinator and generator methods that need verdicts. One channel per
client, reused for every call. System failures raise :class:`AgentError` subclasses; candidate
failures are verdicts. An agent that wants TLS or a bearer token is dialled with a
:class:`~protos.security.ClientAuth` (docs/auth.md).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from types import TracebackType

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from protos import convert
from protos.kgb.agent.v1 import agent_pb2, agent_pb2_grpc
from protos.records import AgentDescription, EvalRequest, Progress, Verdict
from protos.security import ClientAuth, channel

SERVICE_NAME = "kgb.agent.v1.DeviceAgent"
MAX_MESSAGE_BYTES = 64 * 1024 * 1024


class AgentError(RuntimeError):
    """The agent could not produce a verdict (the system's failure, not the candidate's)."""


class AgentUnreachable(AgentError):
    pass


class AgentBusy(AgentError):
    """RESOURCE_EXHAUSTED: the agent's queue is full, or the caller's tenant is over a quota;
    retry after ``retry_after_s``."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class BadRequest(AgentError):
    """INVALID_ARGUMENT: unknown operator, wrong version, oversize source, no deadline, a request
    id reused for other content ..."""


class NotAuthorized(AgentError):
    """UNAUTHENTICATED or PERMISSION_DENIED: no token, a wrong one, or a refused certificate."""


def _translate(exc: grpc.aio.AioRpcError, address: str) -> AgentError:
    code = exc.code()
    detail = exc.details() or code.name
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return BadRequest(detail)
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        retry = 1.0
        for k, v in exc.trailing_metadata() or ():
            if k == "retry-after-ms":
                retry = float(v) / 1000.0
        return AgentBusy(detail, retry)
    if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
        return NotAuthorized(f"agent at {address}: {code.name}: {detail}")
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return AgentUnreachable(f"agent at {address}: {code.name}: {detail}")
    return AgentError(f"agent at {address}: {code.name}: {detail}")


class AgentClient:
    def __init__(self, address: str, auth: ClientAuth | None = None) -> None:
        self.address = address
        self.channel = channel(address, auth, options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ])
        self._metadata = auth.metadata() if auth is not None else ()
        self._stub = agent_pb2_grpc.DeviceAgentStub(self.channel)
        self._health = health_pb2_grpc.HealthStub(self.channel)

    async def __aenter__(self) -> AgentClient:
        return self

    async def __aexit__(self, t: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        await self.channel.close()

    async def health(self, service: str = SERVICE_NAME, timeout: float = 2.0) -> str:
        """SERVING, NOT_SERVING, SERVICE_UNKNOWN or UNKNOWN."""
        try:
            resp = await self._health.Check(health_pb2.HealthCheckRequest(service=service),
                                            timeout=timeout, metadata=self._metadata)
        except grpc.aio.AioRpcError as exc:
            raise _translate(exc, self.address) from None
        return str(health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status))

    async def wait_serving(self, timeout: float, proc_alive: object = None) -> None:
        """Wait until the agent reports SERVING (its workers are warm)."""
        end = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < end:
            if callable(proc_alive) and not proc_alive():
                raise AgentUnreachable(f"agent at {self.address} exited before it was ready")
            try:
                status = await self.health(timeout=min(2.0, max(0.1, end - time.monotonic())))
                if status == "SERVING":
                    return
                last = status
            except AgentError as exc:
                last = str(exc)
            await asyncio.sleep(0.2)
        raise AgentUnreachable(f"agent at {self.address} not SERVING after {timeout:.0f}s ({last})")

    async def describe(self, timeout: float = 10.0) -> AgentDescription:
        try:
            resp = await self._stub.Describe(agent_pb2.DescribeRequest(), timeout=timeout,
                                             metadata=self._metadata)
        except grpc.aio.AioRpcError as exc:
            raise _translate(exc, self.address) from None
        return convert.description_from_proto(resp)

    async def evaluate(self, req: EvalRequest, timeout: float) -> Verdict:
        try:
            resp = await self._stub.Evaluate(convert.request_to_proto(req), timeout=timeout,
                                             metadata=self._metadata)
        except grpc.aio.AioRpcError as exc:
            raise _translate(exc, self.address) from None
        return convert.verdict_from_proto(resp)

    async def evaluate_stream(self, req: EvalRequest,
                              timeout: float) -> AsyncIterator[Progress | Verdict]:
        call = self._stub.EvaluateStream(convert.request_to_proto(req), timeout=timeout,
                                         metadata=self._metadata)
        try:
            async for event in call:
                yield convert.event_from_proto(event)
        except grpc.aio.AioRpcError as exc:
            raise _translate(exc, self.address) from None
