"""Fleet routing (issue #6 point 3): health, least-loaded choice, failover, draining, registration.

Real ``cpu`` agents run as subprocesses for what agents really do (verdicts, SIGKILL, SIGTERM
draining, registration heartbeats); small in-process fake agents script the failures a real
agent cannot be made to produce on demand (an INFRA_ERROR verdict, RESOURCE_EXHAUSTED, an agent
that hangs). Intervals are shrunk so each test takes seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import socket
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import grpc
import pytest

import operators
from coordinator.fleet import (
    AgentSnapshot,
    AgentState,
    AttemptOutcome,
    Fleet,
    FleetConfig,
    FleetSnapshot,
    NoAgent,
    backoff_delay,
    choose,
)
from coordinator.fleet.registration import RegistryServer
from coordinator.local_agent import LocalAgent
from coordinator.sweep_spec import AgentSpec
from generators.evaluation import Evaluator
from protos.client import AgentClient
from protos.records import (
    EvalRequest,
    Status,
    Verdict,
)
from protos.registration import AgentLoad, Registration
from tests.coordinator.fake_agents import fake, honest_verdict
from tests.helpers import until

ADD = operators.get("aten::add")
OP = (ADD.id, ADD.version)
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "candidates"
HANG = (FIXTURES / "add_hang_python.py").read_bytes()
FAST = FleetConfig(probe_interval_s=0.2, probe_timeout_s=1.0, down_after=2, lease_s=30.0,
                   attempts=3, backoff_base_s=0.05, backoff_max_s=0.2, wait_for_agent_s=1.0)


def honest(tag: str) -> str:
    """The reference solution with a comment: passes, and hashes differently per tag (so two
    evaluations do not share one flight)."""
    return f"{ADD.solution}\n# {tag}\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def agent_of(snap: FleetSnapshot, address: str) -> AgentSnapshot | None:
    return next((a for a in snap.agents if a.address == address), None)


def state_of(fleet: Fleet, address: str) -> AgentState | None:
    a = agent_of(fleet.snapshot(), address)
    return a.state if a is not None else None


# ---- real agents ---------------------------------------------------------------------------

def _start(n: int, tmp: Path, workers: int = 1) -> list[LocalAgent]:
    agents = [LocalAgent(platform="cpu", workers=workers, log_path=tmp / f"agent{i}.log")
              for i in range(n)]
    try:
        for a in agents:
            a.start()

        async def serving() -> None:
            await asyncio.gather(*(a.wait_serving(180) for a in agents))

        asyncio.run(serving())
    except BaseException:
        for a in agents:
            a.stop()
        raise
    return agents


@pytest.fixture(scope="module")
def pair(agent_secret_env: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """Two healthy cpu agents with two workers each (shared by the tests that do not kill them;
    a second warm worker saves waiting for a replacement between evaluations)."""
    agents = _start(2, tmp_path_factory.mktemp("pair"), workers=2)
    try:
        yield agents[0].address, agents[1].address
    finally:
        for a in agents:
            a.stop()


@pytest.fixture()
def spare(agent_secret_env: None, tmp_path: Path) -> Iterator[LocalAgent]:
    """One more cpu agent, for a test that kills or drains it."""
    (agent,) = _start(1, tmp_path)
    try:
        yield agent
    finally:
        agent.stop(grace=5)


async def verdict_on(address: str, source: str) -> Verdict:
    async with AgentClient(address) as c:
        return await c.evaluate(EvalRequest(f"direct-{random.getrandbits(64):x}", ADD.id,
                                             source.encode()), timeout=120)


async def registration_of(address: str) -> Registration:
    """What the agent at ``address`` would register, to add it to a fleet mid-test."""
    async with AgentClient(address) as c:
        d = await c.describe()
    return Registration(d.agent_id, address, d.system.platform, d.system.device_model,
                        d.harness_version, AgentLoad(capacity=d.capacity))


# ---- routing, pure ---------------------------------------------------------------------------

def _snap(address: str, **kw: object) -> AgentSnapshot:
    base = AgentSnapshot(address=address, platform="cuda", device_model="NVIDIA H200",
                         state=AgentState.UP, capacity=4, suite=frozenset({OP}))
    return replace(base, **kw)  # type: ignore[arg-type]


def test_choose_takes_the_least_loaded_eligible_agent() -> None:
    rng = random.Random(0)

    def pick(agents: list[AgentSnapshot], device: str | None = None,
             exclude: frozenset[str] = frozenset()) -> AgentSnapshot | NoAgent:
        return choose(agents, "cuda", device, OP, now=100.0, slots_per_worker=2.0, rng=rng,
                      exclude=exclude)
    light, heavy = _snap("a:1", in_flight=1), _snap("b:1", in_flight=3)
    assert pick([heavy, light]) == light
    # Work other clients gave an agent counts as much as our own calls.
    assert pick([_snap("a:1", foreign=3), _snap("b:1", in_flight=2)]) == _snap("b:1", in_flight=2)
    assert pick([_snap("a:1", foreign=1), _snap("b:1", in_flight=2)]) == _snap("a:1", foreign=1)
    # Load is per worker: 3 calls on 8 workers beat 1 call on 1 worker.
    many = _snap("b:1", in_flight=3, capacity=8)
    assert pick([_snap("a:1", in_flight=1, capacity=1), many]) == many
    # Ineligible agents are never chosen, however idle.
    never = [_snap("x:1", state=s) for s in AgentState if s is not AgentState.UP]
    never += [_snap("p:1", platform="cpu"), _snap("z:1", capacity=0),
              _snap("v:1", suite=frozenset({(ADD.id, ADD.version + 1)}))]  # another problem version
    for _ in range(20):
        assert pick([*never, heavy]) == heavy
    # A device model is asked for: other models are not chosen (matching ignores case).
    for _ in range(20):
        assert pick([_snap("d:1", device_model="NVIDIA A100"), heavy], device="nvidia h200") == heavy
    assert pick([_snap("d:1", device_model="NVIDIA A100")], device="NVIDIA H200") is NoAgent.NO_MATCH
    assert pick([_snap("p:1", platform="cpu")]) is NoAgent.NO_MATCH
    assert pick(never[:3]) is NoAgent.NONE_UP
    assert pick([light], exclude=frozenset({"a:1"})) is NoAgent.ALL_TRIED
    assert pick([_snap("a:1", busy_until=101.0)]) is NoAgent.ALL_FULL       # asked to back off
    assert pick([_snap("a:1", capacity=1, in_flight=2)]) is NoAgent.ALL_FULL  # 2 slots per worker
    # Ties are broken at random, so equal agents share the work.
    seen = {pick([_snap("a:1"), _snap("b:1")]) for _ in range(50)}
    assert seen == {_snap("a:1"), _snap("b:1")}


def test_backoff_doubles_with_jitter_up_to_the_cap() -> None:
    rng = random.Random(1)
    for failures, ceiling in ((1, 0.2), (2, 0.4), (3, 0.8), (6, 5.0), (40, 5.0)):
        delays = [backoff_delay(failures, 0.2, 5.0, rng) for _ in range(200)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert max(delays) - min(delays) > ceiling / 10  # jittered, not one fixed delay


def test_config_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="probe_interval_s"):
        FleetConfig(probe_interval_s=0)
    with pytest.raises(ValueError, match="attempts"):
        FleetConfig(attempts=0)
    with pytest.raises(ValueError, match="listed twice"):
        Fleet([AgentSpec("a:1", "cpu"), AgentSpec("a:1", "cpu")])


# ---- real agents: routing ------------------------------------------------------------------

def test_least_loaded_agent_gets_the_work(pair: tuple[str, str]) -> None:
    a, b = pair

    async def go() -> None:
        async with Fleet([AgentSpec(a, "cpu"), AgentSpec(b, "cpu")], FAST) as fleet:
            assert isinstance(fleet.evaluator("cpu"), Evaluator)
            assert fleet.capacity("cpu") == 4 and fleet.capacity("cuda") == 0
            # Two evaluations at once: the second goes where the first is not.
            routed = await asyncio.gather(*(fleet.evaluate("cpu", ADD.id, honest(f"pair {i}"))
                                            for i in range(2)))
            assert [r.verdict.status for r in routed] == [Status.PASSED, Status.PASSED]
            assert {r.agent for r in routed} == {a, b}
            # Another client keeps agent a busy: the fleet sees it in Describe and avoids it.
            async with AgentClient(a) as client:
                hang = asyncio.ensure_future(client.evaluate(
                    EvalRequest("foreign-hang", ADD.id, HANG), timeout=60))
                await until(lambda: agent_of(fleet.snapshot(), a).foreign == 1, 20,  # type: ignore[union-attr]
                            "agent a to report the other client's work")
                for i in range(2):
                    r = await fleet.evaluate("cpu", ADD.id, honest(f"avoid a {i}"))
                    assert r.verdict.status is Status.PASSED and r.agent == b
                    assert not hang.done()
                hang.cancel()  # frees a's worker

    asyncio.run(go())


def test_candidate_failures_are_verdicts_returned_once(pair: tuple[str, str]) -> None:
    a, b = pair
    cases = {"syntax": ((FIXTURES / "add_syntax_error.py").read_text(), Status.COMPILE_ERROR),
             "forbidden import": ("import os\n" + ADD.solution, Status.REJECTED),
             "negative control": (ADD.negatives[0].source, Status.WRONG_ANSWER)}

    async def go() -> None:
        async with Fleet([AgentSpec(a, "cpu"), AgentSpec(b, "cpu")], FAST) as fleet:
            for name, (source, status) in cases.items():
                r = await fleet.evaluate("cpu", ADD.id, source)
                assert r.verdict.status is status, (name, r.verdict.message)
                assert [x.outcome for x in r.attempts] == [AttemptOutcome.VERDICT], name
                assert r.verdict.request_id == r.request_id

    asyncio.run(go())


def test_wrong_platform_or_device_model_is_never_chosen(pair: tuple[str, str]) -> None:
    a, b = pair

    async def go() -> None:
        # a is listed as a cuda agent, b as an H200: both report cpu, so both are MISMATCH.
        specs = [AgentSpec(a, "cuda"), AgentSpec(b, "cpu", device="NVIDIA H200")]
        async with Fleet(specs, FAST) as fleet:
            assert state_of(fleet, a) is AgentState.MISMATCH
            assert state_of(fleet, b) is AgentState.MISMATCH
            assert "reports device" in agent_of(fleet.snapshot(), b).reason  # type: ignore[union-attr]
            for platform in ("cpu", "cuda"):
                r = await fleet.evaluate(platform, ADD.id, honest("mismatch"))
                assert r.verdict.status is Status.INFRA_ERROR and r.attempts == () and r.agent is None
            assert "MISMATCH" in r.verdict.message
        # Listed right, but the evaluation asks for a device model neither has.
        async with Fleet([AgentSpec(a, "cpu"), AgentSpec(b, "cpu")], FAST) as fleet:
            model = agent_of(fleet.snapshot(), a).device_model  # type: ignore[union-attr]
            r = await fleet.evaluate("cpu", ADD.id, honest("h200"), device_model="NVIDIA H200")
            assert r.verdict.status is Status.INFRA_ERROR and r.attempts == ()
            assert "has device" in r.verdict.message
            v = await fleet.evaluator("cpu", model).evaluate(ADD.id, honest("right model"))
            assert v.status is Status.PASSED

    asyncio.run(go())


def test_killed_agent_call_completes_on_another_agent(pair: tuple[str, str], spare: LocalAgent) -> None:
    _, survivor = pair
    victim = spare.address
    source = honest("sigkill")

    async def go() -> None:
        async with Fleet([AgentSpec(victim, "cpu")], FAST) as fleet:
            call = asyncio.ensure_future(fleet.evaluate("cpu", ADD.id, source))
            async with AgentClient(victim) as c:
                end = time.monotonic() + 30
                while (await c.describe()).devices[0].busy == 0:  # the candidate is running there
                    assert time.monotonic() < end and not call.done()
                    await asyncio.sleep(0.02)
            # A second agent joins while the call runs on the first, which then dies.
            fleet.register(await registration_of(survivor))
            await until(lambda: state_of(fleet, survivor) is AgentState.UP, 10, "the survivor UP")
            assert spare.proc is not None
            os.kill(spare.proc.pid, signal.SIGKILL)
            routed = await asyncio.wait_for(call, 60)
            assert routed.verdict.status is Status.PASSED, routed.verdict.message
            assert routed.agent == survivor
            first, last = routed.attempts[0], routed.attempts[-1]
            assert first.agent == victim and first.outcome is AttemptOutcome.UNREACHABLE
            assert last.agent == survivor and last.outcome is AttemptOutcome.VERDICT
            await until(lambda: state_of(fleet, victim) is AgentState.DOWN, 5, "the victim DOWN")
            direct = await verdict_on(survivor, source)
            assert [c.name for c in routed.verdict.cases] == [c.name for c in direct.cases]
            assert routed.verdict.candidate_hash == direct.candidate_hash

    asyncio.run(go())


def test_draining_agent_gets_no_new_work(pair: tuple[str, str], spare: LocalAgent) -> None:
    _, other = pair
    draining = spare.address
    config = replace(FAST, wait_for_agent_s=20.0)

    async def go() -> None:
        async with Fleet([AgentSpec(draining, "cpu")], config) as fleet, AgentClient(draining) as c:
            # Work in flight keeps the agent draining (up to its 5 s grace) after SIGTERM.
            hang = asyncio.ensure_future(c.evaluate(EvalRequest("drain-hang", ADD.id, HANG), timeout=60))
            await until(lambda: agent_of(fleet.snapshot(), draining).busy == 1, 20,  # type: ignore[union-attr]
                        "the hang to start")
            assert spare.proc is not None
            spare.proc.send_signal(signal.SIGTERM)
            await until(lambda: state_of(fleet, draining) is AgentState.DRAINING, 4, "DRAINING")
            assert await c.health() == "NOT_SERVING"  # still answering: draining, not dead
            call = asyncio.ensure_future(fleet.evaluate("cpu", ADD.id, honest("drain")))
            await asyncio.sleep(1.0)
            assert not call.done()  # it waits: the only agent is draining
            fleet.register(await registration_of(other))
            routed = await asyncio.wait_for(call, 60)
            assert routed.verdict.status is Status.PASSED
            assert [(x.agent, x.outcome) for x in routed.attempts] == [(other, AttemptOutcome.VERDICT)]
            with contextlib.suppress(Exception):
                await hang

    asyncio.run(go())


def test_all_agents_dead_is_infra_error_within_the_deadline() -> None:
    dead = [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]

    async def go() -> None:
        async with Fleet([AgentSpec(x, "cpu") for x in dead], FAST) as fleet:
            assert {a.state for a in fleet.snapshot().agents} == {AgentState.DOWN}
            assert fleet.capacity("cpu") == 0
            start = time.monotonic()
            v = await fleet.evaluator("cpu", timeout_s=30).evaluate(ADD.id, honest("dead"))
            assert time.monotonic() - start < FAST.wait_for_agent_s + 1.5
            assert v.status is Status.INFRA_ERROR and not v.status.counts_against_model
            assert all(x in v.message for x in dead) and "DOWN" in v.message
        # The deadline bounds the wait too.
        slow = replace(FAST, wait_for_agent_s=60)
        async with Fleet([AgentSpec(x, "cpu") for x in dead], slow) as fleet:
            start = time.monotonic()
            v = await fleet.evaluator("cpu", timeout_s=1.0).evaluate(ADD.id, honest("dead"))
            assert v.status is Status.INFRA_ERROR and time.monotonic() - start < 2.5

    asyncio.run(go())


# ---- registration with real agents -----------------------------------------------------------

def test_registration_heartbeat_lease_expiry_and_reregistration(agent_secret_env: None,
                                                                tmp_path: Path) -> None:
    config = replace(FAST, lease_s=1.5, forget_after_s=1.0)

    async def go() -> None:
        async with Fleet([], config) as fleet:
            registry = RegistryServer(fleet)
            where = await registry.start()
            agent = LocalAgent(platform="cpu", workers=1, log_path=tmp_path / "agent.log",
                               extra_args=("--register", where))
            address = agent.start()
            try:
                await agent.wait_serving(180)
                await until(lambda: state_of(fleet, address) is AgentState.UP, 10, "registered and UP")
                snap = agent_of(fleet.snapshot(), address)
                assert snap is not None and snap.registered and not snap.static
                r = await fleet.evaluate("cpu", ADD.id, honest("registered"))
                assert r.verdict.status is Status.PASSED and r.agent == address
                # The registry goes away: heartbeats stop although the agent stays healthy, so
                # it is DOWN once the lease runs out, then forgotten.
                await registry.stop(0)
                await until(lambda: state_of(fleet, address) is AgentState.DOWN, 5, "lease expiry")
                snap = agent_of(fleet.snapshot(), address)
                assert snap is not None and "no heartbeat" in snap.reason and snap.health == "SERVING"
                await until(lambda: state_of(fleet, address) is None, 5, "the agent forgotten")
                # The registry is back: the agent's heartbeat is refused (unknown), it registers again.
                registry = RegistryServer(fleet, port=registry.port)
                await registry.start()
                await until(lambda: state_of(fleet, address) is AgentState.UP, 15, "re-registration")
                r = await fleet.evaluate("cpu", ADD.id, honest("registered again"))
                assert r.verdict.status is Status.PASSED and r.agent == address
                assert "cannot reach the coordinator's registry" in agent.log_tail(20000)
                # SIGTERM: deregistered and gone; the agent exits cleanly.
                assert agent.proc is not None
                agent.proc.send_signal(signal.SIGTERM)
                await until(lambda: state_of(fleet, address) is None, 10, "deregistration")
                assert agent.proc.wait(timeout=15) == 0
            finally:
                agent.stop()
                await registry.stop(0)

    asyncio.run(go())


# ---- scripted failures (in-process fake agents) ----------------------------------------------

def _verdict(req: EvalRequest, status: Status, message: str = "") -> Verdict:
    return honest_verdict(req, status, message)


async def passes(req: EvalRequest, context: grpc.aio.ServicerContext) -> Verdict:
    return _verdict(req, Status.PASSED)


async def infra(req: EvalRequest, context: grpc.aio.ServicerContext) -> Verdict:
    return _verdict(req, Status.INFRA_ERROR, "fake: worker failed to start")


async def unavailable(req: EvalRequest, context: grpc.aio.ServicerContext) -> Verdict:
    await context.abort(grpc.StatusCode.UNAVAILABLE, "fake: connection reset")
    raise AssertionError("unreachable")


def test_infra_error_verdict_moves_to_another_agent() -> None:
    async def go() -> None:
        # The broken agent reports no load, the good one is busy: the broken one is tried first.
        async with fake(infra) as (bad, bad_agent), fake(passes, busy=1) as (good, _):
            async with Fleet([AgentSpec(bad, "cpu"), AgentSpec(good, "cpu")], FAST) as fleet:
                r = await fleet.evaluate("cpu", ADD.id, honest("infra"))
                assert r.verdict.status is Status.PASSED and r.agent == good
                assert [(x.agent, x.outcome) for x in r.attempts] == [
                    (bad, AttemptOutcome.INFRA_VERDICT), (good, AttemptOutcome.VERDICT)]
                assert len(bad_agent.calls) == 1
                assert state_of(fleet, bad) is AgentState.UP  # a verdict is an answer: not DOWN
            # With no other agent, the evaluation ends INFRA_ERROR and says why.
            async with Fleet([AgentSpec(bad, "cpu")], FAST) as fleet:
                r = await fleet.evaluate("cpu", ADD.id, honest("infra alone"))
                assert r.verdict.status is Status.INFRA_ERROR
                assert "worker failed to start" in r.verdict.message

    asyncio.run(go())


def test_failing_agent_is_retried_a_bounded_number_of_times_with_one_request_id() -> None:
    async def go() -> None:
        async with fake(unavailable) as (address, agent), Fleet([AgentSpec(address, "cpu")], FAST) as fleet:
            start = time.monotonic()
            r = await fleet.evaluate("cpu", ADD.id, honest("flaky"))
            elapsed = time.monotonic() - start
            assert r.verdict.status is Status.INFRA_ERROR
            assert [x.outcome for x in r.attempts] == [AttemptOutcome.UNREACHABLE] * FAST.attempts
            assert len(agent.calls) == FAST.attempts and set(agent.calls) == {r.request_id}
            assert f"after {FAST.attempts} failed attempt(s)" in r.verdict.message
            # Back-off between attempts: at least half of base and of 2 x base.
            assert elapsed >= 0.5 * (FAST.backoff_base_s * 3)
            assert elapsed < 5

    asyncio.run(go())


def test_busy_agent_is_retried_after_its_hint_without_counting_a_failure() -> None:
    answers: list[str] = []

    async def busy_then_pass(req: EvalRequest, context: grpc.aio.ServicerContext) -> Verdict:
        if len(answers) < FAST.attempts + 1:  # more busy answers than the failure budget
            answers.append("busy")
            context.set_trailing_metadata((("retry-after-ms", "100"),))
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "fake: queue full")
        return _verdict(req, Status.PASSED)

    async def go() -> None:
        async with fake(busy_then_pass) as (address, _), Fleet([AgentSpec(address, "cpu")], FAST) as fleet:
            start = time.monotonic()
            r = await fleet.evaluate("cpu", ADD.id, honest("busy"))
            assert r.verdict.status is Status.PASSED
            outcomes = [x.outcome for x in r.attempts]
            assert outcomes == [AttemptOutcome.BUSY] * (FAST.attempts + 1) + [AttemptOutcome.VERDICT]
            assert time.monotonic() - start >= 0.1 * (FAST.attempts + 1)

    asyncio.run(go())


def test_hung_agent_loses_its_calls_to_another_agent() -> None:
    started = asyncio.Event()

    async def hangs(req: EvalRequest, context: grpc.aio.ServicerContext) -> Verdict:
        started.set()
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    async def go() -> None:
        async with fake(hangs) as (stuck, stuck_agent), fake(passes, busy=1) as (good, _), \
                Fleet([AgentSpec(stuck, "cpu"), AgentSpec(good, "cpu")], FAST) as fleet:
            call = asyncio.ensure_future(fleet.evaluate("cpu", ADD.id, honest("hung")))
            await asyncio.wait_for(started.wait(), 5)
            stuck_agent.unhealthy = True  # its calls hang and its checks fail: a hung host
            r = await asyncio.wait_for(call, 10)
            assert r.verdict.status is Status.PASSED and r.agent == good
            assert [x.outcome for x in r.attempts] == [AttemptOutcome.LOST, AttemptOutcome.VERDICT]
            assert state_of(fleet, stuck) is AgentState.DOWN

    asyncio.run(go())


def test_identical_concurrent_evaluations_share_one_call() -> None:
    async def slow_pass(req: EvalRequest, context: grpc.aio.ServicerContext) -> Verdict:
        await asyncio.sleep(0.3)
        return _verdict(req, Status.PASSED)

    async def go() -> None:
        async with fake(slow_pass) as (address, agent), Fleet([AgentSpec(address, "cpu")], FAST) as fleet:
            ev = fleet.evaluator("cpu")
            verdicts = await asyncio.gather(*(ev.evaluate(ADD.id, honest("same")) for _ in range(3)))
            assert [v.status for v in verdicts] == [Status.PASSED] * 3
            assert len(agent.calls) == 1
            await ev.evaluate(ADD.id, honest("same"))  # after it landed: a new flight
            assert len(agent.calls) == 2

    asyncio.run(go())


def test_heartbeats_drive_lease_and_draining_without_an_agent_process() -> None:
    """The registry's rules on their own: unknown agents must register, a draining heartbeat
    stops new work at once, a malformed registration is refused."""
    from protos.registration import Heartbeat, RegistrationRefused, RegistryClient, UnknownAgent

    async def go() -> None:
        async with fake(passes) as (address, agent), Fleet([], replace(FAST, lease_s=5.0)) as fleet:
            registry = RegistryServer(fleet)
            where = await registry.start()
            try:
                async with RegistryClient(where) as client:
                    with pytest.raises(UnknownAgent):
                        await client.heartbeat(Heartbeat("fake", address, AgentLoad(1)), timeout=2)
                    with pytest.raises(RegistrationRefused, match="host:port"):
                        await client.register(Registration("fake", "no-port", "cpu", "m", "h"), timeout=2)
                    lease = await client.register(
                        Registration("fake", address, "cpu", "cpu (fake)", "test", AgentLoad(1)), timeout=2)
                    assert lease.lease_s == 5.0 and 0 < lease.heartbeat_interval_s < lease.lease_s
                    await until(lambda: state_of(fleet, address) is AgentState.UP, 5, "UP")
                    await client.heartbeat(Heartbeat("fake", address, AgentLoad(1, draining=True)), timeout=2)
                    assert state_of(fleet, address) is AgentState.DRAINING
                    r = await fleet.evaluate("cpu", ADD.id, honest("to a draining agent"))
                    assert r.verdict.status is Status.INFRA_ERROR and agent.calls == []
                    with pytest.raises(UnknownAgent):  # another process at the same address
                        await client.heartbeat(Heartbeat("other", address, AgentLoad(1)), timeout=2)
                    await client.heartbeat(Heartbeat("fake", address, AgentLoad(1)), timeout=2)
                    await until(lambda: state_of(fleet, address) is AgentState.UP, 5, "UP again")
                    await client.deregister("fake", address, timeout=2)
                    assert state_of(fleet, address) is None
            finally:
                await registry.stop(0)

    asyncio.run(go())
