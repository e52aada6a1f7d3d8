"""Agent registration, the coordinator's ``kgb.coordinator.v1.Registry`` service: records,
conversion, client.

Agents announce themselves to a coordinator with it (``device_agent/registration.py``); the
coordinator serves it (``coordinator/fleet/registration.py``). As with the agent service, protobuf
stays on the wire: this module is the one place that reads or builds the registry's message
fields, and everything else uses the frozen dataclasses below.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import TracebackType

import grpc

from protos.kgb.coordinator.v1 import registry_pb2 as pb
from protos.kgb.coordinator.v1 import registry_pb2_grpc
from protos.security import ClientAuth, channel

SERVICE_NAME = "kgb.coordinator.v1.Registry"

_ADDRESS = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})")


def check_address(address: str) -> str:
    """``address`` if it is ``host:port`` (IPv6 in brackets), else ValueError saying why."""
    m = _ADDRESS.fullmatch(address)
    if not m or not 0 < int(m.group(2)) < 65536:
        raise ValueError(f"{address!r} is not host:port (e.g. 10.0.0.7:50151 or [::1]:50151)")
    return address


@dataclass(frozen=True)
class AgentLoad:
    """What an agent can take right now, as it reports it."""

    capacity: int = 0
    busy: int = 0
    queue_depth: int = 0
    draining: bool = False


@dataclass(frozen=True)
class Registration:
    agent_id: str
    address: str
    platform: str
    device_model: str
    harness_version: str
    load: AgentLoad = AgentLoad()

    def check(self) -> Registration:
        """Self, or ValueError naming the first malformed field (a registry must not route to
        an address it cannot parse)."""
        check_address(self.address)
        if not self.agent_id:
            raise ValueError("agent_id is empty")
        if not self.platform:
            raise ValueError("platform is empty")
        if self.load.capacity < 0 or self.load.busy < 0 or self.load.queue_depth < 0:
            raise ValueError(f"negative load: {self.load}")
        return self


@dataclass(frozen=True)
class Heartbeat:
    agent_id: str
    address: str
    load: AgentLoad = AgentLoad()


@dataclass(frozen=True)
class Lease:
    """How long a registration lives without a heartbeat, and how often to send one."""

    lease_s: float
    heartbeat_interval_s: float


# ---- conversion ------------------------------------------------------------------------------

def load_to_proto(load: AgentLoad) -> pb.AgentLoad:
    return pb.AgentLoad(capacity=load.capacity, busy=load.busy, queue_depth=load.queue_depth,
                        draining=load.draining)


def load_from_proto(m: pb.AgentLoad) -> AgentLoad:
    return AgentLoad(capacity=m.capacity, busy=m.busy, queue_depth=m.queue_depth, draining=m.draining)


def registration_to_proto(r: Registration) -> pb.RegisterRequest:
    return pb.RegisterRequest(agent_id=r.agent_id, address=r.address, platform=r.platform,
                              device_model=r.device_model, harness_version=r.harness_version,
                              load=load_to_proto(r.load))


def registration_from_proto(m: pb.RegisterRequest) -> Registration:
    return Registration(agent_id=m.agent_id, address=m.address, platform=m.platform,
                        device_model=m.device_model, harness_version=m.harness_version,
                        load=load_from_proto(m.load))


def heartbeat_to_proto(h: Heartbeat) -> pb.HeartbeatRequest:
    return pb.HeartbeatRequest(agent_id=h.agent_id, address=h.address, load=load_to_proto(h.load))


def heartbeat_from_proto(m: pb.HeartbeatRequest) -> Heartbeat:
    return Heartbeat(agent_id=m.agent_id, address=m.address, load=load_from_proto(m.load))


def lease_to_proto(lease: Lease) -> pb.Lease:
    return pb.Lease(lease_seconds=lease.lease_s, heartbeat_interval_seconds=lease.heartbeat_interval_s)


def lease_from_proto(m: pb.Lease) -> Lease:
    return Lease(lease_s=m.lease_seconds, heartbeat_interval_s=m.heartbeat_interval_seconds)


def register_response(lease: Lease) -> pb.RegisterResponse:
    return pb.RegisterResponse(lease=lease_to_proto(lease))


def heartbeat_response(lease: Lease) -> pb.HeartbeatResponse:
    return pb.HeartbeatResponse(lease=lease_to_proto(lease))


def deregister_request(agent_id: str, address: str) -> pb.DeregisterRequest:
    return pb.DeregisterRequest(agent_id=agent_id, address=address)


def deregister_from_proto(m: pb.DeregisterRequest) -> tuple[str, str]:
    """(agent id, address)."""
    return m.agent_id, m.address


def deregister_response() -> pb.DeregisterResponse:
    return pb.DeregisterResponse()


# ---- client ----------------------------------------------------------------------------------

class RegistryError(RuntimeError):
    """The registry did not take the call (the caller retries; it never stops an agent)."""


class RegistryUnreachable(RegistryError):
    pass


class UnknownAgent(RegistryError):
    """NOT_FOUND: the coordinator does not know this agent; register again."""


class RegistrationRefused(RegistryError):
    """INVALID_ARGUMENT: the registration is malformed (retrying the same one will not help);
    UNAUTHENTICATED: no valid token; PERMISSION_DENIED: the agent's address is registered by
    another tenant."""


def _translate(exc: grpc.aio.AioRpcError, address: str) -> RegistryError:
    code = exc.code()
    detail = exc.details() or code.name
    if code == grpc.StatusCode.NOT_FOUND:
        return UnknownAgent(detail)
    if code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNAUTHENTICATED,
                grpc.StatusCode.PERMISSION_DENIED):
        return RegistrationRefused(f"{code.name}: {detail}")
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return RegistryUnreachable(f"registry at {address}: {code.name}: {detail}")
    return RegistryError(f"registry at {address}: {code.name}: {detail}")


class RegistryClient:
    """An asyncio client of a coordinator's registry; every call takes a deadline.

    Reconnection back-off is capped at a few seconds (gRPC's default grows to two minutes), so
    an agent notices a restarted coordinator within one heartbeat or two. ``auth``: TLS and the
    bearer token the registry wants; heartbeats and deregistration must carry the token that
    registered the agent.
    """

    def __init__(self, address: str, auth: ClientAuth | None = None) -> None:
        self.address = address
        self.channel = channel(address, auth, options=[
            ("grpc.initial_reconnect_backoff_ms", 500),
            ("grpc.min_reconnect_backoff_ms", 500),
            ("grpc.max_reconnect_backoff_ms", 5000),
        ])
        self._metadata = auth.metadata() if auth is not None else ()
        self._stub = registry_pb2_grpc.RegistryStub(self.channel)

    async def __aenter__(self) -> RegistryClient:
        return self

    async def __aexit__(self, t: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        await self.channel.close()

    async def register(self, registration: Registration, timeout: float) -> Lease:
        try:
            resp = await self._stub.Register(registration_to_proto(registration), timeout=timeout,
                                             metadata=self._metadata)
        except grpc.aio.AioRpcError as exc:
            raise _translate(exc, self.address) from None
        return lease_from_proto(resp.lease)

    async def heartbeat(self, heartbeat: Heartbeat, timeout: float) -> Lease:
        try:
            resp = await self._stub.Heartbeat(heartbeat_to_proto(heartbeat), timeout=timeout,
                                              metadata=self._metadata)
        except grpc.aio.AioRpcError as exc:
            raise _translate(exc, self.address) from None
        return lease_from_proto(resp.lease)

    async def deregister(self, agent_id: str, address: str, timeout: float) -> None:
        try:
            await self._stub.Deregister(deregister_request(agent_id, address), timeout=timeout,
                                        metadata=self._metadata)
        except grpc.aio.AioRpcError as exc:
            raise _translate(exc, self.address) from None
