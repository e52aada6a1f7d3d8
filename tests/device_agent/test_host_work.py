"""The agent's own CPU work: bounded pools, checks never behind prepares, bounded admission."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from device_agent.host_work import HostBudget, HostWork


def test_the_default_budget_gives_torch_threads_only_to_spare_cores() -> None:
    busy = HostBudget.for_host(workers=14, cpus=16)  # a GPU host running 14 workers
    assert (busy.check_threads, busy.prepare_threads, busy.intra_op_threads, busy.lookahead) == \
        (14, 7, 1, 14)
    assert HostBudget.for_host(workers=4, cpus=16).intra_op_threads == 4
    assert HostBudget.for_host(workers=2, cpus=2).intra_op_threads == 1
    assert HostBudget.for_host(workers=1, cpus=64).intra_op_threads == 4  # capped
    with pytest.raises(ValueError, match="lookahead"):
        HostBudget(1, 1, 1, 0)


def test_checks_run_while_every_prepare_thread_is_busy() -> None:
    """A running candidate's check must not wait behind the inputs of queued candidates."""
    host = HostWork(HostBudget(check_threads=1, prepare_threads=1, intra_op_threads=1,
                               lookahead=1))
    release = threading.Event()

    def slow_prepare() -> str:
        release.wait(10)
        return threading.current_thread().name

    async def go() -> tuple[float, str, str]:
        preparing = [asyncio.ensure_future(host.prepare(slow_prepare)) for _ in range(3)]
        await asyncio.sleep(0.05)
        t0 = time.monotonic()
        name = await asyncio.wait_for(host.check(lambda: threading.current_thread().name), 5)
        took = time.monotonic() - t0
        release.set()
        names = await asyncio.gather(*preparing)
        return took, name, names[0]

    try:
        took, check_thread, prepare_thread = asyncio.run(go())
    finally:
        host.close()
    assert took < 1.0
    assert check_thread.startswith("kgb-check") and prepare_thread.startswith("kgb-prepare")


def test_admission_holds_capacity_plus_lookahead() -> None:
    host = HostWork(HostBudget(check_threads=1, prepare_threads=1, intra_op_threads=1,
                               lookahead=2))

    async def go() -> int:
        gate = host.admission(running_capacity=3)
        held = 0
        while True:
            try:
                await asyncio.wait_for(gate.acquire(), 0.05)
            except (TimeoutError, asyncio.TimeoutError):  # distinct classes on Python 3.10
                return held
            held += 1

    try:
        assert asyncio.run(go()) == 5
    finally:
        host.close()
