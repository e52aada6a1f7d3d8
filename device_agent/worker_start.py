"""Starting one sandbox worker: its private directory, sandbox plan, environment and control
group, the fork from the agent's forkserver, and the wait for its ready report (sharing the
device's gate only for the parts of the start that use the device). Kept apart from the pool
(:mod:`device_agent.worker_pool`), which decides when to start one."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import tempfile
from pathlib import Path

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
from device_agent.worker_process import ForkedChild, Worker, WorkerStartError, cpu_seconds

READY_TIMEOUT_S = 120.0
STARTING_TASKS = 4096  # a starting worker's task limit; tightened to its own + headroom at ready


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
    proc = ForkedChild(mp_proc)
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
