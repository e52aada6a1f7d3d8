from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Status(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STATUS_UNSPECIFIED: _ClassVar[Status]
    STATUS_REJECTED: _ClassVar[Status]
    STATUS_COMPILE_ERROR: _ClassVar[Status]
    STATUS_RUNTIME_ERROR: _ClassVar[Status]
    STATUS_TIMEOUT: _ClassVar[Status]
    STATUS_WRONG_ANSWER: _ClassVar[Status]
    STATUS_CHEAT_DETECTED: _ClassVar[Status]
    STATUS_PASSED: _ClassVar[Status]
    STATUS_INFRA_ERROR: _ClassVar[Status]
    STATUS_TOOLCHAIN_ERROR: _ClassVar[Status]

class Stage(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STAGE_UNSPECIFIED: _ClassVar[Stage]
    STAGE_QUEUED: _ClassVar[Stage]
    STAGE_STATIC: _ClassVar[Stage]
    STAGE_LOAD: _ClassVar[Stage]
    STAGE_CORRECTNESS: _ClassVar[Stage]
    STAGE_TIMING: _ClassVar[Stage]
    STAGE_DONE: _ClassVar[Stage]
STATUS_UNSPECIFIED: Status
STATUS_REJECTED: Status
STATUS_COMPILE_ERROR: Status
STATUS_RUNTIME_ERROR: Status
STATUS_TIMEOUT: Status
STATUS_WRONG_ANSWER: Status
STATUS_CHEAT_DETECTED: Status
STATUS_PASSED: Status
STATUS_INFRA_ERROR: Status
STATUS_TOOLCHAIN_ERROR: Status
STAGE_UNSPECIFIED: Stage
STAGE_QUEUED: Stage
STAGE_STATIC: Stage
STAGE_LOAD: Stage
STAGE_CORRECTNESS: Stage
STAGE_TIMING: Stage
STAGE_DONE: Stage

class SystemInfo(_message.Message):
    __slots__ = ("platform", "device_model", "driver", "torch_version", "triton_version", "python_version", "hostname", "sm_clock_mhz", "memory_clock_mhz", "temperature_c", "peak_bandwidth_gbps", "peak_tflops", "peak_source", "baselines")
    class PeakTflopsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class BaselinesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PLATFORM_FIELD_NUMBER: _ClassVar[int]
    DEVICE_MODEL_FIELD_NUMBER: _ClassVar[int]
    DRIVER_FIELD_NUMBER: _ClassVar[int]
    TORCH_VERSION_FIELD_NUMBER: _ClassVar[int]
    TRITON_VERSION_FIELD_NUMBER: _ClassVar[int]
    PYTHON_VERSION_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    SM_CLOCK_MHZ_FIELD_NUMBER: _ClassVar[int]
    MEMORY_CLOCK_MHZ_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_C_FIELD_NUMBER: _ClassVar[int]
    PEAK_BANDWIDTH_GBPS_FIELD_NUMBER: _ClassVar[int]
    PEAK_TFLOPS_FIELD_NUMBER: _ClassVar[int]
    PEAK_SOURCE_FIELD_NUMBER: _ClassVar[int]
    BASELINES_FIELD_NUMBER: _ClassVar[int]
    platform: str
    device_model: str
    driver: str
    torch_version: str
    triton_version: str
    python_version: str
    hostname: str
    sm_clock_mhz: float
    memory_clock_mhz: float
    temperature_c: float
    peak_bandwidth_gbps: float
    peak_tflops: _containers.ScalarMap[str, float]
    peak_source: str
    baselines: _containers.ScalarMap[str, str]
    def __init__(self, platform: _Optional[str] = ..., device_model: _Optional[str] = ..., driver: _Optional[str] = ..., torch_version: _Optional[str] = ..., triton_version: _Optional[str] = ..., python_version: _Optional[str] = ..., hostname: _Optional[str] = ..., sm_clock_mhz: _Optional[float] = ..., memory_clock_mhz: _Optional[float] = ..., temperature_c: _Optional[float] = ..., peak_bandwidth_gbps: _Optional[float] = ..., peak_tflops: _Optional[_Mapping[str, float]] = ..., peak_source: _Optional[str] = ..., baselines: _Optional[_Mapping[str, str]] = ...) -> None: ...

class DeviceInfo(_message.Message):
    __slots__ = ("index", "model", "memory_bytes", "capacity", "busy", "queued")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    BUSY_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    index: int
    model: str
    memory_bytes: int
    capacity: int
    busy: int
    queued: int
    def __init__(self, index: _Optional[int] = ..., model: _Optional[str] = ..., memory_bytes: _Optional[int] = ..., capacity: _Optional[int] = ..., busy: _Optional[int] = ..., queued: _Optional[int] = ...) -> None: ...

class SuiteEntry(_message.Message):
    __slots__ = ("operator_id", "version")
    OPERATOR_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    operator_id: str
    version: int
    def __init__(self, operator_id: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class DescribeRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeResponse(_message.Message):
    __slots__ = ("agent_id", "harness_version", "system", "devices", "suite", "capacity", "queue_depth", "max_queue", "timings_meaningful")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    HARNESS_VERSION_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    SUITE_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    QUEUE_DEPTH_FIELD_NUMBER: _ClassVar[int]
    MAX_QUEUE_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_MEANINGFUL_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    harness_version: str
    system: SystemInfo
    devices: _containers.RepeatedCompositeFieldContainer[DeviceInfo]
    suite: _containers.RepeatedCompositeFieldContainer[SuiteEntry]
    capacity: int
    queue_depth: int
    max_queue: int
    timings_meaningful: bool
    def __init__(self, agent_id: _Optional[str] = ..., harness_version: _Optional[str] = ..., system: _Optional[_Union[SystemInfo, _Mapping]] = ..., devices: _Optional[_Iterable[_Union[DeviceInfo, _Mapping]]] = ..., suite: _Optional[_Iterable[_Union[SuiteEntry, _Mapping]]] = ..., capacity: _Optional[int] = ..., queue_depth: _Optional[int] = ..., max_queue: _Optional[int] = ..., timings_meaningful: _Optional[bool] = ...) -> None: ...

class EvaluateRequest(_message.Message):
    __slots__ = ("request_id", "operator_id", "operator_version", "source", "candidate_name", "skip_timing", "public_only", "platform")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_ID_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_VERSION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_NAME_FIELD_NUMBER: _ClassVar[int]
    SKIP_TIMING_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_ONLY_FIELD_NUMBER: _ClassVar[int]
    PLATFORM_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    operator_id: str
    operator_version: int
    source: bytes
    candidate_name: str
    skip_timing: bool
    public_only: bool
    platform: str
    def __init__(self, request_id: _Optional[str] = ..., operator_id: _Optional[str] = ..., operator_version: _Optional[int] = ..., source: _Optional[bytes] = ..., candidate_name: _Optional[str] = ..., skip_timing: _Optional[bool] = ..., public_only: _Optional[bool] = ..., platform: _Optional[str] = ...) -> None: ...

class CaseResult(_message.Message):
    __slots__ = ("name", "hidden", "passed", "mismatch", "max_abs_error", "bad_elements", "total_elements")
    NAME_FIELD_NUMBER: _ClassVar[int]
    HIDDEN_FIELD_NUMBER: _ClassVar[int]
    PASSED_FIELD_NUMBER: _ClassVar[int]
    MISMATCH_FIELD_NUMBER: _ClassVar[int]
    MAX_ABS_ERROR_FIELD_NUMBER: _ClassVar[int]
    BAD_ELEMENTS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_ELEMENTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    hidden: bool
    passed: bool
    mismatch: str
    max_abs_error: float
    bad_elements: int
    total_elements: int
    def __init__(self, name: _Optional[str] = ..., hidden: _Optional[bool] = ..., passed: _Optional[bool] = ..., mismatch: _Optional[str] = ..., max_abs_error: _Optional[float] = ..., bad_elements: _Optional[int] = ..., total_elements: _Optional[int] = ...) -> None: ...

class CaseTiming(_message.Message):
    __slots__ = ("name", "meaningful", "median_us", "ci_low_us", "ci_high_us", "samples", "baseline_median_us", "speedup", "sol_percent", "launch_bound", "throttled_discarded", "sm_clock_mhz", "temperature_c")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MEANINGFUL_FIELD_NUMBER: _ClassVar[int]
    MEDIAN_US_FIELD_NUMBER: _ClassVar[int]
    CI_LOW_US_FIELD_NUMBER: _ClassVar[int]
    CI_HIGH_US_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    BASELINE_MEDIAN_US_FIELD_NUMBER: _ClassVar[int]
    SPEEDUP_FIELD_NUMBER: _ClassVar[int]
    SOL_PERCENT_FIELD_NUMBER: _ClassVar[int]
    LAUNCH_BOUND_FIELD_NUMBER: _ClassVar[int]
    THROTTLED_DISCARDED_FIELD_NUMBER: _ClassVar[int]
    SM_CLOCK_MHZ_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_C_FIELD_NUMBER: _ClassVar[int]
    name: str
    meaningful: bool
    median_us: float
    ci_low_us: float
    ci_high_us: float
    samples: int
    baseline_median_us: float
    speedup: float
    sol_percent: float
    launch_bound: bool
    throttled_discarded: int
    sm_clock_mhz: float
    temperature_c: float
    def __init__(self, name: _Optional[str] = ..., meaningful: _Optional[bool] = ..., median_us: _Optional[float] = ..., ci_low_us: _Optional[float] = ..., ci_high_us: _Optional[float] = ..., samples: _Optional[int] = ..., baseline_median_us: _Optional[float] = ..., speedup: _Optional[float] = ..., sol_percent: _Optional[float] = ..., launch_bound: _Optional[bool] = ..., throttled_discarded: _Optional[int] = ..., sm_clock_mhz: _Optional[float] = ..., temperature_c: _Optional[float] = ...) -> None: ...

class Finding(_message.Message):
    __slots__ = ("layer", "rule", "evidence", "severity")
    LAYER_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    SEVERITY_FIELD_NUMBER: _ClassVar[int]
    layer: str
    rule: str
    evidence: str
    severity: str
    def __init__(self, layer: _Optional[str] = ..., rule: _Optional[str] = ..., evidence: _Optional[str] = ..., severity: _Optional[str] = ...) -> None: ...

class ToolchainFault(_message.Message):
    __slots__ = ("kind", "pass_name", "message_hash", "message")
    KIND_FIELD_NUMBER: _ClassVar[int]
    PASS_NAME_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_HASH_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    kind: str
    pass_name: str
    message_hash: str
    message: str
    def __init__(self, kind: _Optional[str] = ..., pass_name: _Optional[str] = ..., message_hash: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class Verdict(_message.Message):
    __slots__ = ("status", "request_id", "operator_id", "operator_version", "candidate_hash", "device_model", "harness_version", "message", "cases", "timings", "findings", "log", "system", "wall_seconds", "public_only", "toolchain_fault", "baseline")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_ID_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_VERSION_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_HASH_FIELD_NUMBER: _ClassVar[int]
    DEVICE_MODEL_FIELD_NUMBER: _ClassVar[int]
    HARNESS_VERSION_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CASES_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    FINDINGS_FIELD_NUMBER: _ClassVar[int]
    LOG_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_FIELD_NUMBER: _ClassVar[int]
    WALL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_ONLY_FIELD_NUMBER: _ClassVar[int]
    TOOLCHAIN_FAULT_FIELD_NUMBER: _ClassVar[int]
    BASELINE_FIELD_NUMBER: _ClassVar[int]
    status: Status
    request_id: str
    operator_id: str
    operator_version: int
    candidate_hash: str
    device_model: str
    harness_version: str
    message: str
    cases: _containers.RepeatedCompositeFieldContainer[CaseResult]
    timings: _containers.RepeatedCompositeFieldContainer[CaseTiming]
    findings: _containers.RepeatedCompositeFieldContainer[Finding]
    log: str
    system: SystemInfo
    wall_seconds: float
    public_only: bool
    toolchain_fault: ToolchainFault
    baseline: str
    def __init__(self, status: _Optional[_Union[Status, str]] = ..., request_id: _Optional[str] = ..., operator_id: _Optional[str] = ..., operator_version: _Optional[int] = ..., candidate_hash: _Optional[str] = ..., device_model: _Optional[str] = ..., harness_version: _Optional[str] = ..., message: _Optional[str] = ..., cases: _Optional[_Iterable[_Union[CaseResult, _Mapping]]] = ..., timings: _Optional[_Iterable[_Union[CaseTiming, _Mapping]]] = ..., findings: _Optional[_Iterable[_Union[Finding, _Mapping]]] = ..., log: _Optional[str] = ..., system: _Optional[_Union[SystemInfo, _Mapping]] = ..., wall_seconds: _Optional[float] = ..., public_only: _Optional[bool] = ..., toolchain_fault: _Optional[_Union[ToolchainFault, _Mapping]] = ..., baseline: _Optional[str] = ...) -> None: ...

class Progress(_message.Message):
    __slots__ = ("stage", "detail", "done", "total")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    stage: Stage
    detail: str
    done: int
    total: int
    def __init__(self, stage: _Optional[_Union[Stage, str]] = ..., detail: _Optional[str] = ..., done: _Optional[int] = ..., total: _Optional[int] = ...) -> None: ...

class EvaluateEvent(_message.Message):
    __slots__ = ("progress", "verdict")
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    progress: Progress
    verdict: Verdict
    def __init__(self, progress: _Optional[_Union[Progress, _Mapping]] = ..., verdict: _Optional[_Union[Verdict, _Mapping]] = ...) -> None: ...
