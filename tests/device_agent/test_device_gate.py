"""The device gate: checking calls overlap, a timed case runs alone, timers are not starved."""

from __future__ import annotations

import asyncio
import contextlib

from device_agent.device_gate import DeviceGate


def test_shared_holders_overlap_and_exclusive_waits_for_them() -> None:
    async def go() -> list[str]:
        gate = DeviceGate()
        events: list[str] = []

        async def checker(name: str) -> None:
            async with gate.shared():
                events.append(f"{name}+")
                await asyncio.sleep(0.05)
                events.append(f"{name}-")

        async def timer() -> None:
            await asyncio.sleep(0.01)  # arrives while both checkers hold the gate
            async with gate.exclusive():
                assert gate.state == (0, True, 0)
                events.append("T+")
                await asyncio.sleep(0.02)
                events.append("T-")

        await asyncio.gather(checker("a"), checker("b"), timer())
        return events

    events = asyncio.run(go())
    assert events[:2] == ["a+", "b+"]  # the two checkers overlapped
    assert events.index("T+") > max(events.index("a-"), events.index("b-"))


def test_a_waiting_timer_blocks_new_checkers() -> None:
    async def go() -> list[str]:
        gate = DeviceGate()
        events: list[str] = []

        async def long_checker() -> None:
            async with gate.shared():
                await asyncio.sleep(0.05)
                events.append("long-")

        async def timer() -> None:
            await asyncio.sleep(0.01)
            async with gate.exclusive():
                events.append("T")

        async def late_checker() -> None:
            await asyncio.sleep(0.02)  # arrives after the timer started waiting
            async with gate.shared():
                events.append("late")

        await asyncio.gather(long_checker(), timer(), late_checker())
        return events

    assert asyncio.run(go()) == ["long-", "T", "late"]


def test_timers_exclude_each_other_and_a_cancelled_wait_leaves_no_trace() -> None:
    async def go() -> None:
        gate = DeviceGate()
        inside = 0
        peak = 0

        async def timer() -> None:
            nonlocal inside, peak
            async with gate.exclusive():
                inside += 1
                peak = max(peak, inside)
                await asyncio.sleep(0.01)
                inside -= 1

        await asyncio.gather(*(timer() for _ in range(4)))
        assert peak == 1

        async with gate.shared():
            waiter = asyncio.create_task(timer())
            await asyncio.sleep(0.01)
            assert gate.state == (1, False, 1)
            waiter.cancel()
            await asyncio.gather(waiter, return_exceptions=True)
        assert gate.state == (0, False, 0)
        async with gate.shared():  # not blocked by the cancelled timer
            pass

    asyncio.run(go())


async def _timer(gate: DeviceGate, events: list[str], name: str, delay: float,
                 hold: float) -> None:
    await asyncio.sleep(delay)
    async with gate.exclusive():
        events.append(f"{name}+")
        await asyncio.sleep(hold)
        events.append(f"{name}-")


async def _checker(gate: DeviceGate, events: list[str], name: str, delay: float,
                   hold: float) -> None:
    await asyncio.sleep(delay)
    async with gate.shared():
        events.append(name)
        await asyncio.sleep(hold)


def test_checkers_waiting_behind_a_timer_go_before_the_next_timer() -> None:
    """A queue of timers does not starve checking: when one timed case ends, the checkers that
    waited for it run before the next timer takes the device."""
    async def go() -> list[str]:
        gate = DeviceGate()
        events: list[str] = []
        await asyncio.gather(_timer(gate, events, "T1", 0.0, 0.03),
                             _checker(gate, events, "c1", 0.01, 0.01),
                             _timer(gate, events, "T2", 0.015, 0.03),
                             _checker(gate, events, "c2", 0.02, 0.01),
                             _timer(gate, events, "T3", 0.025, 0.03))
        return events

    assert asyncio.run(go()) == ["T1+", "T1-", "c1", "c2", "T2+", "T2-", "T3+", "T3-"]


def test_a_checker_that_gives_up_after_being_let_in_does_not_hold_up_the_next_timer() -> None:
    async def go() -> None:
        gate = DeviceGate()
        async with gate.exclusive():
            waiting = asyncio.create_task(gate.shared().__aenter__())
            await asyncio.sleep(0.01)
            assert gate.state == (0, True, 0)
        waiting.cancel()  # released, then cancelled before it ran
        await asyncio.gather(waiting, return_exceptions=True)
        async with asyncio.timeout(1):
            async with gate.exclusive():
                assert gate.state == (0, True, 0)

    asyncio.run(go())


def test_a_timer_that_gives_up_releases_the_checkers_behind_it() -> None:
    async def go() -> None:
        gate = DeviceGate()
        async with gate.shared():
            timer = asyncio.create_task(gate.exclusive(timeout=0.02).__aenter__())
            await asyncio.sleep(0.005)
            late = asyncio.create_task(gate.shared().__aenter__())
            await asyncio.sleep(0.005)
            assert not late.done()  # behind the waiting timer
            await asyncio.gather(timer, return_exceptions=True)  # timed out
            async with asyncio.timeout(1):
                await late
        assert gate.state[2] == 0

    asyncio.run(go())


def test_timers_queued_during_checking_run_as_one_batch() -> None:
    """Timers that queued while checkers held the device run back to back once they leave; a
    checker that arrives during the batch waits for it, but not for a timer that queued after
    the batch began."""
    async def go() -> list[str]:
        gate = DeviceGate()
        events: list[str] = []
        await asyncio.gather(_checker(gate, events, "c0", 0.0, 0.05),
                             _timer(gate, events, "T1", 0.01, 0.02),
                             _timer(gate, events, "T2", 0.02, 0.02),
                             _timer(gate, events, "T3", 0.03, 0.02),
                             _checker(gate, events, "c1", 0.06, 0.01),
                             _timer(gate, events, "T4", 0.07, 0.02))
        return events

    assert asyncio.run(go()) == ["c0", "T1+", "T1-", "T2+", "T2-", "T3+", "T3-", "c1",
                                 "T4+", "T4-"]


def test_a_timer_that_gives_up_does_not_let_checkers_pass_the_timers_behind_it() -> None:
    async def go() -> list[str]:
        gate = DeviceGate()
        events: list[str] = []

        async def quitter() -> None:
            await asyncio.sleep(0.01)
            with contextlib.suppress(TimeoutError):
                async with gate.exclusive(timeout=0.02):
                    events.append("never")

        await asyncio.gather(_checker(gate, events, "c0", 0.0, 0.05), quitter(),
                             _timer(gate, events, "T2", 0.015, 0.02),
                             _checker(gate, events, "late", 0.02, 0.01))
        return events

    assert asyncio.run(go()) == ["c0", "T2+", "T2-", "late"]
