"""A worker's claim that the harness failed while timing, settled by the problem's own solution.

Only the worker sees the problem's baseline, its re-check reference and the checker fail while
a case is timed, and the worker is the candidate's process: its word cannot clear the candidate
(a hostile one would claim a fault to leave its failure unscored). It can be tested, though. The
agent runs the problem's shipped solution on a fresh worker — one the candidate never touched —
and if that run meets the same fault (same benchmark case, same part of the harness), the fault
is the harness's: the candidate's verdict becomes ``INFRA_ERROR``. If the solution passes, the
claim was the candidate's doing and stays its ``RUNTIME_ERROR``; that answer is kept for the
agent's lifetime. A reproduced fault is not kept: it may have been passing (memory taken by
neighbours, say), and a kept one would let any later candidate at that case turn its failure
into ``INFRA_ERROR`` by claiming it. So each such claim costs a solution run of its own; claims
arriving while one runs share it. A run that settles nothing (its deadline, a lost worker) is
not kept either.
"""
from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from device_agent.harness_faults import PARTS, WorkerClaim
from protos.records import Status, Verdict

SolutionRun = Callable[[], Awaitable[tuple[Verdict, WorkerClaim | None]]]


class Outcome(enum.Enum):
    REPRODUCED = "the problem's own solution fails the same way on a fresh worker"
    NOT_REPRODUCED = "the problem's own solution ran it on a fresh worker without that fault"
    UNSETTLED = "re-running the problem's own solution did not settle it"


@dataclass(frozen=True)
class Settlement:
    outcome: Outcome
    detail: str = ""  # for UNSETTLED: how the solution's run ended

    def describe(self) -> str:
        return self.outcome.value + (f" ({self.detail})" if self.detail else "")


class Reproductions:
    """The agent's claims in settlement, and those refuted, by (problem, benchmark case, part of
    the harness)."""

    def __init__(self) -> None:
        self._refuted: set[tuple[str, int, str]] = set()
        self._running: dict[tuple[str, int, str], asyncio.Future[Settlement]] = {}

    async def settle(self, problem: str, claim: WorkerClaim, run_solution: SolutionRun) -> Settlement:
        """Whether ``claim`` (about ``problem``) reproduces with the problem's solution: one run
        per claim, shared by claims that arrive while it runs; a refutation is reused. A claim
        naming no part of the harness is not run (a forged report could otherwise ask for a run
        per made-up name)."""
        if claim.part not in PARTS:  # only a forged report names no part of the harness
            return Settlement(Outcome.UNSETTLED, "it names no part of the harness")
        key = (problem, claim.case, claim.part)
        if key in self._refuted:
            return Settlement(Outcome.NOT_REPRODUCED)
        running = self._running.get(key)
        if running is None:
            running = self._running[key] = asyncio.ensure_future(self._run(key, run_solution))
            running.add_done_callback(lambda _: self._running.pop(key, None))
        return await asyncio.shield(running)  # a waiter that gives up leaves it to the others

    async def _run(self, key: tuple[str, int, str], run_solution: SolutionRun) -> Settlement:
        verdict, again = await run_solution()
        if again is not None and (again.case, again.part) == key[1:]:
            return Settlement(Outcome.REPRODUCED)
        if verdict.status is Status.PASSED:
            self._refuted.add(key)
            return Settlement(Outcome.NOT_REPRODUCED)
        return Settlement(Outcome.UNSETTLED,
                          f"it ended {verdict.status.name}: {verdict.message[:300]}")
