"""The agent <-> sandboxed-worker protocol: one frozen dataclass per message, both directions.

Commands go from the agent to a worker; reports come back. This module is the one place that
turns messages into frames (``device_agent.codec``) and frames back into messages: past
:func:`decode_report`, the agent holds typed records only, so renaming a field is a type error
on both sides at once.

A worker runs hostile code, which can write any bytes to its end of the channel. Decoding is
therefore strict: an unknown kind is :class:`Unexpected`, a missing, extra or mistyped field
:class:`Malformed` (a :class:`~device_agent.codec.CodecError`), and once a job is handed over
every report must carry the job's nonce, else :class:`Forged`. Each is the candidate's failure
(the evaluation turns it into a verdict), never an error of the agent.

Flow (one job per worker):

* start: ``DeviceWanted`` -> ``DeviceGranted`` -> ``DeviceReleased`` (around each device part of
  the start), then ``Ready`` or ``StartError``;
* job: ``Job`` -> ``Accepted`` (before any candidate code), then ``Loaded`` or ``LoadError``;
* per correctness case: ``CheckCase`` -> ``Warmed``, ``RunCase`` -> ``Ran``, then
  ``CaseOutputs`` (or ``CaseError`` at any point);
* timing: ``StartTiming``, then per benchmark case ``BuildInputs`` -> ``Built``, ``Upload`` ->
  ``Uploaded``, ``Measure`` -> ``Timed``, ``Recheck`` -> ``Rechecked`` (or ``TimingError``);
* ``Stop`` (or the end of the channel) ends the job.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import time
import typing
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import torch

from device_agent.codec import encode, read_message, read_message_blocking
from device_agent.profiling import DeviceTime
from device_agent.sandbox import Applied
from device_agent.timing import Measurement
from device_agent.wire_records import Malformed as Malformed
from device_agent.wire_records import plain, record
from operators.checking import Layout
from operators.spec import Call
from protos.records import SystemInfo

_KIND_SHOWN = 200  # characters of an unknown kind repeated in a verdict


@dataclass(frozen=True, kw_only=True)
class Message:
    """A message of either direction; ``KIND`` is its ``type`` on the wire. Fields are
    keyword-only: a renamed or reordered field is a type error wherever a message is made."""

    KIND: ClassVar[str] = ""


# ---- commands: agent -> worker -------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class DeviceGranted(Message):
    """The starting worker may use the device now (the agent holds its gate shared)."""

    KIND: ClassVar[str] = "device_granted"


@dataclass(frozen=True, kw_only=True)
class Job(Message):
    """The worker's one candidate: the file to import, how many cases follow, the layers on."""

    KIND: ClassVar[str] = "job"
    nonce: str
    operator_id: str
    path: str
    module_name: str
    n_calls: int
    layers: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class CheckCase(Message):
    """Correctness case ``index``: run it dry (``warm``) and wait for :class:`RunCase`; the
    probes ask for a ghost run, a second run, or a replay on ``replay``'s contents."""

    KIND: ClassVar[str] = "call"
    index: int
    call: Call
    warm: bool
    ghost: bool
    repeat: bool
    replay: Call | None


@dataclass(frozen=True, kw_only=True)
class RunCase(Message):
    """Run case ``index`` for real: the agent holds the device's gate shared meanwhile."""

    KIND: ClassVar[str] = "run"
    index: int


@dataclass(frozen=True, kw_only=True)
class Stop(Message):
    """The verdict is decided: no more work."""

    KIND: ClassVar[str] = "stop"


@dataclass(frozen=True, kw_only=True)
class StartTiming(Message):
    KIND: ClassVar[str] = "time"
    n_cases: int
    budget_s: float
    l2_bytes: int  # 0: the timer's own


@dataclass(frozen=True, kw_only=True)
class BuildInputs(Message):
    """Benchmark case ``index``: make its input sets from ``seed`` (compiling dry first when
    ``warm``), without the device's gate where they can be made on the host."""

    KIND: ClassVar[str] = "prepare"
    index: int
    seed: int
    warm: bool


@dataclass(frozen=True, kw_only=True)
class Upload(Message):
    """Make (on the device) and copy case ``index``'s input sets: the gate is held shared."""

    KIND: ClassVar[str] = "upload"
    index: int


@dataclass(frozen=True, kw_only=True)
class Measure(Message):
    """Time case ``index``: the gate is held exclusively, the agent's clock runs."""

    KIND: ClassVar[str] = "go"
    index: int


@dataclass(frozen=True, kw_only=True)
class Recheck(Message):
    """Run case ``index`` once more on pristine inputs (``profile``: under the profiler)."""

    KIND: ClassVar[str] = "recheck"
    index: int
    profile: bool


# ---- reports: worker -> agent (untrusted once a job is handed over) ------------------------------

@dataclass(frozen=True, kw_only=True)
class DeviceWanted(Message):
    KIND: ClassVar[str] = "device_wanted"


@dataclass(frozen=True, kw_only=True)
class DeviceReleased(Message):
    KIND: ClassVar[str] = "device_released"


@dataclass(frozen=True, kw_only=True)
class Ready(Message):
    """A warm, locked-down worker: what it runs on, what sandbox it got, measured peaks."""

    KIND: ClassVar[str] = "ready"
    pid: int
    system: SystemInfo
    sandbox: Applied
    peaks: dict[str, Any] | None = None  # device_agent.peaks' own format
    peaks_error: str = ""


@dataclass(frozen=True, kw_only=True)
class StartError(Message):
    KIND: ClassVar[str] = "start_error"
    message: str
    traceback: str


@dataclass(frozen=True, kw_only=True)
class Accepted(Message):
    """The job arrived: sent before any candidate code runs (a death before it is the system's)."""

    KIND: ClassVar[str] = "accepted"


@dataclass(frozen=True, kw_only=True)
class Loaded(Message):
    KIND: ClassVar[str] = "loaded"


@dataclass(frozen=True, kw_only=True)
class LoadError(Message):
    KIND: ClassVar[str] = "load_error"
    kind: str  # "syntax", "import" or "missing_entry"
    message: str
    traceback: str


@dataclass(frozen=True, kw_only=True)
class Warmed(Message):
    """The dry run of a case is over (``stopped``: why it ended early); the Triton launchers the
    worker had to build itself."""

    KIND: ClassVar[str] = "warmed"
    index: int
    seconds: float
    stopped: str
    launchers: list[Any]  # checked by device_agent.launchers.valid_signature


@dataclass(frozen=True, kw_only=True)
class Ran(Message):
    """The device's part of the case is over: its outputs are in host memory."""

    KIND: ClassVar[str] = "ran"
    index: int


@dataclass(frozen=True, kw_only=True)
class CaseOutputs(Message):
    """A case's raw outputs (tensors, :func:`operators.invoke.wire_output` notes), where they
    live, the inputs after the call, and what the worker's layers saw."""

    KIND: ClassVar[str] = "case"
    index: int
    outputs: list[Any]
    layouts: list[Layout | None]
    post_inputs: dict[str, torch.Tensor]
    seconds: float
    own_launches: int
    guard: tuple[str, ...]
    integrity: tuple[str, ...]
    ghost_outputs: list[Any] | None = None  # None: not asked, or the ghost run failed
    repeat_outputs: list[Any] | None = None  # None: not asked, or the second run failed
    replay_outputs: list[Any] | None = None  # None: not asked, or the replay failed


@dataclass(frozen=True, kw_only=True)
class CaseError(Message):
    KIND: ClassVar[str] = "case_error"
    index: int
    message: str
    traceback: str
    compile: bool = False  # a kernel failed to compile
    signature: bool = False  # the entry point cannot take the call's arguments
    platform_limit: bool = False  # the platform cannot run it (not the candidate's fault)
    toolchain_stage: str | None = None  # raised inside the platform's compiler, in this stage


@dataclass(frozen=True, kw_only=True)
class Built(Message):
    KIND: ClassVar[str] = "built"
    index: int
    seconds: float
    stopped: str
    launchers: list[Any]


@dataclass(frozen=True, kw_only=True)
class Uploaded(Message):
    KIND: ClassVar[str] = "prepared"
    index: int


@dataclass(frozen=True, kw_only=True)
class Timed(Message):
    KIND: ClassVar[str] = "timing"
    index: int
    measurement: Measurement
    integrity: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class Rechecked(Message):
    """The call after timing: how its outputs differ from the reference (None: they agree)."""

    KIND: ClassVar[str] = "rechecked"
    index: int
    drift: str | None
    device_time: DeviceTime | None
    integrity: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class TimingError(Message):
    KIND: ClassVar[str] = "timing_error"
    index: int
    message: str
    traceback: str
    toolchain_stage: str | None = None  # raised inside the platform's compiler, in this stage
    # Raised by this part of the harness's own code (device_agent.harness_faults.PARTS), not by
    # the candidate's, as the worker tells it: a claim the agent settles by re-running the
    # problem's own solution (device_agent.fault_reproduction).
    harness_fault: str | None = None


Command = (DeviceGranted | Job | CheckCase | RunCase | Stop | StartTiming | BuildInputs | Upload
           | Measure | Recheck)
Report = (DeviceWanted | DeviceReleased | Ready | StartError | Accepted | Loaded | LoadError
          | Warmed | Ran | CaseOutputs | CaseError | Built | Uploaded | Timed | Rechecked
          | TimingError)
Failure = LoadError | CaseError | TimingError
_COMMANDS: dict[str, type[Message]] = {c.KIND: c for c in typing.get_args(Command)}
_REPORTS: dict[str, type[Message]] = {c.KIND: c for c in typing.get_args(Report)}
# The report that replaces an expected one when the candidate's code fails there.
_FAILS_AS: dict[type[Message], type[Message]] = {
    Loaded: LoadError, Warmed: CaseError, Ran: CaseError, CaseOutputs: CaseError,
    Built: TimingError, Uploaded: TimingError, Timed: TimingError, Rechecked: TimingError}


# ---- what goes wrong on the channel ---------------------------------------------------------------

class ChannelError(Exception):
    """The worker's end of the channel said something the agent did not ask for."""


class Forged(ChannelError):
    """A report without the job's nonce: written to the channel by something other than the
    harness (the ``process`` layer: the candidate's verdict is CHEAT_DETECTED)."""

    def __init__(self, kind: Any) -> None:
        super().__init__(f"message without the run's nonce: type={_shown(kind)!r}")
        self.kind = _shown(kind)


class Unexpected(ChannelError):
    """A report of an unknown kind, or of another kind or case than the one awaited."""

    def __init__(self, kind: Any) -> None:
        super().__init__(f"unexpected worker message {_shown(kind)!r}")
        self.kind = _shown(kind)


class WorkerFailed(ChannelError):
    """The candidate's code failed where a report was awaited: ``failure`` says how."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


def _shown(kind: Any) -> Any:
    return kind if not isinstance(kind, str) or len(kind) <= _KIND_SHOWN else kind[:_KIND_SHOWN]


# ---- encoding and decoding: the one place ---------------------------------------------------------

def encode_message(message: Message, nonce: str | None = None) -> bytes:
    """One frame for ``message`` (with ``nonce``, for a report of a job)."""
    body: dict[str, Any] = {"type": message.KIND}
    if nonce is not None:
        body["nonce"] = nonce
    for f in dataclasses.fields(message):
        body[f.name] = plain(getattr(message, f.name))
    return encode(body)


def decode_report(raw: dict[str, Any]) -> Report:
    """The report ``raw`` (a decoded frame) holds: :class:`Unexpected` for an unknown kind,
    :class:`Malformed` for fields that are not exactly the kind's."""
    return typing.cast(Report, _decode(raw, _REPORTS, ("type", "nonce")))


def decode_command(raw: dict[str, Any]) -> Command:
    return typing.cast(Command, _decode(raw, _COMMANDS, ("type",)))


def _decode(raw: dict[str, Any], kinds: dict[str, type[Message]],
            envelope: tuple[str, ...]) -> Message:
    kind = raw.get("type")
    cls = kinds.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise Unexpected(kind)
    fields = {k: v for k, v in raw.items() if k not in envelope}
    return typing.cast(Message, record(cls, fields, cls.KIND))


# ---- the two ends of the channel ------------------------------------------------------------------

M = TypeVar("M", bound=Message)


def accept(report: Report, kind: type[M], index: int | None = None) -> M:
    """``report`` as the awaited ``kind`` (of case ``index``). :class:`WorkerFailed` when it is
    the failure that stands in for ``kind``; :class:`Unexpected` for anything else."""
    failure = _FAILS_AS.get(kind)
    if failure is not None and isinstance(report, failure) and _of_case(report, index):
        raise WorkerFailed(typing.cast(Failure, report))
    if isinstance(report, kind) and _of_case(report, index):
        return report
    raise Unexpected(report.KIND)


def _of_case(message: Message, index: int | None) -> bool:
    return index is None or getattr(message, "index", None) == index


class WorkerChannel:
    """The agent's end of one worker's channel. ``until`` is a ``time.monotonic()`` instant:
    past it, :class:`TimeoutError`."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.nonce: str | None = None  # the job's, once handed over: every report must carry it

    async def send(self, command: Command, until: float | None = None) -> None:
        self.writer.write(encode_message(command))
        if until is None:
            await self.writer.drain()
        else:  # a worker that stopped reading must not hold the stage past its deadline
            await asyncio.wait_for(self.writer.drain(), timeout=max(0.001, until - time.monotonic()))

    async def recv(self, until: float | None = None) -> Report:
        if until is None:
            raw = await read_message(self.reader)
        else:
            timeout = until - time.monotonic()
            if timeout <= 0:
                raise TimeoutError
            raw = await asyncio.wait_for(read_message(self.reader), timeout=timeout)
        if self.nonce is not None and raw.get("nonce") != self.nonce:
            raise Forged(raw.get("type"))
        return decode_report(raw)

    async def expect(self, kind: type[M], until: float | None = None,
                     index: int | None = None) -> M:
        return accept(await self.recv(until), kind, index)

    def close(self) -> None:
        self.writer.close()


class AgentChannel:
    """The worker's end (blocking): reports carry the job's nonce once the job has come."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.nonce: str | None = None

    def send(self, report: Report) -> None:
        self.sock.sendall(encode_message(report, self.nonce))

    def recv(self) -> Command:
        return decode_command(read_message_blocking(self.sock))

    def expect(self, kind: type[M], index: int | None = None) -> M:
        """The next command, which must be ``kind`` (of case ``index``): else
        :class:`Unexpected`, on which the worker ends its job."""
        command = self.recv()
        if isinstance(command, kind) and _of_case(command, index):
            return command
        raise Unexpected(command.KIND)
