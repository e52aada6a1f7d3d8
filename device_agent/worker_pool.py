"""The agent's side of its workers: pre-started, pre-warmed sandbox workers, one pool per
device, each worker used once (what runs inside a worker is ``device_agent.sandboxed_worker``).

Workers are forked by a multiprocessing *forkserver*: a separate process, started by exec with a
scrubbed environment, that has imported torch, triton and the suite once (no device is
initialised there). The gRPC server itself never forks. A worker costs a fork instead of a fresh
interpreter; it then leaves the forkserver's session (so the agent kills its whole process
group), takes the environment the agent built for it, initialises its device, warms up and
applies the sandbox. Its only channel to the agent is one end of a socket pair; stdout/stderr go
to a log file that is never parsed. The pool keeps ``size`` workers warm so start-up is hidden
behind other work.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import multiprocessing.forkserver
import os
import shutil
import signal
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from device_agent import launchers, sandbox, worker_uids
from device_agent.cgroups import CgroupHost, JobCgroup
from device_agent.codec import CodecError
from device_agent.device_gate import DeviceGate
from device_agent.forkserver import ensure_forkserver, scrubbed_env
from device_agent.platforms import Platform
from device_agent.protocol import (
    ChannelError,
    DeviceGranted,
    DeviceReleased,
    DeviceWanted,
    Ready,
    Report,
    StartError,
    WorkerChannel,
)
from protos.records import SystemInfo

if TYPE_CHECKING:
    from device_agent.metrics import AgentMetrics

log = logging.getLogger(__name__)

LOG_TAIL_BYTES = 4000
READY_TIMEOUT_S = 120.0
STARTING_TASKS = 4096  # a starting worker's task limit; tightened to its own + headroom at ready


class _Child:
    """A forked worker process as the agent sees it."""

    def __init__(self, proc: multiprocessing.process.BaseProcess) -> None:
        self._proc = proc
        self.pid: int = proc.pid or 0

    @property
    def returncode(self) -> int | None:
        return self._proc.exitcode

    async def wait(self) -> int | None:
        await asyncio.to_thread(self._proc.join)
        return self._proc.exitcode


_CLOCK_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> tuple[float, float] | None:
    """CPU seconds of process ``pid`` so far: (its own, its waited-for children's — for a worker,
    the compilers it ran: ptxas, gcc), read from /proc; None where that cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    try:  # fields after the name: state ppid ... utime(12) stime(13) cutime(14) cstime(15)
        own = (int(fields[11]) + int(fields[12])) / _CLOCK_TICK
        children = (int(fields[13]) + int(fields[14])) / _CLOCK_TICK
    except (IndexError, ValueError):
        return None
    return own, children


@dataclass(frozen=True)
class WorkerCpu:
    """Where one worker's CPU went: starting (fork to ready: device context, warm-up kernel) and
    serving its candidate (compiles, runs, replies), each split into the worker's own time and
    its compilers'. Read by the agent from /proc, so the candidate cannot misreport it."""

    start_own: float
    start_children: float
    job_own: float
    job_children: float

    def describe(self) -> str:
        return (f"worker CPU: start {self.start_own:.1f}s (+{self.start_children:.1f}s "
                f"compilers), job {self.job_own:.1f}s (+{self.job_children:.1f}s compilers)")


class WorkerStartError(RuntimeError):
    """A worker could not start (broken install, no device): the system's fault, not a candidate's."""


class Worker:
    """One started worker process and the agent's end of its channel.

    ``proc`` is what the forkserver started: an isolated worker's shim, whose child
    (``main_pid``) is PID 1 of the worker's own PID namespace and serves the candidate."""

    def __init__(self, proc: _Child, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter, workdir: Path, log_path: Path,
                 plan: sandbox.SandboxPlan, cgroup: JobCgroup | None = None,
                 memory_bytes: int = 0) -> None:
        self.proc = proc
        self.plan = plan
        self.cgroup = cgroup
        self.memory_bytes = memory_bytes
        self.channel = WorkerChannel(reader, writer)
        self.workdir = workdir
        self.log_path = log_path
        self.main_pid = proc.pid
        self.ready: Ready | None = None  # its report once warm
        self.cpu_at_ready: tuple[float, float] | None = None
        self.cpu: WorkerCpu | None = None  # set when the pool takes the worker back

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def uid(self) -> int | None:
        return self.plan.uid

    def log_tail(self, limit: int = LOG_TAIL_BYTES) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - limit))
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def death_note(self) -> str:
        """Why the worker's processes died, where the agent can tell (the kernel's OOM killer
        acting on the job's memory limit); empty otherwise."""
        if self.cgroup is not None and self.cgroup.oom_kills() > 0:
            return (f"; the job reached its memory limit ({self.memory_bytes / (1 << 30):.1f} GiB) "
                    "and the kernel killed it")
        return ""

    def _signal_all(self, sig: int) -> None:
        """``sig`` to the shim's process group and to every process of the worker's PID
        namespace (children that left the group included, whatever uid they have)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.proc.pid, sig)
        if self.plan.isolate and self.main_pid != self.proc.pid:
            for pid in sandbox.namespace_members(self.main_pid):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)

    def dump_stacks(self) -> bool:
        """Ask the worker's main process to write every thread's stack to its log (it registered
        faulthandler on SIGUSR1); False where that process is not known apart from the shim,
        which SIGUSR1 would kill."""
        if self.plan.isolate and self.main_pid == self.proc.pid:
            return False
        try:
            os.kill(self.main_pid, signal.SIGUSR1)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def kill(self) -> None:
        """SIGKILL every process of the worker (its cgroup's, when it has one)."""
        self._signal_all(signal.SIGKILL)
        if self.cgroup is not None:
            self.cgroup.kill()

    def freeze(self) -> None:
        """Stop every process of the worker now (no more host work, no new launches) but leave
        its device context alone: tearing a context down uses the device, so the SIGKILL comes
        from :meth:`dispose`, run while the device's gate is held."""
        if self.cgroup is not None:
            self.cgroup.freeze()
        else:
            self._signal_all(signal.SIGSTOP)

    async def end(self, timeout: float = 10.0, grace: float = 0.0) -> None:
        """Kill now (or after ``grace`` seconds, for a worker that is exiting by itself, so its
        own exit status is kept) and wait for the exit, in which its device context is torn
        down: for a caller that holds the device's gate and must not give it back before then."""
        if grace > 0:
            with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
                await asyncio.wait_for(self.proc.wait(), timeout=grace)
        self.kill()
        with contextlib.suppress(TimeoutError, asyncio.TimeoutError):  # distinct on 3.10
            await asyncio.wait_for(self.proc.wait(), timeout=timeout)

    async def dispose(self) -> int | None:
        """Kill, reap and remove the worker's private directory and groups. Returns its exit
        code."""
        self.kill()
        with contextlib.suppress(Exception):
            self.channel.close()
        try:
            code = await asyncio.wait_for(self.proc.wait(), timeout=10)
        except (TimeoutError, asyncio.TimeoutError):  # distinct classes on Python 3.10
            code = None
        if self.cgroup is not None:  # anything forked between the kill and the reap
            await asyncio.to_thread(self.cgroup.kill)
            if not await asyncio.to_thread(self.cgroup.remove):
                log.warning("worker cgroup %s not empty after the kill", self.cgroup.procs_files)
        shutil.rmtree(self.workdir, ignore_errors=True)
        worker_uids.release_uid(self.plan.uid)
        with contextlib.suppress(OSError):
            self.log_path.unlink()
        return code


async def _until_ready(channel: WorkerChannel, gate: DeviceGate | None) -> Report:
    """A starting worker's reports up to its ready (or failure) report. The worker asks
    before each part of its start that uses the device; it gets ``gate`` shared for that part
    alone, so a timer waits for that part, not for the whole start (host work: imports, the
    sandbox, compiling the warm-up kernel)."""
    while True:
        msg = await channel.recv()
        if not isinstance(msg, DeviceWanted):
            return msg
        async with gate.shared() if gate is not None else contextlib.nullcontext():
            await channel.send(DeviceGranted())
            msg = await channel.recv()
        if not isinstance(msg, DeviceReleased):
            return msg  # a failed start reports itself after the release; a dead one raises


def _plan(limits: sandbox.SandboxSettings, platform: Platform, root: Path, workdir: Path,
          driver_cache: Path, cgroup: JobCgroup | None) -> sandbox.SandboxPlan:
    uid = worker_uids.next_uid() if limits.isolate else None
    memory = limits.memory_bytes
    return sandbox.SandboxPlan(
        isolate=limits.isolate, uid=uid, sys_path=sandbox.trusted_sys_path(),
        cgroup_procs=cgroup.procs_files if cgroup is not None else (),
        agent_root=str(root), writable=(str(driver_cache),) if limits.isolate else (),
        home=sandbox.PRIVATE_HOME if limits.isolate else str(workdir),
        # CUDA reserves huge address ranges: only the cpu platform gets an address-space limit.
        address_space_bytes=0 if platform.timings_meaningful
        else memory + sandbox.ADDRESS_SPACE_HEADROOM,
        file_bytes=limits.file_bytes, extra_processes=limits.extra_processes,
        tmp_bytes=limits.tmp_bytes)


def _worker_env(platform: Platform, device_index: int, plan: sandbox.SandboxPlan, root: Path,
                driver_cache: Path, host_threads: int | None,
                peaks_cache_dir: Path | None) -> dict[str, str]:
    env = scrubbed_env()
    env.update(platform.worker_env(device_index))
    env["HOME"] = plan.home
    env["TRITON_CACHE_DIR"] = f"{plan.home}/.triton"  # private: no cache poisoning across candidates
    if plan.isolate:
        env["TMPDIR"] = "/tmp"  # the worker's own tmpfs; the agent's TMPDIR is read-only there
    env["KGB_WORKER_THREADS"] = str(host_threads or max(1, min(4, (os.cpu_count() or 1) // 4)))
    # Triton's compiled driver helpers, shared by this agent's workers: written only before a
    # worker drops privileges, read-only to candidates (see platforms.cuda.load_triton_driver).
    env["KGB_TRITON_DRIVER_CACHE"] = str(driver_cache)
    # Triton's kernel launchers, built by the agent and read-only to workers (device_agent.launchers).
    env["KGB_TRITON_LAUNCHERS"] = str(launchers.shared_dir(root))
    if peaks_cache_dir is not None:
        env["KGB_PEAKS_CACHE_DIR"] = str(peaks_cache_dir)
    return env


async def start_worker(platform: Platform, device_index: int, root: Path,
                       limits: sandbox.SandboxSettings | None = None,
                       peaks_cache_dir: Path | None = None,
                       host_threads: int | None = None,
                       gate: DeviceGate | None = None,
                       cgroups: CgroupHost | None = None) -> Worker:
    """Start one worker and wait for its ready message. ``host_threads``: torch CPU threads
    of the worker (default: a quarter of the cores, 1-4). ``gate``: the device's, held shared
    while the starting worker uses the device (None: nothing is timed meanwhile). ``cgroups``:
    the agent's, for the worker's own group (None: no group, e.g. --unsafe-sandbox)."""
    limits = limits or sandbox.SandboxSettings()
    workdir = Path(tempfile.mkdtemp(prefix="w-", dir=root))
    driver_cache = root / "triton-driver"
    driver_cache.mkdir(mode=0o755, exist_ok=True)
    cgroup = (cgroups.job(workdir.name, limits.memory_bytes, STARTING_TASKS)
              if cgroups is not None else None)
    plan = _plan(limits, platform, root, workdir, driver_cache, cgroup)
    if plan.uid is not None:  # the worker reads its candidate there (group), cannot write it
        os.chown(workdir, 0, plan.uid)
        os.chmod(workdir, 0o750)
    # The log lives outside the worker's directory, so the candidate cannot swap it.
    log_path = root / f"{workdir.name}.log"
    log_path.touch(mode=0o600)
    env = _worker_env(platform, device_index, plan, root, driver_cache, host_threads,
                      peaks_cache_dir)
    parent_sock, child_sock = socket.socketpair()
    from device_agent.sandboxed_worker import worker_entry

    ctx = await asyncio.to_thread(ensure_forkserver, platform.import_env(), plan.sys_path)
    mp_proc = ctx.Process(target=worker_entry,  # type: ignore[attr-defined]
                          args=(child_sock, platform.name, env, str(log_path), plan),
                          name="kgb-worker")
    try:
        await asyncio.to_thread(mp_proc.start)
    finally:
        child_sock.close()
    proc = _Child(mp_proc)
    reader, writer = await asyncio.open_connection(sock=parent_sock, limit=1 << 20)
    worker = Worker(proc, reader, writer, workdir, log_path, plan, cgroup, limits.memory_bytes)
    try:
        msg = await asyncio.wait_for(_until_ready(worker.channel, gate), timeout=READY_TIMEOUT_S)
    except (TimeoutError, EOFError, asyncio.IncompleteReadError, ConnectionError, CodecError,
            ChannelError) as exc:
        tail = worker.log_tail()
        await worker.dispose()
        raise WorkerStartError(f"worker did not become ready ({type(exc).__name__}); log:\n{tail}") from None
    if not isinstance(msg, Ready):
        tail = worker.log_tail()  # e.g. the compiler's own error when Triton's build fails
        await worker.dispose()
        why = (f"{msg.message}\n{msg.traceback}" if isinstance(msg, StartError)
               else f"unexpected message {msg.KIND!r}\n")
        raise WorkerStartError(f"worker failed to start: {why}\nworker log:\n{tail}")
    worker.ready = msg
    if plan.isolate:
        worker.main_pid = sandbox.child_of(worker.pid) or worker.pid
    if cgroup is not None:  # the warm worker's own tasks, plus room for compilers and threads
        cgroup.limit_tasks(cgroup.tasks() + limits.extra_processes)
    worker.cpu_at_ready = cpu_seconds(worker.main_pid)
    return worker


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
