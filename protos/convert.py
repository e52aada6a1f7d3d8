"""The one conversion between wire messages and domain records.

Nothing else in the project touches ``*_pb2`` message fields. Optional scalars use proto3
``optional`` so that 0 and "unset" stay distinct.
"""

from __future__ import annotations

from typing import Any

from protos.kgb.agent.v1 import agent_pb2 as pb
from protos.records import (
    AgentDescription,
    CaseResult,
    CaseTiming,
    DeviceInfo,
    EvalRequest,
    Finding,
    Progress,
    Stage,
    Status,
    SystemInfo,
    ToolchainFault,
    Verdict,
)


def _opt(msg: Any, name: str) -> Any:
    return getattr(msg, name) if msg.HasField(name) else None


def _set_opt(kwargs: dict[str, Any], name: str, value: Any) -> None:
    if value is not None:
        kwargs[name] = value


# ---- status and stage ------------------------------------------------------------------------

def status_to_proto(s: Status) -> int:
    return int(pb.Status.Value(f"STATUS_{s.value}"))


def status_from_proto(v: int) -> Status:
    name = pb.Status.Name(v)
    if name == "STATUS_UNSPECIFIED":
        raise ValueError("verdict status is unspecified")
    return Status(name.removeprefix("STATUS_"))


def stage_to_proto(s: Stage) -> int:
    return int(pb.Stage.Value(f"STAGE_{s.value}"))


def stage_from_proto(v: int) -> Stage:
    return Stage(pb.Stage.Name(v).removeprefix("STAGE_"))


# ---- system info -----------------------------------------------------------------------------

_SYS_OPTIONAL = ("sm_clock_mhz", "memory_clock_mhz", "temperature_c", "peak_bandwidth_gbps")
_SYS_PLAIN = ("platform", "device_model", "driver", "torch_version", "triton_version",
              "python_version", "hostname", "peak_source")


def system_to_proto(s: SystemInfo) -> pb.SystemInfo:
    kw: dict[str, Any] = {k: getattr(s, k) for k in _SYS_PLAIN}
    for k in _SYS_OPTIONAL:
        _set_opt(kw, k, getattr(s, k))
    msg = pb.SystemInfo(**kw)
    msg.peak_tflops.update(s.peak_tflops)
    msg.baselines.update(s.baselines)
    return msg


def system_from_proto(m: pb.SystemInfo) -> SystemInfo:
    kw: dict[str, Any] = {k: getattr(m, k) for k in _SYS_PLAIN}
    for k in _SYS_OPTIONAL:
        kw[k] = _opt(m, k)
    kw["peak_tflops"] = dict(m.peak_tflops)
    kw["baselines"] = dict(m.baselines)
    return SystemInfo(**kw)


# ---- verdict ---------------------------------------------------------------------------------

def _case_to_proto(c: CaseResult) -> pb.CaseResult:
    kw: dict[str, Any] = {"name": c.name, "hidden": c.hidden, "passed": c.passed,
                          "mismatch": c.mismatch}
    for k in ("max_abs_error", "bad_elements", "total_elements"):
        _set_opt(kw, k, getattr(c, k))
    return pb.CaseResult(**kw)


def _case_from_proto(m: pb.CaseResult) -> CaseResult:
    return CaseResult(name=m.name, passed=m.passed, hidden=m.hidden, mismatch=m.mismatch,
                      max_abs_error=_opt(m, "max_abs_error"), bad_elements=_opt(m, "bad_elements"),
                      total_elements=_opt(m, "total_elements"))


_TIMING_OPTIONAL = ("median_us", "ci_low_us", "ci_high_us", "baseline_median_us", "speedup",
                    "sol_percent", "sm_clock_mhz", "temperature_c")


def _timing_to_proto(t: CaseTiming) -> pb.CaseTiming:
    kw: dict[str, Any] = {"name": t.name, "meaningful": t.meaningful, "samples": t.samples,
                          "launch_bound": t.launch_bound,
                          "throttled_discarded": t.throttled_discarded}
    for k in _TIMING_OPTIONAL:
        _set_opt(kw, k, getattr(t, k))
    return pb.CaseTiming(**kw)


def _timing_from_proto(m: pb.CaseTiming) -> CaseTiming:
    kw: dict[str, Any] = {k: _opt(m, k) for k in _TIMING_OPTIONAL}
    return CaseTiming(name=m.name, meaningful=m.meaningful, samples=m.samples,
                      launch_bound=m.launch_bound, throttled_discarded=m.throttled_discarded, **kw)


def _fault_to_proto(f: ToolchainFault | None) -> pb.ToolchainFault | None:
    if f is None:
        return None
    return pb.ToolchainFault(kind=f.kind, pass_name=f.pass_name, message_hash=f.message_hash,
                             message=f.message)


def _fault_from_proto(m: pb.Verdict) -> ToolchainFault | None:
    if not m.HasField("toolchain_fault"):
        return None
    f = m.toolchain_fault
    return ToolchainFault(kind=f.kind, pass_name=f.pass_name, message_hash=f.message_hash,
                          message=f.message)


def verdict_to_proto(v: Verdict) -> pb.Verdict:
    return pb.Verdict(
        status=status_to_proto(v.status),  # type: ignore[arg-type]
        request_id=v.request_id,
        operator_id=v.operator_id,
        operator_version=v.operator_version,
        candidate_hash=v.candidate_hash,
        device_model=v.device_model,
        harness_version=v.harness_version,
        message=v.message,
        cases=[_case_to_proto(c) for c in v.cases],
        timings=[_timing_to_proto(t) for t in v.timings],
        findings=[pb.Finding(layer=f.layer, rule=f.rule, evidence=f.evidence, severity=f.severity)
                  for f in v.findings],
        log=v.log,
        system=system_to_proto(v.system),
        wall_seconds=v.wall_seconds,
        public_only=v.public_only,
        toolchain_fault=_fault_to_proto(v.toolchain_fault),
        baseline=v.baseline,
    )


def verdict_from_proto(m: pb.Verdict) -> Verdict:
    return Verdict(
        status=status_from_proto(m.status),
        request_id=m.request_id,
        operator_id=m.operator_id,
        operator_version=m.operator_version,
        candidate_hash=m.candidate_hash,
        device_model=m.device_model,
        harness_version=m.harness_version,
        message=m.message,
        cases=tuple(_case_from_proto(c) for c in m.cases),
        timings=tuple(_timing_from_proto(t) for t in m.timings),
        findings=tuple(Finding(f.layer, f.rule, f.evidence, f.severity) for f in m.findings),
        log=m.log,
        system=system_from_proto(m.system),
        wall_seconds=m.wall_seconds,
        public_only=m.public_only,
        toolchain_fault=_fault_from_proto(m),
        baseline=m.baseline,
    )


# ---- requests and progress -------------------------------------------------------------------

def request_to_proto(r: EvalRequest) -> pb.EvaluateRequest:
    kw: dict[str, Any] = {"request_id": r.request_id, "operator_id": r.operator_id,
                          "source": r.source, "candidate_name": r.candidate_name,
                          "platform": r.platform}
    _set_opt(kw, "operator_version", r.operator_version)
    if r.skip_timing:
        kw["skip_timing"] = True
    if r.public_only:
        kw["public_only"] = True
    return pb.EvaluateRequest(**kw)


def request_from_proto(m: pb.EvaluateRequest) -> EvalRequest:
    return EvalRequest(request_id=m.request_id, operator_id=m.operator_id, source=bytes(m.source),
                       operator_version=_opt(m, "operator_version"),
                       candidate_name=m.candidate_name,
                       skip_timing=bool(_opt(m, "skip_timing")),
                       public_only=bool(_opt(m, "public_only")),
                       platform=m.platform)


def progress_to_proto(p: Progress) -> pb.Progress:
    return pb.Progress(stage=stage_to_proto(p.stage), detail=p.detail,  # type: ignore[arg-type]
                       done=p.done, total=p.total)


def progress_from_proto(m: pb.Progress) -> Progress:
    return Progress(stage=stage_from_proto(m.stage), detail=m.detail, done=m.done, total=m.total)


def event_from_proto(m: pb.EvaluateEvent) -> Progress | Verdict:
    which = m.WhichOneof("event")
    if which == "progress":
        return progress_from_proto(m.progress)
    if which == "verdict":
        return verdict_from_proto(m.verdict)
    raise ValueError("empty EvaluateEvent")


def progress_event(p: Progress) -> pb.EvaluateEvent:
    return pb.EvaluateEvent(progress=progress_to_proto(p))


def verdict_event(v: Verdict) -> pb.EvaluateEvent:
    return pb.EvaluateEvent(verdict=verdict_to_proto(v))


# ---- describe --------------------------------------------------------------------------------

def description_to_proto(d: AgentDescription) -> pb.DescribeResponse:
    devices = []
    for dev in d.devices:
        kw: dict[str, Any] = {"index": dev.index, "model": dev.model, "capacity": dev.capacity,
                              "busy": dev.busy, "queued": dev.queued}
        _set_opt(kw, "memory_bytes", dev.memory_bytes)
        devices.append(pb.DeviceInfo(**kw))
    return pb.DescribeResponse(
        agent_id=d.agent_id, harness_version=d.harness_version, system=system_to_proto(d.system),
        devices=devices,
        suite=[pb.SuiteEntry(operator_id=i, version=v) for i, v in d.suite],
        capacity=d.capacity, queue_depth=d.queue_depth, max_queue=d.max_queue,
        timings_meaningful=d.timings_meaningful,
    )


def description_from_proto(m: pb.DescribeResponse) -> AgentDescription:
    return AgentDescription(
        agent_id=m.agent_id, harness_version=m.harness_version,
        system=system_from_proto(m.system),
        devices=tuple(DeviceInfo(index=x.index, model=x.model, capacity=x.capacity, busy=x.busy,
                                 queued=x.queued, memory_bytes=_opt(x, "memory_bytes"))
                      for x in m.devices),
        suite=tuple((s.operator_id, s.version) for s in m.suite),
        capacity=m.capacity, queue_depth=m.queue_depth, max_queue=m.max_queue,
        timings_meaningful=m.timings_meaningful,
    )
