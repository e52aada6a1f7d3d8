"""Shared test helpers: agents on loopback, and candidates derived from shipped solutions."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import operators
from coordinator.local_agent import LocalAgent


class FakeClock:
    """A monotonic clock a test moves by hand (``clock.now += 10``)."""

    def __init__(self, start: float = 100.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


async def until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``predicate`` until it holds; AssertionError naming ``what`` after ``timeout``."""
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(0.05)


def only_layer(*layers: str) -> tuple[str, ...]:
    """Agent arguments that switch off every anti-cheat layer except ``layers``."""
    from device_agent.evaluation import LAYERS

    unknown = set(layers) - set(LAYERS)
    assert not unknown, f"unknown layers {unknown}"
    return tuple(a for layer in LAYERS if layer not in layers for a in ("--disable-layer", layer))


@contextlib.contextmanager
def running_agent(*extra_args: str, workers: int = 1, env: dict[str, str] | None = None,
                  wait: bool = True, platform: str = "cpu", auth: Any = None) -> Iterator[str]:
    """A real agent process (``cpu`` unless told) on a free loopback port; yields its address
    (SERVING unless ``wait`` is False, in which case it yields as soon as the port is bound).
    ``auth`` (a ClientAuth) reaches an agent that ``extra_args`` put behind TLS."""
    agent = LocalAgent(platform=platform, workers=workers, extra_args=extra_args, env=env, auth=auth)
    address = agent.start()
    try:
        if wait:
            asyncio.run(agent.wait_serving(180))
        yield address
    finally:
        agent.stop()


def evaluate_in_process(platform: Any, op: str, source: str, *, pool_platform: Any = None,
                        **evaluator_args: Any) -> Any:
    """One candidate through an in-process :class:`Evaluator` on ``platform`` (a ``cpu``
    platform variant, e.g. one that claims to time or to compile), with one real worker of
    ``pool_platform`` (default: the cpu platform)."""
    import os
    import tempfile
    import time
    import uuid
    from pathlib import Path

    from device_agent.evaluation import Evaluator
    from device_agent.platforms.cpu import CpuPlatform
    from device_agent.worker_pool import WorkerPool
    from protos.records import EvalRequest

    async def go() -> Any:
        # A retired worker may still be leaving files as the pool stops: cleanup is best effort.
        with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as root:
            os.chmod(root, 0o711)
            pool = WorkerPool(pool_platform or CpuPlatform(), 0, 1, Path(root))
            await pool.start()
            try:
                ev = Evaluator(platform, [pool], b"k", **evaluator_args)
                return await ev.evaluate(EvalRequest(uuid.uuid4().hex, op, source.encode()),
                                         time.monotonic() + 300)
            finally:
                await pool.close()

    return asyncio.run(go())


def softmax_with_libdevice() -> bytes:
    """aten::softmax's reference solution with every ``tl.exp`` turned into ``libdevice.exp``."""
    src = operators.get("aten::softmax").solution
    assert "tl.exp(" in src
    src = src.replace("tl.exp(", "libdevice.exp(").replace(
        "import triton.language as tl",
        "import triton.language as tl\nfrom triton.language.extra import libdevice", 1)
    return src.encode()


# ``trajectory_results`` as a store of schema 5 and older created it (before the reused verdicts
# and the agent track's columns): tests open such a file to check it migrates and reports.
OLD_RESULTS_TABLE = """CREATE TABLE trajectory_results (
    run_id TEXT NOT NULL, platform TEXT NOT NULL, trajectory TEXT NOT NULL,
    operator_id TEXT NOT NULL, operator_version INTEGER NOT NULL, source TEXT NOT NULL,
    method TEXT NOT NULL, model TEXT NOT NULL, sample INTEGER NOT NULL,
    end_reason TEXT NOT NULL, status TEXT NOT NULL, best_candidate_hash TEXT NOT NULL,
    speedup REAL, sol_percent REAL, turns INTEGER NOT NULL, candidates INTEGER NOT NULL,
    prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, cost_usd REAL NOT NULL,
    gpu_seconds REAL NOT NULL, detail TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (run_id, platform, trajectory))"""
