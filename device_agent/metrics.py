"""Prometheus metrics of one device agent (names and meanings in docs/metrics.md).

Served over HTTP only when the agent is started with ``--metrics-port``; one
:class:`AgentMetrics` per agent, owning its registry. The agent's hot paths call it through
small hooks (``Evaluator.metrics``, ``WorkerPool.metrics``); queue depths and worker counts are
read from the pools when Prometheus scrapes, so they cost nothing between scrapes.

Labels are bounded: ``platform`` is the agent's one platform, ``device`` a device index of this
host, ``status``/``stage``/``state``/``reason`` closed sets. Nothing is labelled by operator,
candidate or request. Only ``prometheus_client`` is needed, which GPU hosts install anyway.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from http.server import HTTPServer
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from protos.records import Status

# Stages of one evaluation, in order (see device_agent/evaluation.py). "cleanup" is disposing of
# the used worker (kill, reap, remove its directory), which the caller waits for.
STAGES = ("static", "inputs", "queued", "load", "correctness", "timing", "cleanup")
WORKER_STATES = ("ready", "busy", "starting")
REJECT_REASONS = ("invalid_argument", "queue_full", "draining", "quota", "unauthenticated")
WORKER_LOST_WHEN = ("idle", "before_job")
STAGE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 40, 80, 160, 320)
START_BUCKETS = (0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 60, 120)
WORKER_CPU_PHASES = ("start", "job")
WORKER_CPU_PARTS = ("own", "compilers")
LOCK_BUCKETS = (0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60)


class WorkerCpuView(Protocol):
    """What the metrics read from a used worker's CPU record (``device_agent.worker_process.WorkerCpu``)."""

    @property
    def start_own(self) -> float: ...

    @property
    def start_children(self) -> float: ...

    @property
    def job_own(self) -> float: ...

    @property
    def job_children(self) -> float: ...


class PoolView(Protocol):
    """What the metrics read from a worker pool (``device_agent.worker_pool.WorkerPool``)."""

    device_index: int
    busy: int
    waiting: int

    @property
    def ready_count(self) -> int: ...

    @property
    def starting(self) -> int: ...


class AgentMetrics:
    """The agent's metrics; every method is cheap and safe to call from the event loop."""

    def __init__(self, platform: str, registry: CollectorRegistry | None = None) -> None:
        self.platform = platform
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self._server: HTTPServer | None = None
        self._evaluation_metrics(r)
        self._worker_metrics(r)
        self._capacity_metrics(r)
        self._start_at_zero()

    def _evaluation_metrics(self, r: CollectorRegistry) -> None:
        """Evaluations: how they ended, their stages, calls refused before admission."""
        self.evaluations = Counter("kgb_agent_evaluations_total", "Evaluations finished, by verdict",
                                   ["platform", "status"], registry=r)
        self.cancelled_total = Counter("kgb_agent_evaluations_cancelled_total",
                                       "Evaluations abandoned because every client went away",
                                       ["platform"], registry=r)
        self.stage_seconds = Histogram("kgb_agent_stage_seconds",
                                       "Time one evaluation spent in each stage it reached",
                                       ["platform", "stage"], registry=r, buckets=STAGE_BUCKETS)
        self.rejected_total = Counter("kgb_agent_rejected_total",
                                      "Evaluate calls refused before admission",
                                      ["platform", "reason"], registry=r)

    def _worker_metrics(self, r: CollectorRegistry) -> None:
        """Workers: starts, failures, losses, CPU, waits for the timing lock."""
        self.worker_restarts = Counter("kgb_agent_worker_restarts_total",
                                       "Replacement workers that became ready (each worker serves "
                                       "one candidate, so one per evaluation that got a worker)",
                                       ["platform", "device"], registry=r)
        self.worker_start_failures = Counter("kgb_agent_worker_start_failures_total",
                                             "Worker starts that failed (retried with back-off)",
                                             ["platform", "device"], registry=r)
        self.worker_lost_total = Counter("kgb_agent_worker_lost_total",
                                         "Warm workers found dead (idle) or dead before taking "
                                         "their job (before_job): replaced, the job retried",
                                         ["platform", "device", "when"], registry=r)
        self.worker_start_seconds = Histogram("kgb_agent_worker_start_seconds",
                                              "Start-up time of a replacement worker (fork to ready)",
                                              ["platform"], registry=r, buckets=START_BUCKETS)
        self.worker_cpu_seconds = Counter("kgb_agent_worker_cpu_seconds_total",
                                          "CPU time of used workers, read from /proc when each is "
                                          "taken back: phase start (fork to ready) or job (its "
                                          "candidate); part own (the worker) or compilers (the "
                                          "ptxas/gcc processes it ran)",
                                          ["platform", "device", "phase", "part"], registry=r)
        self.timing_lock_wait = Histogram("kgb_agent_timing_lock_wait_seconds",
                                          "Wait for a device's exclusive timing lock, per timed case",
                                          ["platform", "device"], registry=r, buckets=LOCK_BUCKETS)

    def _capacity_metrics(self, r: CollectorRegistry) -> None:
        """Queues, workers by state, admission and health, read at scrape time."""
        self.queue_depth = Gauge("kgb_agent_queue_depth",
                                 "Evaluations waiting for a worker of the device",
                                 ["platform", "device"], registry=r)
        self.running = Gauge("kgb_agent_running", "Evaluations holding a worker of the device",
                             ["platform", "device"], registry=r)
        self.workers = Gauge("kgb_agent_workers", "Workers of the device by state",
                             ["platform", "device", "state"], registry=r)
        self.admitted = Gauge("kgb_agent_admitted",
                              "Evaluations admitted and not finished (all stages)",
                              ["platform"], registry=r)
        self.max_queue = Gauge("kgb_agent_max_queue",
                               "Admission limit; beyond it Evaluate returns RESOURCE_EXHAUSTED",
                               ["platform"], registry=r)
        self.serving_gauge = Gauge("kgb_agent_serving",
                                   "1 while health is SERVING (workers warm, not draining)",
                                   ["platform"], registry=r)
        self.info = Gauge("kgb_agent_info", "Always 1; labels describe the agent",
                          ["platform", "device_model", "harness_version"], registry=r)

    def _start_at_zero(self) -> None:
        """Closed label sets start at zero, so rate() sees the first event and panels show
        zeros."""
        for status in Status:
            self.evaluations.labels(self.platform, status.value)
        for stage in STAGES:
            self.stage_seconds.labels(self.platform, stage)
        for reason in REJECT_REASONS:
            self.rejected_total.labels(self.platform, reason)
        self.cancelled_total.labels(self.platform)
        self.worker_start_seconds.labels(self.platform)
        self.serving_gauge.labels(self.platform).set(0)

    # ---- wiring (server start-up) -------------------------------------------------------------
    def watch(self, pools: Sequence[PoolView], admitted: Callable[[], int], max_queue: int) -> None:
        """Read queue depths and worker counts from ``pools`` at scrape time."""
        p = self.platform
        self.admitted.labels(p).set_function(lambda: float(admitted()))
        self.max_queue.labels(p).set(max_queue)
        for pool in pools:
            d = str(pool.device_index)
            self.worker_restarts.labels(p, d)
            self.worker_start_failures.labels(p, d)
            for when in WORKER_LOST_WHEN:
                self.worker_lost_total.labels(p, d, when)
            self.timing_lock_wait.labels(p, d)
            for phase in WORKER_CPU_PHASES:
                for part in WORKER_CPU_PARTS:
                    self.worker_cpu_seconds.labels(p, d, phase, part)
            self.queue_depth.labels(p, d).set_function(lambda pool=pool: float(pool.waiting))
            self.running.labels(p, d).set_function(lambda pool=pool: float(pool.busy))
            self.workers.labels(p, d, "ready").set_function(lambda pool=pool: float(pool.ready_count))
            self.workers.labels(p, d, "busy").set_function(lambda pool=pool: float(pool.busy))
            self.workers.labels(p, d, "starting").set_function(lambda pool=pool: float(pool.starting))

    def serving(self, up: bool) -> None:
        self.serving_gauge.labels(self.platform).set(1 if up else 0)

    def describe(self, device_model: str, harness_version: str) -> None:
        """Set the info series (once the workers have reported the device model)."""
        self.info.clear()
        self.info.labels(self.platform, device_model or "unknown", harness_version).set(1)

    # ---- hooks --------------------------------------------------------------------------------
    def evaluated(self, status: Status, stages: Mapping[str, float]) -> None:
        """One finished evaluation: its verdict's status and how long each stage took."""
        self.evaluations.labels(self.platform, status.value).inc()
        self._stages(stages)

    def cancelled(self, stages: Mapping[str, float]) -> None:
        self.cancelled_total.labels(self.platform).inc()
        self._stages(stages)

    def _stages(self, stages: Mapping[str, float]) -> None:
        for stage, seconds in stages.items():
            if stage in STAGES:
                self.stage_seconds.labels(self.platform, stage).observe(max(seconds, 0.0))

    def rejected(self, reason: str) -> None:
        if reason in REJECT_REASONS:
            self.rejected_total.labels(self.platform, reason).inc()

    def worker_restarted(self, device: int, seconds: float) -> None:
        self.worker_restarts.labels(self.platform, str(device)).inc()
        self.worker_start_seconds.labels(self.platform).observe(seconds)

    def worker_start_failed(self, device: int) -> None:
        self.worker_start_failures.labels(self.platform, str(device)).inc()

    def worker_lost(self, device: int, when: str) -> None:
        """A warm worker found dead (``idle``) or dead before it took its job (``before_job``):
        replaced, and its candidate retried on another — never the candidate's verdict."""
        if when in WORKER_LOST_WHEN:
            self.worker_lost_total.labels(self.platform, str(device), when).inc()

    def worker_cpu(self, device: int, cpu: WorkerCpuView) -> None:
        """A used worker's CPU seconds, as the pool read them when it took the worker back."""
        d = str(device)
        for phase, part, seconds in (("start", "own", cpu.start_own),
                                     ("start", "compilers", cpu.start_children),
                                     ("job", "own", cpu.job_own),
                                     ("job", "compilers", cpu.job_children)):
            self.worker_cpu_seconds.labels(self.platform, d, phase, part).inc(max(seconds, 0.0))

    def timing_lock_waited(self, device: int, seconds: float) -> None:
        self.timing_lock_wait.labels(self.platform, str(device)).observe(max(seconds, 0.0))

    # ---- exporting ----------------------------------------------------------------------------
    def serve(self, port: int, addr: str = "127.0.0.1") -> int:
        """Serve /metrics from a thread; returns the bound port (0 picks a free one)."""
        server, _thread = start_http_server(port, addr=addr, registry=self.registry)
        self._server = server
        return int(server.server_port)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
