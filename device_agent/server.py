"""The device agent's gRPC server (grpc.aio): the agent composed from its settings, and its life.

:func:`compose` builds every part from :class:`AgentSettings`, each given what it needs as it is
built (the metrics included); :func:`serve` then runs it the way grpc's graceful-shutdown example
runs a server: start (the port is bound first, health NOT_SERVING), warm the worker pools and
only then report SERVING on ``grpc.health.v1`` for both ``""`` and ``kgb.agent.v1.DeviceAgent``,
wait for SIGTERM/SIGINT, drain in-flight evaluations, stop with grace. The RPCs themselves are
``device_agent/service.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import secrets
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

import operators
from device_agent import launchers
from device_agent import peaks as peak_cache
from device_agent.cgroups import CgroupHost
from device_agent.evaluation import LAYERS, Evaluator, StageBudgets
from device_agent.host_work import HostBudget, HostWork, limit_torch_threads
from device_agent.launchers import LauncherBuilder
from device_agent.platforms import Platform, resolve
from device_agent.registration import Registrar, RegistrationSettings, advertise_address
from device_agent.rpc_guard import UndecodableRequests
from device_agent.sandbox import SandboxSettings, is_root, trusted_sys_path
from device_agent.service import DeviceAgentService
from device_agent.tenancy import Access, AccessSettings
from device_agent.worker_pool import WorkerPool
from protos.client import MAX_MESSAGE_BYTES, SERVICE_NAME
from protos.kgb.agent.v1 import agent_pb2, agent_pb2_grpc
from protos.records import SystemInfo
from protos.security import ClientAuth

if TYPE_CHECKING:
    from device_agent.metrics import AgentMetrics

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AgentSettings:
    host: str = "127.0.0.1"
    port: int = 50151
    platform: str = "auto"
    workers_per_device: int | None = None  # default: 2 on cpu, 4 per GPU
    max_queue: int = 256
    port_file: Path | None = None
    work_root: Path | None = None
    budgets: StageBudgets = StageBudgets()
    sandbox: SandboxSettings = SandboxSettings()
    layers: frozenset[str] = frozenset(LAYERS)
    metrics_port: int | None = None  # None: no Prometheus /metrics endpoint
    register: str | None = None    # a coordinator's registry (host:port) to register with
    advertise: str | None = None   # the address to register (default: the listen address)
    drain_s: float = 5.0           # on SIGTERM, how long in-flight evaluations may finish
    instant_verdicts: bool = False  # test mode: static checks only, no workers (benchmarks)
    host_threads: int | None = None  # torch CPU threads of the agent (default: HostBudget.for_host)
    access: AccessSettings = AccessSettings()  # TLS, tokens, quotas, audit log
    register_auth: ClientAuth | None = field(default=None, repr=False)  # to reach --register


def load_secret() -> bytes:
    """The agent's secret for hidden-case seeds: ``KGB_AGENT_SECRET`` (hex), else a file created
    once under ``~/.cache/kgb`` (so verdicts stay reproducible across restarts)."""
    env = os.environ.get("KGB_AGENT_SECRET")
    if env:
        return bytes.fromhex(env) if all(c in "0123456789abcdefABCDEF" for c in env) else env.encode()
    path = Path(os.environ.get("KGB_AGENT_SECRET_FILE", Path.home() / ".cache" / "kgb" / "agent-secret"))
    if path.exists():
        return path.read_bytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    value = secrets.token_bytes(32)
    with os.fdopen(fd, "wb") as f:
        f.write(value)
    return value


def _peaks_for(pool: WorkerPool, system: SystemInfo) -> dict[str, Any] | None:
    """Measured peaks for the pool's device: fresh from its first worker (then cached), else
    from the cache; None keeps the datasheet. Implausible measurements are not used."""
    model, driver = system.device_model, system.driver
    measured = pool.measured_peaks or peak_cache.load(model, driver)
    if not measured:
        return None
    if not peak_cache.believable(measured, system.peak_bandwidth_gbps):
        log.warning("measured bandwidth %.0f GB/s exceeds the datasheet's %s GB/s: ignored",
                    measured.get("bandwidth_gbps", 0.0), system.peak_bandwidth_gbps)
        return None
    if pool.measured_peaks:
        peak_cache.save(model, driver, measured)
    return measured


class BindError(RuntimeError):
    pass


class ExposureRefused(RuntimeError):
    """A non-loopback address without TLS and tokens (and without ``--insecure``)."""


def _registrar(settings: AgentSettings, port: int, service: DeviceAgentService) -> Registrar | None:
    """The heartbeat loop for ``--register`` (started once the workers are warm), else None."""
    if not settings.register:
        return None
    advertise = settings.advertise or advertise_address(settings.host, port)
    return Registrar(RegistrationSettings(coordinator=settings.register, advertise=advertise,
                                          auth=settings.register_auth),
                     service.describe, lambda: service.draining)


def _sandbox_host(limits: SandboxSettings) -> CgroupHost | None:
    """Check that this host can sandbox untrusted code, before anything starts: root (private
    uids, namespaces) and cgroups it may write. Returns the agent's control groups (None with
    --unsafe-sandbox)."""
    if not limits.isolate:
        return None
    if not is_root():
        raise RuntimeError("the sandbox for untrusted candidates needs root (a private uid per "
                           "worker, namespaces, cgroups); run the agent as root, or pass "
                           "--unsafe-sandbox to run trusted code without it")
    return CgroupHost.create()


def default_workers(platform: Platform) -> int:
    return 2 if platform.name == "cpu" else 4


# ---- composition -----------------------------------------------------------------------------------

def compose(settings: AgentSettings) -> Agent:
    """The agent ``settings`` describe, listening but not yet serving. Refuses (with
    :class:`ExposureRefused`, :class:`BindError` or another RuntimeError) before any worker
    starts: an exposed address without TLS and tokens, unusable credentials, no such platform,
    a port in use, no sandbox on this host."""
    problem = settings.access.problem(settings.host)
    if problem is not None:
        raise ExposureRefused(problem)
    access = Access(settings.access)  # unusable certificates or tokens file: refuse to start
    platform = resolve(settings.platform)
    operators.all_specs()  # import the suite once, before serving
    metrics = _metrics(settings, platform)
    server, port = _listen(settings, access, metrics)
    metrics_port = _serve_metrics(settings, metrics)
    # Workers start from this process's import path (multiprocessing imports the agent's main
    # module in them before their sandbox exists): nothing on it may be writable by others.
    sys.path[:] = trusted_sys_path()
    cgroups = _sandbox_host(settings.sandbox)  # after the bind: its failures leave nothing behind
    root = _work_dir(settings)
    size = settings.workers_per_device or default_workers(platform)
    budget = HostBudget.for_host(size * platform.device_count())
    peaks_dir = peak_cache.cache_root() if platform.timings_meaningful else None
    pools = [WorkerPool(platform, i, size, root, limits=settings.sandbox,
                        peaks_cache_dir=peaks_dir if i == 0 else None,
                        host_threads=budget.intra_op_threads, cgroups=cgroups, metrics=metrics)
             for i in range(platform.device_count())]
    if settings.host_threads is not None:
        budget = replace(budget, intra_op_threads=settings.host_threads)
    limit_torch_threads(budget)
    builder = (LauncherBuilder(launchers.shared_dir(root))
               if platform.compiles_kernels and launchers.supported() else None)
    evaluator = Evaluator(platform, pools, load_secret(), settings.budgets, settings.layers,
                          instant=settings.instant_verdicts, host=HostWork(budget),
                          launchers=builder, metrics=metrics)
    agent_id = hashlib.sha256(f"{socket.gethostname()}:{port}:{os.getpid()}".encode()).hexdigest()[:12]
    service = DeviceAgentService(evaluator, pools, agent_id, access,
                                 max_queue=settings.max_queue, metrics=metrics)
    health_servicer = _add_services(server, service)
    return Agent(settings, server, port, health_servicer, service, evaluator, pools, access,
                 _registrar(settings, port, service), root, cgroups, metrics, metrics_port)


def _metrics(settings: AgentSettings, platform: Platform) -> AgentMetrics | None:
    """The agent's Prometheus metrics (None without ``--metrics-port``); served later."""
    if settings.metrics_port is None:
        return None
    from device_agent.metrics import AgentMetrics

    return AgentMetrics(platform.name)


def _listen(settings: AgentSettings, access: Access,
            metrics: AgentMetrics | None) -> tuple[grpc.aio.Server, int]:
    """The gRPC server, bound: who may call first (tenancy), then requests that do not parse
    (INVALID_ARGUMENT, rpc_guard)."""
    counted = (lambda: metrics.rejected("unauthenticated")) if metrics is not None else None
    server = grpc.aio.server(interceptors=[*access.interceptors(counted), UndecodableRequests()],
                             options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                                      ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                                      ("grpc.so_reuseport", 0)])
    address = f"{settings.host}:{settings.port}"
    try:
        port = access.bind(server, address)
    except RuntimeError:
        raise BindError(f"cannot listen on {address} (address in use or not available)") from None
    if port == 0:
        raise BindError(f"cannot listen on {address} (port in use?)")
    return server, port


def _serve_metrics(settings: AgentSettings, metrics: AgentMetrics | None) -> int | None:
    if metrics is None or settings.metrics_port is None:
        return None
    try:
        return metrics.serve(settings.metrics_port, settings.host)
    except OSError as exc:
        raise RuntimeError(f"cannot serve metrics on {settings.host}:{settings.metrics_port} "
                           f"({exc.strerror or exc}); choose another --metrics-port "
                           "(or 0 for a free one)") from None


def _work_dir(settings: AgentSettings) -> Path:
    """The agent's private directory: workers (own uids) reach their own directory inside it;
    nobody lists the others."""
    work_root = settings.work_root or Path(os.environ.get("TMPDIR", "/tmp"))
    work_root.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="kgb-agent-", dir=work_root))
    os.chmod(root, 0o711)
    return root


def _add_services(server: grpc.aio.Server, service: DeviceAgentService) -> health.aio.HealthServicer:
    """The DeviceAgent service, health and reflection on ``server``; returns the health."""
    health_servicer = health.aio.HealthServicer()
    agent_pb2_grpc.add_DeviceAgentServicer_to_server(service, server)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (agent_pb2.DESCRIPTOR.services_by_name["DeviceAgent"].full_name,
         health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
         reflection.SERVICE_NAME), server)
    return health_servicer


# ---- life ------------------------------------------------------------------------------------------

@dataclass
class Agent:
    """A composed agent (:func:`compose`): what :func:`serve` starts, drains and stops."""

    settings: AgentSettings
    server: grpc.aio.Server
    port: int
    health: health.aio.HealthServicer
    service: DeviceAgentService
    evaluator: Evaluator
    pools: list[WorkerPool]
    access: Access
    registrar: Registrar | None
    root: Path
    cgroups: CgroupHost | None
    metrics: AgentMetrics | None
    metrics_port: int | None
    warming: asyncio.Task[None] | None = None

    async def start(self, ready: Callable[[int], None] | None = None) -> None:
        """Serve RPCs (health NOT_SERVING until the workers are warm) and say where."""
        await self._health(health_pb2.HealthCheckResponse.NOT_SERVING)
        await self.server.start()
        s = self.settings
        if s.port_file is not None:
            tmp = s.port_file.with_suffix(".tmp")
            tmp.write_text(str(self.port))
            tmp.replace(s.port_file)
        if ready is not None:
            ready(self.port)
        print(f"kgb agent {self.service.agent_id} listening on {s.host}:{self.port} "
              f"(platform {self.evaluator.platform.name}, {len(self.pools)} device(s) x "
              f"{s.workers_per_device or default_workers(self.evaluator.platform)} workers, "
              f"anti-cheat layers: {', '.join(sorted(s.layers)) or 'none'}; "
              f"{self.access.describe()})"
              + (" -- INSTANT-VERDICT TEST MODE: candidates are not run" if s.instant_verdicts
                 else ""),
              file=sys.stderr, flush=True)
        if self.metrics_port is not None:
            shown = f"[{s.host}]" if ":" in s.host else s.host
            print(f"kgb agent metrics on http://{shown}:{self.metrics_port}/metrics",
                  file=sys.stderr, flush=True)

    async def serve_until(self, stop: asyncio.Event) -> int:
        """Warm the workers (then SERVING) and serve until ``stop`` is set; 1 at once when the
        workers cannot start, else 0."""
        self.warming = asyncio.get_running_loop().create_task(self._warm())
        stopped = asyncio.get_running_loop().create_task(stop.wait())
        done, _ = await asyncio.wait({self.warming, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if self.warming in done and self.warming.exception() is not None:
            stopped.cancel()
            print(f"kgb agent: workers failed to start: {self.warming.exception()}",
                  file=sys.stderr)
            return 1
        await stopped
        return 0

    async def _warm(self) -> None:
        if not self.settings.instant_verdicts:  # the instant test mode never runs a candidate
            await asyncio.gather(*(p.start() for p in self.pools))
        first = self.pools[0] if self.pools else None
        if first is not None and first.system is not None:
            self.evaluator.learn_device(first.system)
            self.evaluator.use_peaks(_peaks_for(first, self.evaluator.datasheet))
        await self._health(health_pb2.HealthCheckResponse.SERVING)
        if self.metrics is not None:
            self.metrics.describe(self.evaluator.system.device_model,
                                  self.evaluator.harness_version)
            self.metrics.serving(True)
        log.info("workers ready; SERVING")
        print("kgb agent ready (SERVING)", file=sys.stderr, flush=True)
        if self.registrar is not None:
            self.registrar.start()

    async def drain(self, limit_s: float) -> None:
        """Keep serving while in-flight evaluations finish (up to ``limit_s``): health answers
        NOT_SERVING, Describe still works and new work gets UNAVAILABLE, so a coordinator can
        tell a draining agent, whose calls will complete, from a dead one, whose calls must
        move."""
        self.service.draining = True
        if self.metrics is not None:
            self.metrics.serving(False)
        with contextlib.suppress(Exception):
            await self.health.enter_graceful_shutdown()
        if self.registrar is not None:
            self.registrar.wake()  # tell the coordinator "draining" now, not at the next heartbeat
        end = time.monotonic() + limit_s
        while self.service.active and time.monotonic() < end:
            await asyncio.sleep(0.05)
        if self.registrar is not None:
            await self.registrar.close()

    async def stop(self, grace: float) -> None:
        """Stop the server (``grace`` seconds for calls in flight), then every part."""
        await self.server.stop(grace=grace)
        if self.warming is not None:
            self.warming.cancel()
        for p in self.pools:
            await p.close()
        self.evaluator.close()
        self.access.close()
        shutil.rmtree(self.root, ignore_errors=True)
        if self.cgroups is not None:
            self.cgroups.close()
        if self.metrics is not None:
            self.metrics.close()
        print("kgb agent stopped", file=sys.stderr, flush=True)

    async def _health(self, status: Any) -> None:
        await self.health.set("", status)
        await self.health.set(SERVICE_NAME, status)


def _stop_signal() -> asyncio.Event:
    """An event set by SIGTERM or SIGINT."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def serve(settings: AgentSettings, ready: Callable[[int], None] | None = None) -> int:
    """Run the agent until SIGTERM/SIGINT: start, wait for a stop signal, drain, stop with
    grace. Returns a process exit code (1: the workers could not start)."""
    agent = compose(settings)
    try:
        await agent.start(ready)
        code = await agent.serve_until(_stop_signal())
        await agent.drain(settings.drain_s)
    finally:
        await agent.stop(grace=1.0)
    return code
