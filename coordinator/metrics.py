"""Prometheus metrics of the coordinator (names and meanings in docs/metrics.md).

Labels are bounded: status (8 values), source (3), platform (3), method (registered names).
The HTTP endpoint listens on loopback unless told otherwise.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server


class SweepMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.candidates = Counter("kgb_candidates_total", "Candidates with a verdict, by outcome",
                                  ["status", "source", "platform", "method"], registry=r)
        self.eval_seconds = Histogram("kgb_evaluation_seconds",
                                      "Agent wall time per evaluated candidate",
                                      ["platform"], registry=r,
                                      buckets=(0.5, 1, 2, 5, 10, 20, 40, 80, 160, 320, 640))
        self.reused = Counter("kgb_verdicts_reused_total",
                              "Verdicts taken from the store instead of re-evaluating", registry=r)
        self.infra_errors = Counter("kgb_infra_errors_total",
                                    "Evaluations that failed for system reasons (retried)", registry=r)
        self.trajectories_planned = Gauge("kgb_sweep_trajectories", "Trajectories in the sweep",
                                          registry=r)
        self.trajectories_done = Gauge("kgb_sweep_trajectories_done",
                                       "Trajectories with a final verdict", registry=r)

    def serve(self, port: int, addr: str = "127.0.0.1") -> int:
        """Serve /metrics; returns the bound port (0 picks a free one)."""
        server, _thread = start_http_server(port, addr=addr, registry=self.registry)
        return int(server.server_port)
