from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AgentLoad(_message.Message):
    __slots__ = ("capacity", "busy", "queue_depth", "draining")
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    BUSY_FIELD_NUMBER: _ClassVar[int]
    QUEUE_DEPTH_FIELD_NUMBER: _ClassVar[int]
    DRAINING_FIELD_NUMBER: _ClassVar[int]
    capacity: int
    busy: int
    queue_depth: int
    draining: bool
    def __init__(self, capacity: _Optional[int] = ..., busy: _Optional[int] = ..., queue_depth: _Optional[int] = ..., draining: _Optional[bool] = ...) -> None: ...

class RegisterRequest(_message.Message):
    __slots__ = ("agent_id", "address", "platform", "device_model", "harness_version", "load")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PLATFORM_FIELD_NUMBER: _ClassVar[int]
    DEVICE_MODEL_FIELD_NUMBER: _ClassVar[int]
    HARNESS_VERSION_FIELD_NUMBER: _ClassVar[int]
    LOAD_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    address: str
    platform: str
    device_model: str
    harness_version: str
    load: AgentLoad
    def __init__(self, agent_id: _Optional[str] = ..., address: _Optional[str] = ..., platform: _Optional[str] = ..., device_model: _Optional[str] = ..., harness_version: _Optional[str] = ..., load: _Optional[_Union[AgentLoad, _Mapping]] = ...) -> None: ...

class Lease(_message.Message):
    __slots__ = ("lease_seconds", "heartbeat_interval_seconds")
    LEASE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    lease_seconds: float
    heartbeat_interval_seconds: float
    def __init__(self, lease_seconds: _Optional[float] = ..., heartbeat_interval_seconds: _Optional[float] = ...) -> None: ...

class RegisterResponse(_message.Message):
    __slots__ = ("lease",)
    LEASE_FIELD_NUMBER: _ClassVar[int]
    lease: Lease
    def __init__(self, lease: _Optional[_Union[Lease, _Mapping]] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("agent_id", "address", "load")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    LOAD_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    address: str
    load: AgentLoad
    def __init__(self, agent_id: _Optional[str] = ..., address: _Optional[str] = ..., load: _Optional[_Union[AgentLoad, _Mapping]] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("lease",)
    LEASE_FIELD_NUMBER: _ClassVar[int]
    lease: Lease
    def __init__(self, lease: _Optional[_Union[Lease, _Mapping]] = ...) -> None: ...

class DeregisterRequest(_message.Message):
    __slots__ = ("agent_id", "address")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    address: str
    def __init__(self, agent_id: _Optional[str] = ..., address: _Optional[str] = ...) -> None: ...

class DeregisterResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
