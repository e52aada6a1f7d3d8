"""A starting worker holds its device's gate only for the parts of its start that use the
device (the context, the peak measurement, the warm-up launch), never for its host work: a
timer then waits for one such part, not a whole start (on the H200 a start held timers, and
with them every checker queued behind the timers, for up to 2 s)."""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path

import pytest

from device_agent.device_gate import DeviceGate
from device_agent.platforms.cpu import CpuPlatform
from device_agent.protocol import (
    Command,
    DeviceReleased,
    DeviceWanted,
    Ready,
    Report,
    StartError,
)
from device_agent.sandbox import Applied
from device_agent.worker_start import _until_ready, start_worker
from protos.records import SystemInfo

READY = Ready(pid=1, system=SystemInfo(platform="cpu"),
              sandbox=Applied(0, False, True, True, False, 0, 0, 0))


class _ScriptedChannel:
    """The agent's end of a starting worker's channel, replaying ``script``; records the
    gate's state when each report is read and what the agent sent."""

    def __init__(self, gate: DeviceGate, script: list[Report]) -> None:
        self.gate = gate
        self.script = list(script)
        self.sent: list[str] = []
        self.states: list[tuple[str, int]] = []

    async def recv(self, until: float | None = None) -> Report:
        if not self.script:
            raise EOFError("the worker died")
        msg = self.script.pop(0)
        self.states.append((msg.KIND, self.gate.state[0]))
        return msg

    async def send(self, msg: Command, until: float | None = None) -> None:
        self.sent.append(msg.KIND)


def test_the_gate_is_held_between_grant_and_release_only() -> None:
    async def go() -> tuple[_ScriptedChannel, Report]:
        gate = DeviceGate()
        w = _ScriptedChannel(gate, [DeviceWanted(), DeviceReleased(), DeviceWanted(),
                                    DeviceReleased(), READY])
        return w, await _until_ready(w, gate)  # type: ignore[arg-type]

    w, msg = asyncio.run(go())
    assert msg is READY
    assert w.sent == ["device_granted", "device_granted"]
    # Asking: not held; releasing: held by this start; ready: let go again.
    assert w.states == [("device_wanted", 0), ("device_released", 1), ("device_wanted", 0),
                        ("device_released", 1), ("ready", 0)]


def test_a_start_that_fails_inside_a_device_part_lets_the_gate_go() -> None:
    async def go() -> tuple[Report, tuple[int, bool, int]]:
        gate = DeviceGate()
        w = _ScriptedChannel(gate, [DeviceWanted(), StartError(message="no device", traceback="")])
        msg = await _until_ready(w, gate)  # type: ignore[arg-type]
        return msg, gate.state

    msg, state = asyncio.run(go())
    assert isinstance(msg, StartError) and state == (0, False, 0)


def test_a_worker_dying_inside_a_device_part_lets_the_gate_go() -> None:
    async def go() -> tuple[int, bool, int]:
        gate = DeviceGate()
        w = _ScriptedChannel(gate, [DeviceWanted()])
        with pytest.raises(EOFError):
            await _until_ready(w, gate)  # type: ignore[arg-type]
        return gate.state

    assert asyncio.run(go()) == (0, False, 0)


def test_a_real_worker_waits_for_a_timer_before_using_the_device(agent_secret_env: None) -> None:
    """A timer holds the device while a real (cpu) worker starts: the start asks for the
    device and stays unfinished while the timer holds it, then becomes ready once it lets go."""

    async def go() -> tuple[bool, bool]:
        with tempfile.TemporaryDirectory() as root:
            os.chmod(root, 0o711)
            gate = DeviceGate()
            timing, done_timing = asyncio.Event(), asyncio.Event()

            async def timer() -> None:
                async with gate.exclusive():
                    timing.set()
                    await done_timing.wait()

            task = asyncio.create_task(timer())
            await timing.wait()
            start = asyncio.create_task(start_worker(CpuPlatform(), 0, Path(root), gate=gate))
            began = time.monotonic()
            while gate._blocked == 0 and not start.done() and time.monotonic() - began < 90:
                await asyncio.sleep(0.05)  # until the worker asks for the device
            asked = gate._blocked == 1
            await asyncio.sleep(0.5)
            waited = not start.done()
            done_timing.set()
            await task
            w = await asyncio.wait_for(start, 90)
            try:
                assert isinstance(w.ready, Ready)
            finally:
                await w.dispose()
            return asked, waited

    asked, waited = asyncio.run(go())
    assert asked, "the starting worker never asked for the device"
    assert waited, "the worker became ready while a timer held the device"
