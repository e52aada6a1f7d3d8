"""The agent's own CPU work — inputs, fp64 references, output checks — and the threads it gets.

Why this is its own concern: on a GPU host the candidates' kernel compiles (Triton's passes,
ptxas, gcc) already keep every core busy, and the agent checks many candidates at once. Left to
its defaults, each of those checks would run torch's CPU operators with one OpenMP thread per
core, inside a thread pool sized to the core count: hundreds of spinning threads on sixteen
cores, most of the time lost to the scheduler (seen on the H200 host as 15-40 % system time and
up to 97,000 context switches a second). So the agent runs its host work

- in two bounded pools of its own: ``checks`` for candidates that hold a worker (their worker
  waits for the answer) and ``prepare`` for candidates about to get one, so checks never queue
  behind the inputs of candidates that are still waiting;
- with a small intra-op thread count, since the parallelism is across candidates;
- and prepares at most ``lookahead`` candidates ahead of the workers (their inputs and
  references live in memory until the verdict).
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class HostBudget:
    """How much of the host the agent's own work may use."""

    check_threads: int     # checks of candidates that hold a worker
    prepare_threads: int   # inputs and hidden-case references of candidates about to run
    intra_op_threads: int  # torch's CPU threads per operator
    lookahead: int         # candidates prepared (inputs in memory) beyond those running

    def __post_init__(self) -> None:
        for name in ("check_threads", "prepare_threads", "intra_op_threads", "lookahead"):
            if getattr(self, name) < 1:
                raise ValueError(f"HostBudget.{name} must be at least 1")

    @staticmethod
    def for_host(workers: int, cpus: int | None = None) -> HostBudget:
        """The default for ``workers`` workers in all on a host of ``cpus`` cores: a checking
        thread per worker, half as many preparing, and torch threads only where cores are left
        over once every worker has one."""
        cpus = max(1, cpus if cpus is not None else (os.cpu_count() or 1))
        workers = max(1, workers)
        return HostBudget(check_threads=workers, prepare_threads=max(1, workers // 2),
                          intra_op_threads=max(1, min(4, cpus // workers)),
                          lookahead=workers)


class HostWork:
    """The agent's two thread pools and the admission gate in front of ``prepare``."""

    def __init__(self, budget: HostBudget) -> None:
        self.budget = budget
        self._checks = ThreadPoolExecutor(budget.check_threads, thread_name_prefix="kgb-check")
        self._prepare = ThreadPoolExecutor(budget.prepare_threads, thread_name_prefix="kgb-prepare")
        self._admission: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def admission(self, running_capacity: int) -> asyncio.Semaphore:
        """The semaphore a candidate holds from its inputs to its verdict: the workers'
        capacity plus ``lookahead``. Made on first use, for the running loop."""
        loop = asyncio.get_running_loop()
        if self._admission is None or self._loop is not loop:
            self._admission = asyncio.Semaphore(running_capacity + self.budget.lookahead)
            self._loop = loop
        return self._admission

    async def check(self, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(
            self._checks, functools.partial(fn, *args))

    async def prepare(self, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(
            self._prepare, functools.partial(fn, *args))

    def close(self) -> None:
        self._checks.shutdown(wait=False, cancel_futures=True)
        self._prepare.shutdown(wait=False, cancel_futures=True)


def limit_torch_threads(budget: HostBudget) -> None:
    """Give torch's CPU operators in this (agent) process ``intra_op_threads`` threads."""
    import torch

    torch.set_num_threads(budget.intra_op_threads)
