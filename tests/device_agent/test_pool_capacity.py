"""A pool of size N runs at most N candidates at once, although a replacement worker starts as
soon as one is taken (so it is warm when the slot frees): Describe's capacity is a promise."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from device_agent.platforms.cpu import CpuPlatform
from device_agent.worker_pool import WorkerPool


class _LiveProcess:
    returncode = None


class _FakeWorker:
    pid = main_pid = 0  # no such process: the pool reads no CPU times for it
    proc = _LiveProcess()
    cpu_at_ready = None
    cpu = None

    def kill(self) -> None:
        pass

    def freeze(self) -> None:
        pass

    async def dispose(self) -> None:
        pass


def _pool(size: int, tmp_path: Path) -> WorkerPool:
    pool = WorkerPool(CpuPlatform(), 0, size, tmp_path)

    def instant_replacement() -> None:  # a replacement that is warm at once
        pool._ready.put_nowait(_FakeWorker())  # type: ignore[arg-type]

    pool._spawn_replacement = instant_replacement  # type: ignore[method-assign]
    for _ in range(size):
        pool._ready.put_nowait(_FakeWorker())  # type: ignore[arg-type]
    return pool


def test_a_warm_replacement_waits_for_a_free_slot(tmp_path: Path) -> None:
    async def go() -> list[Any]:
        pool = _pool(1, tmp_path)
        first = await pool.acquire()
        assert pool.ready_count == 1  # the replacement is warm ...
        second = asyncio.ensure_future(pool.acquire())
        await asyncio.sleep(0.05)
        assert not second.done() and pool.busy == 1 and pool.waiting == 1  # ... but waits
        await pool.release(first)
        got = await asyncio.wait_for(second, 1)
        assert pool.busy == 1 and pool.waiting == 0
        return [got]

    asyncio.run(go())


def test_a_cancelled_wait_gives_its_slot_back(tmp_path: Path) -> None:
    async def go() -> None:
        pool = _pool(2, tmp_path)
        pool._ready = asyncio.Queue()  # no warm worker at all
        waiter = asyncio.ensure_future(pool.acquire())
        await asyncio.sleep(0.05)
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
        pool._ready.put_nowait(_FakeWorker())  # type: ignore[arg-type]
        pool._ready.put_nowait(_FakeWorker())  # type: ignore[arg-type]
        await asyncio.wait_for(pool.acquire(), 1)
        await asyncio.wait_for(pool.acquire(), 1)  # both slots free again
        assert pool.busy == 2

    asyncio.run(go())
