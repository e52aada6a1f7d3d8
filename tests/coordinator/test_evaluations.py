"""``Evaluations``: the one place verdicts are reused, identical evaluations share a flight, and
new verdicts are kept; and a fleet nobody can join gives up at once when its agents are
quarantined. Against in-process fake agents (no Ray, no real agent)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from pathlib import Path

import grpc

import operators
from coordinator.fleet import Evaluations, Fleet, FleetConfig
from coordinator.spot_check import Dispute
from coordinator.sweep_spec import AgentSpec
from protos.records import CaseTiming, EvalRequest, Status, Verdict, candidate_id
from tests.coordinator.fake_agents import FAKE_MODEL, FakeAgent, fake, honest_verdict
from tests.helpers import until

ADD = operators.get("aten::add")
FAST = FleetConfig(probe_interval_s=0.2, probe_timeout_s=1.0, attempts=2, backoff_base_s=0.05,
                   backoff_max_s=0.1, wait_for_agent_s=1.0)


class Cache:
    """A VerdictCache in memory that records what it was asked."""

    def __init__(self) -> None:
        self.kept: dict[tuple[str, int, str], Verdict] = {}
        self.lookups: list[list[tuple[str, str, str]]] = []
        self.disputes: list[Dispute] = []

    async def lookup(self, operator_id: str, operator_version: int, candidate_hash: str,
                     keys: list[tuple[str, str, str]], public_only: bool = False) -> Verdict | None:
        self.lookups.append(keys)
        found = self.kept.get((operator_id, operator_version, candidate_hash))
        return found if found is not None and found.public_only == public_only else None

    async def keep(self, verdict: Verdict | None, dispute: Dispute | None) -> None:
        if verdict is not None:
            self.kept[(verdict.operator_id, verdict.operator_version, verdict.candidate_hash)] = verdict
        if dispute is not None:
            self.disputes.append(dispute)


async def slow_pass(req: EvalRequest, context: grpc.aio.ServicerContext) -> Verdict:
    await asyncio.sleep(0.3)
    return honest_verdict(req, Status.PASSED)


def test_a_kept_verdict_is_reused_and_identical_candidates_share_one_call() -> None:
    async def go() -> None:
        cache = Cache()
        async with fake(slow_pass) as (address, agent), \
                Fleet([AgentSpec(address, "cpu")], FAST) as fleet:
            ev = Evaluations(fleet, cache, timeout_s=10)
            got = await asyncio.gather(*(ev.evaluate("cpu", ADD.id, ADD.solution) for _ in range(3)))
            # one evaluation, its verdict shared: the first caller's is the evaluation, the
            # others' a reuse (no agent time spent for them)
            assert [(v.status, reused) for v, reused in got] == \
                [(Status.PASSED, False), (Status.PASSED, True), (Status.PASSED, True)]
            assert len(agent.calls) == 1 and ev.evaluated == 1 and ev.shared == 2  # kept once
            # asked before the slot and again once it was granted, for the agent that could judge it
            assert cache.lookups == [[(FAKE_MODEL, "test", "")]] * 2
            again, reused = await ev.evaluate("cpu", ADD.id, ADD.solution)
            assert reused and again == got[0][0] and len(agent.calls) == 1 and ev.reused == 1
            # not timed: the store keeps timed verdicts only, so no lookup and nothing kept
            notime, reused = await ev.evaluate("cpu", ADD.id, ADD.solution, skip_timing=True)
            assert not reused and len(agent.calls) == 2 and len(cache.lookups) == 3
            assert list(cache.kept) == [(ADD.id, ADD.version, candidate_id(ADD.solution))]

    asyncio.run(go())


def test_the_store_is_asked_again_once_the_slot_is_granted() -> None:
    """Two evaluations of one candidate that do not share a flight (one names the device model,
    one does not: the same agent judges both, under one verdict key) wait for the one slot in
    turn; the second finds the first's verdict kept by then and never reaches the agent. The
    agent's evaluations equal the new verdicts kept."""
    async def go() -> None:
        cache = Cache()
        async with fake(slow_pass) as (address, agent), \
                Fleet([AgentSpec(address, "cpu")], FAST) as fleet:
            await fleet.wait_ready("cpu", timeout_s=10)
            ev = Evaluations(fleet, cache, timeout_s=10, in_flight_limit=1)
            got = await asyncio.gather(
                ev.evaluate("cpu", ADD.id, ADD.solution),
                ev.evaluate("cpu", ADD.id, ADD.solution, device_model=FAKE_MODEL))
            assert [v.status for v, _ in got] == [Status.PASSED] * 2
            assert sorted(reused for _, reused in got) == [False, True]
            assert len(agent.calls) == ev.evaluated == len(cache.kept) == 1
            assert ev.reused == 1

    asyncio.run(go())


def test_a_verdict_timed_against_another_baseline_is_not_reused(tmp_path: Path) -> None:
    """The agent's Describe says what it times each problem against; a stored verdict timed
    against PyTorch is not reused once the agent would time against vLLM's kernel (both are
    kept, in the run's real store), and is again once it would time against PyTorch."""
    from coordinator.engine.router import StoreVerdicts

    async def timed(req: EvalRequest, context: grpc.aio.ServicerContext) -> Verdict:
        return replace(honest_verdict(req, Status.PASSED), harness_version="test",
                       baseline=agent.baselines["aten"],
                       timings=(CaseTiming("c", True, 10.0, speedup=2.0),))

    async def describes(fleet: Fleet, baseline: str) -> None:
        agent.baselines = {"aten": baseline}
        await until(lambda: dict(fleet.snapshot().agents[0].baselines).get("aten") == baseline,
                    10, f"the fleet to see baseline {baseline}")

    async def go() -> None:
        nonlocal agent
        cache = StoreVerdicts(str(tmp_path / "kgb.sqlite"))
        async with fake(timed) as (address, agent), \
                Fleet([AgentSpec(address, "cpu")], FAST) as fleet:
            ev = Evaluations(fleet, cache, timeout_s=10)
            await describes(fleet, "torch")
            first, reused = await ev.evaluate("cpu", ADD.id, ADD.solution)
            assert first.baseline == "torch" and not reused
            await describes(fleet, "vllm")
            second, reused = await ev.evaluate("cpu", ADD.id, ADD.solution)
            assert second.baseline == "vllm" and not reused and len(agent.calls) == 2
            await describes(fleet, "torch")
            again, reused = await ev.evaluate("cpu", ADD.id, ADD.solution)
            assert reused and again == first and len(agent.calls) == 2
        await cache.close()

    agent: FakeAgent
    asyncio.run(go())


def test_infra_errors_are_returned_never_kept() -> None:
    async def broken(req: EvalRequest, context: grpc.aio.ServicerContext) -> Verdict:
        return replace(honest_verdict(req, Status.INFRA_ERROR), message="no device")

    async def go() -> None:
        cache = Cache()
        async with fake(broken) as (address, _), Fleet([AgentSpec(address, "cpu")], FAST) as fleet:
            v, reused = await Evaluations(fleet, cache, timeout_s=10).evaluate(
                "cpu", ADD.id, ADD.solution)
            assert v.status is Status.INFRA_ERROR and not reused and cache.kept == {}

    asyncio.run(go())


def test_quarantined_agents_end_evaluations_at_once_unless_agents_may_register() -> None:
    """Nobody can join a fleet without registration: once its only agent is quarantined, an
    evaluation gives up at once rather than wait for an agent that cannot come."""
    async def lie(req: EvalRequest, context: grpc.aio.ServicerContext) -> Verdict:
        return replace(honest_verdict(req, Status.PASSED), operator_version=ADD.version + 1)

    patient = replace(FAST, wait_for_agent_s=3.0)

    async def go(open_fleet: bool) -> float:
        async with fake(lie) as (address, agent), \
                Fleet([AgentSpec(address, "cpu")], patient) as fleet:
            if open_fleet:
                fleet.accept_registrations()
            first = await fleet.evaluate("cpu", ADD.id, ADD.solution)
            assert first.verdict.status is Status.INFRA_ERROR and len(agent.calls) == 1
            start = time.monotonic()
            second = await fleet.evaluate("cpu", ADD.id, "# another\n" + ADD.solution)
            assert second.verdict.status is Status.INFRA_ERROR and len(agent.calls) == 1
            if not open_fleet:
                assert "every matching agent is quarantined" in second.verdict.message
            return time.monotonic() - start

    assert asyncio.run(go(open_fleet=False)) < 1.0
    assert asyncio.run(go(open_fleet=True)) >= patient.wait_for_agent_s
