"""One started worker process as the agent sees it: its channel, its log, its CPU account and
the ways to stop it (freeze, kill, dispose). Kept apart from how a worker starts
(:mod:`device_agent.worker_start`) and from the pool that keeps workers warm
(:mod:`device_agent.worker_pool`): the candidate's stages need only this."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path

from device_agent import sandbox, worker_uids
from device_agent.cgroups import JobCgroup
from device_agent.protocol import Ready, WorkerChannel

log = logging.getLogger(__name__)

LOG_TAIL_BYTES = 4000


class ForkedChild:
    """The process the forkserver started for a worker, as the agent waits on it."""

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

    def __init__(self, proc: ForkedChild, reader: asyncio.StreamReader,
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
