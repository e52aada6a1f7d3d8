"""The correctness stage holds the device's gate for several ready cases in a row (up to
``check_hold_s``), not once per case: under a queue of timers, a hold per case made every case of
every candidate wait for a batch of timers. A timer still gets the device within a hold."""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import operators
from device_agent.candidate_run import _ready
from device_agent.device_gate import DeviceGate
from device_agent.evaluation import Evaluator, StageBudgets
from device_agent.platforms.cpu import CpuPlatform
from device_agent.worker_pool import WorkerPool
from protos.records import EvalRequest, Status, Verdict

ADD = operators.get("aten::add")


class _Counting(DeviceGate):
    """The pool's gate, counting shared holds and the times they were taken."""

    def __init__(self) -> None:
        super().__init__()
        self.holds: list[float] = []

    @contextlib.asynccontextmanager
    async def shared(self, timeout: float | None = None) -> AsyncIterator[None]:
        async with super().shared(timeout):
            self.holds.append(time.monotonic())
            yield


async def _evaluate(check_hold_s: float, while_checking: Any = None
                    ) -> tuple[Verdict, _Counting, float]:
    """``aten::add``'s solution on one cpu worker whose gate counts holds; ``while_checking``
    (an async function of the gate) runs beside it. Also returns when the verdict came."""
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as root:
        os.chmod(root, 0o711)
        pool = WorkerPool(CpuPlatform(), 0, 1, Path(root))
        gate = pool.gate = _Counting()
        await pool.start()
        try:
            ev = Evaluator(CpuPlatform(), [pool], b"k", StageBudgets(check_hold_s=check_hold_s),
                           layers=frozenset())
            req = EvalRequest(uuid.uuid4().hex, ADD.id, ADD.solution.encode())
            beside = asyncio.ensure_future(while_checking(gate)) if while_checking else None
            v = await ev.evaluate(req, time.monotonic() + 300)
            came = time.monotonic()
            if beside is not None:
                await beside
            return v, gate, came
        finally:
            await pool.close()


def test_ready_cases_share_holds_and_a_zero_budget_gives_each_its_own(
        agent_secret_env: None) -> None:
    v, gate, _ = asyncio.run(_evaluate(check_hold_s=600))
    assert v.status is Status.PASSED, v.message
    assert len(v.cases) > 10
    # A hold ends early only when a case's dry run is slow to answer (a loaded machine).
    assert len(gate.holds) <= len(v.cases) // 4, (len(gate.holds), len(v.cases))
    v, gate, _ = asyncio.run(_evaluate(check_hold_s=0))
    assert v.status is Status.PASSED, v.message
    assert len(gate.holds) >= len(v.cases)


def test_a_waiting_timer_gets_the_device_before_the_cases_end(agent_secret_env: None) -> None:
    """With a short hold budget, a timer that asks while a candidate is being checked gets in
    between its holds, not after its last case."""
    got: list[float] = []

    async def timer(gate: _Counting) -> None:
        while not gate.holds:
            await asyncio.sleep(0.01)
        async with gate.exclusive():
            got.append(time.monotonic())

    v, gate, came = asyncio.run(_evaluate(check_hold_s=0.05, while_checking=timer))
    assert v.status is Status.PASSED, v.message
    # Holds taken after the timer's and before the verdict: the candidate's later cases (and at
    # most one more, the used worker's disposal, which may begin before the verdict is out).
    later = [h for h in gate.holds if got[0] < h < came]
    assert len(later) >= 3, f"the timer waited for every case ({len(gate.holds)} holds in all)"


@pytest.mark.parametrize(("delay", "ready"), [(0.0, True), (0.5, False)])
def test_a_dry_run_is_waited_for_only_briefly(delay: float, ready: bool) -> None:
    async def go() -> tuple[bool, bool]:
        f = asyncio.ensure_future(asyncio.sleep(delay, "warmed"))
        await asyncio.sleep(0)
        answer = await _ready(f, 0.1, time.monotonic() + 10)
        left_running = not f.done()
        f.cancel()
        return answer, left_running

    answer, left_running = asyncio.run(go())
    assert answer is ready and left_running is not ready
