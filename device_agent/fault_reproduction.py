"""A worker's claim that the harness failed while timing, settled by the problem's own solution.

Only the worker sees the problem's baseline, its re-check reference and the checker fail while
a case is timed, and the worker is the candidate's process: its word cannot clear the candidate
(a hostile one would claim a fault to leave its failure unscored). It can be tested, though. The
agent runs the problem's shipped solution on a fresh worker — one the candidate never touched —
and if that run meets the same fault (same benchmark case, same part of the harness), the fault
is the harness's: the candidate's verdict becomes ``INFRA_ERROR``. If the solution passes, the
claim was the candidate's doing and stays its ``RUNTIME_ERROR``. Either answer is kept for the
agent's lifetime, so a problem whose baseline fails costs one extra run, not one per candidate;
a run that settles nothing (its deadline, a lost worker) is not kept.
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
    """The agent's settled claims, by (problem, benchmark case, part of the harness)."""

    def __init__(self) -> None:
        self._settled: dict[tuple[str, int, str], Outcome] = {}
        self._locks: dict[tuple[str, int, str], asyncio.Lock] = {}

    async def settle(self, problem: str, claim: WorkerClaim, run_solution: SolutionRun) -> Settlement:
        """Whether ``claim`` (about ``problem``) reproduces with the problem's solution; one
        run per claim at a time, its answer reused. A claim naming no part of the harness is
        not run (a forged report could otherwise ask for a run per made-up name)."""
        if claim.part not in PARTS:  # only a forged report names no part of the harness
            return Settlement(Outcome.UNSETTLED, "it names no part of the harness")
        key = (problem, claim.case, claim.part)
        async with self._locks.setdefault(key, asyncio.Lock()):
            if key in self._settled:
                return Settlement(self._settled[key])
            verdict, again = await run_solution()
            if again is not None and (again.case, again.part) == (claim.case, claim.part):
                outcome = Outcome.REPRODUCED
            elif verdict.status is Status.PASSED:
                outcome = Outcome.NOT_REPRODUCED
            else:
                return Settlement(Outcome.UNSETTLED,
                                  f"it ended {verdict.status.name}: {verdict.message[:300]}")
            self._settled[key] = outcome
            return Settlement(outcome)
