"""The coordinator's agent registry behind TLS and tokens (issue 19, point 2; docs/auth.md):
only token holders register agents, and an agent's heartbeats and deregistration are taken only
from the tenant that registered it. Ends with a real agent process that serves TLS and tokens
itself, registers over TLS with a token, and is evaluated on through the fleet.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

import operators
from coordinator.fleet import AgentSnapshot, AgentState, Fleet, FleetConfig
from coordinator.fleet.registration import RegistryAccess, RegistryServer
from coordinator.local_agent import LocalAgent
from coordinator.sweep_spec import AgentSpec, SweepSpecError, parse_spec
from protos.records import Status
from protos.registration import (
    AgentLoad,
    Heartbeat,
    Registration,
    RegistrationRefused,
    RegistryClient,
    RegistryUnreachable,
)
from protos.security import ClientAuth, ClientAuthFiles, ServerTLS, add_token
from tests.certs import Certs, make_certs
from tests.helpers import until

CONFIG = FleetConfig(probe_interval_s=0.2, probe_timeout_s=1.0, lease_s=5.0, forget_after_s=60.0)
ADD = operators.get("aten::add")
AGENT = "127.0.0.1:1"  # never dialled successfully: only its registration matters here


class Setup:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.certs: Certs = make_certs(root / "certs")
        self.tokens = root / "tokens"
        self.alice, self.bob = add_token(self.tokens, "alice"), add_token(self.tokens, "bob")

    def auth(self, token: str | None) -> ClientAuth:
        return ClientAuth(ca=self.certs.ca.read_bytes(), token=token)

    def access(self) -> RegistryAccess:
        return RegistryAccess(tls=ServerTLS(self.certs.server.cert, self.certs.server.key),
                              tokens=self.tokens)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    return Setup(tmp_path_factory.mktemp("registry-auth"))


def registration(agent_id: str = "agent-1", address: str = AGENT) -> Registration:
    return Registration(agent_id=agent_id, address=address, platform="cpu", device_model="cpu",
                        harness_version="1", load=AgentLoad(capacity=1))


def seen(fleet: Fleet, address: str = AGENT) -> AgentSnapshot | None:
    return next((a for a in fleet.snapshot().agents if a.address == address), None)


def with_registry(setup: Setup, body: Callable[[Fleet, str], Awaitable[None]]) -> None:
    async def go() -> None:
        async with Fleet([], CONFIG) as fleet:
            server = RegistryServer(fleet, access=setup.access())
            address = await server.start()
            try:
                await body(fleet, address)
            finally:
                await server.stop(0)

    asyncio.run(go())


def test_registering_needs_a_token_and_tls(setup: Setup) -> None:
    async def body(fleet: Fleet, address: str) -> None:
        for token, why in ((None, "no bearer token"), (setup.alice + "x", "not valid")):
            async with RegistryClient(address, setup.auth(token)) as c:
                with pytest.raises(RegistrationRefused, match=f"UNAUTHENTICATED: .*{why}"):
                    await c.register(registration(), timeout=5)
        async with RegistryClient(address, ClientAuth(token=setup.alice)) as plaintext:
            with pytest.raises(RegistryUnreachable):
                await plaintext.register(registration(), timeout=3)
        assert seen(fleet) is None

    with_registry(setup, body)


def test_only_the_registering_tenant_may_heartbeat_or_deregister(setup: Setup) -> None:
    async def body(fleet: Fleet, address: str) -> None:
        async with RegistryClient(address, setup.auth(setup.alice)) as alice, \
                RegistryClient(address, setup.auth(setup.bob)) as bob:
            await alice.register(registration(), timeout=5)
            beat = Heartbeat("agent-1", AGENT, AgentLoad(capacity=1))
            with pytest.raises(RegistrationRefused, match="PERMISSION_DENIED"):
                await bob.deregister("agent-1", AGENT, timeout=5)
            with pytest.raises(RegistrationRefused, match="PERMISSION_DENIED"):
                await bob.heartbeat(beat, timeout=5)
            with pytest.raises(RegistrationRefused, match="PERMISSION_DENIED"):
                await bob.register(registration("agent-by-bob"), timeout=5)
            snap = seen(fleet)
            assert snap is not None and snap.registered and not snap.deregistered
            assert snap.agent_id == "agent-1"
            await alice.heartbeat(beat, timeout=5)
            await alice.deregister("agent-1", AGENT, timeout=5)
            assert seen(fleet) is None
            # Once Alice's registration is gone, the address is free for anyone with a token.
            await bob.register(registration("agent-by-bob"), timeout=5)
            snap = seen(fleet)
            assert snap is not None and snap.agent_id == "agent-by-bob"

    with_registry(setup, body)


def test_a_static_agent_cannot_be_drained_through_the_registry(setup: Setup) -> None:
    """A spec agent holds no registration, so no token's Deregister may touch it (before, one
    with its agent id, "" until first checked, drained it)."""
    async def go() -> None:
        async with Fleet([AgentSpec(AGENT, "cpu")], CONFIG) as fleet:
            server = RegistryServer(fleet, access=setup.access())
            address = await server.start()
            try:
                async with RegistryClient(address, setup.auth(setup.bob)) as bob:
                    await bob.deregister("", AGENT, timeout=5)
                snap = seen(fleet)
                assert snap is not None and snap.state is not AgentState.DRAINING, snap
                assert "deregistered" not in snap.reason
            finally:
                await server.stop(0)

    asyncio.run(go())


def test_an_exposed_registry_needs_tls_and_tokens_or_insecure(setup: Setup) -> None:
    async def go() -> None:
        async with Fleet([], CONFIG) as fleet:
            with pytest.raises(PermissionError, match="without TLS and tokens"):
                await RegistryServer(fleet, host="0.0.0.0").start()
            for access in (RegistryAccess(insecure=True), setup.access()):
                server = RegistryServer(fleet, host="0.0.0.0", access=access)
                assert await server.start()
                await server.stop(0)

    asyncio.run(go())


def test_kgb_sweep_refuses_an_exposed_registry_before_starting(setup: Setup, tmp_path: Path) -> None:
    from coordinator.cli import kgb

    spec = tmp_path / "s.toml"
    spec.write_text('operators = ["aten::add"]\nplatforms = ["cpu"]\n[sweep]\nname = "exposed"\n'
                    '[[methods]]\nname = "reference"\n')
    r = CliRunner().invoke(kgb, ["sweep", "run", str(spec), "--registry-port", "0",
                                 "--registry-host", "0.0.0.0", "--wait-for-agents", "0",
                                 "--no-progress", "--metrics-port", "0"])
    assert r.exit_code == 2 and "without TLS and tokens" in r.stderr, r.output
    r = CliRunner().invoke(kgb, ["sweep", "run", str(spec), "--registry-port", "0",
                                 "--registry-tls-cert", str(setup.certs.server.cert),
                                 "--registry-tls-key", str(setup.certs.client.key)])
    assert r.exit_code == 2 and "does not match" in r.stderr, r.output


def test_spec_agents_take_their_own_credentials(setup: Setup, tmp_path: Path) -> None:
    token = tmp_path / "agent.token"
    token.write_text(setup.alice)
    base = ('operators = ["aten::add"]\nplatforms = ["cpu"]\n[sweep]\nname = "x"\n'
            '[[methods]]\nname = "reference"\n[[agents]]\naddress = "10.0.0.7:50151"\n'
            'platform = "cpu"\n')
    spec = parse_spec(base + f'ca = "{setup.certs.ca}"\ntoken_file = "agent.token"\n', base_dir=tmp_path)
    auth = spec.agents[0].auth
    assert auth == ClientAuthFiles(ca=setup.certs.ca, token_file=token)
    assert auth.load().token == setup.alice and setup.alice not in repr(spec)
    with pytest.raises(SweepSpecError, match=r"agents\[0\]\.token_file.*no such file"):
        parse_spec(base + 'token_file = "missing"\n', base_dir=tmp_path)
    with pytest.raises(SweepSpecError, match="needs its key"):
        parse_spec(base + f'ca = "{setup.certs.ca}"\ncert = "{setup.certs.client.cert}"\n')


def test_an_agent_with_tls_and_tokens_registers_with_a_token_and_serves_the_fleet(
        agent_secret_env: None, setup: Setup, tmp_path: Path) -> None:
    """Both directions authenticated: the agent registers over TLS with Bob's token; the fleet
    dials it over TLS with Alice's token and gets a verdict."""
    bob_token = tmp_path / "bob.token"
    bob_token.write_text(setup.bob)

    async def go() -> None:
        fleet_auth = setup.auth(setup.alice)
        async with Fleet([], CONFIG, auth=fleet_auth) as fleet:
            registry = RegistryServer(fleet, access=setup.access())
            where = await registry.start()
            agent = LocalAgent(platform="cpu", workers=1, log_path=tmp_path / "agent.log", auth=fleet_auth,
                               extra_args=(
                "--instant-verdicts", "--tls-cert", str(setup.certs.server.cert),
                "--tls-key", str(setup.certs.server.key), "--tokens", str(setup.tokens),
                "--register", where, "--register-ca", str(setup.certs.ca),
                "--register-token-file", str(bob_token)))
            address = agent.start()
            try:
                await agent.wait_serving(120)
                await until(lambda: (s := seen(fleet, address)) is not None and s.state is AgentState.UP,
                            20, "registered and UP")
                routed = await fleet.evaluate("cpu", ADD.id, ADD.solution, timeout_s=60)
                assert routed.verdict.status is Status.PASSED and routed.agent == address
            finally:
                agent.stop()
                await registry.stop(0)
            assert setup.bob not in agent.log_tail(100_000)

    asyncio.run(go())
