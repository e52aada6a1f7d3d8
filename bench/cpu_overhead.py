"""Harness overhead per candidate on the ``cpu`` platform.

Three numbers for the same work (aten::add's cpu tier, public + hidden cases, distinct
candidates so nothing is cached):

1. in-process: the interpreter running the cases with no harness at all (the floor);
2. naive: a fresh Python process per candidate (import torch + triton, load, run, compare);
3. agent: a real cpu agent with warm single-use workers, candidates sent concurrently.

    python bench/cpu_overhead.py [--candidates 16] [--workers 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("TRITON_INTERPRET", "1")

import operators  # noqa: E402
from coordinator.local_agent import LocalAgent  # noqa: E402
from operators.spec import Tier  # noqa: E402
from protos.client import AgentClient  # noqa: E402
from protos.records import EvalRequest, Status  # noqa: E402

OP = "aten::add"

NAIVE = """
import os, sys, time
os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, {repo!r})
import torch, triton
import operators
from operators.spec import Tier
from operators.testing import run_cases
src = open({path!r}).read()
res = run_cases(operators.get({op!r}), src, tier=Tier.CPU, seed=7)
assert all(r.passed for r in res), [r for r in res if not r.passed][:1]
"""


def variants(n: int) -> list[str]:
    base = operators.get(OP).solution
    return [base + f"\n# variant {i} {uuid.uuid4().hex}\n" for i in range(n)]


def in_process(src: str) -> float:
    from operators.testing import run_cases

    t0 = time.perf_counter()
    res = run_cases(operators.get(OP), src, tier=Tier.CPU, seed=7)
    assert all(r.passed for r in res)
    return time.perf_counter() - t0


def naive(src: str) -> float:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(src)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", NAIVE.format(repo=str(REPO), path=f.name, op=OP)],
                   check=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    return time.perf_counter() - t0


async def through_agent(address: str, sources: list[str], concurrency: int) -> tuple[float, list[float]]:
    sem = asyncio.Semaphore(concurrency)
    async with AgentClient(address) as c:
        await c.evaluate(EvalRequest(uuid.uuid4().hex, OP, variants(1)[0].encode()), timeout=300)

        async def one(src: str) -> float:
            async with sem:
                v = await c.evaluate(EvalRequest(uuid.uuid4().hex, OP, src.encode()), timeout=300)
                assert v.status is Status.PASSED, v.message
                return v.wall_seconds

        t0 = time.perf_counter()
        walls = await asyncio.gather(*(one(s) for s in sources))
        return time.perf_counter() - t0, list(walls)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--candidates", type=int, default=16)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--naive", type=int, default=3, help="fresh-process candidates to time")
    args = ap.parse_args()
    from device_agent.platforms.cpu import install_interpreter_support

    install_interpreter_support()
    floor = statistics.median(in_process(s) for s in variants(3))
    naive_s = [naive(s) for s in variants(args.naive)]
    agent = LocalAgent(platform="cpu", workers=args.workers)
    address = agent.start()
    try:
        asyncio.run(agent.wait_serving(300))
        total, walls = asyncio.run(through_agent(address, variants(args.candidates), args.workers))
    finally:
        agent.stop()
    per = total / args.candidates
    print(f"| measure | value |\n|---|---|\n"
          f"| cases per candidate | {len(operators.get(OP).public_cases(Tier.CPU))} public + hidden |\n"
          f"| in-process interpreter time (floor), median | {floor:.2f} s |\n"
          f"| fresh process per candidate (naive), median of {args.naive} | "
          f"{statistics.median(naive_s):.2f} s |\n"
          f"| agent, {args.workers} warm workers: throughput | {60 / per:.1f} candidates/min "
          f"({per:.2f} s each, {args.candidates} candidates in {total:.1f} s) |\n"
          f"| agent-reported wall time per candidate (median; includes waiting for a warm worker) "
          f"| {statistics.median(walls):.2f} s |\n"
          f"| agent overhead per candidate over the floor | {statistics.median(walls) - floor:.2f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
