"""Fuzzing the worker's result channel as the agent reads it (issue #19, point 6; issue #20).

A candidate runs inside the worker, so every byte on the channel may be its: it can write to
the channel's descriptor directly, or find the worker's end of the channel (and its nonce). The
agent reads those frames through :class:`device_agent.protocol.WorkerChannel`: a frame becomes a
typed report, or one of the channel's own errors (:class:`CodecError` for a frame that does not
decode or a message with wrong fields, :class:`Unexpected` for an unknown kind, :class:`Forged`
without the job's nonce), never another exception. And a run of a candidate
(:class:`device_agent.candidate_run.CandidateRun`) that meets any of them ends in the
candidate's verdict, never in an error of the agent. In-process and fast: no agent needed. The
end-to-end version (a candidate writing such frames to its descriptors) is in
test_fuzz_loader.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import struct
import tempfile
import time
import types
import typing
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

import operators
from device_agent import candidate_run
from device_agent.candidate_run import CandidateRun
from device_agent.case_inputs import CaseInputs, Prepared
from device_agent.codec import CodecError, decode, encode
from device_agent.device_gate import DeviceGate
from device_agent.evaluation import LAYERS
from device_agent.host_work import HostBudget, HostWork
from device_agent.platforms.cpu import CpuPlatform
from device_agent.protocol import (
    Accepted,
    CaseError,
    ChannelError,
    Forged,
    Loaded,
    Malformed,
    Ran,
    Report,
    Unexpected,
    Warmed,
    WorkerChannel,
    encode_message,
)
from device_agent.run_harness import Harness, StageBudgets, WorkerLost
from operators.spec import Tier
from protos.records import Status, SystemInfo, Verdict
from tests.device_agent.fuzzing import (
    frames,
    fuzz_settings,
    seeded,
    typed_worker_messages,
    worker_messages,
)

NONCE = "0123456789abcdef"
SYSTEM = SystemInfo(platform="cpu")
CANDIDATE_STATUSES = frozenset(Status) - {Status.INFRA_ERROR}


class _Sink:
    """The agent's writing end, writing nowhere."""

    def write(self, data: bytes) -> None:
        pass

    async def drain(self) -> None:
        pass

    def close(self) -> None:
        pass


def _channel(data: bytes, nonce: str | None) -> WorkerChannel:
    """The agent's own end of a worker's channel, fed ``data`` (then the end of the stream)."""
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    ch = WorkerChannel(reader, _Sink())  # type: ignore[arg-type]
    ch.nonce = nonce
    return ch


def _read(frame: bytes, nonce: str | None = None) -> Report:
    """The agent's own read path: the channel of a job (with ``nonce``) or of a start."""

    async def go() -> Report:
        return await _channel(frame, nonce).recv()

    return asyncio.run(go())


def _header_frame(header: bytes) -> bytes:
    body = struct.pack("<I", len(header)) + header
    return struct.pack("<I", len(body)) + body


@fuzz_settings(examples=300)
@given(frame=frames(), nonce=st.sampled_from([None, NONCE]))
@example(frame=_header_frame(b'{"body": {"__tuple__": 5}, "blobs": []}'), nonce=None)
@example(frame=_header_frame(b'{"body": {"__dict__": [[1, 2, 3]]}, "blobs": []}'), nonce=None)
@example(frame=_header_frame(b'{"body": {"__dict__": [[[1], 2]]}, "blobs": []}'), nonce=None)
@example(frame=_header_frame(b'{"body": {"__dict__": [["t", {"__tensor__": 0}]]}, "blobs": '
                             b'[{"dtype": "float32", "size": [0, 4611686018427387904, 2], '
                             b'"stride": [1, 1, 1], "nbytes": 0}]}' + struct.pack("<Q", 0)),
         nonce=None)
@seeded
def test_fuzz_frames_become_reports_or_channel_errors(frame: bytes, nonce: str | None) -> None:
    """Any frame: a typed report, or the channel's own errors (or EOF for one cut short)."""
    try:
        report = _read(frame, nonce)
    except (CodecError, ChannelError, asyncio.IncompleteReadError):
        return
    assert dataclasses.is_dataclass(report) and report.KIND


@fuzz_settings(examples=300)
@given(msg=st.one_of(typed_worker_messages(), worker_messages()))
@example(msg={"type": "case", "index": 0, "outputs": "x", "layouts": [], "post_inputs": {},
              "seconds": 0.0, "own_launches": 0, "guard": [], "integrity": []})
@example(msg={"type": "rechecked", "index": 0, "drift": None, "integrity": [],
              "device_time": {"own_us": 1.0}})
@example(msg={"type": "warmed", "index": True, "seconds": 0.0, "stopped": "", "launchers": []})
@seeded
def test_fuzz_messages_decode_to_exactly_their_fields(msg: dict[str, Any]) -> None:
    """What a worker (or a candidate holding its channel) can send is decoded strictly: a
    report of the message's kind holding the same values, or :class:`Malformed` /
    :class:`Unexpected`; never a report with a field missing, added or of another type."""
    try:
        frame = encode({**msg, "nonce": NONCE})
    except CodecError:
        return
    try:
        report = _read(frame, NONCE)
    except (Malformed, Unexpected):
        return
    assert msg["type"] == report.KIND
    assert _conforms(report, type(report)), report
    back = decode(encode_message(report, NONCE)[4:])
    fields = {f.name for f in dataclasses.fields(report)}
    assert set(msg) - {"type"} <= fields, (msg, report)
    assert all(_same(msg[k], back[k]) for k in msg if k != "type"), (msg, back)


def _conforms(value: Any, hint: Any) -> bool:
    """Whether a decoded ``value`` is exactly of the declared type ``hint`` (the test's own
    oracle, independent of the protocol's decoder)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_conforms(value, a) for a in args)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        hints = typing.get_type_hints(hint)
        return type(value) is hint and all(_conforms(getattr(value, f.name), hints[f.name])
                                           for f in dataclasses.fields(hint))
    if origin is dict:
        return type(value) is dict and all(type(k) is str and _conforms(v, args[1])
                                           for k, v in value.items())
    if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
        return (type(value) is tuple and len(value) == len(args)
                and all(map(_conforms, value, args)))
    if origin in (list, tuple, frozenset):
        return type(value) is origin and all(_conforms(v, args[0]) for v in value)
    if hint is torch.Tensor:
        return isinstance(value, torch.Tensor)
    return type(value) is hint


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape
    if isinstance(a, float) and a != a:
        return isinstance(b, float) and b != b
    if isinstance(a, list | tuple):
        return isinstance(b, list | tuple) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and set(map(str, a)) == set(map(str, b))
    return bool(a == b)


@pytest.mark.parametrize("msg", [
    {"type": "ran", "index": True},  # a bool is no int
    {"type": "ran", "index": 1.0},
    {"type": "ran", "index": "0"},
    {"type": "ran"},
    {"type": "ran", "index": 0, "seconds": 1.0},
    {"type": "warmed", "index": 0, "seconds": "1", "stopped": "", "launchers": []},
    {"type": "warmed", "index": 0, "seconds": True, "stopped": "", "launchers": []},
    {"type": "warmed", "index": 0, "seconds": 1, "stopped": 0, "launchers": []},
    {"type": "warmed", "index": 0, "seconds": 1, "stopped": "", "launchers": {}},
    {"type": "case_error", "index": 0, "message": "m", "traceback": "", "compile": 1},
    {"type": "case", "index": 0, "outputs": [], "layouts": [[1, 2]], "post_inputs": {},
     "seconds": 0.0, "own_launches": 0, "guard": [], "integrity": []},
    {"type": "case", "index": 0, "outputs": [], "layouts": [{"view_of": 1.5, "offset": 0}],
     "post_inputs": {}, "seconds": 0.0, "own_launches": 0, "guard": [], "integrity": []},
    {"type": "case", "index": 0, "outputs": [], "layouts": [], "post_inputs": {"0": 1},
     "seconds": 0.0, "own_launches": 0, "guard": [], "integrity": []},
    {"type": "case", "index": 0, "outputs": [], "layouts": [], "post_inputs": {},
     "seconds": 0.0, "own_launches": 0, "guard": [1], "integrity": []},
    {"type": "rechecked", "index": 0, "drift": None, "integrity": [],
     "device_time": {"own_us": 1.0, "other_us": 1.0, "others": [["k", 1.0, 2.0]]}},
    {"type": "rechecked", "index": 0, "drift": None, "integrity": [],
     "device_time": {"own_us": 1.0, "other_us": 1.0, "others": [["k", "1"]]}},
    {"type": "timing", "index": 0, "integrity": [], "measurement": {"median_us": 1.0}},
])
def test_a_field_missing_added_or_of_another_type_is_malformed(msg: dict[str, Any]) -> None:
    with pytest.raises(Malformed):
        _read(encode({**msg, "nonce": NONCE}), NONCE)


def test_a_report_without_the_jobs_nonce_is_forged() -> None:
    frame = encode_message(Loaded(), "another nonce")
    with pytest.raises(Forged, match="type='loaded'"):
        _read(frame, NONCE)
    with pytest.raises(Forged):
        _read(encode_message(Loaded()), NONCE)
    assert isinstance(_read(encode_message(Loaded(), NONCE), NONCE), Loaded)


@given(data=st.binary(max_size=200))
@fuzz_settings(examples=200)
@seeded
def test_fuzz_raw_bytes_decode_or_raise_codec_error(data: bytes) -> None:
    try:
        msg = decode(data)
    except CodecError:
        return
    assert isinstance(msg, dict)


# ---- a whole run meeting a hostile report --------------------------------------------------------

@functools.cache
def _prepared() -> tuple[Harness, Prepared]:
    spec = operators.get("aten::add")
    layers = frozenset(LAYERS)
    harness = Harness(CpuPlatform(), layers, StageBudgets(load_s=5, correctness_s=5),
                      HostWork(HostBudget.for_host(1)), None, None)
    return harness, CaseInputs(Tier.CPU, b"k", layers).prepare(spec, "0" * 64, spec.solution)


class _Proc:
    returncode = 1

    async def wait(self) -> int:
        return 1


class _ScriptedWorker:
    """A worker whose channel carries ``data`` and then ends."""

    def __init__(self, data: bytes, workdir: Path) -> None:
        self.channel = _channel(data, None)
        self.workdir = workdir
        self.proc = _Proc()
        self.pid = 0

    def log_tail(self) -> str:
        return ""

    def death_note(self) -> str:
        return ""

    async def end(self, timeout: float = 10.0, grace: float = 0.0) -> None:
        pass


# The honest reports that lead up to case 0's outputs, in order.
HONEST = [Accepted(), Loaded(), Warmed(index=0, seconds=0.0, stopped="", launchers=[]),
          Ran(index=0)]


def _run(honest_first: int, last: bytes, monkeypatch: pytest.MonkeyPatch) -> Verdict:
    """A run of aten::add's candidate whose worker answers ``honest_first`` reports honestly,
    then sends ``last`` and dies."""
    harness, p = _prepared()
    monkeypatch.setattr(candidate_run.secrets, "token_hex", lambda n: NONCE)
    data = b"".join(encode_message(r, NONCE) for r in HONEST[:honest_first]) + last

    def verdict(status: Status, message: str, **details: Any) -> Verdict:
        return Verdict(status, p.spec.id, p.spec.version, p.candidate_hash, message=message,
                       **details)

    async def go() -> Verdict:
        with tempfile.TemporaryDirectory() as workdir:
            worker = _ScriptedWorker(data, Path(workdir))
            run = CandidateRun(harness, worker, 0, DeviceGate(), p, verdict,  # type: ignore[arg-type]
                               lambda *a: None, system=SYSTEM, datasheet=SYSTEM,
                               deadline=time.monotonic() + 60, t0=0.0, skip_timing=True)
            return await run.run()

    return asyncio.run(go())


def _framed(msg: dict[str, Any], nonce: bool, case_0: bool) -> bytes:
    """``msg`` as a frame (of case 0 when ``case_0``, so it reaches the judging of that case),
    with the job's nonce or without."""
    if case_0 and "index" in msg:
        msg = {**msg, "index": 0}
    try:
        return encode({**msg, "nonce": NONCE} if nonce else msg)
    except CodecError:
        return b""


# What a hostile worker may say: any frame, or any message, typed or not, with or without the
# nonce (mostly with: that is what gets past the nonce check).
hostile = st.one_of(
    frames(),
    st.builds(_framed, st.one_of(typed_worker_messages(), worker_messages()),
              st.sampled_from([True, True, True, False]), st.booleans()))


@fuzz_settings(examples=150)
@given(honest_first=st.integers(1, len(HONEST)), last=hostile)
@example(honest_first=4, last=_header_frame(b'{"body": {"__dict__": [["type", "case"], '
                                              b'["nonce", "' + NONCE.encode() + b'"]]}, '
                                              b'"blobs": []}'))
@seeded
def test_fuzz_a_hostile_report_ends_in_the_candidates_verdict(
        honest_first: int, last: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the worker says once the candidate is loaded (and however it ends), the run
    returns a verdict of the candidate's (never INFRA_ERROR, never an exception)."""
    v = _run(honest_first, last, monkeypatch)
    assert v.status in CANDIDATE_STATUSES, (v.status, v.message)
    assert v.message


@fuzz_settings(examples=150)
@given(outputs=typed_worker_messages(kinds=("case",), faithful=True))
@seeded
def test_fuzz_case_outputs_are_judged_into_the_candidates_verdict(
        outputs: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Case outputs of every shape the protocol lets through (any values of the declared types:
    outputs that are not tensors, tensors of any shape and dtype, layouts, inputs after the
    call that are missing or different, probe outputs) reach the agent's judging of case 0
    and end in a verdict of the candidate's."""
    frame = encode({**outputs, "index": 0, "nonce": NONCE})
    v = _run(len(HONEST), frame, monkeypatch)
    assert v.status in CANDIDATE_STATUSES, (v.status, v.message)
    assert "malformed" not in v.message and "unexpected" not in v.message, v.message


@fuzz_settings(examples=60)
@given(last=hostile)
@seeded
def test_fuzz_a_worker_that_never_acknowledges_is_lost_to_the_system(
        last: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before the worker acknowledges its job no candidate code has run: whatever it says
    instead (or a death) is the system's loss (retried elsewhere), never a verdict."""
    try:
        v = _run(0, last, monkeypatch)
    except WorkerLost:
        return
    assert v.status in CANDIDATE_STATUSES  # it did acknowledge (a valid Accepted), then died


def test_verdicts_for_each_way_a_report_goes_wrong(monkeypatch: pytest.MonkeyPatch) -> None:
    """The verdict (and its message) for each way the channel fails, as the agent gave it
    before the protocol was typed."""
    forged = _run(2, encode_message(Warmed(index=0, seconds=0.0, stopped="", launchers=[])), monkeypatch)
    assert forged.status is Status.CHEAT_DETECTED
    assert forged.message == "result channel carried a forged message"
    assert [f.rule for f in forged.findings] == ["result-channel-nonce"]
    unexpected = _run(2, encode_message(Ran(index=0), NONCE), monkeypatch)
    assert (unexpected.status, unexpected.message) == (Status.RUNTIME_ERROR,
                                                       "unexpected worker message 'ran'")
    other_case = _run(2, encode_message(Warmed(index=1, seconds=0.0, stopped="", launchers=[]),
                                         NONCE), monkeypatch)
    assert other_case.message == "unexpected worker message 'warmed'"
    unknown = _run(1, encode({"type": "nonsense", "nonce": NONCE}), monkeypatch)
    assert unknown.message == "unexpected worker message 'nonsense'"
    malformed = _run(2, encode({"type": "warmed", "index": 0, "nonce": NONCE}), monkeypatch)
    assert malformed.status is Status.RUNTIME_ERROR
    assert malformed.message == "malformed message from worker: warmed: missing field 'seconds'"
    died = _run(3, b"", monkeypatch)
    assert (died.status, died.message) == (
        Status.RUNTIME_ERROR, "worker exited with code 1 during correctness without a result")
    load_error = _run(1, encode({"type": "load_error", "kind": "syntax", "message": "m",
                                 "traceback": "tb", "nonce": NONCE}), monkeypatch)
    assert (load_error.status, load_error.message) == (Status.COMPILE_ERROR,
                                                       "candidate does not parse: m")
    crash = _run(4, encode_message(CaseError(index=0, message="ValueError: x", traceback=""),
                                   NONCE), monkeypatch)
    assert crash.status is Status.RUNTIME_ERROR and crash.message.endswith(": raised: ValueError: x")
