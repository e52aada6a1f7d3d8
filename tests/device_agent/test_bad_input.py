"""Regression tests for what the fuzz tests (test_fuzz_grpc.py, test_fuzz_loader.py) found:

* request bytes that do not parse were answered UNKNOWN by grpcio itself (on every service);
* an INVALID_ARGUMENT whose details echo a long operator id reached the client as
  RESOURCE_EXHAUSTED ("received metadata size exceeds hard limit"), which means "retry";
* a source nesting a few thousand levels deep made the agent's own parse raise RecursionError
  or MemoryError: INTERNAL instead of the candidate's COMPILE_ERROR;
* a frame a candidate writes to the worker's result channel could make the agent's decoder
  raise TypeError, ValueError, RuntimeError or RecursionError instead of CodecError: INTERNAL
  instead of the candidate's RUNTIME_ERROR (end to end: test_fuzz_loader.py's explicit example).
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2

from device_agent.codec import CodecError, decode
from device_agent.evaluation import Evaluator, InvalidRequest
from device_agent.platforms.cpu import CpuPlatform
from device_agent.rpc_guard import DETAILS_LIMIT_BYTES, UndecodableRequests, clip_details
from device_agent.service import _abort_for
from protos.client import SERVICE_NAME
from protos.kgb.agent.v1 import agent_pb2, agent_pb2_grpc
from protos.records import EvalRequest, Status

ENTRIES = b"def add_Tensor(self, other, *, alpha=1):\n    return self\nadd_Scalar = add_out = add_Tensor\n"


class _Toy(agent_pb2_grpc.DeviceAgentServicer):  # type: ignore[misc]
    """Answers decodable requests; an operator id "bad..." is refused through the agent's own
    status mapping."""

    async def Describe(self, request: Any, context: Any) -> Any:
        return agent_pb2.DescribeResponse(agent_id="toy", capacity=1)

    async def Evaluate(self, request: Any, context: Any) -> Any:
        if request.operator_id.startswith("bad"):
            await _abort_for(InvalidRequest(f"unknown operator {request.operator_id!r}"), context)
        return agent_pb2.Verdict(status=agent_pb2.STATUS_PASSED, request_id=request.request_id)

    async def EvaluateStream(self, request: Any, context: Any) -> AsyncIterator[Any]:
        yield agent_pb2.EvaluateEvent(progress=agent_pb2.Progress(detail="one"))
        yield agent_pb2.EvaluateEvent(verdict=agent_pb2.Verdict(request_id=request.request_id))


def _with_server(interceptors: list[Any], body: Callable[[grpc.aio.Channel], Any]) -> Any:
    async def go() -> Any:
        server = grpc.aio.server(interceptors=interceptors)
        agent_pb2_grpc.add_DeviceAgentServicer_to_server(_Toy(), server)
        checker = health.aio.HealthServicer()
        await checker.set("", health_pb2.HealthCheckResponse.SERVING)
        health_pb2_grpc.add_HealthServicer_to_server(checker, server)
        reflection.enable_server_reflection((SERVICE_NAME, reflection.SERVICE_NAME), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                return await body(channel)
        finally:
            await server.stop(0)

    return asyncio.run(go())


UNDECODABLE = [
    (f"/{SERVICE_NAME}/Evaluate", b"\xff\xff\xff"),
    (f"/{SERVICE_NAME}/Evaluate", b"\x0a\x02\xff\xfe"),  # request_id: invalid UTF-8
    (f"/{SERVICE_NAME}/EvaluateStream", b"\x0a\x10ab"),  # a length past the end
    (f"/{SERVICE_NAME}/Describe", b"\x0b" * 200),       # unterminated groups
    ("/grpc.health.v1.Health/Check", b"\x0a\x01\xc3"),
    ("/grpc.health.v1.Health/Watch", b"\x0a\x01\xc3"),
    ("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", b"\xff"),
]


async def _raw_call(channel: grpc.aio.Channel, method: str, raw: bytes) -> grpc.StatusCode:
    try:
        if method.endswith("EvaluateStream") or method.endswith("Watch"):
            async for _ in channel.unary_stream(method)(raw, timeout=10):
                pass
        elif method.endswith("ServerReflectionInfo"):
            async for _ in channel.stream_stream(method)(iter([raw]), timeout=10):
                pass
        else:
            await channel.unary_unary(method)(raw, timeout=10)
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


@pytest.mark.parametrize("method,raw", UNDECODABLE,
                         ids=[f"{m.rsplit('/', 1)[1]}-{i}" for i, (m, _) in enumerate(UNDECODABLE)])
def test_undecodable_request_bytes_are_invalid_argument(method: str, raw: bytes) -> None:
    async def body(channel: grpc.aio.Channel) -> grpc.StatusCode:
        return await _raw_call(channel, method, raw)

    assert _with_server([UndecodableRequests()], body) is grpc.StatusCode.INVALID_ARGUMENT
    # Without the interceptor grpcio answers UNKNOWN, a server fault (what the fuzz test found).
    assert _with_server([], body) is grpc.StatusCode.UNKNOWN


def test_decodable_requests_pass_the_interceptor_unchanged() -> None:
    """Every handler shape still works: unary, async-generator stream, the health Watch (a
    coroutine writing its stream), the reflection stream-stream."""

    async def body(channel: grpc.aio.Channel) -> None:
        stub = agent_pb2_grpc.DeviceAgentStub(channel)
        assert (await stub.Describe(agent_pb2.DescribeRequest(), timeout=10)).agent_id == "toy"
        v = await stub.Evaluate(agent_pb2.EvaluateRequest(request_id="r"), timeout=10)
        assert v.status == agent_pb2.STATUS_PASSED and v.request_id == "r"
        events = [e async for e in stub.EvaluateStream(agent_pb2.EvaluateRequest(request_id="s"),
                                                       timeout=10)]
        assert [e.WhichOneof("event") for e in events] == ["progress", "verdict"]
        checker = health_pb2_grpc.HealthStub(channel)
        got = await checker.Check(health_pb2.HealthCheckRequest(service=""), timeout=10)
        assert got.status == health_pb2.HealthCheckResponse.SERVING
        watch = checker.Watch(health_pb2.HealthCheckRequest(service=""), timeout=10)
        first = await watch.read()
        assert first.status == health_pb2.HealthCheckResponse.SERVING
        watch.cancel()
        from grpc_reflection.v1alpha import reflection_pb2_grpc

        refl = reflection_pb2_grpc.ServerReflectionStub(channel)
        answers = [a async for a in refl.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10)]
        names = {s.name for s in answers[0].list_services_response.service}
        assert SERVICE_NAME in names

    _with_server([UndecodableRequests()], body)


def test_a_refusal_that_echoes_a_long_operator_id_stays_invalid_argument() -> None:
    long_id = "bad::" + "x" * 100_000

    async def body(channel: grpc.aio.Channel) -> tuple[grpc.StatusCode, str]:
        stub = agent_pb2_grpc.DeviceAgentStub(channel)
        try:
            await stub.Evaluate(agent_pb2.EvaluateRequest(request_id="r", operator_id=long_id),
                                timeout=10)
        except grpc.aio.AioRpcError as exc:
            return exc.code(), exc.details() or ""
        return grpc.StatusCode.OK, ""

    code, details = _with_server([UndecodableRequests()], body)
    assert code is grpc.StatusCode.INVALID_ARGUMENT, (code, details[:200])
    assert details.startswith("unknown operator 'bad::xxx") and len(details) < 2 * DETAILS_LIMIT_BYTES


def test_clip_details_cuts_on_a_character_boundary() -> None:
    assert clip_details("short") == "short"
    cut = clip_details("\u00e9" * 5000, limit=101)
    assert cut.startswith("\u00e9" * 50) and "\ufffd" not in cut and "10000 bytes in all" in cut
    assert len(clip_details("x" * 10**6).encode()) < DETAILS_LIMIT_BYTES + 40


DEEP = {"unary": "-" * 100_000 + "1", "binop": "1" + "+1" * 5_000, "call": "f" + "()" * 5_000,
        "lambda": "lambda: " * 5_000 + "1", "not": "not " * 20_000 + "1"}


@pytest.mark.parametrize("expr", list(DEEP.values()), ids=list(DEEP))
def test_sources_too_deep_to_parse_are_compile_errors(expr: str) -> None:
    """In the agent's own static stage (no worker needed): a verdict, not an exception."""
    ev = Evaluator(CpuPlatform(), [], b"k", instant=True)
    source = ENTRIES + f"x = {expr}\n".encode()
    v = asyncio.run(ev.evaluate(EvalRequest("deep", "aten::add", source), time.monotonic() + 30))
    assert v.status is Status.COMPILE_ERROR, v
    assert "nests too deeply" in v.message


MALFORMED_HEADERS = {
    "tuple_of_int": b'{"body": {"__tuple__": 5}, "blobs": []}',
    "dict_of_triples": b'{"body": {"__dict__": [[1, 2, 3]]}, "blobs": []}',
    "unhashable_key": b'{"body": {"__dict__": [[[1], 2]]}, "blobs": []}',
    "dict_of_none": b'{"body": {"__dict__": null}, "blobs": []}',
    "deep": b'{"body": {"__dict__": [["x", ' + b"[" * 1000 + b"]" * 1000 + b"]]}, \"blobs\": []}",
}


@pytest.mark.parametrize("header", list(MALFORMED_HEADERS.values()), ids=list(MALFORMED_HEADERS))
def test_malformed_frames_are_codec_errors(header: bytes) -> None:
    with pytest.raises(CodecError):
        decode(struct.pack("<I", len(header)) + header)


def test_tensor_sizes_past_int64_are_codec_errors() -> None:
    header = (b'{"body": {"__dict__": [["t", {"__tensor__": 0}]]}, "blobs": [{"dtype": "float32",'
              b' "size": [0, 4611686018427387904, 2], "stride": [1, 1, 1], "nbytes": 0}]}')
    with pytest.raises(CodecError):
        decode(struct.pack("<I", len(header)) + header + struct.pack("<Q", 0))
