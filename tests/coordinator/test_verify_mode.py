"""The integrity of an agent's ``verify``: a public-only evaluation is its own mode end to end.

The request says ``public_only``; an honest agent runs no hidden case and says so in its
verdict; the coordinator's guard refuses a verdict in the other mode; the store keeps it in
``mode_verdicts`` under a key that includes the mode, so it is never read back as a final
verdict (nor a final one for a check); its request id differs from a final evaluation's. Fake
agents for the coordinator's side, the real ``cpu`` agent for the device's.
"""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace
from pathlib import Path

import grpc

import operators
from coordinator.engine.outcomes import public_pass_hidden_fail
from coordinator.engine.router import StoreVerdicts
from coordinator.fleet import AgentEvaluator, Evaluations, Fleet
from coordinator.store import Store, TrajectoryKey, TrajectoryResult
from coordinator.sweep_spec import AgentSpec
from device_agent.tenancy import Binding
from protos.records import CaseResult, EvalRequest, Status, Verdict, candidate_id
from tests.coordinator.fake_agents import FAKE_MODEL, fake, honest_verdict
from tests.coordinator.test_evaluations import FAST
from tests.helpers import OLD_RESULTS_TABLE

ADD = operators.get("aten::add")


async def passes(req: EvalRequest, context: grpc.aio.ServicerContext) -> Verdict:
    assert req.public_only == req.request_id.startswith("rid-public")  # the mode went out
    return replace(honest_verdict(req, Status.PASSED, "public" if req.public_only else "full"),
                   harness_version="test")  # what the fake agent describes: the store's key


def test_public_and_final_verdicts_never_stand_for_each_other(tmp_path: Path) -> None:
    ids: list[tuple[str, str]] = []

    def request_id(operator_id: str, version: int, chash: str, mode: str) -> str:
        ids.append((mode, chash))
        return f"rid-{mode}-{chash[:8]}"

    async def go() -> None:
        cache = StoreVerdicts(str(tmp_path / "kgb.sqlite"))
        async with fake(passes) as (address, agent), \
                Fleet([AgentSpec(address, "cpu")], FAST) as fleet:
            ev = Evaluations(fleet, cache, timeout_s=10, request_id=request_id)
            check, reused = await ev.evaluate("cpu", ADD.id, ADD.solution, public_only=True)
            assert check.public_only and check.message == "public" and not reused
            again, reused = await ev.evaluate("cpu", ADD.id, ADD.solution, public_only=True)
            assert reused and again == check and len(agent.calls) == 1  # same mode: reused
            final, reused = await ev.evaluate("cpu", ADD.id, ADD.solution)
            assert not reused and not final.public_only and final.message == "full"
            assert agent.calls == \
                [f"rid-public-{candidate_id(ADD.solution)[:8]}",
                 f"rid-timed-{candidate_id(ADD.solution)[:8]}"]
            check2, reused = await ev.evaluate("cpu", ADD.id, ADD.solution, public_only=True)
            assert reused and check2.public_only  # the final verdict never answers a check
        await cache.close()

    asyncio.run(go())
    store = Store(tmp_path / "kgb.sqlite")
    key = (ADD.id, ADD.version, candidate_id(ADD.solution))
    final = store.verdict_for_any(*key, [(FAKE_MODEL, "test", "")])
    public = store.verdict_for_any(*key, [(FAKE_MODEL, "test", "")], public_only=True)
    assert final is not None and final.message == "full" and not final.public_only
    assert public is not None and public.message == "public" and public.public_only
    rows = store.db.execute("SELECT mode, status FROM mode_verdicts").fetchall()
    assert rows == [("public", "PASSED")]
    assert store.db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0] == 1
    store.close()


def test_a_verdict_in_the_wrong_mode_is_refused_and_never_kept(tmp_path: Path) -> None:
    """An agent that ignores ``public_only`` (runs hidden cases, or claims a check is final)
    answers another request: INFRA_ERROR, the agent quarantined, nothing kept."""
    async def ignores_mode(req: EvalRequest, context: grpc.aio.ServicerContext) -> Verdict:
        return replace(honest_verdict(req, Status.PASSED), public_only=not req.public_only)

    async def go() -> None:
        cache = StoreVerdicts(str(tmp_path / "kgb.sqlite"))
        async with fake(ignores_mode) as (address, _), \
                Fleet([AgentSpec(address, "cpu")], FAST) as fleet:
            v, _ = await Evaluations(fleet, cache, timeout_s=10).evaluate(
                "cpu", ADD.id, ADD.solution, public_only=True)
            assert v.status is Status.INFRA_ERROR and "public_only" in v.message
            assert fleet.guard.quarantined(address) is not None
        await cache.close()

    asyncio.run(go())
    store = Store(tmp_path / "kgb.sqlite")
    assert store.db.execute("SELECT COUNT(*) FROM mode_verdicts").fetchone()[0] == 0
    assert store.db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0] == 0


def test_real_agent_runs_no_hidden_case_in_public_mode(cpu_agent: str) -> None:
    async def go() -> tuple[Verdict, Verdict]:
        async with AgentEvaluator(cpu_agent, public_only=True) as check, \
                AgentEvaluator(cpu_agent) as final:
            return (await check.evaluate(ADD.id, ADD.solution),
                    await final.evaluate(ADD.id, ADD.solution))

    public, full = asyncio.run(go())
    assert public.status is Status.PASSED and full.status is Status.PASSED
    assert public.public_only and not full.public_only
    assert public.cases and not any(c.hidden for c in public.cases)
    assert any(c.hidden for c in full.cases)
    assert [c.name for c in public.cases] == [c.name for c in full.cases if not c.hidden]


def test_a_request_id_is_bound_to_its_mode() -> None:
    first = Binding(ADD.id, ADD.version, "h", False, public_only=True)
    assert first.differences(Binding(ADD.id, ADD.version, "h", False)) == \
        ["evaluation mode (public_only)"]


def test_public_pass_hidden_fail() -> None:
    def v(*cases: tuple[bool, bool], status: Status = Status.WRONG_ANSWER, **kw: object) -> Verdict:
        return Verdict(status, ADD.id, 1, "h", cases=tuple(
            CaseResult(f"c{i}", hidden, passed) for i, (hidden, passed) in enumerate(cases)), **kw)  # type: ignore[arg-type]

    assert public_pass_hidden_fail(v((False, True), (True, False)))
    assert not public_pass_hidden_fail(v((False, False), (True, False)))   # a public case failed
    assert not public_pass_hidden_fail(v((False, True), (True, True), status=Status.PASSED))
    assert not public_pass_hidden_fail(v((True, False)))                   # no public case ran
    assert not public_pass_hidden_fail(v((False, True), (True, False), public_only=True))
    assert not public_pass_hidden_fail(None)


def test_old_store_files_gain_the_new_columns(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute(OLD_RESULTS_TABLE)
    db.execute("INSERT INTO trajectory_results VALUES ('r', 'cpu', 'aten::add@1/sample/m/0', "
               "'aten::add', 1, 'aten', 'sample', 'm', 0, 'SOLVED', 'PASSED', 'h', NULL, NULL, "
               "1, 1, 10, 5, 0.0, 1.0, '', 1.0)")
    db.commit()
    db.close()
    store = Store(path)
    old = store.trajectory_results("r")
    assert [(r.wall_s, r.verify_calls, r.public_pass_hidden_fail) for r in old] == [(0.0, 0, False)]
    key = TrajectoryKey(ADD.id, 1, "agent", "m", 0)
    new = TrajectoryResult("r", "cpu", key, "aten", "CANDIDATE", Status.WRONG_ANSWER, "h2", None,
                           None, 4, 1, 100, 50, 0.0, 2.0, wall_s=12.5, verify_calls=3,
                           public_pass_hidden_fail=True)
    assert store.add_trajectory_result(new)
    back = [r for r in store.trajectory_results("r") if r.key == key]
    assert back == [replace(new, created=back[0].created)]
    store.close()
