"""The agent side of registration: the heartbeat loop against a real registry, in process.

The agent's describe() and draining flag are stand-ins here; tests/coordinator/test_fleet.py
runs the same loop inside a real agent process (``--register``), through lease expiry,
re-registration and SIGTERM.
"""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from coordinator.fleet import AgentSnapshot, Fleet, FleetConfig
from coordinator.fleet.registration import RegistryServer
from device_agent import __main__ as agent_main
from device_agent.registration import Registrar, RegistrationSettings, advertise_address
from protos.records import AgentDescription, DeviceInfo, SystemInfo
from tests.helpers import until

CONFIG = FleetConfig(probe_interval_s=0.2, probe_timeout_s=0.5, lease_s=1.5, forget_after_s=30.0)
FAST_RETRY = dict(timeout_s=1.0, backoff_base_s=0.1, backoff_max_s=0.3)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class StandIn:
    """What the registrar reads from the agent, changeable by the test."""

    def __init__(self) -> None:
        self.queue_depth = 0
        self.draining = False
        self.calls = 0

    def describe(self) -> AgentDescription:
        self.calls += 1
        return AgentDescription(
            agent_id="agent-1", harness_version="9.9",
            system=SystemInfo(platform="cpu", device_model="cpu (x)"),
            devices=(DeviceInfo(0, "cpu (x)", capacity=2, busy=1),), suite=(), capacity=2,
            queue_depth=self.queue_depth, max_queue=8, timings_meaningful=False)


def registrar(port: int, agent: StandIn, advertise: str = "127.0.0.1:1") -> Registrar:
    settings = RegistrationSettings(coordinator=f"127.0.0.1:{port}", advertise=advertise, **FAST_RETRY)
    return Registrar(settings, agent.describe, lambda: agent.draining)


def seen(fleet: Fleet, address: str = "127.0.0.1:1") -> AgentSnapshot | None:
    return next((a for a in fleet.snapshot().agents if a.address == address), None)


def test_unreachable_coordinator_is_retried_then_registration_and_heartbeats_flow() -> None:
    async def go() -> None:
        port = free_port()
        agent = StandIn()
        reg = registrar(port, agent)
        reg.start()
        await asyncio.sleep(1.0)  # nothing listens: the loop keeps trying, quietly
        assert not reg.registered and agent.calls >= 3
        async with Fleet([], CONFIG) as fleet:
            server = RegistryServer(fleet, port=port)
            await server.start()
            try:
                await until(lambda: seen(fleet) is not None, 5, "the registration")
                snap = seen(fleet)
                assert snap is not None and snap.registered and snap.agent_id == "agent-1"
                assert (snap.platform, snap.device_model, snap.harness_version) == ("cpu", "cpu (x)", "9.9")
                assert (snap.capacity, snap.busy) == (2, 1)
                # Heartbeats carry the load and keep the lease alive past its length.
                agent.queue_depth = 5
                await until(lambda: seen(fleet).queue_depth == 5, 3, "a heartbeat")  # type: ignore[union-attr]
                await asyncio.sleep(CONFIG.lease_s * 1.5)
                snap = seen(fleet)
                assert snap is not None and "no heartbeat" not in snap.reason
                # Draining is reported as soon as the agent is woken, not a full interval later.
                agent.draining = True
                reg.wake()
                await until(lambda: seen(fleet).draining_reported, 1, "draining")  # type: ignore[union-attr]
                await reg.close()  # deregisters: a registered-only agent is forgotten
                assert seen(fleet) is None and not reg.registered
            finally:
                await server.stop(0)

    asyncio.run(go())


def test_a_restarted_coordinator_gets_the_agent_back() -> None:
    async def go() -> None:
        port = free_port()
        agent = StandIn()
        reg = registrar(port, agent)
        async with Fleet([], CONFIG) as first:
            server = RegistryServer(first, port=port)
            await server.start()
            reg.start()
            await until(lambda: seen(first) is not None, 5, "the first registration")
            await server.stop(0)
        # A new coordinator on the same port knows nothing: the heartbeat is refused (NOT_FOUND)
        # and the agent registers again.
        async with Fleet([], CONFIG) as second:
            server = RegistryServer(second, port=port)
            await server.start()
            try:
                # The coordinator records the registration before the agent has read the reply.
                await until(lambda: seen(second) is not None and reg.registered, 8,
                            "registration with the new coordinator")
            finally:
                await reg.close()
                await server.stop(0)

    asyncio.run(go())


def test_close_never_hangs_or_raises_when_the_coordinator_is_gone() -> None:
    async def go() -> None:
        port = free_port()
        async with Fleet([], CONFIG) as fleet:
            server = RegistryServer(fleet, port=port)
            await server.start()
            reg = registrar(port, StandIn())
            reg.start()
            await until(lambda: reg.registered, 5, "registration")
            await server.stop(0)
            start = time.monotonic()
            await reg.close()  # the deregistration fails, is logged, and close returns
            assert time.monotonic() - start < FAST_RETRY["timeout_s"] * 2 + 1.5

    asyncio.run(go())


def test_advertised_address() -> None:
    assert advertise_address("127.0.0.1", 50151) == "127.0.0.1:50151"
    assert advertise_address("::1", 7) == "[::1]:7"
    assert advertise_address("0.0.0.0", 7) == f"{socket.getfqdn()}:7"
    with pytest.raises(ValueError, match="host:port"):
        RegistrationSettings(coordinator="coordinator", advertise="127.0.0.1:1")


@pytest.mark.parametrize("argv, message", [
    (["--register", "no-port"], "--register: 'no-port' is not host:port"),
    (["--register", "h:1", "--advertise", "h:99999"], "--advertise"),
    (["--advertise", "h:1"], "--advertise needs --register"),
])
def test_cli_refuses_bad_registration_flags(argv: list[str], message: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert agent_main.main(["serve", *argv]) == 2
    assert message in capsys.readouterr().err


def test_registry_wire_format() -> None:
    """The generated stubs import under the oldest supported grpcio, and records survive the
    round trip through protobuf unchanged."""
    from protos import registration
    from protos.kgb.coordinator.v1 import registry_pb2, registry_pb2_grpc

    svc = registry_pb2.DESCRIPTOR.services_by_name["Registry"]
    assert svc.full_name == registration.SERVICE_NAME
    assert {m.name for m in svc.methods} == {"Register", "Heartbeat", "Deregister"}
    assert registry_pb2_grpc.GRPC_GENERATED_VERSION == "1.84.0"
    load = registration.AgentLoad(capacity=4, busy=3, queue_depth=2, draining=True)
    reg = registration.Registration("id", "[::1]:5", "cuda", "NVIDIA H200", "0.1.0", load)
    assert registration.registration_from_proto(registration.registration_to_proto(reg)) == reg
    beat = registration.Heartbeat("id", "h:1", load)
    assert registration.heartbeat_from_proto(registration.heartbeat_to_proto(beat)) == beat
    lease = registration.Lease(lease_s=10.0, heartbeat_interval_s=2.5)
    assert registration.lease_from_proto(registration.lease_to_proto(lease)) == lease
    assert registration.deregister_from_proto(registration.deregister_request("id", "h:1")) == ("id", "h:1")
