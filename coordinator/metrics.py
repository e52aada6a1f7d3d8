"""Prometheus metrics of the coordinator: what a sweep spends and produces (docs/metrics.md).

One :class:`SweepMetrics` per sweep, owning its registry, so tests and several sweeps in one
process never collide and nothing global needs resetting. The sweep engine calls its methods
(``llm_call``, ``stored``, ``verdict``, ``trajectory_finished``, ``progress``, ``in_flight``,
``fleet``); the metric objects stay public attributes for callers that predate those methods.

Two views of the spend: the ``kgb_llm_*`` counters count what *this process* stored, each call
once as it is committed (a call stored by an earlier process is never added again: Prometheus
scraped it from that process); the ``kgb_run_llm_*`` gauges are the run's stored totals over
every process that ran it (read from the store when the run starts, then growing with each
commit), so a dashboard shows the true spend after any number of restarts, and the unconfirmed
calls (possibly billed, never recorded as billed) beside it.

Every label has a bounded value set, so a billion-token sweep cannot flood Prometheus with
series: statuses, token kinds, end reasons and stages are closed enums; models, methods,
sources, platforms and device models come from the sweep spec and the fleet, and each label
keeps at most :data:`MAX_NAMES` distinct values per process (later ones are counted as
``other``). Nothing is labelled by operator id, candidate hash or request id; the one metric
labelled by agent address is the integrity alarm counter, which only a misbehaving agent moves,
and its ``agent`` label is bounded like the others.
The HTTP endpoint listens on loopback unless told otherwise.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from http.server import HTTPServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from generators.llm import CallStatus, LLMCall
from generators.trajectory import EndReason
from protos.records import Status, Verdict

MAX_NAMES = 64
OTHER = "other"
TOKEN_KINDS = ("prompt", "completion", "cached", "reasoning")
IN_FLIGHT_STAGES = ("generation", "evaluation")
ALARM_KINDS = ("mismatch", "disagreement")  # coordinator.integrity.AlarmKind
LLM_BUCKETS = (0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800)
EVAL_BUCKETS = (0.5, 1, 2, 5, 10, 20, 40, 80, 160, 320, 640)

_STATUSES = tuple(s.value for s in Status)
_CALL_STATUSES = tuple(s.value for s in CallStatus)
_END_REASONS = tuple(r.value for r in EndReason)


class _Names:
    """The distinct values one open label has taken; past ``limit`` new ones become ``other``."""

    def __init__(self, limit: int = MAX_NAMES) -> None:
        self.limit = limit
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, value: str) -> str:
        value = value or "none"  # an empty label value would read as "label absent"
        with self._lock:
            if value in self._seen:
                return value
            if len(self._seen) >= self.limit:
                return OTHER
            self._seen.add(value)
            return value


def _closed(value: str, allowed: Sequence[str]) -> str:
    return value if value in allowed else OTHER


class SweepMetrics:
    """The coordinator's metrics. Thread-safe: callbacks may come from any thread."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self._model, self._method = _Names(), _Names()
        self._source, self._platform, self._device_model = _Names(), _Names(), _Names()
        self._agent = _Names()
        self._alarms_seen: dict[tuple[str, str], int] = {}
        self._fleet_lock = threading.Lock()
        self._fleet_keys: set[tuple[str, str]] = set()
        self._fleet_platforms: set[str] = set()
        self._server: HTTPServer | None = None

        self._llm_call_metrics(r)
        self._run_spend_metrics(r)
        self._evaluation_metrics(r)
        self._progress_metrics(r)
        self._fleet_metrics(r)
        for stage in IN_FLIGHT_STAGES:
            self.in_flight_gauge.labels(stage).set(0)

    def _llm_call_metrics(self, r: CollectorRegistry) -> None:
        """Model calls this process stored: tokens, cost, latency, outcome, retries."""
        self.llm_tokens = Counter(
            "kgb_llm_tokens_total", "Billed tokens by kind (cached is part of prompt, reasoning "
            "part of completion)", ["model", "method", "kind"], registry=r)
        self.llm_cost = Counter("kgb_llm_cost_usd_total", "Billed cost of model calls in US dollars",
                                ["model", "method"], registry=r)
        self.llm_seconds = Histogram("kgb_llm_request_seconds",
                                     "Wall time of a model call that was sent, retries included",
                                     ["model"], registry=r, buckets=LLM_BUCKETS)
        self.llm_requests = Counter("kgb_llm_requests_total", "Model calls by how they ended",
                                    ["model", "status"], registry=r)
        self.llm_retries = Counter("kgb_llm_retries_total",
                                   "Extra attempts a provider made within calls (429, 5xx, timeouts)",
                                   ["model"], registry=r)

    def _run_spend_metrics(self, r: CollectorRegistry) -> None:
        """The run's stored model calls, every coordinator process that ran it."""
        self.run_tokens = Gauge("kgb_run_llm_tokens", "Billed tokens of the run's stored calls, "
                                "every coordinator process that ran it", ["model", "method", "kind"],
                                registry=r)
        self.run_cost = Gauge("kgb_run_llm_cost_usd", "Billed cost of the run's stored calls in US "
                              "dollars, every coordinator process that ran it", ["model", "method"],
                              registry=r)
        self.run_calls = Gauge("kgb_run_llm_calls", "The run's stored calls by how they ended",
                               ["model", "status"], registry=r)
        self.run_unconfirmed = Gauge(
            "kgb_run_llm_unconfirmed_calls", "Calls of the run sent without a stored reply (a "
            "coordinator died first, or the connection was lost mid-reply): possibly billed",
            ["model", "method"], registry=r)

    def _evaluation_metrics(self, r: CollectorRegistry) -> None:
        """Candidates and their evaluation."""
        self.candidates = Counter("kgb_candidates_total", "Candidates with a verdict, by outcome",
                                  ["status", "source", "platform", "method"], registry=r)
        self.eval_seconds = Histogram("kgb_evaluation_seconds",
                                      "Agent wall time per evaluated candidate",
                                      ["platform"], registry=r, buckets=EVAL_BUCKETS)
        self.reused = Counter("kgb_verdicts_reused_total",
                              "Verdicts taken from the store instead of re-evaluating", registry=r)
        self.infra_errors = Counter("kgb_infra_errors_total",
                                    "Evaluations that failed for system reasons (retried)", registry=r)

    def _progress_metrics(self, r: CollectorRegistry) -> None:
        """Trajectories and the sweep's progress."""
        self.trajectories = Counter("kgb_trajectories_total", "Finished trajectories by end reason",
                                    ["method", "end_reason"], registry=r)
        self.trajectories_solved = Counter("kgb_trajectories_solved_total",
                                           "Finished trajectories with a PASSED candidate",
                                           ["method"], registry=r)
        self.trajectories_planned = Gauge("kgb_sweep_trajectories", "Trajectories in the sweep",
                                          registry=r)
        self.trajectories_done = Gauge("kgb_sweep_trajectories_done",
                                       "Trajectories with a final verdict", registry=r)

    def _fleet_metrics(self, r: CollectorRegistry) -> None:
        """Work in flight and the fleet of agents."""
        self.in_flight_gauge = Gauge("kgb_sweep_in_flight",
                                     "Work the coordinator has handed out and not yet got back",
                                     ["stage"], registry=r)
        self.fleet_agents = Gauge("kgb_fleet_agents", "Agents the coordinator routes to",
                                  ["platform", "device_model"], registry=r)
        self.fleet_agents_up = Gauge("kgb_fleet_agents_up", "Agents that answered their last check",
                                     ["platform", "device_model"], registry=r)
        self.fleet_queue_depth = Gauge("kgb_fleet_queue_depth",
                                       "Evaluations waiting for a worker, summed over a platform's agents",
                                       ["platform"], registry=r)
        self.fleet_in_flight = Gauge("kgb_fleet_in_flight",
                                     "Evaluations running, summed over a platform's agents",
                                     ["platform"], registry=r)
        self.integrity_alarms_total = Counter(
            "kgb_fleet_integrity_alarms_total",
            "Integrity alarms per agent: mismatch (a verdict answered another request; the agent "
            "is quarantined), disagreement (a spot-check did not confirm a PASSED; both agents)",
            ["agent", "alarm"], registry=r)

    # ---- what the sweep engine calls ------------------------------------------------------------
    def declare(self, *, models: Iterable[str] = (), methods: Iterable[str] = (),
                platforms: Iterable[str] = (), sources: Iterable[str] = ()) -> None:
        """Create the sweep's series at zero before any work, so ``rate()`` sees the first
        increment (a counter that appears at 1 shows no increase) and dashboards show zeros."""
        models = [self._model(m) for m in models]
        methods = [self._method(m) for m in methods]
        platforms = [self._platform(p) for p in platforms]
        sources = [self._source(s) for s in sources]
        for model in models:
            self.llm_seconds.labels(model)
            self.llm_retries.labels(model)
            for status in _CALL_STATUSES:
                self.llm_requests.labels(model, status)
                self.run_calls.labels(model, status)
            for method in methods:
                self.llm_cost.labels(model, method)
                self.run_cost.labels(model, method)
                self.run_unconfirmed.labels(model, method)
                for kind in TOKEN_KINDS:
                    self.llm_tokens.labels(model, method, kind)
                    self.run_tokens.labels(model, method, kind)
        for method in methods:
            self.trajectories_solved.labels(method)
            for reason in _END_REASONS:
                self.trajectories.labels(method, reason)
        for platform in platforms:
            self.eval_seconds.labels(platform)
            for source in sources:
                for method in methods:
                    for status in _STATUSES:
                        self.candidates.labels(status, source, platform, method)

    def llm_call(self, model: str, method: str, call: LLMCall) -> None:
        """One model call as recorded (sent or not): tokens, cost, latency, outcome."""
        model, method = self._model(model), self._method(method)
        self.llm_requests.labels(model, call.status.value).inc()
        if call.status is not CallStatus.BUDGET:  # never sent: no latency to speak of
            self.llm_seconds.labels(model).observe(max(call.latency_s, 0.0))
        if call.attempts > 1:
            self.llm_retries.labels(model).inc(call.attempts - 1)
        if call.usage is not None:
            u = call.usage
            for kind, n in zip(TOKEN_KINDS, (u.prompt_tokens, u.completion_tokens,
                                             u.cached_tokens, u.reasoning_tokens), strict=True):
                if n > 0:
                    self.llm_tokens.labels(model, method, kind).inc(n)
        if call.cost_usd > 0:
            self.llm_cost.labels(model, method).inc(call.cost_usd)

    def stored(self, tokens: Mapping[tuple[str, str, str], int],
               cost: Mapping[tuple[str, str], float], calls: Mapping[tuple[str, str], int],
               unconfirmed: Mapping[tuple[str, str], int]) -> None:
        """The run's stored totals (every process that ran it): tokens by (model, method,
        kind), cost by (model, method), calls by (model, status), unconfirmed calls by (model,
        method). Values past a label's bound are summed under ``other``."""
        sums: dict[tuple[Gauge, tuple[str, ...]], float] = {}

        def add(gauge: Gauge, labels: tuple[str, ...], value: float) -> None:
            sums[(gauge, labels)] = sums.get((gauge, labels), 0.0) + value

        for (model, method, kind), n in tokens.items():
            add(self.run_tokens, (self._model(model), self._method(method),
                                  _closed(kind, TOKEN_KINDS)), n)
        for (model, method), usd in cost.items():
            add(self.run_cost, (self._model(model), self._method(method)), usd)
        for (model, status), n in calls.items():
            add(self.run_calls, (self._model(model), _closed(status, _CALL_STATUSES)), n)
        for (model, method), n in unconfirmed.items():
            add(self.run_unconfirmed, (self._model(model), self._method(method)), n)
        for (gauge, labels), value in sums.items():
            gauge.labels(*labels).set(value)

    def verdict(self, verdict: Verdict, *, source: str, platform: str, method: str,
                reused: bool = False) -> None:
        """A candidate's verdict. ``source`` is the suite (the operator id's namespace, e.g.
        ``aten``); ``reused``: taken from the store or shared with an identical evaluation in
        flight, so no agent time was spent on it for this candidate."""
        platform = self._platform(platform)
        self.candidates.labels(verdict.status.value, self._source(source), platform,
                               self._method(method)).inc()
        if verdict.status is Status.INFRA_ERROR:
            self.infra_errors.inc()
        if reused:
            self.reused.inc()
        elif verdict.wall_seconds > 0:
            self.eval_seconds.labels(platform).observe(verdict.wall_seconds)

    def trajectory_finished(self, *, method: str, end_reason: str, solved: bool) -> None:
        method = self._method(method)
        self.trajectories.labels(method, _closed(end_reason, _END_REASONS)).inc()
        if solved:
            self.trajectories_solved.labels(method).inc()

    def progress(self, planned: int, done: int) -> None:
        """Trajectories planned and finished so far (the sweep's progress bar)."""
        self.trajectories_planned.set(planned)
        self.trajectories_done.set(done)

    def in_flight(self, generation: int, evaluation: int) -> None:
        """The coordinator's own queues: generations and evaluations handed out, not yet back."""
        self.in_flight_gauge.labels("generation").set(generation)
        self.in_flight_gauge.labels("evaluation").set(evaluation)

    def fleet(self, agents: Sequence[tuple[str, str, bool, int, int]]) -> None:
        """The fleet as last seen: (platform, device model, up, queue depth, in flight) per
        agent. Replaces the previous view; groups that disappeared are dropped."""
        count: dict[tuple[str, str], int] = {}
        up: dict[tuple[str, str], int] = {}
        queued: dict[str, int] = {}
        running: dict[str, int] = {}
        for platform, device_model, is_up, queue_depth, in_flight in agents:
            key = (self._platform(platform), self._device_model(device_model))
            count[key] = count.get(key, 0) + 1
            up[key] = up.get(key, 0) + int(is_up)
            queued[key[0]] = queued.get(key[0], 0) + (queue_depth if is_up else 0)
            running[key[0]] = running.get(key[0], 0) + (in_flight if is_up else 0)
        with self._fleet_lock:
            for key in self._fleet_keys - count.keys():
                self.fleet_agents.remove(*key)
                self.fleet_agents_up.remove(*key)
            for platform in self._fleet_platforms - queued.keys():
                self.fleet_queue_depth.remove(platform)
                self.fleet_in_flight.remove(platform)
            for key, n in count.items():
                self.fleet_agents.labels(*key).set(n)
                self.fleet_agents_up.labels(*key).set(up[key])
            for platform in queued:
                self.fleet_queue_depth.labels(platform).set(queued[platform])
                self.fleet_in_flight.labels(platform).set(running[platform])
            self._fleet_keys = set(count)
            self._fleet_platforms = set(queued)

    def integrity_alarms(self, totals: Mapping[tuple[str, str], int],
                         agents: Iterable[str] = ()) -> None:
        """Alarms so far per (agent address, kind), cumulative as ``Guard.totals()`` keeps them
        (the guard may live in another process): each counter grows by what is new. ``agents``
        get their series created at zero, so the first alarm shows as an increase."""
        with self._fleet_lock:
            for agent in agents:
                for kind in ALARM_KINDS:
                    self.integrity_alarms_total.labels(self._agent(agent), kind)
            for (agent, kind), total in totals.items():
                new = total - self._alarms_seen.get((agent, kind), 0)
                if new > 0:
                    self.integrity_alarms_total.labels(self._agent(agent),
                                                       _closed(kind, ALARM_KINDS)).inc(new)
                    self._alarms_seen[(agent, kind)] = total

    # ---- exporting ----------------------------------------------------------------------------
    def serve(self, port: int, addr: str = "127.0.0.1") -> int:
        """Serve /metrics; returns the bound port (0 picks a free one)."""
        server, _thread = start_http_server(port, addr=addr, registry=self.registry)
        self._server = server
        return int(server.server_port)

    def close(self) -> None:
        """Stop serving /metrics (a no-op when not serving)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
