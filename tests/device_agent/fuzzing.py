"""Shared pieces of the fuzz tests (issue #19, point 6): the fixed CI budget, a real agent
process whose pid, memory and warm workers the tests can watch, the outcomes every call may
end in, and a hand-written protobuf wire encoder for messages no generated class would send.

Budget: every fuzz test runs a fixed, derandomized number of examples (no example database),
so CI runs are reproducible and bounded. ``KGB_FUZZ_EXAMPLES=N`` runs N examples per test
instead; ``KGB_FUZZ_SEED=S`` draws new examples from seed S (a fresh exploration, still
reproducible with the same seed). A failing run prints the falsifying example.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import re
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from hypothesis import HealthCheck, Phase, settings

import operators
from coordinator.local_agent import LocalAgent
from protos.client import MAX_MESSAGE_BYTES, SERVICE_NAME
from protos.kgb.agent.v1 import agent_pb2

# Status codes a call may end with: the agent's own clean refusals and the client's own
# deadline or cancellation. INTERNAL and UNKNOWN (an exception escaping a handler) never.
CLEAN_CODES = frozenset({
    grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED,
})
# Verdict statuses that are the candidate's: what any candidate, however hostile, may get.
CANDIDATE_STATUSES = frozenset({
    agent_pb2.STATUS_COMPILE_ERROR, agent_pb2.STATUS_RUNTIME_ERROR, agent_pb2.STATUS_TIMEOUT,
    agent_pb2.STATUS_WRONG_ANSWER, agent_pb2.STATUS_REJECTED, agent_pb2.STATUS_CHEAT_DETECTED,
    agent_pb2.STATUS_PASSED,
})
EVALUATE = f"/{SERVICE_NAME}/Evaluate"
EVALUATE_STREAM = f"/{SERVICE_NAME}/EvaluateStream"
DESCRIBE = f"/{SERVICE_NAME}/Describe"
HEALTH_CHECK = "/grpc.health.v1.Health/Check"
REFLECTION = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
HONEST = operators.get("aten::add").solution.encode()
# The agent's resident memory may grow this much over a fuzz run (caches of verdicts and public
# cases, allocator high-water marks): measured 23-28 MiB from about 390 MiB on this machine; a
# leak of 2 MiB per call fails it. Issue #19 saw 575 MB from eight oversized request ids.
RSS_GROWTH_LIMIT_KIB = 256 * 1024


def fuzz_settings(examples: int, *, shrink: bool = True) -> settings:
    """The fixed CI budget: ``examples`` derandomized examples (``KGB_FUZZ_EXAMPLES`` overrides),
    no example database, no per-example deadline (an RPC to a busy agent may take seconds).
    ``shrink=False`` for tests whose examples cost seconds each: a failure is reported as found."""
    n = int(os.environ.get("KGB_FUZZ_EXAMPLES", examples))
    seed = os.environ.get("KGB_FUZZ_SEED")
    phases = [Phase.explicit, Phase.generate] + ([Phase.shrink] if shrink else [])
    return settings(max_examples=n, derandomize=seed is None, database=None, deadline=None,
                    phases=phases, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.large_base_example,
                                           HealthCheck.function_scoped_fixture])


def seeded(test: Any) -> Any:
    """Apply ``KGB_FUZZ_SEED`` (if set) to a hypothesis test."""
    from hypothesis import seed

    value = os.environ.get("KGB_FUZZ_SEED")
    return seed(int(value))(test) if value else test


def weighted(*choices: tuple[int, Any]) -> Any:
    """One of the strategies ``choices``, each as often as its weight says (``st.one_of``
    favours its first branches): mostly valid values reach the deeper code, odd ones still come,
    and slow ones (a candidate that hangs until its deadline) stay rare."""
    from hypothesis import strategies as st

    return st.sampled_from([strategy for weight, strategy in choices
                            for _ in range(weight)]).flatmap(lambda strategy: strategy)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class FuzzAgent:
    """A real agent process on loopback, with what the fuzz properties read from outside."""

    agent: LocalAgent = field(repr=False)
    address: str
    channel: grpc.Channel = field(repr=False)
    metrics_port: int | None = None
    rss_start_kib: int = 0
    # (tenant, request id) -> (operator id, version, candidate hash, skip_timing) of every id that
    # got a verdict (request ids are per tenant; "" without tokens)
    verdicts: dict[tuple[str, str], tuple[str, int, str, bool]] = field(
        default_factory=dict, repr=False)
    # ids the agent may have a verdict for that the test never saw (a stream cancelled or a
    # deadline passed after admission)
    maybe_cached: set[tuple[str, str]] = field(default_factory=set, repr=False)
    metadata: tuple[tuple[str, str], ...] = ()  # sent with the fixture's own calls (a token)

    def __repr__(self) -> str:
        return f"FuzzAgent({self.address}, pid {self.agent.proc.pid if self.agent.proc else None})"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # hypothesis prints examples this way
        p.text(repr(self))

    @property
    def pid(self) -> int:
        assert self.agent.proc is not None
        return self.agent.proc.pid

    def rss_kib(self) -> int:
        text = Path(f"/proc/{self.pid}/status").read_text()
        match = re.search(r"^VmRSS:\s+(\d+) kB", text, re.M)
        assert match, text
        return int(match.group(1))

    def ready_workers(self) -> float:
        """Warm workers waiting for a candidate, from the agent's /metrics."""
        assert self.metrics_port is not None, "start the agent with metrics=True"
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as resp:
            text = resp.read().decode()
        found = re.findall(r'^kgb_agent_workers\{[^}]*state="ready"[^}]*\} (\S+)$', text, re.M)
        return sum(float(v) for v in found)

    def wait_ready_worker(self, timeout: float = 120.0) -> None:
        """Block until a warm worker is free, so a candidate's deadline is spent on the candidate
        (a deadline passed while no worker was free is the agent's INFRA_ERROR, by design)."""
        end = time.monotonic() + timeout
        while self.ready_workers() < 1:
            assert self.agent.alive(), f"agent died:\n{self.agent.log_tail()}"
            assert time.monotonic() < end, f"no warm worker within {timeout:.0f}s"
            time.sleep(0.05)

    def assert_alive(self) -> None:
        alive = self.agent.alive()  # (polls the process, so its exit code is known below)
        code = self.agent.proc.returncode if self.agent.proc else None
        assert alive, f"agent process died (exit {code}):\n{self.agent.log_tail()}"

    def assert_serving(self) -> None:
        """Alive, health SERVING for both names, Describe answers."""
        from grpc_health.v1 import health_pb2

        self.assert_alive()
        check = self.channel.unary_unary(
            HEALTH_CHECK, request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString)
        for name in ("", SERVICE_NAME):
            got = check(health_pb2.HealthCheckRequest(service=name), timeout=30)
            assert got.status == health_pb2.HealthCheckResponse.SERVING, (name, got)
        describe = self.channel.unary_unary(
            DESCRIBE, request_serializer=agent_pb2.DescribeRequest.SerializeToString,
            response_deserializer=agent_pb2.DescribeResponse.FromString)
        d = describe(agent_pb2.DescribeRequest(), timeout=30, metadata=self.metadata)
        assert d.capacity >= 1 and d.suite, d

    def evaluate(self, req: agent_pb2.EvaluateRequest, timeout: float | None) -> agent_pb2.Verdict:
        call = self.channel.unary_unary(
            EVALUATE, request_serializer=agent_pb2.EvaluateRequest.SerializeToString,
            response_deserializer=agent_pb2.Verdict.FromString)
        return call(req, timeout=timeout, metadata=self.metadata)  # type: ignore[no-any-return]

    def evaluate_raw(self, req: agent_pb2.EvaluateRequest, timeout: float | None,
                     metadata: tuple[tuple[str, str], ...]) -> agent_pb2.Verdict:
        call = self.channel.unary_unary(
            EVALUATE, request_serializer=agent_pb2.EvaluateRequest.SerializeToString,
            response_deserializer=agent_pb2.Verdict.FromString)
        return call(req, timeout=timeout, metadata=metadata)  # type: ignore[no-any-return]

    def assert_honest_passes(self, timeout: float = 240.0) -> None:
        """The property every fuzz run ends with: alive, SERVING, bounded memory, and an honest
        candidate PASSES on this same agent."""
        self.assert_serving()
        rid = f"honest-{time.monotonic_ns()}"
        v = self.evaluate(agent_pb2.EvaluateRequest(request_id=rid, operator_id="aten::add",
                                                    source=HONEST), timeout)
        assert v.status == agent_pb2.STATUS_PASSED, (v.status, v.message, v.log[-2000:])
        assert v.candidate_hash == sha256(HONEST) and v.request_id == rid
        if not self.rss_start_kib:  # the warm-up run: nothing to compare with yet
            return
        grown = self.rss_kib() - self.rss_start_kib
        assert grown < RSS_GROWTH_LIMIT_KIB, (
            f"agent RSS grew by {grown // 1024} MiB over the fuzz run "
            f"(from {self.rss_start_kib // 1024} MiB)")


@contextlib.contextmanager
def fuzz_agent(*extra_args: str, workers: int = 1, metrics: bool = False,
               log_dir: Path | None = None,
               metadata: tuple[tuple[str, str], ...] = ()) -> Iterator[FuzzAgent]:
    """A ``cpu`` agent process of its own (so its pid, memory and workers are this test's),
    warmed by one honest candidate before its memory is first read. ``metadata`` goes with the
    fixture's own calls (a bearer token when ``extra_args`` require one)."""
    args = tuple(extra_args) + (("--metrics-port", "0") if metrics else ())
    agent = LocalAgent(platform="cpu", workers=workers, extra_args=args,
                       log_path=(log_dir / "agent.log") if log_dir else None)
    address = agent.start()
    try:
        asyncio.run(agent.wait_serving(180))
        port = None
        if metrics:
            found = re.search(r"metrics on http://\S+:(\d+)/metrics", agent.log_tail(20000))
            assert found, agent.log_tail()
            port = int(found.group(1))
        options = [("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                   ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]
        with grpc.insecure_channel(address, options=options) as channel:
            fa = FuzzAgent(agent, address, channel, port, metadata=metadata)
            fa.assert_honest_passes()  # warm: public cases cached, allocator settled
            fa.rss_start_kib = fa.rss_kib()
            yield fa
    finally:
        agent.stop()


# ---- the protobuf wire format, by hand ---------------------------------------------------------
def varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def wire_field(number: int, wire_type: int, payload: bytes | int) -> bytes:
    """One field: key, then a varint (type 0), 8 bytes (1), a length and bytes (2), 4 bytes (5),
    or the payload as given (group markers 3/4, invalid types 6/7: no payload of their own)."""
    key = varint((number << 3) | wire_type)
    if wire_type == 0:
        assert isinstance(payload, int)
        return key + varint(payload)
    data = payload if isinstance(payload, bytes) else varint(payload)
    if wire_type == 2:
        return key + varint(len(data)) + data
    return key + data


def decodes(message_type: Any, raw: bytes) -> bool:
    """Whether this process's protobuf runtime (the agent's) parses ``raw`` as ``message_type``."""
    from google.protobuf.message import DecodeError

    try:
        message_type.FromString(raw)
    except DecodeError:
        return False
    return True


def rpc_code(exc: grpc.RpcError) -> grpc.StatusCode:
    return exc.code()  # type: ignore[attr-defined,no-any-return]


def rpc_details(exc: grpc.RpcError) -> str:
    return str(exc.details())  # type: ignore[attr-defined]


# ---- the worker's result channel, as a candidate can write it ----------------------------------
# A candidate runs in the worker process: it can write any bytes to the channel's descriptor, or
# find the worker's end of the channel (device_agent.protocol.AgentChannel: its socket and its
# nonce) and send any message the codec can encode.
DTYPE_NAMES = ["float16", "bfloat16", "float32", "float64", "complex64", "complex128", "int8",
               "uint8", "int16", "int32", "int64", "bool"]
SPECIAL_KEYS = ["__tensor__", "__dtype__", "__device__", "__float__", "__tuple__", "__dict__",
                "__complex__"]


def _st() -> Any:
    from hypothesis import strategies as st

    return st


def json_values(max_leaves: int = 12) -> Any:
    """JSON values, with the codec's special objects (``{"__tuple__": ...}`` and the rest)
    holding anything, not just what they should."""
    st = _st()
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2 ** 63), 2 ** 64 - 1),
                        st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8),
                        st.sampled_from(DTYPE_NAMES + ["cpu", "cuda", "nan", "-inf", "torch"]))
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.dictionaries(st.text(max_size=6), inner, max_size=3),
            st.tuples(st.sampled_from(SPECIAL_KEYS), inner).map(lambda kv: {kv[0]: kv[1]}),
        ),
        max_leaves=max_leaves)


def blob_metas() -> Any:
    """A tensor's header entry and its bytes: often consistent, often not (sizes past int64,
    negative or bool strides, byte counts that disagree)."""
    st = _st()
    dims = st.one_of(st.integers(0, 5), st.sampled_from([2 ** 31, 2 ** 62, 2 ** 63, 2 ** 64 - 1, -1]),
                     st.booleans())

    @st.composite
    def meta(draw: Any) -> tuple[dict[str, Any], bytes]:
        rank = draw(st.integers(0, 3))
        size = draw(st.lists(dims, min_size=rank, max_size=rank))
        stride = draw(st.lists(dims, min_size=rank, max_size=rank + draw(st.integers(0, 1))))
        raw = draw(st.binary(max_size=64))
        m: dict[str, Any] = {"dtype": draw(st.one_of(st.sampled_from(DTYPE_NAMES), json_values(2))),
                             "size": size, "stride": stride, "nbytes": len(raw)}
        if draw(st.integers(0, 4)) == 0:
            m[draw(st.sampled_from(["dtype", "size", "stride", "nbytes"]))] = draw(json_values(3))
        return m, raw

    return meta()


FRAME_KINDS = ("header", "header", "special", "special", "deep", "garbage", "lie")


def frames(kinds: tuple[str, ...] = FRAME_KINDS) -> Any:
    """Whole channel frames (outer length included): a header of JSON values and blobs, some
    well-formed, some with lengths that lie, bad JSON, codec objects holding junk, deep
    nesting, or plain garbage."""
    import struct

    import orjson

    st = _st()

    @st.composite
    def frame(draw: Any) -> bytes:
        kind = draw(st.sampled_from(kinds))
        if kind == "special":  # a message whose one value is a codec object holding junk
            junk = draw(st.sampled_from([st.integers(-(2 ** 63), 2 ** 64 - 1), st.none(),
                                         st.text(max_size=3),
                                         st.lists(st.lists(json_values(3), max_size=4),
                                                  max_size=3)]).flatmap(lambda j: j))
            value = {draw(st.sampled_from(SPECIAL_KEYS)): junk}
            header = orjson.dumps({"body": {"__dict__": [["type", "loaded"], ["x", value]]},
                                   "blobs": []})
            body = struct.pack("<I", len(header)) + header
        elif kind == "garbage":
            body = draw(st.binary(max_size=80))
        elif kind == "deep":
            depth = draw(st.sampled_from([100, 800, 1000, 1020, 5000]))
            wrap = draw(st.sampled_from([(b"[", b"]"), (b'{"__tuple__": [', b"]}"),
                                         (b'{"__dict__": [["k", ', b"]]}")]))
            header = (b'{"blobs": [], "body": {"__dict__": [["type", "loaded"], ["x", '
                      + wrap[0] * depth + b"1" + wrap[1] * depth + b"]]}}")
            body = struct.pack("<I", len(header)) + header
        else:
            blobs = draw(st.lists(blob_metas(), max_size=2))
            if draw(st.integers(0, 3)):  # shaped like a message, its values anything
                pairs = draw(st.lists(st.tuples(st.sampled_from(["index", "outputs", "x"]),
                                                json_values()), max_size=3))
                body_value: Any = {"__dict__": [["type", "loaded"], *map(list, pairs)]}
            else:
                body_value = draw(json_values())
            header = orjson.dumps({"body": body_value, "blobs": [m for m, _ in blobs]})
            body = struct.pack("<I", len(header)) + header + b"".join(
                struct.pack("<Q", len(raw)) + raw for _, raw in blobs)
            if kind == "lie":
                cut = draw(st.integers(0, len(body)))
                body = body[:cut] + draw(st.binary(max_size=8))
        return struct.pack("<I", len(body)) + body

    return frame()


def worker_messages() -> Any:
    """Messages a candidate that found the worker's channel could send (with the right nonce):
    every type the agent reads, with fields of random types and values (tensors included).
    Never ``platform_limit`` true: that forgery is pinned by
    test_fuzz_loader.test_a_candidate_can_forge_a_platform_limit (an open finding)."""
    st = _st()
    tensors = st.builds(_tensor, st.sampled_from(DTYPE_NAMES),
                        st.lists(st.integers(0, 4), max_size=3))
    values = st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(-(2 ** 63), 2 ** 63 - 1),
                  st.floats(), st.text(max_size=8), tensors),
        lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner, inner),
                                st.dictionaries(st.text(max_size=5), inner, max_size=3)),
        max_leaves=8)
    types = st.sampled_from(["loaded", "warmed", "ran", "case", "case_error", "load_error",
                             "timing", "timing_error", "built", "prepared", "rechecked",
                             "device_wanted", "device_released", "accepted", "ready", "???"])
    fields = st.sampled_from(["index", "outputs", "layouts", "post_inputs", "seconds",
                              "own_launches", "guard", "integrity", "message", "traceback",
                              "compile", "signature", "kind", "ghost_outputs", "repeat_outputs",
                              "replay_outputs", "stopped", "launchers", "drift", "device_time"])

    @st.composite
    def message(draw: Any) -> dict[str, Any]:
        msg: dict[str, Any] = {"type": draw(types)}
        msg["index"] = draw(st.one_of(st.just(0), st.integers(-2, 30), values))
        for name in draw(st.sets(fields, max_size=6)):
            msg[name] = draw(values)
        msg["platform_limit"] = False
        return msg

    return message()


def typed_worker_messages(kinds: tuple[str, ...] = (), faithful: bool = False) -> Any:
    """Reports as the typed protocol (``device_agent.protocol``) spells them: a kind's own
    field names, each value mostly of the field's declared type (records as objects of their
    own fields), sometimes of another; now and then a field left out or one added
    (``faithful``: always every field, of its type: what gets past the agent's strict decoding
    to the code that judges reports). Of the report kinds ``kinds`` (default: all). Never
    ``platform_limit`` true (see :func:`worker_messages`)."""
    import dataclasses
    import typing

    from device_agent import protocol, wire_records

    st = _st()
    junk = worker_messages().map(lambda m: m.get("index"))

    def of(hint: Any) -> Any:
        """Values of the type ``hint`` (the protocol's field types)."""
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if hint is typing.Any:
            return st.one_of(st.none(), st.integers(-3, 3), st.floats(), st.text(max_size=4),
                             tensors(), st.fixed_dictionaries({"py": st.just("int"),
                                                               "text": st.just("3")}))
        if origin in (typing.Union, __import__("types").UnionType):
            return st.one_of(*(of(a) for a in args))
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            return record(hint)
        if origin in (list, tuple, frozenset):
            item = args[0] if len(args) in (1, 2) and (len(args) == 1 or args[1] is Ellipsis) \
                else None
            if item is None:  # a fixed-size tuple
                return st.tuples(*(of(a) for a in args)).map(list)
            return st.lists(of(item), max_size=3)
        if origin is dict:
            return st.dictionaries(st.sampled_from(["0", "1", "out", "x"]), of(args[1]),
                                   max_size=3)
        simple = {int: st.integers(-2, 40), float: st.floats(allow_nan=False, width=32),
                  str: st.text(max_size=12), bool: st.booleans(), type(None): st.none()}
        if hint in simple:
            return simple[hint]
        return tensors()  # torch.Tensor

    def tensors() -> Any:
        return st.builds(_tensor, st.sampled_from(DTYPE_NAMES),
                         st.lists(st.integers(0, 4), max_size=3))

    def record(cls: Any) -> Any:
        hints = wire_records.field_types(cls)

        @st.composite
        def build(draw: Any) -> dict[str, Any]:
            out: dict[str, Any] = {}
            for name, hint in hints.items():
                if not faithful and draw(st.integers(0, 19)) == 0:
                    continue  # left out
                out[name] = draw(of(hint) if faithful or draw(st.integers(0, 9)) else junk)
            if not faithful and draw(st.integers(0, 19)) == 0:
                out["extra"] = 1
            if "platform_limit" in out:
                out["platform_limit"] = False
            return out

        return build()

    classes = sorted((c for c in protocol._REPORTS.values() if not kinds or c.KIND in kinds),
                     key=lambda c: c.KIND)
    return st.sampled_from(classes).flatmap(
        lambda cls: record(cls).map(lambda fields: {"type": cls.KIND, **fields}))


def _tensor(dtype: str, shape: list[int]) -> Any:
    import torch

    from operators.spec import dtype_from_name

    return torch.zeros(shape, dtype=dtype_from_name(dtype))
