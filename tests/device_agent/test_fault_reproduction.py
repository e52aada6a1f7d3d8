"""device_agent.fault_reproduction: a worker's claim of a harness fault is settled by a run of the
problem's own solution. A refutation is kept; a reproduction is not (a later claim runs again), and
neither is a run that settles nothing. The whole path through an agent's workers is in
test_harness_faults.py."""

from __future__ import annotations

import asyncio

from device_agent.fault_reproduction import Outcome, Reproductions
from device_agent.harness_faults import WorkerClaim
from protos.records import Status, Verdict

CLAIM = WorkerClaim("baseline", 1, "timing case big", "CublasError: CUBLAS_STATUS_NOT_SUPPORTED")


def _verdict(status: Status, message: str = "") -> Verdict:
    return Verdict(status=status, operator_id="cublas::x", operator_version=1, candidate_hash="h",
                   request_id="r", device_model="d", harness_version="v", message=message)


class _Solution:
    """A stand-in for the solution's run: hands out ``results`` in turn, counting runs."""

    def __init__(self, *results: tuple[Verdict, WorkerClaim | None]) -> None:
        self.results = list(results)
        self.runs = 0

    async def __call__(self) -> tuple[Verdict, WorkerClaim | None]:
        self.runs += 1
        await asyncio.sleep(0.01)
        return self.results.pop(0)


def _settle(r: Reproductions, run: _Solution, claim: WorkerClaim = CLAIM,
            problem: str = "cublas::x") -> Outcome:
    return asyncio.run(r.settle(problem, claim, run)).outcome


def test_a_reproduced_fault_is_run_again_for_the_next_claim() -> None:
    """A kept reproduction would let any later candidate at that case claim its way to
    INFRA_ERROR, and the fault may have been passing: the next claim runs the solution again."""
    r = Reproductions()
    run = _Solution((_verdict(Status.RUNTIME_ERROR), CLAIM), (_verdict(Status.PASSED), None))
    assert _settle(r, run) is Outcome.REPRODUCED
    assert _settle(r, run) is Outcome.NOT_REPRODUCED
    assert run.runs == 2


def test_a_passing_solution_refutes_the_claim_and_is_remembered() -> None:
    r, run = Reproductions(), _Solution((_verdict(Status.PASSED), None))
    assert _settle(r, run) is Outcome.NOT_REPRODUCED
    assert _settle(r, run) is Outcome.NOT_REPRODUCED
    assert run.runs == 1


def test_another_case_or_part_is_not_the_same_fault() -> None:
    elsewhere = WorkerClaim("baseline", 2, "timing case other", CLAIM.error)
    other_part = WorkerClaim("checker", 1, CLAIM.where, CLAIM.error)
    for again in (elsewhere, other_part):
        run = _Solution((_verdict(Status.RUNTIME_ERROR, "timing failed"), again))
        settled = asyncio.run(Reproductions().settle("cublas::x", CLAIM, run))
        assert settled.outcome is Outcome.UNSETTLED
        assert "RUNTIME_ERROR: timing failed" in settled.describe()


def test_a_run_that_settles_nothing_is_tried_again_next_time() -> None:
    r = Reproductions()
    run = _Solution((_verdict(Status.INFRA_ERROR, "no worker became free"), None),
                    (_verdict(Status.PASSED), None))
    assert _settle(r, run) is Outcome.UNSETTLED
    assert _settle(r, run) is Outcome.NOT_REPRODUCED
    assert run.runs == 2


def test_claims_arriving_together_share_one_run() -> None:
    r, run = Reproductions(), _Solution((_verdict(Status.RUNTIME_ERROR), CLAIM))

    async def both() -> list[Outcome]:
        got = await asyncio.gather(r.settle("cublas::x", CLAIM, run), r.settle("cublas::x", CLAIM, run))
        return [s.outcome for s in got]

    assert asyncio.run(both()) == [Outcome.REPRODUCED, Outcome.REPRODUCED]
    assert run.runs == 1


def test_each_problem_is_settled_on_its_own() -> None:
    r = Reproductions()
    run = _Solution((_verdict(Status.RUNTIME_ERROR), CLAIM), (_verdict(Status.PASSED), None))
    assert _settle(r, run, problem="cublas::x") is Outcome.REPRODUCED
    assert _settle(r, run, problem="cublas::y") is Outcome.NOT_REPRODUCED


def test_a_claim_naming_no_part_of_the_harness_is_not_run() -> None:
    run = _Solution((_verdict(Status.RUNTIME_ERROR), None))
    made_up = WorkerClaim("the moon", 1, CLAIM.where, CLAIM.error)
    settled = asyncio.run(Reproductions().settle("cublas::x", made_up, run))
    assert settled.outcome is Outcome.UNSETTLED and "no part of the harness" in settled.describe()
    assert run.runs == 0


def test_a_waiter_that_gives_up_leaves_the_shared_run_to_the_others() -> None:
    r, run = Reproductions(), _Solution((_verdict(Status.RUNTIME_ERROR), CLAIM))

    async def go() -> Outcome:
        first = asyncio.ensure_future(r.settle("cublas::x", CLAIM, run))
        second = asyncio.ensure_future(r.settle("cublas::x", CLAIM, run))
        await asyncio.sleep(0)
        first.cancel()
        return (await second).outcome

    assert asyncio.run(go()) is Outcome.REPRODUCED
    assert run.runs == 1
