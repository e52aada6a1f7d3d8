"""Agent registration: the gRPC ``Registry`` service that feeds registrations into a
:class:`~coordinator.fleet.routing.Fleet` (wire records: ``protos/registration.py``).

Agents started with ``kgb agent serve --register HOST:PORT`` call it (``device_agent/
registration.py``). It only tells the fleet that an agent exists, how loaded it is and whether
it is draining; the fleet checks each agent itself before routing work to it.

Like an agent, it listens on loopback unless told otherwise, and any other address needs TLS
and a tokens file (``RegistryAccess``; docs/auth.md). With tokens, every call carries one, and an
agent's address belongs to the tenant whose token registered it: heartbeats and deregistration
from another tenant are PERMISSION_DENIED, and so is another tenant's registration of the same
address while that registration lives. Without tokens every caller is the one tenant ``""``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import grpc

from coordinator.fleet.roster import UnknownAgentError
from coordinator.fleet.routing import Fleet
from protos import registration
from protos.kgb.coordinator.v1 import registry_pb2, registry_pb2_grpc
from protos.security import (
    BearerTokenInterceptor,
    ServerTLS,
    TokenStore,
    current_tenant,
    exposure_problem,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RegistryAccess:
    """Who may register agents: TLS (optionally mutual) and a tokens file
    (``kgb agent token add``). ``insecure`` allows a non-loopback address without both."""

    tls: ServerTLS | None = None
    tokens: Path | None = None
    insecure: bool = False


class RegistryServicer(registry_pb2_grpc.RegistryServicer):  # type: ignore[misc]
    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self._owners: dict[str, str] = {}  # agent address -> tenant that registered it

    def _owner(self, address: str) -> str | None:
        """The tenant holding ``address``'s registration, while the fleet still holds one."""
        owner = self._owners.get(address)
        if owner is None:
            return None
        live = any(a.address == address and a.registered and not a.deregistered
                   for a in self.fleet.snapshot().agents)
        if not live:
            del self._owners[address]
            return None
        return owner

    async def _check_owner(self, address: str, context: grpc.aio.ServicerContext,
                           what: str) -> None:
        owner, tenant = self._owner(address), current_tenant()
        if owner is not None and owner != tenant:
            log.warning("refused %s of agent %s by tenant %r: registered by tenant %r (peer %s)",
                        what, address, tenant, owner, context.peer())
            await context.abort(grpc.StatusCode.PERMISSION_DENIED,
                                f"agent {address} is registered with another tenant's token; only "
                                f"that token may {what} it")

    async def Register(self, request: registry_pb2.RegisterRequest,
                       context: grpc.aio.ServicerContext) -> registry_pb2.RegisterResponse:
        reg = registration.registration_from_proto(request)
        await self._check_owner(reg.address, context, "register")
        try:
            lease = self.fleet.register(reg)
        except ValueError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"bad registration: {exc}")
            raise
        self._owners[reg.address] = current_tenant()
        return registration.register_response(lease)

    async def Heartbeat(self, request: registry_pb2.HeartbeatRequest,
                        context: grpc.aio.ServicerContext) -> registry_pb2.HeartbeatResponse:
        heartbeat = registration.heartbeat_from_proto(request)
        await self._check_owner(heartbeat.address, context, "send heartbeats for")
        try:
            lease = self.fleet.heartbeat(heartbeat)
        except UnknownAgentError as exc:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(exc.args[0]))
            raise
        return registration.heartbeat_response(lease)

    async def Deregister(self, request: registry_pb2.DeregisterRequest,
                         context: grpc.aio.ServicerContext) -> registry_pb2.DeregisterResponse:
        agent_id, address = registration.deregister_from_proto(request)
        await self._check_owner(address, context, "deregister")
        if self._owner(address) is not None:  # only a registration can be withdrawn
            self.fleet.deregister(agent_id, address)
        return registration.deregister_response()


class RegistryServer:
    """Serves :class:`RegistryServicer` for one fleet. ``port`` 0 picks a free port."""

    def __init__(self, fleet: Fleet, host: str = "127.0.0.1", port: int = 0,
                 access: RegistryAccess = RegistryAccess()) -> None:
        self.fleet = fleet
        fleet.accept_registrations()
        self.host = host
        self.port = port
        self.access = access
        self._server: grpc.aio.Server | None = None

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    async def start(self) -> str:
        """Listen; returns ``host:port`` for agents' ``--register``."""
        if self._server is not None:
            return self.address
        acc = self.access
        problem = exposure_problem(self.host, tls=acc.tls is not None, tokens=acc.tokens is not None,
                                   insecure=acc.insecure)
        if problem is not None:
            raise PermissionError(f"agent registry: {problem} (give --registry-tls-cert/"
                                  "--registry-tls-key and --registry-tokens, or --registry-insecure)")
        if acc.insecure and (acc.tls is None or acc.tokens is None):
            log.warning("agent registry listening on %s without TLS and tokens (--registry-"
                        "insecure): anyone who reaches it can offer an agent", self.host)
        credentials = acc.tls.credentials() if acc.tls is not None else None
        interceptors = [BearerTokenInterceptor(TokenStore(acc.tokens))] if acc.tokens else []
        server = grpc.aio.server(interceptors=interceptors)
        registry_pb2_grpc.add_RegistryServicer_to_server(RegistryServicer(self.fleet), server)
        bind = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
        try:
            port = (server.add_secure_port(bind, credentials) if credentials is not None
                    else server.add_insecure_port(bind))
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
