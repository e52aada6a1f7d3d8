"""Streamed replies: server-sent events, and the state a wire format builds from them.

An endpoint with ``stream = true`` asks for its reply as server-sent events (OpenAI Chat
Completions with ``stream_options.include_usage``; Anthropic Messages). :class:`SSEDecoder` turns
the bytes into (event, data) pairs as they arrive; each wire format's :class:`StreamState` reads
them into the reply's text, finish reason, id and usage. The usage is kept as the stream last
reported it, so a stream cut off midway is billed with what it carried (the rule is in
:mod:`generators.providers.base`).
"""

from __future__ import annotations

import abc
from typing import Any

import orjson

from generators.llm import CallStatus
from generators.providers.wire import WireReply


class SSEDecoder:
    """The event-stream format as the model APIs send it: lines end in LF, CRLF or CR;
    ``event:`` names the event, ``data:`` lines are joined by LF, a blank line dispatches,
    lines starting with ``:`` are comments, other fields are ignored."""

    __slots__ = ("_buf", "_data", "_event")

    def __init__(self) -> None:
        self._buf = b""
        self._event = ""
        self._data: list[bytes] = []

    def feed(self, chunk: bytes) -> list[tuple[str, bytes]]:
        """The events completed by ``chunk``."""
        buf = self._buf + chunk
        held = b""
        if buf.endswith(b"\r"):  # its LF may be in the next chunk
            buf, held = buf[:-1], b"\r"
        lines = buf.splitlines(keepends=True)
        if lines and not lines[-1].endswith((b"\n", b"\r")):
            held = lines.pop() + held
        self._buf = held
        out: list[tuple[str, bytes]] = []
        for line in lines:
            line = line.rstrip(b"\r\n")
            if not line:
                if self._data:
                    out.append((self._event, b"\n".join(self._data)))
                self._event, self._data = "", []
                continue
            name, _, value = line.partition(b":")
            if value.startswith(b" "):
                value = value[1:]
            if name == b"data":
                self._data.append(value)
            elif name == b"event":
                self._event = value.decode("utf-8", "replace")
        return out


class StreamState(abc.ABC):
    """What one streamed attempt has said so far. ``usage`` is the wire format's usage object as
    last reported (None until one arrives); ``complete`` is set by the stream's terminator."""

    def __init__(self) -> None:
        self.events = 0
        self.parts: list[str] = []
        self.finish_reason = ""
        self.response_id = ""
        self.usage: dict[str, Any] | None = None
        self.complete = False
        self.failed: CallStatus | None = None  # an error event: how the attempt ends
        self.error = ""
        self.malformed = ""                    # the first event that did not parse

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def feed(self, event: str, data: bytes) -> None:
        self.events += 1
        if self.complete or self.failed is not None:
            return
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            obj = None
            if data.strip() == b"[DONE]":
                self.on_done()
                return
        if not isinstance(obj, dict):
            if not self.malformed:
                self.malformed = f"event {self.events} is not a JSON object: {data[:200]!r}"
            return
        self.on_event(event, obj)

    def on_done(self) -> None:
        """The OpenAI terminator; any other wire format's stream may not send it."""
        if not self.malformed:
            self.malformed = f"event {self.events} is an unexpected [DONE]"

    def fail(self, status: CallStatus, message: str) -> None:
        self.failed = status
        self.error = message

    @abc.abstractmethod
    def on_event(self, event: str, obj: dict[str, Any]) -> None:
        """Read one event's decoded data."""

    @abc.abstractmethod
    def reply(self) -> WireReply:
        """The reply of a complete stream (OK, TRUNCATED or MALFORMED)."""
