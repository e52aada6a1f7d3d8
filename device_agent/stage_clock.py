"""A stage's deadline, and the device's gate as a stage holds it.

Time a candidate spends waiting for its device is the agent's load, not the candidate's: each
hold moves the stage's deadline on by the wait (never past the request's own deadline), and the
waits add up, so a deadline lost to them is told apart from a candidate that hangs.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

from device_agent import toolchain_faults
from device_agent.worker_process import Worker


class StageClock:
    """A stage's deadline, and the time its candidate spent waiting for the device. Waiting
    (and the agent's own checking) is the agent's load, not the candidate's time: it moves the
    stage's deadline on, never past the request's own (``request_end``)."""

    def __init__(self, request_end: float) -> None:
        self.request_end = request_end
        self.end = request_end
        self.waited = 0.0  # seconds spent waiting for the device so far
        self.waiting_since = 0.0  # when the wait in progress began; 0: none

    def start(self, budget_s: float) -> None:
        self.end = min(time.monotonic() + budget_s, self.request_end)

    def extend(self, seconds: float) -> None:
        self.end = min(self.end + seconds, self.request_end)

    def waited_now(self) -> float:
        return self.waited + (time.monotonic() - self.waiting_since if self.waiting_since else 0)

    @contextlib.asynccontextmanager
    async def holding(self, hold: Callable[[float], AbstractAsyncContextManager[None]],
                      worker: Worker) -> AsyncIterator[tuple[float, float]]:
        """Hold the device's gate by ``hold`` (its shared or exclusive mode), at most until the
        request's deadline; yields (asked, got). A worker that fails inside is killed there."""
        asked = self.waiting_since = time.monotonic()
        async with hold(max(0.001, self.request_end - time.monotonic())), ends_inside(worker):
            got = time.monotonic()
            self.waiting_since = 0.0
            self.waited += got - asked
            self.extend(got - asked)
            yield asked, got


@contextlib.asynccontextmanager
async def ends_inside(worker: Worker) -> AsyncIterator[None]:
    """Inside a hold on the device: a worker that fails there (a deadline, a forged or malformed
    message, a crash) is killed there, and the hold is given back only after it exited. Its call
    may still be running on the device (a kernel that never returns) and its context's teardown
    uses the device: neither may overlap a case that a neighbour times next."""
    try:
        yield
    except (EOFError, asyncio.IncompleteReadError, ConnectionError):
        # The worker is gone already: let its shim report how it died before the kill.
        await worker.end(grace=1.0)
        raise
    except TimeoutError:
        # Past its deadline: its stacks first, which tell a hung compiler from a hung candidate.
        await toolchain_faults.ask_for_stacks(worker)
        await worker.end()
        raise
    except BaseException:
        await worker.end()
        raise
