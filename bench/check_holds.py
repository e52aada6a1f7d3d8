"""Correctness under timers: one hold of the device's gate per case, or several ready cases a hold.

    python bench/check_holds.py [--candidates 4] [--timers 4] [--op aten::add] [--holds 0 0.25]

Several candidates share one device: while some are timed (each timed case holds the device
alone), the others run their correctness cases, each of which needs the device shared. With one
hold per case (``check_hold_s`` 0, the agent before this change), every case of a candidate
waits for the batch of timers queued when it asks; with a hold budget, a candidate runs the
cases whose dry runs are ready in a row under one hold.

The candidates (distinct variants of the problem's solution) go through an in-process agent on
the ``cpu`` platform, correctness only; beside them ``--timers`` stand-in timers stand for the
candidates being timed on the same device: each takes the gate alone for ``--timed-s`` (a timed
case), lets go, builds its next case for ``--build-s``, and asks again, until the candidates are
done. Printed per setting: wall time, shared holds, timer holds, and the candidates' correctness
stage (median, max).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import operators  # noqa: E402
from device_agent.device_gate import DeviceGate  # noqa: E402
from device_agent.evaluation import Evaluator, StageBudgets  # noqa: E402
from device_agent.platforms.cpu import CpuPlatform  # noqa: E402
from device_agent.worker_pool import WorkerPool  # noqa: E402
from protos.records import EvalRequest  # noqa: E402


class _CountingGate(DeviceGate):
    def __init__(self) -> None:
        super().__init__()
        self.shared_holds = 0

    @contextlib.asynccontextmanager
    async def shared(self, timeout: float | None = None) -> AsyncIterator[None]:
        async with super().shared(timeout):
            self.shared_holds += 1
            yield


def _variant(source: str, i: int) -> str:
    return source + f"\n# candidate {i}\n"  # its own hash: no verdict or input reuse


async def _run(op: str, n: int, timers: int, hold_s: float, timed_s: float,
               build_s: float) -> dict[str, float]:
    spec = operators.get(op)
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as root:
        os.chmod(root, 0o711)
        pool = WorkerPool(CpuPlatform(), 0, n, Path(root))
        gate = pool.gate = _CountingGate()
        await pool.start()
        try:
            ev = Evaluator(CpuPlatform(), [pool], os.urandom(16),
                           StageBudgets(check_hold_s=hold_s), layers=frozenset())
            checking: list[float] = []
            timed = 0
            waits: list[float] = []
            done = asyncio.Event()

            async def one(i: int) -> str:
                req = EvalRequest(uuid.uuid4().hex, spec.id, _variant(spec.solution, i).encode(),
                                  skip_timing=True)
                t = time.monotonic()
                v = await ev.evaluate(req, time.monotonic() + 1800)
                checking.append(time.monotonic() - t)
                return v.status.name

            async def timer() -> None:
                nonlocal timed
                while not done.is_set():
                    asked = time.monotonic()
                    async with gate.exclusive():
                        waits.append(time.monotonic() - asked)
                        await asyncio.sleep(timed_s)
                        timed += 1
                    await asyncio.sleep(build_s)

            t0 = time.monotonic()
            beside = [asyncio.ensure_future(timer()) for _ in range(timers)]
            statuses = await asyncio.gather(*(one(i) for i in range(n)))
            wall = time.monotonic() - t0
            done.set()
            await asyncio.gather(*beside)
        finally:
            await pool.close()
    bad = [s for s in statuses if s != "PASSED"]
    if bad:
        raise SystemExit(f"hold {hold_s}: not every candidate passed: {bad}")
    return {"hold_s": hold_s, "wall_s": wall, "shared_holds": gate.shared_holds, "timed": timed,
            "median_s": statistics.median(checking), "max_s": max(checking),
            "wait_median_s": statistics.median(waits), "wait_max_s": max(waits)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--op", default="aten::add")
    ap.add_argument("--candidates", type=int, default=4, help="also the workers")
    ap.add_argument("--timers", type=int, default=4)
    ap.add_argument("--timed-s", type=float, default=0.2, help="a stand-in timed case")
    ap.add_argument("--build-s", type=float, default=0.05, help="between a timer's cases")
    ap.add_argument("--holds", type=float, nargs="+", default=[0.0, 0.25])
    args = ap.parse_args()
    os.environ.setdefault("KGB_AGENT_SECRET_FILE", str(Path(tempfile.mkdtemp()) / "secret"))
    print(f"{args.candidates} candidates of {args.op} (correctness only, a worker each), "
          f"{args.timers} stand-in timers ({args.timed_s:g} s a timed case, {args.build_s:g} s "
          "between)\n")
    print("| check_hold_s | wall (s) | shared holds | timed cases | a candidate's evaluation, "
          "median / max (s) | a timer's wait for the device, median / max (s) |")
    print("|---|---|---|---|---|---|")
    for hold in args.holds:
        r = asyncio.run(_run(args.op, args.candidates, args.timers, hold, args.timed_s,
                             args.build_s))
        print(f"| {r['hold_s']:g} | {r['wall_s']:.1f} | {r['shared_holds']:.0f} | "
              f"{r['timed']:.0f} | {r['median_s']:.1f} / {r['max_s']:.1f} | "
              f"{r['wait_median_s']:.2f} / {r['wait_max_s']:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
