"""Who may use a device right now: shared for checking, exclusive for timing.

Compile and correctness of several candidates overlap on one device (their kernels are short and
their time is mostly host work), but nothing else may run on the device while a case is timed,
or a neighbour's kernels would show up in the samples.

A phase-fair readers-writer lock with batched writers. Timers are served in arrival order,
and once a timer waits, checkers that arrive later wait behind it — so a stream of checking
calls never starves timing. When the checkers in the device have finished, every timer queued
by then runs, back to back (one batch); then every checker that waited gets in before the next
batch — so a queue of timers never starves checking either. A checker waits for at most one
batch, a timer for at most one round of checking calls plus the batch before it.

Why batches: a timed case holds the device for tens of milliseconds, but taking the device
alone means waiting until every checking call in it has finished, and a checking call can last
seconds (its first launch compiles the candidate's kernel). One timer per such drain made the
timers, not the device, the bottleneck (H200, 12 workers: 6–38 s of waiting for 0.02 s of
timing). A writer-preferring lock was worse still: correctness waited behind every timer.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
from collections.abc import AsyncIterator


class DeviceGate:
    """Phase-fair readers-writer lock with batched writers, for one device (asyncio, one loop)."""

    def __init__(self) -> None:
        self._cond = asyncio.Condition()
        self._shared = 0
        self._exclusive = False
        self._timers: collections.deque[int] = collections.deque()  # waiting, in arrival order
        self._tickets = itertools.count()
        self._phase = 0  # counts the ends of timer batches
        self._batch_last = -1  # the last ticket of the batch of timers running now
        self._blocked = 0  # checkers waiting for the next release
        self._admitted = 0  # checkers let in by the last release that have not entered yet

    @property
    def state(self) -> tuple[int, bool, int]:
        """(shared holders, held exclusively, timers waiting): for Describe and tests."""
        return self._shared, self._exclusive, len(self._timers)

    @contextlib.asynccontextmanager
    async def shared(self, timeout: float | None = None) -> AsyncIterator[None]:
        """Hold the device with other checkers; raises TimeoutError after ``timeout`` s."""
        async with self._cond:
            if self._exclusive or self._timers:
                phase = self._phase
                self._blocked += 1
                try:
                    await asyncio.wait_for(self._cond.wait_for(lambda: self._phase != phase), timeout)
                except BaseException:
                    if self._phase == phase:
                        self._blocked -= 1
                    else:  # let in, but gave up before entering: the next timer need not wait
                        self._admitted -= 1
                        self._cond.notify_all()
                    raise
                self._admitted -= 1
            self._shared += 1
        try:
            yield
        finally:
            async with self._cond:
                self._shared -= 1
                self._cond.notify_all()

    @contextlib.asynccontextmanager
    async def exclusive(self, timeout: float | None = None) -> AsyncIterator[None]:
        """Hold the device alone; raises TimeoutError after ``timeout`` s of waiting."""
        async with self._cond:
            ticket = next(self._tickets)
            self._timers.append(ticket)
            try:
                await asyncio.wait_for(self._cond.wait_for(
                    lambda: self._timers[0] == ticket and not self._exclusive
                    and self._shared == 0 and self._admitted == 0), timeout)
            except BaseException:
                self._timers.remove(ticket)
                ran_out = not self._timers or (ticket <= self._batch_last < self._timers[0])
                if not self._exclusive and ran_out:  # no timer left to release waiting checkers
                    self._release_checkers()
                self._cond.notify_all()
                raise
            if ticket > self._batch_last:  # a new batch: every timer queued by now
                self._batch_last = self._timers[-1]
            self._timers.popleft()
            self._exclusive = True
        try:
            yield
        finally:
            async with self._cond:
                self._exclusive = False
                if not (self._timers and self._timers[0] <= self._batch_last):
                    self._release_checkers()  # the batch is over
                self._cond.notify_all()

    def _release_checkers(self) -> None:
        """Start a new phase: every checker waiting now may enter before the next batch."""
        self._phase += 1
        self._admitted += self._blocked
        self._blocked = 0
