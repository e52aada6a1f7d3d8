"""``SweepMetrics``: what each engine call exports, label bounds, and the HTTP endpoint."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from coordinator.metrics import MAX_NAMES, OTHER, SweepMetrics
from generators.llm import CallStatus, LLMCall, Prompt, Usage
from protos.records import Status, SystemInfo, Verdict

PROMPT = Prompt(messages=(), template="aten/v1", operator_id="aten::add")


def _call(status: CallStatus, usage: Usage | None, *, cost: float = 0.0, latency: float = 0.0,
          attempts: int = 1) -> LLMCall:
    return LLMCall(provider="ep", model="m", prompt=PROMPT, status=status, usage=usage,
                   cost_usd=cost, latency_s=latency, attempts=attempts)


def _verdict(status: Status, wall: float = 3.0) -> Verdict:
    return Verdict(status=status, operator_id="aten::add", operator_version=1, candidate_hash="ab",
                   system=SystemInfo(platform="cpu"), wall_seconds=wall)


def _value(m: SweepMetrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, labels)


def test_llm_call_counts_tokens_by_kind_cost_latency_and_status() -> None:
    m = SweepMetrics()
    m.llm_call("coder", "refine", _call(CallStatus.OK, Usage(1000, 400, 300, 50), cost=0.01,
                                         latency=1.5, attempts=3))
    m.llm_call("coder", "refine", _call(CallStatus.TRUNCATED, Usage(200, 4096), cost=0.02, latency=9))
    m.llm_call("coder", "refine", _call(CallStatus.BUDGET, None))
    m.llm_call("coder", "sample", _call(CallStatus.CLIENT_ERROR, None, latency=0.1))
    tokens = {k: _value(m, "kgb_llm_tokens_total", model="coder", method="refine", kind=k)
              for k in ("prompt", "completion", "cached", "reasoning")}
    assert tokens == {"prompt": 1200, "completion": 4496, "cached": 300, "reasoning": 50}
    assert _value(m, "kgb_llm_tokens_total", model="coder", method="sample", kind="prompt") is None
    assert _value(m, "kgb_llm_cost_usd_total", model="coder", method="refine") == pytest.approx(0.03)
    assert {s.value: _value(m, "kgb_llm_requests_total", model="coder", status=s.value)
            for s in (CallStatus.OK, CallStatus.TRUNCATED, CallStatus.BUDGET,
                      CallStatus.CLIENT_ERROR)} == {"OK": 1, "TRUNCATED": 1, "BUDGET": 1,
                                                    "CLIENT_ERROR": 1}
    # The unsent BUDGET call has no latency; the three sent ones do.
    assert _value(m, "kgb_llm_request_seconds_count", model="coder") == 3
    assert _value(m, "kgb_llm_request_seconds_sum", model="coder") == pytest.approx(10.6)
    assert _value(m, "kgb_llm_request_seconds_bucket", model="coder", le="1.0") == 1
    assert _value(m, "kgb_llm_retries_total", model="coder") == 2


def test_verdicts_count_by_status_and_time_only_real_evaluations() -> None:
    m = SweepMetrics()
    m.verdict(_verdict(Status.PASSED, 4.0), source="aten", platform="cpu", method="refine")
    m.verdict(_verdict(Status.PASSED, 4.0), source="aten", platform="cpu", method="refine", reused=True)
    m.verdict(_verdict(Status.INFRA_ERROR, 0.0), source="aten", platform="cpu", method="sample")
    labels = {"source": "aten", "platform": "cpu"}
    assert _value(m, "kgb_candidates_total", status="PASSED", method="refine", **labels) == 2
    assert _value(m, "kgb_candidates_total", status="INFRA_ERROR", method="sample", **labels) == 1
    assert _value(m, "kgb_verdicts_reused_total") == 1
    assert _value(m, "kgb_infra_errors_total") == 1
    # Only the one verdict an agent produced is timed: reused and never-evaluated ones are not.
    assert _value(m, "kgb_evaluation_seconds_count", platform="cpu") == 1
    assert _value(m, "kgb_evaluation_seconds_sum", platform="cpu") == 4.0


def test_trajectories_progress_and_in_flight() -> None:
    m = SweepMetrics()
    m.progress(10, 0)
    m.trajectory_finished(method="refine", end_reason="SOLVED", solved=True)
    m.trajectory_finished(method="refine", end_reason="TURNS_EXHAUSTED", solved=True)
    m.trajectory_finished(method="sample", end_reason="made-up", solved=False)
    m.progress(10, 3)
    m.in_flight(generation=4, evaluation=2)
    assert _value(m, "kgb_trajectories_total", method="refine", end_reason="SOLVED") == 1
    assert _value(m, "kgb_trajectories_total", method="sample", end_reason=OTHER) == 1
    assert _value(m, "kgb_trajectories_solved_total", method="refine") == 2
    assert _value(m, "kgb_trajectories_solved_total", method="sample") is None
    assert _value(m, "kgb_sweep_trajectories") == 10
    assert _value(m, "kgb_sweep_trajectories_done") == 3
    assert _value(m, "kgb_sweep_in_flight", stage="generation") == 4
    assert _value(m, "kgb_sweep_in_flight", stage="evaluation") == 2


def test_fleet_sums_per_group_and_drops_groups_that_left() -> None:
    m = SweepMetrics()
    m.fleet([("cuda", "NVIDIA H200", True, 3, 4), ("cuda", "NVIDIA H200", False, 9, 9),
             ("cuda", "NVIDIA A100", True, 1, 2), ("cpu", "x86", True, 0, 1)])
    assert _value(m, "kgb_fleet_agents", platform="cuda", device_model="NVIDIA H200") == 2
    assert _value(m, "kgb_fleet_agents_up", platform="cuda", device_model="NVIDIA H200") == 1
    # A down agent's last numbers are not believed.
    assert _value(m, "kgb_fleet_queue_depth", platform="cuda") == 4
    assert _value(m, "kgb_fleet_in_flight", platform="cuda") == 6
    m.fleet([("cuda", "NVIDIA H200", True, 0, 1)])
    assert _value(m, "kgb_fleet_agents", platform="cuda", device_model="NVIDIA A100") is None
    assert _value(m, "kgb_fleet_agents_up", platform="cpu", device_model="x86") is None
    assert _value(m, "kgb_fleet_queue_depth", platform="cpu") is None
    assert _value(m, "kgb_fleet_queue_depth", platform="cuda") == 0
    assert _value(m, "kgb_fleet_agents_up", platform="cuda", device_model="NVIDIA H200") == 1


def test_open_labels_are_capped_and_empty_values_named() -> None:
    m = SweepMetrics()
    for i in range(MAX_NAMES + 5):
        m.llm_call(f"model-{i}", "sample", _call(CallStatus.OK, Usage(1, 1)))
    assert _value(m, "kgb_llm_requests_total", model=f"model-{MAX_NAMES - 1}", status="OK") == 1
    assert _value(m, "kgb_llm_requests_total", model=f"model-{MAX_NAMES}", status="OK") is None
    assert _value(m, "kgb_llm_requests_total", model=OTHER, status="OK") == 5
    m.verdict(_verdict(Status.PASSED), source="", platform="cpu", method="reference")
    assert _value(m, "kgb_candidates_total", status="PASSED", source="none", platform="cpu",
                  method="reference") == 1


def test_declare_creates_every_series_at_zero() -> None:
    m = SweepMetrics()
    m.declare(models=["a", "b"], methods=["sample"], platforms=["cpu"], sources=["aten", "vllm"])
    assert _value(m, "kgb_llm_tokens_total", model="b", method="sample", kind="reasoning") == 0
    assert _value(m, "kgb_llm_requests_total", model="a", status="RATE_LIMITED") == 0
    assert _value(m, "kgb_llm_request_seconds_count", model="a") == 0
    assert _value(m, "kgb_candidates_total", status="CHEAT_DETECTED", source="vllm", platform="cpu",
                  method="sample") == 0
    assert _value(m, "kgb_trajectories_total", method="sample", end_reason="BUDGET_SPENT") == 0
    assert _value(m, "kgb_evaluation_seconds_count", platform="cpu") == 0


def test_each_instance_has_its_own_registry_and_endpoint() -> None:
    a, b = SweepMetrics(), SweepMetrics()
    a.progress(5, 1)
    port = a.serve(0)
    other = b.serve(0)
    try:
        assert port != other
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        assert "kgb_sweep_trajectories 5.0" in body and "kgb_sweep_trajectories_done 1.0" in body
        body_b = urllib.request.urlopen(f"http://127.0.0.1:{other}/metrics", timeout=5).read().decode()
        assert "kgb_sweep_trajectories 0.0" in body_b
    finally:
        a.close()
        b.close()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)


def test_integrity_alarms_grow_by_what_is_new_and_bound_the_agent_label() -> None:
    m = SweepMetrics()
    m.integrity_alarms({}, agents=["10.0.0.1:50051"])
    for kind in ("mismatch", "disagreement"):  # created at zero: the first alarm is an increase
        assert _value(m, "kgb_fleet_integrity_alarms_total", agent="10.0.0.1:50051", alarm=kind) == 0
    m.integrity_alarms({("10.0.0.1:50051", "mismatch"): 1})
    m.integrity_alarms({("10.0.0.1:50051", "mismatch"): 1})  # the same totals again: no change
    m.integrity_alarms({("10.0.0.1:50051", "mismatch"): 3, ("10.0.0.2:50051", "disagreement"): 1})
    assert _value(m, "kgb_fleet_integrity_alarms_total", agent="10.0.0.1:50051", alarm="mismatch") == 3
    assert _value(m, "kgb_fleet_integrity_alarms_total", agent="10.0.0.2:50051",
                  alarm="disagreement") == 1
    m.integrity_alarms({(f"10.1.0.{i}:1", "mismatch"): 1 for i in range(MAX_NAMES + 5)})
    agents = {s.labels["agent"] for f in m.registry.collect() for s in f.samples
              if s.name == "kgb_fleet_integrity_alarms_total"}
    assert len(agents) == MAX_NAMES + 1 and OTHER in agents  # the first 64 agents, then "other"
    assert _value(m, "kgb_fleet_integrity_alarms_total", agent=OTHER, alarm="mismatch") == 7
