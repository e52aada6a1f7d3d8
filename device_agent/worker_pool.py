"""The agent's side of its workers: pre-started, pre-warmed sandbox workers, one pool per
device, each worker used once (what runs inside a worker is ``device_agent.sandboxed_worker``).

Workers are forked by a multiprocessing *forkserver*: a separate process, started by exec with a
scrubbed environment, that has imported torch, triton and the suite once (no device is
initialised there). The gRPC server itself never forks. A worker costs a fork instead of a fresh
interpreter; it then leaves the forkserver's session (so the agent kills its whole process
group), takes the environment the agent built for it, initialises its device, warms up and
applies the sandbox. Its only channel to the agent is one end of a socket pair; stdout/stderr go
to a log file that is never parsed. The pool keeps ``size`` workers warm so start-up is hidden
behind other work. Starting one worker is :mod:`device_agent.worker_start`; a started one,
:mod:`device_agent.worker_process`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from device_agent import sandbox
from device_agent.cgroups import CgroupHost
from device_agent.device_gate import DeviceGate
from device_agent.platforms import Platform
from device_agent.worker_process import Worker, WorkerCpu, WorkerStartError, cpu_seconds
from device_agent.worker_start import start_worker
from protos.records import SystemInfo

if TYPE_CHECKING:
    from device_agent.metrics import AgentMetrics

log = logging.getLogger(__name__)


class WorkerPool:
    """Warm workers for one device. ``acquire`` hands out a ready worker (used once, then
    disposed by the caller) while fewer than ``size`` are in use; a replacement starts at once
    in the background, so it is warm when the slot frees."""

    def __init__(self, platform: Platform, device_index: int, size: int, root: Path,
                 limits: sandbox.SandboxSettings | None = None,
                 peaks_cache_dir: Path | None = None, host_threads: int | None = None,
                 cgroups: CgroupHost | None = None, metrics: AgentMetrics | None = None) -> None:
        if size < 1:
            raise ValueError("pool size must be >= 1")
        self.platform = platform
        self.device_index = device_index
        self.size = size
        self.root = root
        self.limits = limits or sandbox.SandboxSettings()
        self.peaks_cache_dir = peaks_cache_dir  # the first worker measures peaks when uncached
        self.host_threads = host_threads  # torch CPU threads per worker (None: start_worker's)
        self.cgroups = cgroups  # the agent's control groups (None: workers get none)
        self.measured_peaks: dict[str, Any] = {}  # device_agent.peaks' format
        self._ready: asyncio.Queue[Worker] = asyncio.Queue()
        self._closed = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._reaping: set[asyncio.Task[None]] = set()
        self.busy = 0
        self.waiting = 0
        # At most ``size`` candidates at once (the capacity Describe reports): replacements
        # start as soon as a worker is taken, but a warm worker waits for a free slot.
        self._slots = asyncio.Semaphore(size)
        self.system: SystemInfo | None = None  # from the first worker that became ready
        # The device's gate: the device parts of a start (the context, the peak measurement,
        # the warm-up launch) and a used worker's kill (its context's teardown) use the device
        # too, so they wait while a case is timed; a start's host work does not hold it.
        self.gate = DeviceGate()
        self.metrics = metrics  # None: not exported

    async def start(self) -> None:
        """Start ``size`` workers and wait until all are ready (raises if none can start)."""
        results = await asyncio.gather(
            *(start_worker(self.platform, self.device_index, self.root, self.limits,
                           self.peaks_cache_dir if i == 0 else None, self.host_threads,
                           cgroups=self.cgroups)
              for i in range(self.size)),
            return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        for r in results:
            if isinstance(r, Worker):
                self._learn(r)
                self._ready.put_nowait(r)
        if errors:
            for _ in errors:
                if self.metrics is not None:
                    self.metrics.worker_start_failed(self.device_index)
                self._spawn_replacement()
            if self._ready.empty():
                raise WorkerStartError(str(errors[0]))

    def _learn(self, w: Worker) -> None:
        """The device's description and measured peaks, from a worker that became ready."""
        if w.ready is None:
            return
        self.system = self.system or w.ready.system
        if w.ready.peaks is not None:
            self.measured_peaks = dict(w.ready.peaks)
        elif w.ready.peaks_error:
            log.warning("peak measurement failed: %s", w.ready.peaks_error)

    def _spawn_replacement(self) -> None:
        if self._closed:
            return
        task = asyncio.get_running_loop().create_task(self._replace())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _replace(self) -> None:
        delay = 0.5
        while not self._closed:
            try:
                began = time.monotonic()
                w = await start_worker(self.platform, self.device_index, self.root,
                                       self.limits, host_threads=self.host_threads,
                                       gate=self.gate, cgroups=self.cgroups)
            except WorkerStartError as exc:
                if self.metrics is not None:
                    self.metrics.worker_start_failed(self.device_index)
                log.error("worker start failed (retrying in %.1fs): %s", delay, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
                continue
            if self._closed:
                await w.dispose()
                return
            if self.metrics is not None:
                self.metrics.worker_restarted(self.device_index, time.monotonic() - began)
            self._ready.put_nowait(w)
            return

    @property
    def ready_count(self) -> int:
        """Warm workers waiting for a candidate."""
        return self._ready.qsize()

    @property
    def starting(self) -> int:
        """Replacement workers being started (or retried after a failed start)."""
        return len(self._tasks)

    async def acquire(self) -> Worker:
        """A ready, live worker for one candidate. Starts its replacement immediately. A warm
        worker that died while it waited (killed by someone, the OOM killer) is replaced, never
        handed out."""
        self.waiting += 1
        try:
            await self._slots.acquire()
            try:
                w = await self._ready.get()
                while w.proc.returncode is not None:
                    log.warning("warm worker %d died while idle (exit %s); replacing it",
                                w.pid, w.proc.returncode)
                    self._discard(w)
                    w = await self._ready.get()
            except BaseException:
                self._slots.release()
                raise
        finally:
            self.waiting -= 1
        self.busy += 1
        self._spawn_replacement()
        return w

    def _discard(self, w: Worker) -> None:
        """Dispose of a dead warm worker in the background and start its replacement."""
        if self.metrics is not None:
            self.metrics.worker_lost(self.device_index, "idle")
        self._spawn_replacement()
        task = asyncio.get_running_loop().create_task(self._reap(w))
        self._reaping.add(task)
        task.add_done_callback(self._reaping.discard)

    async def release(self, w: Worker) -> None:
        """Dispose of a used worker (workers are never reused). Its processes are stopped at
        once; the kill and the reaping go on in the background, under the device's gate (a CUDA
        context's teardown uses the device: it must not overlap a timed case), so the
        candidate's verdict waits for neither."""
        self.busy -= 1
        self._slots.release()
        done = cpu_seconds(w.main_pid)
        if done is not None and w.cpu_at_ready is not None:
            (so, sc), (do, dc) = w.cpu_at_ready, done
            w.cpu = WorkerCpu(so, sc, max(0.0, do - so), max(0.0, dc - sc))
            if self.metrics is not None:
                self.metrics.worker_cpu(self.device_index, w.cpu)
        w.freeze()
        task = asyncio.get_running_loop().create_task(self._reap(w))
        self._reaping.add(task)
        task.add_done_callback(self._reaping.discard)

    async def _reap(self, w: Worker) -> None:
        async with self.gate.shared():
            await w.dispose()

    async def close(self) -> None:
        self._closed = True
        for t in list(self._tasks):
            t.cancel()
        while not self._ready.empty():
            await self._ready.get_nowait().dispose()
        if self._reaping:
            await asyncio.gather(*self._reaping, return_exceptions=True)
