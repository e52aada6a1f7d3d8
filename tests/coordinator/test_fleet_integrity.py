"""Fleet integrity (issue 19 point 3): rogue agents cannot feed the store.

A rogue agent here is a small in-process DeviceAgent (``tests/coordinator/fake_agents.py``) that
answers PASSED for anything: with a wrong candidate hash, operator, version or device model —
which every path that accepts verdicts (the fleet behind ``kgb sweep``, its store, ``kgb run``,
``kgb eval``, ``AgentEvaluator``) must refuse as INFRA_ERROR, alarm, and stop asking — or echoing
the request right, which only a spot-check on a second, honest agent can catch.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import grpc
import orjson
import pytest
from click.testing import CliRunner
from rich.console import Console

import operators
from coordinator.cli import kgb
from coordinator.engine.router import FleetRouter
from coordinator.fleet import AgentEvaluator, AgentState, AttemptOutcome, Fleet, FleetConfig
from coordinator.integrity import Guard
from coordinator.local_agent import LocalAgent
from coordinator.metrics import SweepMetrics
from coordinator.report import render_disputes
from coordinator.spot_check import SpotOutcome
from coordinator.store import Store
from coordinator.sweep_spec import AgentSpec
from protos.client import AgentClient
from protos.records import EvalRequest, Status, Verdict, candidate_id
from protos.request_ids import is_valid
from tests.coordinator.fake_agents import Behaviour, fake, fake_in_thread, honest_verdict

ADD = operators.get("aten::add")
FAST = FleetConfig(probe_interval_s=0.2, probe_timeout_s=1.0, down_after=2, lease_s=30.0,
                   attempts=3, backoff_base_s=0.05, backoff_max_s=0.2, wait_for_agent_s=1.0)
LIES = {"candidate_hash": hashlib.sha256(b"another candidate").hexdigest(),
        "operator_id": "aten::acosh", "operator_version": ADD.version + 1,
        "device_model": "NVIDIA H200"}


def garbage(tag: str) -> str:
    """A candidate no honest agent passes (it does not parse)."""
    return f"this is not a kernel {tag} (\n"


def rogue(lie: str | None, model: str = "cpu (fake)") -> Behaviour:
    """PASSED for anything; ``lie`` names the field it gets wrong (None: it echoes every field)."""
    async def answer(req: EvalRequest, context: grpc.aio.ServicerContext) -> Verdict:
        v = honest_verdict(req, Status.PASSED, "rogue: looks great", model=model)
        return v if lie is None else replace(v, **{lie: LIES[lie]})
    return answer


def judge(model: str = "cpu (fake)") -> Behaviour:
    """An honest fake: PASSED for the reference solution, WRONG_ANSWER for anything else."""
    async def answer(req: EvalRequest, context: grpc.aio.ServicerContext) -> Verdict:
        ok = req.source.decode().startswith(ADD.solution)
        return honest_verdict(req, Status.PASSED if ok else Status.WRONG_ANSWER, model=model)
    return answer


def alarms(metrics: SweepMetrics, agent: str, kind: str) -> float:
    value = metrics.registry.get_sample_value("kgb_fleet_integrity_alarms_total",
                                              {"agent": agent, "alarm": kind})
    return value or 0.0


@pytest.fixture(scope="module")
def honest(agent_secret_env: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real cpu agent with two workers: the honest member of the fleet."""
    agent = LocalAgent(platform="cpu", workers=2,
                       log_path=tmp_path_factory.mktemp("honest") / "agent.log")
    agent.start()
    try:
        asyncio.run(agent.wait_serving(180))
        yield agent.address
    finally:
        agent.stop()


async def model_of(address: str) -> str:
    async with AgentClient(address) as c:
        return (await c.describe()).system.device_model


# ---- the fleet ---------------------------------------------------------------------------------

@pytest.mark.parametrize("lie", sorted(LIES))
def test_a_lying_agent_gets_infra_error_an_alarm_and_quarantine(lie: str) -> None:
    async def go() -> None:
        async with fake(rogue(lie)) as (address, agent), \
                Fleet([AgentSpec(address, "cpu")], FAST) as fleet:
            r = await fleet.evaluate("cpu", ADD.id, garbage("1"))
            assert r.verdict.status is Status.INFRA_ERROR and r.agent is None
            assert r.verdict.candidate_hash == candidate_id(garbage("1"))  # what was sent
            assert is_valid(r.request_id) and candidate_id(garbage("1"))[:8] not in r.request_id
            (first, *_) = r.attempts
            assert first.outcome is AttemptOutcome.UNTRUSTED and lie in first.detail
            assert fleet.guard.totals() == {(address, "mismatch"): 1}
            snap = next(a for a in fleet.snapshot().agents if a.address == address)
            assert snap.state is AgentState.QUARANTINED
            await asyncio.sleep(3 * FAST.probe_interval_s)  # its health checks pass: no matter
            assert fleet.snapshot().agents[0].state is AgentState.QUARANTINED
            again = await fleet.evaluate("cpu", ADD.id, garbage("2"))
            assert again.verdict.status is Status.INFRA_ERROR
            assert len(agent.calls) == 1  # never asked again

    asyncio.run(go())


def test_quarantine_survives_deregistering_and_registering_again() -> None:
    from protos.registration import AgentLoad, Registration

    async def go() -> None:
        async with fake(rogue("candidate_hash")) as (address, agent), Fleet([], FAST) as fleet:
            reg = Registration("fake", address, "cpu", "cpu (fake)", "test", AgentLoad(1))
            fleet.register(reg)
            await fleet.wait_ready("cpu", timeout_s=5)
            assert (await fleet.evaluate("cpu", ADD.id, garbage("a"))).verdict.status \
                is Status.INFRA_ERROR
            fleet.deregister("fake", address)
            assert fleet.snapshot().agents == ()  # forgotten ...
            fleet.register(reg)  # ... and back, as a fresh agent
            await asyncio.sleep(3 * FAST.probe_interval_s)
            assert fleet.snapshot().agents[0].state is AgentState.QUARANTINED
            assert fleet.capacity("cpu") == 0
            assert (await fleet.evaluate("cpu", ADD.id, garbage("b"))).verdict.status \
                is Status.INFRA_ERROR
            assert len(agent.calls) == 1

    asyncio.run(go())


def _router_spec(tmp_path: Path, agents: list[str], spot_check: float | None = None) -> str:
    listed = "".join(f'\n[[agents]]\naddress = "{a}"\nplatform = "cpu"\n' for a in agents)
    fleet = f"\n[fleet]\nspot_check = {spot_check}\n" if spot_check is not None else ""
    return (f'operators = ["aten::add"]\nplatforms = ["cpu"]\n\n[sweep]\nname = "integrity"\n'
            f'store = "{tmp_path}"\n\n[[methods]]\nname = "reference"\n{listed}{fleet}')


async def _router(tmp_path: Path, agents: list[str], spot_check: float | None = None) -> FleetRouter:
    router = FleetRouter(_router_spec(tmp_path, agents, spot_check), "integrity.toml",
                         str(tmp_path), str(tmp_path / "kgb.sqlite"), FAST, 120.0, None)
    await router.start()
    await router.wait_ready(["cpu"], 10)
    return router


def _stored(tmp_path: Path) -> list[tuple[str, str, str]]:
    store = Store(tmp_path / "kgb.sqlite")
    try:
        return [tuple(r) for r in store.db.execute(
            "SELECT candidate_hash, status, device_model FROM verdicts")]
    finally:
        store.close()


def test_sweep_stores_nothing_from_a_rogue_and_the_honest_agent_keeps_serving(
        honest: str, tmp_path: Path) -> None:
    """The issue's attack: a rogue next to an honest agent, four garbage candidates."""
    async def go() -> None:
        async with fake(rogue("candidate_hash")) as (bad, agent):
            router = await _router(tmp_path, [bad, honest])
            try:
                got = await asyncio.gather(*(router.evaluate("cpu", None, ADD.id, garbage(str(i)))
                                             for i in range(4)))
                assert len(agent.calls) >= 1  # the rogue, idle, was picked
                assert all(v.status is Status.COMPILE_ERROR for v, _ in got)  # the honest verdicts
                status = await router.status()
                metrics = SweepMetrics()
                metrics.integrity_alarms(status["alarms"], [a[0] for a in status["agents"]])
                assert alarms(metrics, bad, "mismatch") == 1
                assert alarms(metrics, honest, "mismatch") == 0
                assert dict((a[0], a[2]) for a in status["agents"])[bad] == "QUARANTINED"
                ref, _ = await router.evaluate("cpu", None, ADD.id, ADD.solution)
                assert ref.status is Status.PASSED
                assert ref.device_model == await model_of(honest)
            finally:
                await router.close()
        rows = _stored(tmp_path)
        assert sorted(s for _, s, _ in rows) == ["COMPILE_ERROR"] * 4 + ["PASSED"]
        assert {h for h, s, _ in rows if s == "PASSED"} == {candidate_id(ADD.solution)}

    asyncio.run(go())


# ---- spot-checks -------------------------------------------------------------------------------

def _seed_choosing_first() -> int:
    """A fleet seed whose first tie-break between two idle agents picks the first listed."""
    return next(s for s in range(100) if random.Random(s).choice((0, 1)) == 0)


def test_spot_check_catches_an_echoing_rogue_on_an_honest_real_agent(honest: str) -> None:
    async def go() -> None:
        model = await model_of(honest)
        async with fake(rogue(None, model), model=model) as (bad, _):
            config = replace(FAST, spot_check=1.0)
            async with Fleet([AgentSpec(bad, "cpu"), AgentSpec(honest, "cpu")], config,
                             seed=_seed_choosing_first()) as fleet:
                r = await fleet.evaluate("cpu", ADD.id, garbage("echo"))
                assert r.spot_check is SpotOutcome.DISAGREED and r.agent == honest
                assert r.verdict.status is Status.COMPILE_ERROR
                assert r.verdict.message.startswith(f"disputed: agent {bad} said PASSED")
                assert r.dispute is not None and (r.dispute.passed_by, r.dispute.refuted_by) == \
                    (bad, honest)
                assert fleet.guard.totals() == {(bad, "disagreement"): 1,
                                                (honest, "disagreement"): 1}
                assert fleet.guard.quarantined(bad) is None  # two agents disagree: who lies?

    asyncio.run(go())


def test_spot_check_disputes_are_stored_and_confirmed_passes_stand(tmp_path: Path) -> None:
    async def go() -> None:
        # The honest judge reports work of others (even while it runs ours), so the idle rogue
        # is asked first.
        async with fake(rogue(None)) as (bad, _), fake(judge(), busy=3) as (good, judged):
            router = await _router(tmp_path, [bad, good], spot_check=1.0)
            try:
                v, _ = await router.evaluate("cpu", None, ADD.id, garbage("x"))
                assert v.status is Status.WRONG_ANSWER and v.message.startswith("disputed")
                ref, _ = await router.evaluate("cpu", None, ADD.id, ADD.solution)
                assert ref.status is Status.PASSED and ref.message == "rogue: looks great"
                assert len(judged.calls) == 2  # each PASSED judged again
                status = await router.status()
                assert status["alarms"] == {(bad, "disagreement"): 1, (good, "disagreement"): 1}
            finally:
                await router.close()
        store = Store(tmp_path / "kgb.sqlite")
        try:
            (d,) = store.disputes()
            assert (d.candidate_hash, d.passed_by, d.refuted_by, d.second_status) == \
                (candidate_id(garbage("x")), bad, good, Status.WRONG_ANSWER)
            console = Console(record=True, width=240)
            console.print(render_disputes(store.disputes()))
            shown = console.export_text()
            assert bad in shown and good in shown and "WRONG_ANSWER" in shown
        finally:
            store.close()
        assert sorted(s for _, s, _ in _stored(tmp_path)) == ["PASSED", "WRONG_ANSWER"]

    asyncio.run(go())


def test_spot_check_without_a_second_agent_is_inconclusive_and_off_by_default() -> None:
    async def go() -> None:
        async with fake(rogue(None)) as (bad, agent):
            async with Fleet([AgentSpec(bad, "cpu")], replace(FAST, spot_check=1.0)) as fleet:
                r = await fleet.evaluate("cpu", ADD.id, garbage("alone"))
                assert r.verdict.status is Status.PASSED  # nobody can tell: a known limit
                assert r.spot_check is SpotOutcome.INCONCLUSIVE and r.dispute is None
            async with Fleet([AgentSpec(bad, "cpu")], FAST) as fleet:
                calls = len(agent.calls)
                r = await fleet.evaluate("cpu", ADD.id, garbage("default"))
                assert r.spot_check is None and len(agent.calls) == calls + 1
        assert FleetConfig().spot_check == 0.0
        with pytest.raises(ValueError, match="spot_check"):
            FleetConfig(spot_check=1.5)

    asyncio.run(go())


# ---- the other paths that accept verdicts ------------------------------------------------------

def test_agent_evaluator_refuses_a_rogue_and_stops_asking_it() -> None:
    async def go() -> None:
        async with fake(rogue("operator_version")) as (address, agent):
            async with AgentEvaluator(address, timeout_s=10) as ev:
                v = await ev.evaluate(ADD.id, garbage("1"))
                assert v.status is Status.INFRA_ERROR and "operator_version" in v.message
                assert v.candidate_hash == candidate_id(garbage("1"))
                v = await ev.evaluate(ADD.id, garbage("2"))
                assert v.status is Status.INFRA_ERROR and "not trusted" in v.message
            assert len(agent.calls) == 1

    asyncio.run(go())


def test_kgb_eval_writes_no_verdict_from_a_rogue(tmp_path: Path) -> None:
    for i in range(2):
        (tmp_path / f"c{i}.py").write_text(garbage(str(i)))
    out = tmp_path / "out.jsonl"
    with fake_in_thread(rogue("candidate_hash")) as (address, agent):
        r = CliRunner().invoke(kgb, ["eval", str(tmp_path / "c0.py"), str(tmp_path / "c1.py"),
                                     "--op", ADD.id, "--agent", address, "--json",
                                     "--out", str(out)])
    assert r.stdout == "" and not out.exists()
    assert "answered for another request" in r.stderr and "quarantined" in r.stderr
    assert len(agent.calls) == 1


def test_kgb_run_path_stores_nothing_from_a_rogue(tmp_path: Path) -> None:
    """``kgb run``'s sweep (one agent, candidates judged one at a time): the rogue is caught on
    the first candidate and never asked again; the rest end as infrastructure failures."""
    import ray

    from coordinator.engine import init_ray, run_sweep
    from coordinator.local_run import local_sweep

    ops = tuple(operators.ids()[:4])
    alarms: dict[tuple[str, str], int] = {}
    with fake_in_thread(rogue("candidate_hash")) as (address, agent):
        spec, options = local_sweep("rogue", tmp_path, ops, [("reference", {})], "cpu", address,
                                    evaluations_in_flight=1)
        init_ray(num_cpus=1)
        try:
            state, progress = asyncio.run(run_sweep(
                spec, options, on_fleet=lambda status: alarms.update(status["alarms"])))
        finally:
            ray.shutdown()
    store = Store.open_run(tmp_path)
    try:
        assert state == "incomplete" and progress.planned == 4 and progress.infra == 4
        assert store.db.execute("SELECT COUNT(*) FROM verdicts").fetchone() == (0,)
        assert alarms == {(address, "mismatch"): 1}
        assert len(agent.calls) == 1  # one at a time: caught on the first, never asked again
        assert all(row.verdict is None for row in store.trajectories("rogue"))
    finally:
        store.close()


def test_guard_keeps_the_agents_claims_out_of_the_refusal() -> None:
    from protos.integrity import Expected

    guard = Guard()
    req = EvalRequest("r", ADD.id, b"source", operator_version=ADD.version)
    lie = replace(honest_verdict(req, Status.PASSED), operator_id="x" * 10_000 + "\n")
    refused = guard.vet("a:1", Expected.of(req), lie)
    assert refused.status is Status.INFRA_ERROR and refused.operator_id == ADD.id
    assert "\n" not in refused.message and len(refused.message) < 600  # quoted, truncated
    assert guard.vet("a:1", Expected.of(req), honest_verdict(req, Status.PASSED)).status \
        is Status.INFRA_ERROR  # quarantined: even a right answer is not taken
    assert guard.vet("b:1", Expected.of(req), honest_verdict(req, Status.PASSED)).status \
        is Status.PASSED
    data = orjson.dumps(refused.to_json())
    assert b"x" * 100 not in data
