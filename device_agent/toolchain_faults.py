"""The agent's side of ``TOOLCHAIN_ERROR``: reading a dead or stuck worker's stacks.

A worker whose stage deadline passed is asked for its stacks (SIGUSR1; faulthandler writes
them to its log) before it is killed; a worker that died by a signal wrote them itself. Where
the innermost frame is in the platform's compiler (:class:`ToolchainFrames`), the candidate's
verdict is ``TOOLCHAIN_ERROR`` with the fault's signature, not ``TIMEOUT`` or
``RUNTIME_ERROR``. Retry policy (docs/platforms.md): none, in the agent or the fleet — one
source on one toolchain compiles the same way again, so a retry would spend device time to
crash again; the signature is what lets a person group and report the fault.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from device_agent.platforms.toolchain import ToolchainFrames, fault, fault_from_dump
from protos.records import ToolchainFault

if TYPE_CHECKING:
    from device_agent.worker_process import Worker

DUMP_WAIT_S = 2.0  # how long a stuck worker's stacks may take to reach its log


def raised(stage: str, message: str) -> ToolchainFault:
    """A failure the worker saw raised inside the compiler's ``stage``."""
    return fault("error", stage, message)


DUMP_LOG_BYTES = 64 << 10  # a crash may dump twice (PID 1 survives its first signal)


def crashed(worker: Worker, frames: ToolchainFrames) -> ToolchainFault | None:
    """The toolchain's crash, from the stacks a worker killed by a signal left in its log."""
    return fault_from_dump(worker.log_tail(DUMP_LOG_BYTES), frames, "crash")


async def ask_for_stacks(worker: Worker) -> None:
    """Have a live worker write its stacks to its log (before it is killed for its deadline):
    returns once the log grew, or after :data:`DUMP_WAIT_S`."""
    if worker.proc.returncode is not None:
        return
    before = worker.log_tail()
    if not worker.dump_stacks():
        return
    end = time.monotonic() + DUMP_WAIT_S
    while time.monotonic() < end:
        await asyncio.sleep(0.05)
        if worker.log_tail() != before:
            await asyncio.sleep(0.2)  # the rest of the dump
            return


async def hung(worker: Worker, frames: ToolchainFrames) -> ToolchainFault | None:
    """The toolchain's hang: the stacks of a worker past its deadline (asked for here if it is
    still alive; :func:`device_agent.stage_clock.ends_inside` asked before killing it inside a
    hold of the device) say it was in the compiler. None otherwise."""
    if not frames.files:
        return None
    await ask_for_stacks(worker)
    return fault_from_dump(worker.log_tail(DUMP_LOG_BYTES), frames, "hang")


def describe(found: ToolchainFault, platform: str, where: str) -> str:
    verb = {"crash": "crashed", "hang": "hung", "error": "failed"}.get(found.kind, "failed")
    stage = f" in {found.pass_name}" if found.pass_name else ""
    return (f"{where}: the {platform} platform's compiler {verb}{stage} on this candidate "
            f"(signature {found.signature}): {found.message}")[:1500]
