"""Who may use a device right now: shared for checking, exclusive for timing.

Compile and correctness of several candidates overlap on one device (their kernels are short and
their time is mostly host work), but nothing else may run on the device while a case is timed,
or a neighbour's kernels would show up in the samples. A writer-preferring readers-writer lock:
once a timer waits, new checking calls wait behind it, so timing is never starved by a stream
of correctness calls; timers are served in arrival order.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class DeviceGate:
    """Readers-writer lock for one device (asyncio, one event loop)."""

    def __init__(self) -> None:
        self._cond = asyncio.Condition()
        self._shared = 0
        self._exclusive = False
        self._writers_waiting = 0

    @property
    def state(self) -> tuple[int, bool, int]:
        """(shared holders, held exclusively, timers waiting): for Describe and tests."""
        return self._shared, self._exclusive, self._writers_waiting

    @contextlib.asynccontextmanager
    async def shared(self, timeout: float | None = None) -> AsyncIterator[None]:
        """Hold the device with other checkers; raises TimeoutError after ``timeout`` s."""
        async with self._cond:
            await asyncio.wait_for(
                self._cond.wait_for(lambda: not self._exclusive and not self._writers_waiting),
                timeout)
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
            self._writers_waiting += 1
            try:
                await asyncio.wait_for(
                    self._cond.wait_for(lambda: not self._exclusive and self._shared == 0),
                    timeout)
            finally:
                self._writers_waiting -= 1
            self._exclusive = True
        try:
            yield
        finally:
            async with self._cond:
                self._exclusive = False
                self._cond.notify_all()
