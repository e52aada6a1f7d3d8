"""Running a sweep on Ray: plan trajectories, generate candidates, route them to an agent.

trajectories = operator x method x sample. Generation runs as Ray tasks; evaluation goes through
one async ``AgentActor`` per agent, holding one reused gRPC channel. The driver keeps a bounded
number of refs in flight and handles results in completion order; every store write is an
idempotent upsert, and a verdict already stored for the same key is reused, never recomputed.
Every verdict is vetted against its request by a :class:`~coordinator.integrity.Guard` before
it is stored: one that answers another request is an infrastructure failure, and the agent is
quarantined (the trajectories left end as infrastructure failures too).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ray

from coordinator.integrity import Guard
from coordinator.store import Store
from coordinator.sweep_engine import init_ray as init_ray  # one way to start Ray
from protos import request_ids
from protos.integrity import Expected
from protos.records import AgentDescription, EvalRequest, Status, Verdict

EVAL_TIMEOUT_S = 900.0
MAX_ATTEMPTS = 3


@dataclass(frozen=True)
class MethodSpec:
    name: str
    options: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class SweepConfig:
    run_id: str
    operators: tuple[str, ...]
    methods: tuple[MethodSpec, ...]
    platform: str = ""
    max_in_flight: int = 0  # 0: twice the agent's capacity

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "operators": list(self.operators),
                "methods": [{"name": m.name, "options": dict(m.options)} for m in self.methods],
                "platform": self.platform}


@dataclass
class SweepSummary:
    trajectories: int = 0
    evaluated: int = 0
    reused: int = 0
    infra_errors: int = 0
    by_status: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ResultEvent:
    """What the driver reports for each finished trajectory (for progress and metrics)."""

    operator_id: str
    method: str
    label: str
    verdict: Verdict | None  # None: infrastructure failure after all retries
    reused: bool
    error: str = ""


@ray.remote  # type: ignore[untyped-decorator]
def _generate(operator_id: str, method: str, options: dict[str, str], sample: int) -> dict[str, Any]:
    import operators
    from generators import create

    cand = create(method, **options).generate(operators.get(operator_id), sample)
    return {"operator_id": cand.operator_id, "source": cand.source, "method": cand.method,
            "sample": cand.sample, "model": cand.model, "label": cand.label,
            "candidate_hash": cand.candidate_hash}


@ray.remote
class AgentActor:
    """One per device agent: one gRPC channel, many concurrent calls."""

    def __init__(self, address: str) -> None:
        self.address = address
        self._client: Any = None

    async def evaluate(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        import asyncio

        from protos.client import AgentBusy, AgentClient, AgentError

        if self._client is None:
            self._client = AgentClient(self.address)
        req = EvalRequest(**request)
        delay = 1.0
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                v = await self._client.evaluate(req, timeout=timeout)
                return {"verdict": v.to_json()}
            except AgentBusy as exc:
                await asyncio.sleep(max(exc.retry_after_s, delay))
            except AgentError as exc:
                if attempt == MAX_ATTEMPTS:
                    return {"error": str(exc)}
                await asyncio.sleep(delay)
            delay *= 2
        return {"error": "agent stayed busy"}


def plan(config: SweepConfig) -> list[tuple[str, MethodSpec, int]]:
    import operators
    from generators import create

    out = []
    for op_id in config.operators:
        spec = operators.get(op_id)
        for m in config.methods:
            n = create(m.name, **dict(m.options)).samples(spec)
            out += [(op_id, m, s) for s in range(n)]
    return out


def run_sweep(config: SweepConfig, agent_address: str, description: AgentDescription, store: Store,
              on_event: Callable[[ResultEvent], None] | None = None,
              on_planned: Callable[[int], None] | None = None,
              guard: Guard | None = None) -> SweepSummary:
    """Run every trajectory of ``config`` to a verdict (Ray must be initialised)."""
    import operators

    guard = guard or Guard()
    store.add_run(config.run_id, config.to_json())
    trajectories = plan(config)
    summary = SweepSummary(trajectories=len(trajectories))
    if on_planned:
        on_planned(len(trajectories))
    actor = AgentActor.options(max_concurrency=max(4, description.capacity * 4)).remote(agent_address)  # type: ignore[attr-defined]
    limit = config.max_in_flight or max(2, description.capacity * 2)
    pending_gen = list(trajectories)
    gen_refs: dict[Any, tuple[str, MethodSpec, int]] = {}
    eval_refs: dict[Any, tuple[dict[str, Any], Expected]] = {}

    def finish(event: ResultEvent) -> None:
        if event.verdict is not None:
            s = event.verdict.status.value
            summary.by_status[s] = summary.by_status.get(s, 0) + 1
        else:
            summary.infra_errors += 1
        if on_event:
            on_event(event)

    while pending_gen or gen_refs or eval_refs:
        while pending_gen and len(gen_refs) + len(eval_refs) < limit:
            op_id, m, s = pending_gen.pop(0)
            ref = _generate.remote(op_id, m.name, dict(m.options), s)
            gen_refs[ref] = (op_id, m, s)
        ready, _ = ray.wait(list(gen_refs) + list(eval_refs), num_returns=1, timeout=1.0)
        for ref in ready:
            if ref in gen_refs:
                gen_refs.pop(ref)
                cand = ray.get(ref)
                store.add_candidate(cand["candidate_hash"], cand["source"])
                store.add_trajectory(config.run_id, cand["operator_id"], cand["method"],
                                     cand["model"], cand["sample"], cand["label"],
                                     cand["candidate_hash"])
                spec = operators.get(cand["operator_id"])
                existing = store.verdict(spec.id, spec.version, cand["candidate_hash"],
                                         description.system.device_model,
                                         description.harness_version)
                if existing is not None:
                    summary.reused += 1
                    finish(ResultEvent(spec.id, cand["method"], cand["label"], existing, True))
                    continue
                quarantined = guard.quarantined(agent_address)
                if quarantined is not None:
                    finish(ResultEvent(spec.id, cand["method"], cand["label"], None, False,
                                       f"agent {agent_address} is quarantined ({quarantined})"))
                    continue
                req = {"request_id": request_ids.fresh("run"),
                       "operator_id": spec.id, "operator_version": spec.version,
                       "source": cand["source"].encode("utf-8", "surrogateescape"),
                       "candidate_name": cand["label"]}
                eref = actor.evaluate.remote(req, EVAL_TIMEOUT_S)
                eval_refs[eref] = (cand, Expected.of(EvalRequest(**req),
                                                     description.system.device_model))
            else:
                cand, expected = eval_refs.pop(ref)
                result = ray.get(ref)
                if "verdict" in result:
                    v = guard.vet(agent_address, expected, Verdict.from_json(result["verdict"]))
                    if v.status is Status.INFRA_ERROR:
                        finish(ResultEvent(cand["operator_id"], cand["method"], cand["label"], None,
                                           False, v.message))
                        continue
                    store.add_verdict(v)
                    summary.evaluated += 1
                    finish(ResultEvent(cand["operator_id"], cand["method"], cand["label"], v, False))
                else:
                    finish(ResultEvent(cand["operator_id"], cand["method"], cand["label"], None,
                                       False, result.get("error", "")))
    return summary


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]
