"""A used or failed worker's device context is torn down only while the device's gate is held:
the teardown (and any call of the candidate still running there) must not overlap a case a
neighbour is timing. On the H200 three workers killed right after their verdicts, outside the
gate, made a 36 µs case measure 44 µs (400 samples, against 10 to 160 for its nine repeats)."""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path

import pytest

from device_agent.device_gate import DeviceGate
from device_agent.platforms.cpu import CpuPlatform
from device_agent.stage_clock import ends_inside
from device_agent.worker_pool import WorkerPool
from device_agent.worker_start import start_worker


def _state(pid: int) -> str:
    """The process's state letter from /proc (T: stopped), or '' once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return ""


def test_a_released_worker_stops_at_once_and_dies_only_once_the_timer_lets_go(
        agent_secret_env: None) -> None:
    async def go() -> tuple[str, str, int | None]:
        with tempfile.TemporaryDirectory() as root:
            os.chmod(root, 0o711)
            pool = WorkerPool(CpuPlatform(), 0, 1, Path(root))
            await pool.start()
            try:
                w = await pool.acquire()
                timing, done_timing = asyncio.Event(), asyncio.Event()

                async def timer() -> None:
                    async with pool.gate.exclusive():
                        timing.set()
                        await done_timing.wait()

                task = asyncio.create_task(timer())
                await timing.wait()
                await pool.release(w)
                await asyncio.sleep(1.0)  # the reaper waits for the gate meanwhile
                while_timing = _state(w.pid)
                alive_while_timing = w.proc.returncode is None
                done_timing.set()
                await task
                code = await asyncio.wait_for(w.proc.wait(), 30)
                assert alive_while_timing
                return while_timing, _state(w.pid), code
            finally:
                await pool.close()

    while_timing, after, code = asyncio.run(go())
    assert while_timing == "T", f"the released worker was not stopped: state {while_timing!r}"
    assert after in ("", "Z") and code is not None  # it exited once the timer let go


def test_a_worker_failing_inside_a_device_hold_has_exited_before_the_hold_ends(
        agent_secret_env: None) -> None:
    async def go() -> tuple[int | None, tuple[int, bool, int]]:
        with tempfile.TemporaryDirectory() as root:
            os.chmod(root, 0o711)
            gate = DeviceGate()
            w = await start_worker(CpuPlatform(), 0, Path(root), gate=gate)
            try:
                began = time.monotonic()
                with pytest.raises(TimeoutError):
                    async with gate.shared(), ends_inside(w):
                        raise TimeoutError  # as a stage deadline does, mid-call
                code = w.proc.returncode  # read before anything else can run
                assert time.monotonic() - began < 10
                return code, gate.state
            finally:
                await w.dispose()

    code, state = asyncio.run(go())
    assert code is not None, "the worker was still alive when the device hold was given back"
    assert state == (0, False, 0)
