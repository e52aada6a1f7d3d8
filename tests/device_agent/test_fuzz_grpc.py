"""Fuzzing the agent's gRPC surface (issue #19, point 6 and "Bad input").

A real agent process on loopback, in ``--instant-verdicts`` mode (static checks, no workers: the
request-level surface at full speed), is fed hypothesis-generated ``EvaluateRequest`` messages
(every field: request ids of odd lengths and characters, operator ids near and far from real
ones, versions, sources of random bytes, invalid UTF-8, empty, oversize, deeply nested or valid
Python, flags, deadlines, metadata), undecodable protobuf bytes on every method through a
generic channel, and streams cancelled at random points, with health and Describe between them.

The same requests also go to an agent behind bearer tokens (two tenants, quotas, an audit log)
with generated credentials: missing, malformed, truncated, extended, in the wrong header, twice.

Properties: every call ends as a verdict or a clean status code (never INTERNAL or UNKNOWN),
and the one predicted from the request (a bad request is INVALID_ARGUMENT, an undecodable one
too, a request id reused for other content too; a verdict names the request id, operator,
version and candidate hash that were sent); without a valid token, UNAUTHENTICATED; request ids
are per tenant; the agent stays alive and SERVING after every example; its memory stays
bounded; its audit log stays one JSON object a line; an honest candidate PASSES at the end on
the same agent. The fixed CI budget is in ``fuzzing.py``.
"""

from __future__ import annotations

import itertools
import os
import re
import string
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st

import operators
from device_agent.evaluation import MAX_SOURCE_BYTES, StageBudgets
from device_agent.tenancy import MAX_REQUEST_ID
from protos.kgb.agent.v1 import agent_pb2
from tests.device_agent.fuzzing import (
    CLEAN_CODES,
    DESCRIBE,
    EVALUATE,
    EVALUATE_STREAM,
    HEALTH_CHECK,
    HONEST,
    REFLECTION,
    FuzzAgent,
    decodes,
    fuzz_agent,
    fuzz_settings,
    rpc_code,
    rpc_details,
    seeded,
    sha256,
    varint,
    weighted,
    wire_field,
)

SPECS = operators.all_specs()
IDS = [s.id for s in SPECS]
MARGIN_S = StageBudgets().margin_s
# Instant mode answers after the static checks: these are all it can say.
INSTANT_STATUSES = {agent_pb2.STATUS_PASSED, agent_pb2.STATUS_COMPILE_ERROR,
                    agent_pb2.STATUS_REJECTED}


@pytest.fixture(scope="module")
def agent(agent_secret_env: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzAgent]:
    with fuzz_agent("--instant-verdicts", log_dir=tmp_path_factory.mktemp("fuzz-grpc")) as fa:
        yield fa


# ---- strategies ---------------------------------------------------------------------------------
def _near(op_id: str) -> st.SearchStrategy[str]:
    """Operator ids one edit away from a real one (case, padding, separators, a NUL, ...)."""
    return st.sampled_from([
        op_id.upper(), op_id + "x", op_id[:-1], " " + op_id, op_id + " ", op_id + "\x00",
        op_id.replace("::", ":"), op_id.replace("::", "::::"), op_id + "@1", op_id + "\n",
        op_id.replace("a", "\u0430"),  # Cyrillic a
        op_id + "\u200b",  # zero-width space
    ])


operator_ids = weighted(
    (6, st.sampled_from(IDS)),
    (2, st.sampled_from(IDS).flatmap(_near)),
    (1, st.text(max_size=40)),
    (1, st.sampled_from(["", "::", "aten::", "::add", "aten::add::add", "a::" + "b" * 300])),
    (1, st.sampled_from(IDS).flatmap(  # long: error messages that echo them must stay small
        lambda op: st.sampled_from([1_000, 10_000, 17_000, 100_000, 300_000]).map(
            lambda n: op + "x" * n))),
)

request_ids = weighted(
    (6, st.uuids().map(str)),
    (2, st.text(min_size=1, max_size=40)),
    (1, st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF,
                                       exclude_categories=["Cs"]), max_size=12)),
    (1, st.sampled_from([1, 2, 127, 128, 129, 4096, 65_536, 300_000]).map(lambda n: "r" * n)),
    (1, st.just("")),
)


def _nested(kind: str, depth: int) -> bytes:
    """A one-line module whose expression nests ``depth`` levels: deep enough and the parser
    itself gives up (RecursionError, MemoryError or SyntaxError)."""
    expr = {"unary": "-" * depth + "1", "binop": "1" + "+1" * depth, "call": "f" + "()" * depth,
            "attr": "a" + ".b" * depth, "lambda": "lambda: " * depth + "1",
            "not": "not " * depth + "1", "list": "[" * depth + "]" * depth,
            "paren": "(" * depth + "1" + ")" * depth, "subscript": "a" + "[0]" * depth,
            "ifexp": "1 if 1 else " * depth + "1"}[kind]
    return ("def add_Tensor(self, other, *, alpha=1):\n    return self\n"
            f"add_Scalar = add_out = add_Tensor\nx = {expr}\n").encode()


nested_sources = st.builds(
    _nested,
    st.sampled_from(["unary", "binop", "call", "attr", "lambda", "not", "list", "paren",
                     "subscript", "ifexp"]),
    st.sampled_from([10, 199, 201, 500, 999, 1000, 2999, 3000, 10_000, 100_000, 300_000]))


@st.composite
def mutated_honest(draw: st.DrawFn) -> bytes:
    """A real solution with one corruption (NUL, BOM, CRLF, a dropped line, bytes cut off, ...)."""
    spec = draw(st.sampled_from(SPECS))
    src = spec.solution.encode()
    how = draw(st.sampled_from(["as_is", "nul", "bom", "crlf", "cr", "drop_line", "cut",
                                "tabs", "latin1", "garbage_tail", "formfeed"]))
    if how == "nul":
        at = draw(st.integers(0, len(src)))
        src = src[:at] + b"\x00" + src[at:]
    elif how == "bom":
        src = b"\xef\xbb\xbf" + src
    elif how == "crlf":
        src = src.replace(b"\n", b"\r\n")
    elif how == "cr":
        src = src.replace(b"\n", b"\r")
    elif how == "drop_line":
        lines = src.split(b"\n")
        del lines[draw(st.integers(0, len(lines) - 1))]
        src = b"\n".join(lines)
    elif how == "cut":
        src = src[:draw(st.integers(1, len(src)))]
    elif how == "tabs":
        src = src.replace(b"    ", b"\t")
    elif how == "latin1":
        src = b"# -*- coding: latin-1 -*-\n# \xe9\xe8\n" + src
    elif how == "garbage_tail":
        src = src + draw(st.binary(min_size=1, max_size=64))
    elif how == "formfeed":
        src = src.replace(b"\ndef ", b"\n\x0cdef ")
    return src


sources = weighted(
    (1, st.just(HONEST)),
    (3, mutated_honest()),
    (1, st.binary(max_size=600)),
    (1, st.binary(max_size=200).map(lambda b: b"def add_Tensor(self, other):\n    pass\n\xff" + b)),
    (1, st.text(max_size=300).map(lambda t: t.encode("utf-8"))),
    (1, st.sampled_from([b"", b" ", b"\n\n", b"\t \r\n", b"\x0b\x0c", b"\x00", b"\xef\xbb\xbf"])),
    (1, st.sampled_from([MAX_SOURCE_BYTES - 1, MAX_SOURCE_BYTES, MAX_SOURCE_BYTES + 1,
                         4 * MAX_SOURCE_BYTES]).map(lambda n: b"#" * n)),
    (3, nested_sources),
)

# Header names the HTTP/2 transport owns (a client refuses to send them as metadata).
RESERVED_HEADERS = {"te", "host", "connection", "upgrade", "keep-alive", "content-type",
                    "user-agent", "transfer-encoding", "proxy-connection", "accept-encoding",
                    "content-encoding"}
versions = weighted((4, st.none()), (2, st.integers(-1, 3)),
                    (1, st.integers(-(2 ** 31), 2 ** 31 - 1)))
deadlines = weighted((5, st.just(30.0)), (1, st.none()), (1, st.floats(0.001, MARGIN_S + 1.0)))
metadata = st.one_of(
    st.none(),
    st.lists(st.tuples(st.text(alphabet=string.ascii_lowercase + string.digits + "-_.",
                               min_size=1, max_size=20)
                       .filter(lambda k: not k.startswith("grpc") and not k.endswith("-bin")
                               and k not in RESERVED_HEADERS),
                       st.text(alphabet=string.printable.strip(), max_size=200)),
             max_size=4))


@dataclass(frozen=True)
class Call:
    request: agent_pb2.EvaluateRequest
    deadline: float | None
    mode: str            # unary | stream | cancel
    cancel_after: int    # stream events read before cancelling (cancel mode)
    metadata: tuple[tuple[str, str], ...] | None
    reuse_id: bool = False  # send with the request id of the batch's previous call


_sent = itertools.count()


def unique_ids(batch: list[Call]) -> list[Call]:
    """The batch with each non-empty request id made unique to this run (a prefix in place of
    its first characters, so its length stays what was drawn), or the previous call's id where
    asked: an example then means the same thing when hypothesis replays it, whatever ids earlier
    examples left in the agent's memory."""
    out: list[Call] = []
    for call in batch:
        req = agent_pb2.EvaluateRequest()
        req.CopyFrom(call.request)
        if call.reuse_id and out:
            req.request_id = out[-1].request.request_id
        elif req.request_id:
            tag = f"{os.getpid()}.{next(_sent)}~"
            rid = req.request_id
            req.request_id = tag + rid[len(tag):] if len(rid) >= len(tag) else rid + tag
        out.append(replace(call, request=req))
    return out


FIELDS = ("request_id", "operator_id", "operator_version", "deadline", "candidate_name",
          "skip_timing", "metadata")


@st.composite
def calls(draw: st.DrawFn) -> Call:
    """A valid request of a random problem and source, with up to three other fields odd."""
    spec = draw(st.sampled_from([s for s in SPECS if "cpu" in s.platforms]))
    odd = draw(st.sets(st.sampled_from(FIELDS), max_size=3))
    kw: dict[str, Any] = {
        "request_id": draw(request_ids) if "request_id" in odd else draw(st.uuids()).hex,
        "operator_id": draw(operator_ids) if "operator_id" in odd else spec.id,
        "source": draw(weighted((1, st.just(spec.solution.encode())), (3, sources))),
        "candidate_name": draw(st.text(max_size=30)) if "candidate_name" in odd else ""}
    version = draw(versions) if "operator_version" in odd else draw(st.sampled_from([None, spec.version]))
    if version is not None:
        kw["operator_version"] = version
    timing = draw(st.none() | st.booleans()) if "skip_timing" in odd else None
    if timing is not None:
        kw["skip_timing"] = timing
    md = draw(metadata) if "metadata" in odd else None
    deadline = draw(deadlines) if "deadline" in odd else 30.0
    return Call(agent_pb2.EvaluateRequest(**kw), deadline,
                draw(st.sampled_from(["unary", "unary", "stream", "cancel"])),
                draw(st.integers(0, 3)), tuple(md) if md is not None else None,
                draw(weighted((4, st.just(False)), (1, st.just(True)))))


# ---- the oracle --------------------------------------------------------------------------------
REQUEST_ID = re.compile(rf"[!-~]{{1,{MAX_REQUEST_ID}}}")  # the agent's rule (tenancy.py)


def refusal(req: agent_pb2.EvaluateRequest) -> str | None:
    """Why the agent must refuse this request with INVALID_ARGUMENT whatever it remembers."""
    if not REQUEST_ID.fullmatch(req.request_id):
        return "bad request id"
    try:
        spec = operators.get(req.operator_id)
    except operators.UnknownOperatorError:
        return "unknown operator"
    if req.HasField("operator_version") and req.operator_version != spec.version:
        return "wrong version"
    if "cpu" not in spec.platforms:
        return "not on this platform"
    if len(req.source) > MAX_SOURCE_BYTES:
        return "oversize source"
    if not req.source.strip():
        return "empty source"
    return None


def deadline_refusal(deadline: float | None) -> str | None:
    """Why a new (not repeated) valid request must be refused; None: it gets a verdict."""
    if deadline is None:
        return "no deadline"
    if deadline < MARGIN_S - 0.25:  # (near the margin either answer is right: clocks differ)
        return "deadline too short"
    return None


def content(req: agent_pb2.EvaluateRequest) -> tuple[str, int, str, bool]:
    """What a request id is bound to (a valid request): operator, version, candidate hash, and
    the evaluation mode (an unset version means the agent's, so it binds the same)."""
    spec = operators.get(req.operator_id)
    return spec.id, spec.version, sha256(req.source), req.skip_timing


def check_verdict(agent: FuzzAgent, req: agent_pb2.EvaluateRequest, v: agent_pb2.Verdict,
                  tenant: str = "") -> None:
    """A verdict names the request id, operator, version and candidate hash that were sent:
    a request id is bound to its content, a repeat with other content is refused."""
    assert v.status in INSTANT_STATUSES, (v.status, v.message)
    spec = operators.get(req.operator_id)
    assert (v.request_id, v.operator_id, v.operator_version, v.candidate_hash) == (
        req.request_id, spec.id, spec.version, sha256(req.source)), v
    agent.verdicts[tenant, req.request_id] = content(req)


def check_outcome(agent: FuzzAgent, call: Call, verdict: agent_pb2.Verdict | None,
                  error: grpc.RpcError | None, cancelled: bool = False, tenant: str = "") -> None:
    """Judge one call's outcome; ``tenant``: whose request ids (they are per tenant)."""
    req = call.request
    key = (tenant, req.request_id)
    event("outcome: " + (rpc_code(error).name if error is not None
                         else agent_pb2.Status.Name(verdict.status) if verdict is not None
                         else "stream cancelled"))
    code = rpc_code(error) if error is not None else None
    details = rpc_details(error)[:300] if error is not None else ""
    if code is not None:
        if code is grpc.StatusCode.UNAVAILABLE:  # draining, or gone: say which
            agent.assert_alive()
        assert code in CLEAN_CODES, f"{code}: {details}"
        if code is grpc.StatusCode.CANCELLED:
            assert cancelled, details
        if code is grpc.StatusCode.DEADLINE_EXCEEDED:
            assert call.deadline is not None and call.deadline < 5, details
        if code in (grpc.StatusCode.CANCELLED, grpc.StatusCode.DEADLINE_EXCEEDED):
            agent.maybe_cached.add(key)  # admitted or not: the test cannot tell
            return
        if code is grpc.StatusCode.RESOURCE_EXHAUSTED:  # a quota or the queue: not admitted
            return
    why = refusal(req)
    if why is None:
        known = agent.verdicts.get(key)
        if known is not None and known != content(req):
            why = "request id reused for other content"
        elif known is None and key not in agent.maybe_cached:
            why = deadline_refusal(call.deadline)
            near_margin = call.deadline is not None and abs(call.deadline - MARGIN_S) <= 0.5
            if near_margin and code is grpc.StatusCode.INVALID_ARGUMENT:
                return  # "deadline too short", by the agent's clock
        elif known is None and code is grpc.StatusCode.INVALID_ARGUMENT:
            return  # its first use may have had other content, or no deadline
    if why is not None:
        assert code is grpc.StatusCode.INVALID_ARGUMENT, (
            f"{why}: expected INVALID_ARGUMENT, got {code or 'a verdict'}: {details}")
        return
    assert code is None, f"valid request refused: {code}: {details}"
    assert verdict is not None
    check_verdict(agent, req, verdict, tenant)


def run_call(agent: FuzzAgent, call: Call, tenant: str = "") -> None:
    """Make the call, then judge what came back (outside any ``except`` block, so a failure
    carries no gRPC internals as its context and replays the same way)."""
    kw: dict[str, Any] = {"timeout": call.deadline, "metadata": call.metadata}
    verdict: agent_pb2.Verdict | None = None
    error: grpc.RpcError | None = None
    if call.mode == "unary":
        unary = agent.channel.unary_unary(
            EVALUATE, request_serializer=agent_pb2.EvaluateRequest.SerializeToString,
            response_deserializer=agent_pb2.Verdict.FromString)
        try:
            verdict = unary(call.request, **kw)
        except grpc.RpcError as exc:
            error = exc
        check_outcome(agent, call, verdict, error, tenant=tenant)
        return
    stream = agent.channel.unary_stream(
        EVALUATE_STREAM, request_serializer=agent_pb2.EvaluateRequest.SerializeToString,
        response_deserializer=agent_pb2.EvaluateEvent.FromString)
    it = stream(call.request, **kw)
    events: list[agent_pb2.EvaluateEvent] = []
    try:
        if call.mode == "cancel" and call.cancel_after == 0:
            it.cancel()
        for event in it:
            events.append(event)
            if call.mode == "cancel" and len(events) >= call.cancel_after:
                it.cancel()
    except grpc.RpcError as exc:
        error = exc
    kinds = [e.WhichOneof("event") for e in events]
    assert set(kinds) <= {"progress", "verdict"}, kinds
    assert kinds.count("verdict") <= 1 and "verdict" not in kinds[:-1], kinds
    if "verdict" in kinds:
        verdict = events[-1].verdict
        check_outcome(agent, call, verdict, None, tenant=tenant)
    if error is not None:
        check_outcome(agent, call, None, error, cancelled=call.mode == "cancel", tenant=tenant)
    elif verdict is None:  # the stream ended without a verdict: only a cancellation may
        assert call.mode == "cancel", "stream ended without a verdict or an error"
        agent.maybe_cached.add((tenant, call.request.request_id))


# ---- the tests ---------------------------------------------------------------------------------
@fuzz_settings(examples=220)
@given(batch=st.lists(calls(), min_size=1, max_size=3))
@example(batch=[Call(agent_pb2.EvaluateRequest(request_id="deep", operator_id="aten::add",
                                               source=_nested("unary", 100_000)),
                     30.0, "unary", 0, None)])
@example(batch=[Call(agent_pb2.EvaluateRequest(request_id="long-op", operator_id="aten::" + "x" * 20_000,
                                               source=HONEST), 30.0, "unary", 0, None)])
@seeded
def test_fuzz_evaluate_requests(agent: FuzzAgent, batch: list[Call]) -> None:
    """Generated requests, unary and streamed (some streams cancelled): each ends as a verdict
    that names what was sent, or as the status code the request calls for; the agent serves on."""
    for call in unique_ids(batch):
        run_call(agent, call)
    agent.assert_serving()


@st.composite
def wire_messages(draw: st.DrawFn) -> bytes:
    """Protobuf-shaped bytes, valid or not: fields of any number and wire type (groups and
    the invalid types 6 and 7 included), strings of invalid UTF-8, truncated varints, lengths
    running past the end, deep group nesting, and valid messages with corrupted bytes."""
    kind = draw(st.sampled_from(["fields", "fields", "random", "corrupt", "groups", "bad_utf8"]))
    if kind == "random":
        return draw(st.binary(max_size=300))
    if kind == "groups":
        depth = draw(st.sampled_from([1, 50, 99, 100, 101, 1000, 20_000]))
        closed = draw(st.booleans())
        return wire_field(9, 3, b"") * depth + (wire_field(9, 4, b"") * depth if closed else b"")
    if kind == "bad_utf8":
        field_no = draw(st.sampled_from([1, 2, 5]))
        good = agent_pb2.EvaluateRequest(request_id="x", operator_id="aten::add", source=HONEST)
        return good.SerializeToString() + wire_field(
            field_no, 2, draw(st.binary(min_size=1, max_size=8)).join([b"\xc3", b"\xff"]))
    if kind == "corrupt":
        good = agent_pb2.EvaluateRequest(request_id=draw(st.text(min_size=1, max_size=8)),
                                         operator_id=draw(st.sampled_from(IDS)),
                                         source=draw(st.sampled_from([HONEST, b"x = 1\n"])),
                                         operator_version=1).SerializeToString()
        at = draw(st.integers(0, len(good) - 1))
        how = draw(st.sampled_from(["cut", "flip", "insert"]))
        if how == "cut":
            return good[:at]
        if how == "flip":
            return good[:at] + bytes([good[at] ^ draw(st.integers(1, 255))]) + good[at + 1:]
        return good[:at] + draw(st.binary(min_size=1, max_size=8)) + good[at:]
    out = b""
    for _ in range(draw(st.integers(1, 6))):
        number = draw(st.one_of(st.integers(1, 8), st.integers(1, (1 << 29) - 1)))
        wire_type = draw(st.integers(0, 7))
        if wire_type == 0:
            out += wire_field(number, 0, draw(st.integers(0, (1 << 64) - 1)))
        elif wire_type == 2:
            payload = draw(st.binary(max_size=40))
            if draw(st.booleans()):
                out += varint((number << 3) | 2) + varint(draw(st.integers(0, 1 << 40))) + payload
            else:
                out += wire_field(number, 2, payload)
        elif wire_type in (1, 5):
            out += wire_field(number, wire_type, draw(st.binary(min_size=0, max_size=8)))
        else:
            out += wire_field(number, wire_type, b"")
    if draw(st.booleans()):
        out += b"\x80" * draw(st.integers(1, 11))  # an unterminated varint
    return out


def _raw_outcome(method: str, raw: bytes, timeout: float, agent: FuzzAgent) -> None:
    """Send ``raw`` as the request of ``method`` (no serializer: the bytes go as they are)."""
    from grpc_health.v1 import health_pb2
    from grpc_reflection.v1alpha import reflection_pb2

    request_type = {EVALUATE: agent_pb2.EvaluateRequest, EVALUATE_STREAM: agent_pb2.EvaluateRequest,
                    DESCRIBE: agent_pb2.DescribeRequest, HEALTH_CHECK: health_pb2.HealthCheckRequest,
                    REFLECTION: reflection_pb2.ServerReflectionRequest}.get(method)
    error: grpc.RpcError | None = None
    try:
        if method == EVALUATE_STREAM:
            list(agent.channel.unary_stream(method)(raw, timeout=timeout))
        elif method == REFLECTION:
            list(agent.channel.stream_stream(method)(iter([raw]), timeout=timeout))
        else:
            agent.channel.unary_unary(method)(raw, timeout=timeout)
    except grpc.RpcError as exc:
        error = exc
    if error is None:
        assert request_type is not None and decodes(request_type, raw), "undecodable bytes answered"
        return
    code, details = rpc_code(error), rpc_details(error)[:300]
    if code is grpc.StatusCode.UNAVAILABLE:
        agent.assert_alive()
    if request_type is None:
        assert code is grpc.StatusCode.UNIMPLEMENTED, f"{code}: {details}"
    elif not decodes(request_type, raw):
        assert code is grpc.StatusCode.INVALID_ARGUMENT, (
            f"undecodable {request_type.__name__} answered {code}: {details}")
    elif method == HEALTH_CHECK:  # a decodable check for a service that does not exist
        assert code is grpc.StatusCode.NOT_FOUND, f"{code}: {details}"
    else:
        assert code in CLEAN_CODES, f"{code}: {details}"


@fuzz_settings(examples=200)
@given(method=st.sampled_from([EVALUATE, EVALUATE, EVALUATE_STREAM, DESCRIBE, HEALTH_CHECK,
                               REFLECTION, "/kgb.agent.v1.DeviceAgent/Nope", "/x/y"]),
       raw=wire_messages())
@example(method=EVALUATE, raw=b"\xff\xff\xff")
@example(method=EVALUATE, raw=wire_field(1, 2, b"\xff\xfe"))  # request id: invalid UTF-8
@example(method=DESCRIBE, raw=b"\x0a\x10ab")
@example(method=HEALTH_CHECK, raw=wire_field(1, 2, b"\xc3"))
@seeded
def test_fuzz_raw_bytes(agent: FuzzAgent, method: str, raw: bytes) -> None:
    """Raw bytes on every method: undecodable ones are INVALID_ARGUMENT (never UNKNOWN or
    INTERNAL), decodable ones get an answer or a clean refusal; the agent serves on."""
    _raw_outcome(method, raw, 10.0, agent)
    agent.assert_serving()


# ---- the same surface behind bearer tokens (per tenant, with quotas and an audit log) ----------
@dataclass(frozen=True)
class Tokens:
    agent: FuzzAgent
    tokens: dict[str, str]  # tenant -> token
    audit: Path


@pytest.fixture(scope="module")
def token_agent(agent_secret_env: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tokens]:
    from protos.security import add_token

    where = tmp_path_factory.mktemp("fuzz-auth")
    tokens = {tenant: add_token(where / "tokens", tenant) for tenant in ("alice", "bob")}
    audit = where / "audit.jsonl"
    with fuzz_agent("--instant-verdicts", "--tokens", str(where / "tokens"),
                    "--quota-concurrency", "4", "--quota-rate", "100000", "--audit-log", str(audit),
                    log_dir=where, metadata=(("authorization", f"Bearer {tokens['alice']}"),)) as fa:
        yield Tokens(fa, tokens, audit)


Metadata = tuple[tuple[str, str], ...]


@st.composite
def credentials(draw: st.DrawFn) -> tuple[str | None, Metadata]:
    """(the tenant the agent must see, or None for a refusal; the authorization metadata)."""
    tenant = draw(st.sampled_from(["alice", "bob"]))
    good = f"<{tenant}>"  # replaced by the tenant's real token when sent
    kind = draw(st.sampled_from(["good", "good", "lower", "spaces", "none", "scheme", "empty",
                                 "random", "truncated", "extended", "other_header", "huge",
                                 "twice_good_first", "twice_bad_first"]))
    value = {"good": f"Bearer {good}", "lower": f"bearer {good}", "spaces": f"Bearer   {good}  ",
             "scheme": f"Basic {good}", "empty": "Bearer ", "truncated": f"Bearer {good}[:-1]",
             "extended": f"Bearer {good}x", "huge": "Bearer " + "k" * 20_000,
             "random": draw(st.text(alphabet=string.printable.strip() + " ", max_size=60)),
             "other_header": f"Bearer {good}"}.get(kind, "")
    if kind == "none":
        return None, ()
    if kind == "other_header":
        return None, (("x-authorization", value),)
    if kind == "twice_good_first":
        return tenant, (("authorization", f"Bearer {good}"), ("authorization", "Bearer nope"))
    if kind == "twice_bad_first":
        return None, (("authorization", "Bearer nope"), ("authorization", f"Bearer {good}"))
    return (tenant if kind in ("good", "lower", "spaces") else None), (("authorization", value),)


def _with_tokens(metadata: Metadata, tokens: dict[str, str]) -> Metadata:
    """``metadata`` with each ``<tenant>`` placeholder replaced by that tenant's token."""
    out = []
    for key, value in metadata:
        for tenant, token in tokens.items():
            value = value.replace(f"<{tenant}>[:-1]", token[:-1]).replace(f"<{tenant}>", token)
        out.append((key, value))
    return tuple(out)


@fuzz_settings(examples=120)
@given(batch=st.lists(st.tuples(calls(), credentials()), min_size=1, max_size=3),
       raw=st.none() | wire_messages())
@seeded
def test_fuzz_bearer_tokens(token_agent: Tokens, batch: list[tuple[Call, Any]],
                            raw: bytes | None) -> None:
    """Behind tokens: a call without a valid token is UNAUTHENTICATED (health stays open);
    with one, the same outcomes as above in that tenant's own request-id space (the same id
    from two tenants is two requests); undecodable bytes with a token are INVALID_ARGUMENT."""
    agent = token_agent.agent
    calls_only = unique_ids([c for c, _ in batch])
    for call, (tenant, metadata) in zip(calls_only, (cred for _, cred in batch), strict=True):
        md = _with_tokens(metadata, token_agent.tokens) + (call.metadata or ())
        if tenant is None:
            error = None
            try:
                agent.evaluate_raw(call.request, call.deadline, md)
            except grpc.RpcError as exc:
                error = exc
            # (metadata past gRPC's own 8-16 KiB limit is refused by the transport first)
            ok = {grpc.StatusCode.UNAUTHENTICATED} | (
                {grpc.StatusCode.RESOURCE_EXHAUSTED} if sum(len(k) + len(v) for k, v in md) > 8000
                else set())
            assert error is not None and rpc_code(error) in ok, (
                rpc_code(error) if error is not None else "a verdict")
            event("auth: refused")
            continue
        event("auth: " + tenant)
        run_call(replace(agent, metadata=md), replace(call, metadata=md), tenant=tenant)
    if raw is not None:
        error = None
        try:
            agent.channel.unary_unary(EVALUATE)(raw, timeout=10, metadata=agent.metadata)
        except grpc.RpcError as exc:
            error = exc
        if not decodes(agent_pb2.EvaluateRequest, raw):
            assert error is not None and rpc_code(error) is grpc.StatusCode.INVALID_ARGUMENT
    agent.assert_serving()


def test_fuzz_tokens_end_with_an_honest_pass_and_a_readable_audit_log(token_agent: Tokens) -> None:
    import json

    token_agent.agent.assert_honest_passes()
    log = Path(token_agent.agent.agent.log_path).read_text(errors="replace")
    assert "internal error" not in log, log[-3000:]
    # (JSON lines end at "\n" only: a client's request id may hold U+2028 or U+0085, which
    # str.splitlines() would also split at)
    lines = token_agent.audit.read_text(encoding="utf-8").split("\n")
    assert lines[-1] == "" and len(lines) > 1
    for line in lines[:-1]:
        record = json.loads(line)
        assert isinstance(record, dict) and {"tenant", "rpc", "request_id"} <= set(record), record


def test_fuzz_ends_with_an_honest_pass(agent: FuzzAgent) -> None:
    """After the fuzz runs above (module order): alive, SERVING, memory bounded, honest PASSED."""
    agent.assert_honest_passes()


def test_agent_log_has_no_internal_errors(agent: FuzzAgent) -> None:
    """No request above reached the agent's "internal error" path (it logs each one)."""
    log = Path(agent.agent.log_path).read_text(errors="replace")
    assert "internal error" not in log, log[-3000:]
