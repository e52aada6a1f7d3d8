"""The worker's side: the sandboxed worker process itself — its start, its sandbox, its one job.

A separate process that imports one candidate, runs it (``device_agent.sandboxed_job``), and
exits; the agent's side of it is ``device_agent.worker_process`` (started by
``device_agent.worker_start``, pooled by ``device_agent.worker_pool``), the messages between them
``device_agent.protocol``.

Forked by the agent's forkserver — a separate process started by exec, with torch, triton and
the suite preloaded and no device initialised; the gRPC server itself never forks — then
pre-warmed (device initialised, a kernel run) before any candidate exists, and used for exactly
one candidate. Everything here runs beside untrusted code, so the
agent trusts nothing it says: it only sends raw outputs back over the channel (framed by
``device_agent.codec``, never pickled), and the agent compares them with references it keeps to
itself. Hidden seeds and expected outputs never enter this process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import faulthandler
import os
import resource
import signal
import socket
import sys
from collections.abc import Iterator
from typing import Any

import operators
from device_agent import triton_hooks
from device_agent.protocol import (
    Accepted,
    AgentChannel,
    DeviceGranted,
    DeviceReleased,
    DeviceWanted,
    Job,
    Ready,
    StartError,
    Unexpected,
)
from device_agent.sandboxed_job import run_job, traceback_of
from protos.records import SystemInfo


def worker_entry(sock: socket.socket, platform_name: str, env: dict[str, str], log_path: str,
                 plan: Any) -> None:
    """Body of a worker process forked by the agent's forkserver (torch and triton preloaded).

    Builds the sandbox's first phase (``sandbox.isolate``: descriptors, import path, cgroup,
    no_new_privs, namespaces, private mounts, PID 1 of its own namespace), takes the environment
    the agent built for it, and serves one candidate.
    """
    from device_agent import sandbox

    ch = AgentChannel(sock)
    try:
        sandbox.isolate(plan, sock.fileno(), log_path)
    except BaseException as exc:  # noqa: BLE001 - a broken start is reported, not raised
        with contextlib.suppress(OSError):
            ch.send(StartError(message=f"sandbox: {type(exc).__name__}: {exc}",
                               traceback=traceback_of(exc)))
        os._exit(70)
    os.environ.clear()
    os.environ.update(env)
    code = serve(ch, platform_name, plan)
    sys.stdout.flush()
    sys.stderr.flush()
    # Leave without running the candidate's atexit hooks or finalisers.
    os._exit(code)


def _measure_peaks_if_asked(ch: AgentChannel, platform: Any,
                            system: SystemInfo) -> tuple[dict[str, Any] | None, str]:
    """(measured peaks, why they could not be measured): the agent asks one worker to measure
    when its peak cache has no entry for this device."""
    cache_dir = os.environ.get("KGB_PEAKS_CACHE_DIR")
    if not cache_dir or not platform.timings_meaningful:
        return None, ""
    from device_agent import peaks

    os.environ["KGB_CACHE_DIR"] = cache_dir
    if peaks.load(system.device_model, system.driver) is not None:
        return None, ""
    try:
        with _device_section(ch):
            return peaks.measure(platform.torch_device), ""
    except Exception as exc:  # noqa: BLE001 - the datasheet stays in use
        return None, f"{type(exc).__name__}: {exc}"[:500]


@contextlib.contextmanager
def _device_section(ch: AgentChannel) -> Iterator[None]:
    """Start-up work that uses the device waits for the agent's word, which it gives only while
    no case is being timed there; the host work of a start (imports, compiles, the sandbox) goes
    on meanwhile, so a timer never waits for a whole start."""
    ch.send(DeviceWanted())
    msg = ch.recv()
    if not isinstance(msg, DeviceGranted):
        raise RuntimeError(f"the agent did not grant the device (sent {msg.KIND!r})")
    try:
        yield
    finally:
        ch.send(DeviceReleased())


def _start(ch: AgentChannel, platform_name: str, plan: Any) -> tuple[Any, Ready]:
    """Warm up and lock the sandbox down: the platform and the ready report."""
    from device_agent.platforms import resolve

    platform = resolve(platform_name)
    with _device_section(ch):  # the context and a first kernel
        platform.init_worker()
    from device_agent.warmup import compile_warm_kernel, warm_imports, warm_kernel

    operators.all_specs()
    warm_imports()
    triton_hooks.install()  # before any candidate exists
    system = platform.system_info()  # NVML etc. before privileges are dropped
    # What each source's baselines time against here; asked now, while the worker may still
    # read the installation (vLLM is imported here, once, for the job's timing too).
    system = dataclasses.replace(system, baselines=operators.baseline_libraries())
    peaks, peaks_error = _measure_peaks_if_asked(ch, platform, system)
    from device_agent import sandbox

    applied = sandbox.lock_down(plan)
    try:
        if platform.compiles_kernels:
            compile_warm_kernel(platform.torch_device)  # host work: off the device's gate
        with _device_section(ch):
            warm_kernel(platform.torch_device)
    except Exception as exc:
        hint = (" (agent option --unsafe-sandbox runs trusted code without the sandbox)"
                if plan.isolate else "")
        raise RuntimeError(f"warm-up kernel failed inside the sandbox: {exc}{hint}") from exc
    return platform, Ready(pid=os.getpid(), system=system, sandbox=applied, peaks=peaks,
                           peaks_error=peaks_error)


def serve(ch: AgentChannel, platform_name: str, plan: Any) -> int:
    """Warm up, lock the sandbox down, report ready, then run one job. Returns an exit code."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core dumps from crashing candidates
    # Stacks to the log (stderr) on a fatal signal, and on SIGUSR1 from the agent when a stage
    # deadline passes: where a crash or hang happened tells the toolchain's from the candidate's
    # (device_agent.platforms.toolchain).
    faulthandler.enable(all_threads=True)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    try:
        platform, ready = _start(ch, platform_name, plan)
        ch.send(ready)
    except BaseException as exc:  # noqa: BLE001 - reported to the agent as a broken start
        with contextlib.suppress(OSError):
            ch.send(StartError(message=f"{type(exc).__name__}: {exc}",
                               traceback=traceback_of(exc)))
        return 70
    try:
        job = ch.expect(Job)
    except (EOFError, Unexpected):
        return 0
    ch.nonce = job.nonce
    ch.send(Accepted())  # before any candidate code: a death before this is ours
    run_job(ch, job, platform)
    return 0
