"""Typed domain records shared by agent, coordinator and generators.

The wire uses the generated protobuf classes; everything else uses these frozen dataclasses.
``protos.convert`` is the one place that maps between the two. JSON (results files, the store,
``kgb eval --json``) is produced from these records with bare status names (``PASSED``).
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any


def source_bytes(source: str | bytes) -> bytes:
    """A candidate's bytes. Text becomes UTF-8, with ``surrogateescape`` so that a source read
    from undecodable bytes gets exactly those bytes back: the agent judges (and hashes) bytes."""
    return source if isinstance(source, bytes) else source.encode("utf-8", "surrogateescape")


def candidate_id(source: str | bytes) -> str:
    """A candidate's content address: sha256 of :func:`source_bytes`, hex. The only place it is
    computed: store keys, ``--resume``, request ids and the agent's verdicts all agree on it."""
    return hashlib.sha256(source_bytes(source)).hexdigest()


class Status(str, enum.Enum):
    """The closed set of verdict statuses (see docs/architecture.md for when each applies)."""

    REJECTED = "REJECTED"
    COMPILE_ERROR = "COMPILE_ERROR"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    TIMEOUT = "TIMEOUT"
    WRONG_ANSWER = "WRONG_ANSWER"
    CHEAT_DETECTED = "CHEAT_DETECTED"
    PASSED = "PASSED"
    INFRA_ERROR = "INFRA_ERROR"
    # The platform's compiler or runtime crashed or hung on the candidate's code. Unsolved for
    # the model (the published MC accuracy drops count it so), reported apart per platform.
    TOOLCHAIN_ERROR = "TOOLCHAIN_ERROR"

    @property
    def counts_against_model(self) -> bool:
        """INFRA_ERROR is the system's failure: retried elsewhere, never scored."""
        return self is not Status.INFRA_ERROR


class Stage(str, enum.Enum):
    QUEUED = "QUEUED"
    STATIC = "STATIC"
    LOAD = "LOAD"
    CORRECTNESS = "CORRECTNESS"
    TIMING = "TIMING"
    DONE = "DONE"


@dataclass(frozen=True)
class SystemInfo:
    platform: str = ""
    device_model: str = ""
    driver: str = ""
    torch_version: str = ""
    triton_version: str = ""
    python_version: str = ""
    hostname: str = ""
    sm_clock_mhz: float | None = None
    memory_clock_mhz: float | None = None
    temperature_c: float | None = None
    peak_bandwidth_gbps: float | None = None
    peak_tflops: dict[str, float] = field(default_factory=dict)
    peak_source: str = ""
    # The library each problem's baseline times against on this host, as the workers found at
    # warm-up: per source, plus by problem id where a problem differs (:meth:`baseline_for`).
    baselines: dict[str, str] = field(default_factory=dict)

    def baseline_for(self, operator_id: str) -> str:
        """The library ``operator_id``'s baseline times against here ("" where unknown)."""
        return baseline_for(self.baselines, operator_id)


def baseline_for(baselines: Mapping[str, str], operator_id: str) -> str:
    """``operator_id``'s entry of a :attr:`SystemInfo.baselines` map, else its source's."""
    return baselines.get(operator_id) or baselines.get(operator_id.split("::", 1)[0], "")


@dataclass(frozen=True)
class CaseResult:
    name: str
    passed: bool
    hidden: bool = False
    mismatch: str = ""
    max_abs_error: float | None = None
    bad_elements: int | None = None
    total_elements: int | None = None


@dataclass(frozen=True)
class CaseTiming:
    name: str
    meaningful: bool
    median_us: float | None = None
    ci_low_us: float | None = None
    ci_high_us: float | None = None
    samples: int = 0
    baseline_median_us: float | None = None
    speedup: float | None = None
    sol_percent: float | None = None
    launch_bound: bool = False
    throttled_discarded: int = 0
    sm_clock_mhz: float | None = None
    temperature_c: float | None = None


WARNING = "warning"  # a finding's severity when it is recorded but did not decide the verdict


@dataclass(frozen=True)
class Finding:
    layer: str
    rule: str
    evidence: str
    severity: str = ""  # "" decided the verdict; WARNING: recorded only

    @property
    def warning(self) -> bool:
        return self.severity == WARNING


@dataclass(frozen=True)
class ToolchainFault:
    """The crash signature of a TOOLCHAIN_ERROR: repeats of one compiler fault share
    ``(pass_name, message_hash)`` whatever the candidate (docs/platforms.md)."""

    kind: str  # crash | hang | error
    pass_name: str = ""
    message_hash: str = ""
    message: str = ""

    @property
    def signature(self) -> str:
        return f"{self.pass_name or '?'}:{self.message_hash}"


@dataclass(frozen=True)
class Verdict:
    status: Status
    operator_id: str
    operator_version: int
    candidate_hash: str
    request_id: str = ""
    device_model: str = ""
    harness_version: str = ""
    message: str = ""
    cases: tuple[CaseResult, ...] = ()
    timings: tuple[CaseTiming, ...] = ()
    findings: tuple[Finding, ...] = ()
    log: str = ""
    system: SystemInfo = field(default_factory=SystemInfo)
    wall_seconds: float = 0.0
    public_only: bool = False          # judged on the public cases only: never a score
    toolchain_fault: ToolchainFault | None = None
    # The library the timed cases' baseline ran ("torch", "vllm", "cublas"; "a+b" where cases
    # differed), reported by the worker that timed them; "" when nothing was timed.
    baseline: str = ""

    @property
    def operator(self) -> str:
        return self.operator_id

    @property
    def speedup(self) -> float | None:
        """Geometric mean speedup over meaningful timed cases (None when none)."""
        vals = [t.speedup for t in self.timings if t.meaningful and t.speedup and t.speedup > 0]
        if not vals:
            return None
        prod = 1.0
        for v in vals:
            prod *= v
        return float(prod ** (1.0 / len(vals)))

    @property
    def sol_percent(self) -> float | None:
        """Geometric mean % of speed-of-light over meaningful timed cases."""
        vals = [t.sol_percent for t in self.timings if t.meaningful and t.sol_percent]
        if not vals:
            return None
        prod = 1.0
        for v in vals:
            prod *= v
        return float(prod ** (1.0 / len(vals)))

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: bare status name, plus ``operator`` for convenience."""
        d = asdict(self)
        d["status"] = self.status.value
        d["operator"] = self.operator_id
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> Verdict:
        data = {k: v for k, v in d.items() if k in _VERDICT_FIELDS}
        data["status"] = Status(d["status"])
        data["cases"] = tuple(CaseResult(**c) for c in d.get("cases", ()))
        data["timings"] = tuple(CaseTiming(**t) for t in d.get("timings", ()))
        data["findings"] = tuple(Finding(**f) for f in d.get("findings", ()))
        data["system"] = SystemInfo(**d.get("system", {}))
        fault = d.get("toolchain_fault")
        data["toolchain_fault"] = ToolchainFault(**fault) if fault else None
        return Verdict(**data)


_VERDICT_FIELDS = {f.name for f in fields(Verdict)}


@dataclass(frozen=True)
class EvalRequest:
    request_id: str
    operator_id: str
    source: bytes
    operator_version: int | None = None
    candidate_name: str = ""
    skip_timing: bool = False
    public_only: bool = False          # public cases only (an agent's verify): never a score
    platform: str = ""  # the platform the sender routed for ("": any)


@dataclass(frozen=True)
class Progress:
    stage: Stage
    detail: str = ""
    done: int = 0
    total: int = 0


@dataclass(frozen=True)
class DeviceInfo:
    index: int
    model: str
    capacity: int
    busy: int = 0
    queued: int = 0
    memory_bytes: int | None = None


@dataclass(frozen=True)
class AgentDescription:
    agent_id: str
    harness_version: str
    system: SystemInfo
    devices: tuple[DeviceInfo, ...]
    suite: tuple[tuple[str, int], ...]
    capacity: int
    queue_depth: int
    max_queue: int
    timings_meaningful: bool
