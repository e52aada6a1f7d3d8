"""The coordinator's agent registry: a gRPC server that feeds registrations into a :class:`Fleet`.

Agents started with ``kgb agent serve --register HOST:PORT`` call it (``device_agent/
registration.py``). It only tells the fleet that an agent exists, how loaded it is and whether
it is draining; the fleet checks each agent itself before routing work to it. There is no
authentication yet, so like an agent it listens on loopback unless told otherwise: anyone who
can reach it can offer an agent, and an agent's verdicts are trusted.
"""

from __future__ import annotations

import logging

import grpc

from coordinator.fleet import Fleet, UnknownAgentError
from protos import registry
from protos.kgb.coordinator.v1 import registry_pb2, registry_pb2_grpc

log = logging.getLogger(__name__)


class RegistryServicer(registry_pb2_grpc.RegistryServicer):  # type: ignore[misc]
    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet

    async def Register(self, request: registry_pb2.RegisterRequest,
                       context: grpc.aio.ServicerContext) -> registry_pb2.RegisterResponse:
        try:
            lease = self.fleet.register(registry.registration_from_proto(request))
        except ValueError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"bad registration: {exc}")
            raise
        return registry.register_response(lease)

    async def Heartbeat(self, request: registry_pb2.HeartbeatRequest,
                        context: grpc.aio.ServicerContext) -> registry_pb2.HeartbeatResponse:
        try:
            lease = self.fleet.heartbeat(registry.heartbeat_from_proto(request))
        except UnknownAgentError as exc:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(exc.args[0]))
            raise
        return registry.heartbeat_response(lease)

    async def Deregister(self, request: registry_pb2.DeregisterRequest,
                         context: grpc.aio.ServicerContext) -> registry_pb2.DeregisterResponse:
        self.fleet.deregister(*registry.deregister_from_proto(request))
        return registry.deregister_response()


class RegistryServer:
    """Serves :class:`RegistryServicer` for one fleet. ``port`` 0 picks a free port."""

    def __init__(self, fleet: Fleet, host: str = "127.0.0.1", port: int = 0) -> None:
        self.fleet = fleet
        self.host = host
        self.port = port
        self._server: grpc.aio.Server | None = None

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    async def start(self) -> str:
        """Listen; returns ``host:port`` for agents' ``--register``."""
        if self._server is not None:
            return self.address
        if self.host not in ("127.0.0.1", "localhost", "::1"):
            log.warning("agent registry listening on %s: it has no authentication; anyone who "
                        "reaches it can offer an agent whose verdicts are trusted", self.host)
        server = grpc.aio.server()
        registry_pb2_grpc.add_RegistryServicer_to_server(RegistryServicer(self.fleet), server)
        bind = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
        try:
            port = server.add_insecure_port(bind)
        except RuntimeError:
            port = 0
        if port == 0:
            raise OSError(f"agent registry cannot listen on {bind} (address in use or not available)")
        await server.start()
        self._server, self.port = server, port
        log.info("agent registry listening on %s", self.address)
        return self.address

    async def stop(self, grace: float = 1.0) -> None:
        if self._server is not None:
            await self._server.stop(grace)
            self._server = None
