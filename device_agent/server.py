"""The device agent's gRPC server (grpc.aio): a thin shell around :class:`Evaluator`.

Startup binds the port first (health NOT_SERVING), then warms the worker pools and only then
reports SERVING on ``grpc.health.v1`` for both ``""`` and ``kgb.agent.v1.DeviceAgent``.
Candidate failures are successful RPCs; system errors map to status codes in
:func:`_abort_for`, the one place that does so. SIGTERM/SIGINT drain and stop cleanly.

Who may call and how much is ``device_agent/tenancy.py``: TLS, bearer tokens (each a tenant),
per-tenant quotas and the audit log. Request ids are per tenant and bound to their content.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import logging
import os
import secrets
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

import operators
from device_agent import launchers, tenancy
from device_agent.cgroups import CgroupHost
from device_agent.evaluation import LAYERS, Evaluator, InvalidRequest, StageBudgets, candidate_hash
from device_agent.host_work import HostBudget, HostWork, limit_torch_threads
from device_agent.launchers import LauncherBuilder
from device_agent.platforms import Platform, resolve
from device_agent.registration import Registrar, RegistrationSettings, advertise_address
from device_agent.rpc_guard import UndecodableRequests, clip_details
from device_agent.sandbox import SandboxSettings, is_root, trusted_sys_path
from device_agent.tenancy import Access, AccessSettings, Admitted, Binding, Caller, RequestKey
from device_agent.workers import WorkerPool
from protos import convert
from protos.client import MAX_MESSAGE_BYTES, SERVICE_NAME
from protos.kgb.agent.v1 import agent_pb2, agent_pb2_grpc
from protos.records import AgentDescription, DeviceInfo, EvalRequest, Progress, SystemInfo, Verdict
from protos.security import ClientAuth, current_tenant

if TYPE_CHECKING:
    from device_agent.metrics import AgentMetrics

log = logging.getLogger(__name__)

VERDICT_CACHE = 4096


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


class DeviceAgentService(agent_pb2_grpc.DeviceAgentServicer):  # type: ignore[misc]
    def __init__(self, evaluator: Evaluator, pools: list[WorkerPool], settings: AgentSettings,
                 agent_id: str, access: Access | None = None) -> None:
        self.evaluator = evaluator
        self.pools = pools
        self.settings = settings
        self.agent_id = agent_id
        self.access = access or Access(AccessSettings())
        self.draining = False
        self._tasks: dict[RequestKey, tuple[Binding, asyncio.Task[Verdict]]] = {}
        self._waiters: collections.Counter[RequestKey] = collections.Counter()
        self._done: collections.OrderedDict[RequestKey, tuple[Binding, Verdict]] = collections.OrderedDict()
        self._progress: dict[RequestKey, Callable[[Progress], None]] = {}
        self.metrics: AgentMetrics | None = None

    def _count_rejection(self, exc: BaseException) -> None:
        """Count an Evaluate call refused before admission (for metrics)."""
        reason = ("invalid_argument" if isinstance(exc, InvalidRequest) else
                  "queue_full" if isinstance(exc, tenancy.QueueFull) else
                  "quota" if isinstance(exc, tenancy.QuotaExceeded) else
                  "draining" if isinstance(exc, tenancy.Draining) else None)
        if self.metrics is not None and reason is not None:
            self.metrics.rejected(reason)

    # ---- audit -------------------------------------------------------------------------------
    @staticmethod
    def _caller(context: grpc.aio.ServicerContext, rpc: str) -> Caller:
        return Caller(current_tenant(), context.peer() or "", rpc)

    def _audit(self, caller: Caller, req: EvalRequest, admitted: Admitted | None, *,
               verdict: Verdict | None = None, refused: BaseException | None = None) -> None:
        """One audit line for one Evaluate call: its verdict, or why it got none."""
        if self.access.audit is not None:
            self.access.record(tenancy.audit_record(caller, req, admitted, verdict, refused))

    # ---- admission ---------------------------------------------------------------------------
    @property
    def active(self) -> int:
        return len(self._tasks)

    @property
    def queue_depth(self) -> int:
        """Accepted evaluations not yet on a worker: waiting to be admitted, being checked,
        their inputs being made, or waiting for a worker of a device. A pool's own ``waiting``
        counts only the last kind, so a loaded agent would look idle to its clients."""
        return max(0, self.active - sum(p.busy for p in self.pools))

    def _admit(self, req: EvalRequest, caller: Caller, context: grpc.aio.ServicerContext,
               progress: Callable[[Progress], None] | None) -> Admitted:
        tenancy.check_request_id(req.request_id)
        spec = self.evaluator.resolve(req)  # unknown operator, bad version, oversize: INVALID_ARGUMENT
        binding = Binding(spec.id, spec.version, candidate_hash(req.source), req.skip_timing)
        key = (caller.tenant, req.request_id)
        earlier = self._done.get(key) or self._tasks.get(key)
        if earlier is not None:
            tenancy.check_repeat(req.request_id, earlier[0], binding)
            return Admitted(key, binding, earlier[1], repeat=True)
        if self.draining:
            raise tenancy.Draining()
        remaining = context.time_remaining()
        if remaining is None:
            raise InvalidRequest("a deadline is required on Evaluate calls")
        if remaining <= self.settings.budgets.margin_s:
            raise InvalidRequest(f"deadline too short ({remaining:.1f}s)")
        if self.active >= self.settings.max_queue:
            raise tenancy.QueueFull()
        self.access.quotas.admit(caller.tenant)
        return Admitted(key, binding, self._start(key, binding, req, time.monotonic() + remaining,
                                                  progress), repeat=False)

    def _start(self, key: RequestKey, binding: Binding, req: EvalRequest, deadline: float,
               progress: Callable[[Progress], None] | None) -> asyncio.Task[Verdict]:
        if progress is not None:
            self._progress[key] = progress

        def emit(p: Progress) -> None:
            cb = self._progress.get(key)
            if cb is not None:
                cb(p)

        task = asyncio.get_running_loop().create_task(self.evaluator.evaluate(req, deadline, emit))
        self._tasks[key] = (binding, task)

        def finished(t: asyncio.Task[Verdict]) -> None:
            self._tasks.pop(key, None)
            self._progress.pop(key, None)
            self.access.quotas.release(key[0])
            if not t.cancelled() and t.exception() is None:
                self._done[key] = (binding, t.result())
                while len(self._done) > VERDICT_CACHE:
                    self._done.popitem(last=False)

        task.add_done_callback(finished)
        return task

    async def _await(self, rid: RequestKey, task: asyncio.Task[Verdict]) -> Verdict:
        """Wait for a shared evaluation; the last waiter to leave cancels it (frees the worker)."""
        self._waiters[rid] += 1
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if self._waiters[rid] <= 1 and not task.done():
                task.cancel()
            raise
        finally:
            self._waiters[rid] -= 1
            if self._waiters[rid] <= 0:
                del self._waiters[rid]

    # ---- RPCs --------------------------------------------------------------------------------
    async def Describe(self, request: agent_pb2.DescribeRequest,
                       context: grpc.aio.ServicerContext) -> agent_pb2.DescribeResponse:
        return convert.description_to_proto(self.describe())

    def describe(self) -> AgentDescription:
        model = self.evaluator.system.device_model or self.evaluator.platform.name
        devices = tuple(DeviceInfo(index=p.device_index, model=model, capacity=p.size, busy=p.busy,
                                   queued=p.waiting) for p in self.pools)
        return AgentDescription(
            agent_id=self.agent_id, harness_version=self.evaluator.harness_version,
            system=self.evaluator.system,
            devices=devices, suite=tuple((s.id, s.version) for s in operators.all_specs()),
            capacity=sum(p.size for p in self.pools),
            queue_depth=self.queue_depth, max_queue=self.settings.max_queue,
            timings_meaningful=self.evaluator.platform.timings_meaningful)

    async def Evaluate(self, request: agent_pb2.EvaluateRequest,
                       context: grpc.aio.ServicerContext) -> agent_pb2.Verdict:
        req = convert.request_from_proto(request)
        caller, admitted = self._caller(context, f"/{SERVICE_NAME}/Evaluate"), None
        try:
            admitted = self._admit(req, caller, context, None)
            got = admitted.got
            verdict = got if isinstance(got, Verdict) else await self._await(admitted.key, got)
        except asyncio.CancelledError as exc:
            self._audit(caller, req, admitted, refused=exc)
            raise
        except Exception as exc:  # noqa: BLE001 - mapped to a status code in one place
            self._count_rejection(exc)
            self._audit(caller, req, admitted, refused=exc)
            await _abort_for(exc, context)
            raise
        self._audit(caller, req, admitted, verdict=verdict)
        return convert.verdict_to_proto(verdict)

    async def EvaluateStream(self, request: agent_pb2.EvaluateRequest,
                             context: grpc.aio.ServicerContext) -> AsyncIterator[agent_pb2.EvaluateEvent]:
        req = convert.request_from_proto(request)
        caller = self._caller(context, f"/{SERVICE_NAME}/EvaluateStream")
        events: asyncio.Queue[Progress] = asyncio.Queue()
        try:
            admitted = self._admit(req, caller, context, events.put_nowait)
        except Exception as exc:  # noqa: BLE001
            self._count_rejection(exc)
            self._audit(caller, req, None, refused=exc)
            await _abort_for(exc, context)
            raise
        got = admitted.got
        if isinstance(got, Verdict):
            self._audit(caller, req, admitted, verdict=got)
            yield convert.verdict_event(got)
            return
        waiter = asyncio.ensure_future(self._await(admitted.key, got))
        try:
            while not waiter.done():
                getter = asyncio.ensure_future(events.get())
                done, _ = await asyncio.wait({getter, waiter}, return_when=asyncio.FIRST_COMPLETED)
                if getter in done:
                    yield convert.progress_event(getter.result())
                else:
                    getter.cancel()
            while not events.empty():
                yield convert.progress_event(events.get_nowait())
            verdict = waiter.result()
        except (Exception, asyncio.CancelledError) as exc:  # noqa: BLE001
            self._audit(caller, req, admitted, refused=exc)
            await _abort_for(exc, context)
            raise
        finally:
            if not waiter.done():
                waiter.cancel()
        self._audit(caller, req, admitted, verdict=verdict)
        yield convert.verdict_event(verdict)


async def _abort_for(exc: BaseException, context: grpc.aio.ServicerContext) -> None:
    """The one mapping from system exceptions to gRPC status codes. (Requests whose bytes do
    not parse never get here: :class:`UndecodableRequests` answers them INVALID_ARGUMENT.)
    Details are clipped: they may echo client input, and an oversize trailer reaches the client
    as RESOURCE_EXHAUSTED, which means "retry"."""
    if isinstance(exc, asyncio.CancelledError):
        return
    if isinstance(exc, InvalidRequest):
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, clip_details(str(exc)))
    if isinstance(exc, tenancy.QuotaExceeded):
        context.set_trailing_metadata((("retry-after-ms", str(max(1, round(exc.retry_after_s * 1000)))),))
        await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{exc} (trailer retry-after-ms)")
    if isinstance(exc, tenancy.QueueFull):
        context.set_trailing_metadata((("retry-after-ms", "1000"),))
        await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                            "agent queue is full; retry after about 1 s (trailer retry-after-ms)")
    if isinstance(exc, tenancy.Draining):
        await context.abort(grpc.StatusCode.UNAVAILABLE, "agent is shutting down; use another agent")
    log.exception("internal error")
    await context.abort(grpc.StatusCode.INTERNAL,
                        clip_details(f"internal error: {type(exc).__name__}: {exc}"))


def _peaks_for(pool: WorkerPool, system: SystemInfo) -> dict[str, Any] | None:
    """Measured peaks for the pool's device: fresh from its first worker (then cached), else
    from the cache; None keeps the datasheet. Implausible measurements are not used."""
    from device_agent import peaks as peak_cache

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


async def _drain(service: DeviceAgentService, limit_s: float) -> None:
    """Keep serving while in-flight evaluations finish (up to ``limit_s``): health answers
    NOT_SERVING, Describe still works and new work gets UNAVAILABLE, so a coordinator can tell a
    draining agent, whose calls will complete, from a dead one, whose calls must move."""
    end = time.monotonic() + limit_s
    while service.active and time.monotonic() < end:
        await asyncio.sleep(0.05)


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


async def serve(settings: AgentSettings, ready: Callable[[int], None] | None = None) -> int:
    """Run the agent until SIGTERM/SIGINT. Returns a process exit code."""
    problem = settings.access.problem(settings.host)
    if problem is not None:
        raise ExposureRefused(problem)
    access = Access(settings.access)  # unusable certificates or tokens file: refuse to start
    platform = resolve(settings.platform)
    operators.all_specs()  # import the suite once, before serving
    # Who may call first (tenancy), then requests that do not parse: INVALID_ARGUMENT (rpc_guard).
    server = grpc.aio.server(interceptors=[*access.interceptors(), UndecodableRequests()], options=[
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.so_reuseport", 0),
    ])
    address = f"{settings.host}:{settings.port}"
    try:
        port = access.bind(server, address)
    except RuntimeError:
        raise BindError(f"cannot listen on {address} (address in use or not available)") from None
    if port == 0:
        raise BindError(f"cannot listen on {address} (port in use?)")
    metrics: AgentMetrics | None = None
    if settings.metrics_port is not None:
        from device_agent.metrics import AgentMetrics

        metrics = AgentMetrics(platform.name)
        try:
            metrics_port = metrics.serve(settings.metrics_port, settings.host)
        except OSError as exc:
            raise RuntimeError(f"cannot serve metrics on {settings.host}:{settings.metrics_port} "
                               f"({exc.strerror or exc}); choose another --metrics-port "
                               "(or 0 for a free one)") from None

    # Workers start from this process's import path (multiprocessing imports the agent's main
    # module in them before their sandbox exists): nothing on it may be writable by others.
    sys.path[:] = trusted_sys_path()
    cgroups = _sandbox_host(settings.sandbox)  # after the bind: its failures leave nothing behind
    work_root = settings.work_root or Path(os.environ.get("TMPDIR", "/tmp"))
    work_root.mkdir(parents=True, exist_ok=True)
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="kgb-agent-", dir=work_root))
    os.chmod(root, 0o711)  # workers (own uids) reach their own directory; nobody lists others
    size = settings.workers_per_device or default_workers(platform)
    from device_agent import peaks as peak_cache

    peaks_dir = peak_cache.cache_root()
    devices = platform.device_count()
    budget = HostBudget.for_host(size * devices)
    pools = [WorkerPool(platform, i, size, root, limits=settings.sandbox,
                        peaks_cache_dir=peaks_dir if i == 0 and platform.timings_meaningful else None,
                        host_threads=budget.intra_op_threads, cgroups=cgroups)
             for i in range(devices)]
    if settings.host_threads is not None:
        budget = replace(budget, intra_op_threads=settings.host_threads)
    limit_torch_threads(budget)
    builder = (LauncherBuilder(launchers.shared_dir(root))
               if platform.compiles_kernels and launchers.supported() else None)
    evaluator = Evaluator(platform, pools, load_secret(), settings.budgets, settings.layers,
                          instant=settings.instant_verdicts, host=HostWork(budget),
                          launchers=builder)
    agent_id = hashlib.sha256(f"{socket.gethostname()}:{port}:{os.getpid()}".encode()).hexdigest()[:12]
    service = DeviceAgentService(evaluator, pools, settings, agent_id, access)
    if metrics is not None:
        service.metrics = evaluator.metrics = metrics
        access.on_unauthenticated = lambda: metrics.rejected("unauthenticated")
        for pool in pools:
            pool.metrics = metrics
        metrics.watch(pools, lambda: service.active, settings.max_queue)

    health_servicer = health.aio.HealthServicer()
    await health_servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    await health_servicer.set(SERVICE_NAME, health_pb2.HealthCheckResponse.NOT_SERVING)
    agent_pb2_grpc.add_DeviceAgentServicer_to_server(service, server)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (agent_pb2.DESCRIPTOR.services_by_name["DeviceAgent"].full_name,
         health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
         reflection.SERVICE_NAME), server)
    await server.start()
    registrar = _registrar(settings, port, service)
    if settings.port_file is not None:
        tmp = settings.port_file.with_suffix(".tmp")
        tmp.write_text(str(port))
        tmp.replace(settings.port_file)
    if ready is not None:
        ready(port)
    print(f"kgb agent {agent_id} listening on {settings.host}:{port} "
          f"(platform {platform.name}, {len(pools)} device(s) x {size} workers, "
          f"anti-cheat layers: {', '.join(sorted(settings.layers)) or 'none'}; "
          f"{access.describe()})"
          + (" -- INSTANT-VERDICT TEST MODE: candidates are not run" if settings.instant_verdicts
             else ""),
          file=sys.stderr, flush=True)
    if metrics is not None:
        shown = f"[{settings.host}]" if ":" in settings.host else settings.host
        print(f"kgb agent metrics on http://{shown}:{metrics_port}/metrics", file=sys.stderr,
              flush=True)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    async def warm() -> None:
        if not settings.instant_verdicts:  # the instant test mode never runs a candidate
            await asyncio.gather(*(p.start() for p in pools))
        if pools and pools[0].system_info:
            evaluator.system = evaluator.datasheet = SystemInfo(**pools[0].system_info)
            evaluator.use_peaks(_peaks_for(pools[0], evaluator.system))
        await health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        await health_servicer.set(SERVICE_NAME, health_pb2.HealthCheckResponse.SERVING)
        if metrics is not None:
            metrics.describe(evaluator.system.device_model, evaluator.harness_version)
            metrics.serving(True)
        log.info("workers ready; SERVING")
        print("kgb agent ready (SERVING)", file=sys.stderr, flush=True)
        if registrar is not None:
            registrar.start()

    warm_task = loop.create_task(warm())
    stop_task = loop.create_task(stop.wait())
    done, _ = await asyncio.wait({warm_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
    code = 0
    if warm_task in done and warm_task.exception() is not None:
        print(f"kgb agent: workers failed to start: {warm_task.exception()}", file=sys.stderr)
        code = 1
    else:
        await stop.wait()
    service.draining = True
    if metrics is not None:
        metrics.serving(False)
    with contextlib.suppress(Exception):
        await health_servicer.enter_graceful_shutdown()
    if registrar is not None:
        registrar.wake()  # tell the coordinator "draining" now, not at the next heartbeat
    await _drain(service, settings.drain_s)
    if registrar is not None:
        await registrar.close()
    await server.stop(grace=1.0)
    warm_task.cancel()
    for p in pools:
        await p.close()
    evaluator.close()
    access.close()
    import shutil

    shutil.rmtree(root, ignore_errors=True)
    if cgroups is not None:
        cgroups.close()
    if metrics is not None:
        metrics.close()
    print("kgb agent stopped", file=sys.stderr, flush=True)
    return code
