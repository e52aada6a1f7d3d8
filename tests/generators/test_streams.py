"""Streamed replies (``stream = true``) against the scripted server, in both wire formats.

Reconciliation as for whole replies: complete, truncated, cut off, trickling past the timeout,
an error event, an event that does not parse, a server that ignores ``stream`` — the usage the
project records for each attempt is exactly the usage the server's events carried before the
stream ended (the billing rule for a stream cut off midway, docs/generators.md).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from generators.llm import CallStatus, LLMCall, Usage
from generators.providers import attempt_records, create
from generators.providers.stream import SSEDecoder
from tests.generators.fake_llm_server import fake_server
from tests.generators.llm_helpers import KEY, KEY_ENV, MODEL, PRICES, PROMPT, endpoint, server_usage
from tests.generators.llm_helpers import wire_usage as u

KERNEL = "```python\nimport triton\n\n@triton.jit\ndef k(x):\n    pass\n```"


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


# (replies for one call, expected status, attempts, text)
def _script(w: str) -> list[tuple[list[dict[str, Any]], CallStatus, int, str]]:
    return [
        ([{"kind": "ok", "text": KERNEL, "usage": u(w, 1200, 300, 1000, 120, 7)}],
         CallStatus.OK, 1, KERNEL),
        ([{"kind": "truncated", "text": "def kern", "usage": u(w, 80, 256, 0, 200)}],
         CallStatus.TRUNCATED, 1, "def kern"),
        ([{"kind": "error", "status": 429, "headers": {"retry-after-ms": "20"}},
          {"kind": "ok", "text": "B", "usage": u(w, 50, 20)}], CallStatus.OK, 2, "B"),
        # cut off midway (Anthropic: after message_start and some text), then a whole reply
        ([{"kind": "ok", "text": "x" * 64, "usage": u(w, 500, 64, 100), "cut_after": 9},
          {"kind": "ok", "text": "C", "usage": u(w, 60, 25)}], CallStatus.OK, 2, "C"),
        # trickling: the attempt's 0.5 s run out midway
        ([{"kind": "ok", "text": "y" * 40, "usage": u(w, 70, 30), "event_delay_s": 0.1},
          {"kind": "ok", "text": "D", "usage": u(w, 70, 30)}], CallStatus.OK, 2, "D"),
        # an error event in the stream (Anthropic: overloaded_error)
        ([{"kind": "ok", "text": "z" * 40, "usage": u(w, 90, 40), "stream_error": 7},
          {"kind": "ok", "text": "E", "usage": u(w, 90, 40)}], CallStatus.OK, 2, "E"),
        # an event that does not parse: final and billed, like a malformed whole reply
        ([{"kind": "ok", "text": "w" * 16, "usage": u(w, 91, 41), "bad_event": 2}],
         CallStatus.MALFORMED, 1, ""),
        # a server that answers in one piece all the same
        ([{"kind": "ok", "text": "F", "usage": u(w, 92, 42), "ignore_stream": True}],
         CallStatus.OK, 1, "F"),
        # a complete stream without usage: not billed
        ([{"kind": "ok", "text": "G"}], CallStatus.OK, 1, "G"),
        # cut before the first event, every time
        ([{"kind": "ok", "text": "H", "usage": u(w, 10, 5), "cut_after": 0}] * 3,
         CallStatus.SERVER_ERROR, 3, ""),
    ]


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_streams_reconcile_exactly_with_what_the_server_sent(wire: str, tmp_path: Path) -> None:
    plan = _script(wire)
    replies = [r for call_replies, *_ in plan for r in call_replies]
    with fake_server({"endpoints": {"ep": {"replies": replies}}}, tmp_path) as server:
        async def run() -> list[LLMCall]:
            async with create(endpoint(server, wire, "ep", stream=True), PRICES) as provider:
                return [await provider.complete(PROMPT, model=MODEL, temperature=None,
                                                max_tokens=512, deadline_s=30) for _ in plan]

        calls = asyncio.run(run())
        billing = sorted(server.wait_billing(len(replies)), key=lambda r: r["seq"])
        requests = server.requests()

    for call, (_, status, attempts, text) in zip(calls, plan, strict=True):
        assert (call.status, call.attempts, call.text) == (status, attempts, text), call
        assert call.extra["stream"] == "1"
    ours = [rec.usage for c in calls for rec in attempt_records(c)]
    theirs = [server_usage(wire, r["usage"]) for r in billing]
    assert len(billing) == len(replies) and ours == theirs
    total = sum((c.usage for c in calls if c.usage is not None), Usage())
    assert total == sum((t for t in theirs if t is not None), Usage()) and total.cached_tokens > 0
    # The billing rule for a stream that did not reach its terminator, attempt by attempt.
    cut, trickled, errored = (attempt_records(calls[i])[0] for i in (3, 4, 5))
    assert cut.status is CallStatus.SERVER_ERROR and "stream cut off after 9 events" in cut.error
    assert trickled.status is CallStatus.TIMEOUT and "stream cut off" in trickled.error
    assert errored.status is CallStatus.SERVER_ERROR and "error event" in errored.error
    if wire == "anthropic":  # message_start carried the prompt's tokens: billed, a lower bound
        assert cut.usage == Usage(500, 1, 100, 0) and trickled.usage == Usage(70, 1, 0, 0)
        assert errored.usage == Usage(90, 1, 0, 0) and "overloaded_error" in errored.error
    else:  # usage comes only in the last chunk before [DONE]: a cut stream carries none
        assert cut.usage is None and trickled.usage is None and errored.usage is None
    assert calls[6].billed and "not a JSON object" in calls[6].error
    assert not calls[8].billed and not calls[9].billed
    body = requests[0]["body"]
    assert body["stream"] is True and body["max_tokens"] == 512
    if wire == "openai":
        assert body["stream_options"] == {"include_usage": True}


def test_an_anthropic_rate_limit_event_is_rate_limited_and_retried(tmp_path: Path) -> None:
    replies = [{"kind": "ok", "text": "a" * 32, "usage": u("anthropic", 40, 10), "stream_error": 6,
                "error_type": "rate_limit_error"},
               {"kind": "ok", "text": "ok", "usage": u("anthropic", 40, 10)}]
    with fake_server({"endpoints": {"ep": {"replies": replies}}}, tmp_path) as server:
        async def run() -> LLMCall:
            async with create(endpoint(server, "anthropic", "ep", stream=True)) as provider:
                return await provider.complete(PROMPT, model=MODEL, temperature=None,
                                               max_tokens=64, deadline_s=10)

        call = asyncio.run(run())
    first, second = attempt_records(call)
    assert first.status is CallStatus.RATE_LIMITED and first.usage == Usage(40, 1, 0, 0)
    assert second.status is CallStatus.OK and call.text == "ok"
    assert call.usage == Usage(80, 11, 0, 0)


def test_sse_decoder_reads_events_split_anywhere() -> None:
    wire = (b": keep-alive\r\n\r\nevent: message_start\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n"
            b"data: [DONE]\n\nid: 7\rdata: x\r\r\n")
    whole = SSEDecoder().feed(wire)
    assert whole == [("message_start", b'{"a":\n1}'), ("", b"[DONE]"), ("", b"x")]
    for size in (1, 2, 3, 7):
        decoder = SSEDecoder()
        pieces = [decoder.feed(wire[i:i + size]) for i in range(0, len(wire), size)]
        assert [e for piece in pieces for e in piece] == whole, size
