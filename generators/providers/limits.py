"""Async token buckets for requests- and tokens-per-minute limits.

A bucket refills at ``rate`` units per second up to ``capacity``. A charge waits (first come,
first served) until the bucket holds ``min(amount, capacity)`` and then takes the whole amount,
so the level may go negative: a request larger than the burst still goes out once the bucket is
full, and those behind it wait until the debt is repaid. The long-run rate therefore never
exceeds ``rate``, whatever the request sizes. ``adjust`` corrects a charge after the fact (the
tokens-per-minute bucket is charged with an estimate of the prompt before sending and with the
true usage once the reply says it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class TokenBucket:
    def __init__(self, rate_per_s: float, capacity: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if rate_per_s <= 0 or capacity <= 0:
            raise ValueError("token bucket needs a positive rate and capacity")
        self.rate = rate_per_s
        self.capacity = capacity
        self._clock = clock
        self._level = capacity
        self._stamp = clock()
        self._lock = asyncio.Lock()  # FIFO among waiters, so a large charge is not starved

    @property
    def level(self) -> float:
        self._refill()
        return self._level

    def _refill(self) -> None:
        now = self._clock()
        self._level = min(self.capacity, self._level + (now - self._stamp) * self.rate)
        self._stamp = now

    async def acquire(self, amount: float) -> float:
        """Take ``amount``, waiting as long as needed; returns the seconds waited."""
        start = self._clock()
        need = min(amount, self.capacity)
        async with self._lock:
            while True:
                self._refill()
                if self._level >= need:
                    self._level -= amount
                    return self._clock() - start
                await asyncio.sleep((need - self._level) / self.rate)

    def adjust(self, delta: float) -> None:
        """Charge ``delta`` more (negative: refund), without waiting."""
        self._refill()
        self._level = min(self.capacity, self._level - delta)
