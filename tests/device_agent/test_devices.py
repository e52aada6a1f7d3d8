"""One pool and one gate per device: work spreads over the devices, and a case timed on one
device holds up nobody on another. Two cpu "devices" stand in for two GPUs (the issue-8 runs on
a multi-GPU host measure the same machinery with real devices)."""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
import uuid
from pathlib import Path

import operators
from device_agent.evaluation import Evaluator
from device_agent.platforms.cpu import CpuPlatform
from device_agent.worker_pool import WorkerPool
from protos.records import EvalRequest, Status, Verdict

SAXPY = operators.get("cublas::cublasSaxpy_v2")


def test_a_timer_on_one_device_does_not_hold_up_the_other(agent_secret_env: None) -> None:
    async def go() -> tuple[Verdict, Verdict]:
        with tempfile.TemporaryDirectory() as root:
            os.chmod(root, 0o711)
            pools = [WorkerPool(CpuPlatform(), i, 1, Path(root)) for i in range(2)]
            await asyncio.gather(*(p.start() for p in pools))
            try:
                ev = Evaluator(CpuPlatform(), pools, b"k")
                held, let_go = asyncio.Event(), asyncio.Event()

                async def timer_on_device_0() -> None:
                    async with pools[0].gate.exclusive():
                        held.set()
                        await let_go.wait()

                timer = asyncio.create_task(timer_on_device_0())
                await held.wait()

                async def one() -> Verdict:
                    return await ev.evaluate(EvalRequest(uuid.uuid4().hex, SAXPY.id,
                                                         SAXPY.solution.encode()),
                                             time.monotonic() + 240)

                first = asyncio.create_task(one())  # the least-loaded pool: device 0
                await asyncio.sleep(0.2)
                second = asyncio.create_task(one())  # device 1
                v2 = await asyncio.wait_for(second, 180)
                assert not first.done(), "the candidate on device 0 ran while its device was timed"
                assert [p.busy for p in pools] == [1, 0]
                let_go.set()
                await timer
                return await asyncio.wait_for(first, 180), v2
            finally:
                await asyncio.gather(*(p.close() for p in pools))

    v1, v2 = asyncio.run(go())
    assert v2.status is Status.PASSED, v2.message  # on device 1, while device 0 was held
    assert v1.status is Status.PASSED, v1.message  # on device 0, once the timer let go
