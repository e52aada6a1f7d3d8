"""The wire formats' shared pieces: a request and a reply as the providers see them, the
readers of what a server sends (Retry-After, usage in a body that does not parse, typed fields),
and :class:`ToolCallParts`, which gathers the tool calls a stream sends in pieces.
"""

from __future__ import annotations

import email.utils
import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from generators.llm import CallStatus, Prompt, ToolCall


@dataclass(frozen=True)
class WireRequest:
    """A request body and headers, without the key (added at send time)."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    max_tokens: int | None = None  # what was actually sent
    stream: bool = False           # the reply comes as server-sent events


@dataclass(frozen=True)
class WireReply:
    """A 2xx body as understood by a wire format."""

    status: CallStatus             # OK, TRUNCATED or MALFORMED
    text: str = ""
    finish_reason: str = ""
    response_id: str = ""
    error: str = ""
    tool_calls: tuple[ToolCall, ...] = ()


class ToolCallParts:
    """Tool calls assembled from stream events: each is opened at its block or list index with
    its id and name, and its arguments' JSON text arrives in pieces (OpenAI ``delta.tool_calls``,
    Anthropic ``input_json_delta``)."""

    def __init__(self) -> None:
        self._calls: dict[int, tuple[list[str], list[str]]] = {}  # index -> ([id, name], pieces)

    def add(self, index: int, call_id: str = "", name: str = "", arguments: str = "") -> None:
        head, pieces = self._calls.setdefault(index, (["", ""], []))
        head[0] = head[0] or call_id
        head[1] = head[1] or name
        if arguments:
            pieces.append(arguments)

    def __contains__(self, index: int) -> bool:
        return index in self._calls

    def calls(self, empty_arguments: str = "") -> tuple[ToolCall, ...]:
        """The calls in index order; a call whose arguments never came gets ``empty_arguments``."""
        return tuple(ToolCall(head[0], head[1], "".join(pieces) or empty_arguments)
                     for _, (head, pieces) in sorted(self._calls.items()))


def parse_retry_after(headers: Any, now: datetime | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date)."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            ms = float(raw_ms)
        except ValueError:
            ms = math.nan
        if math.isfinite(ms):
            return max(ms / 1000.0, 0.0)
    raw = headers.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        seconds = (when - (now or datetime.now(timezone.utc))).total_seconds()
    return max(seconds, 0.0) if math.isfinite(seconds) else None


def scan_usage(text: str) -> dict[str, Any] | None:
    """The first JSON object that follows a ``"usage"`` key in a body that is not valid JSON."""
    decoder = json.JSONDecoder()
    start = 0
    while True:
        at = text.find('"usage"', start)
        if at < 0:
            return None
        pos = at + len('"usage"')
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        if pos < len(text) and text[pos] == ":":
            pos += 1
            while pos < len(text) and text[pos] in " \t\r\n":
                pos += 1
            try:
                obj, _ = decoder.raw_decode(text, pos)
            except ValueError:
                obj = None
            if isinstance(obj, dict):
                return obj
        start = at + 1


def int_field(obj: Any, *path: str) -> int | None:
    """``obj[path[0]][path[1]]...`` when it is a non-negative int (not a bool), else None."""
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    if isinstance(obj, bool) or not isinstance(obj, int) or obj < 0:
        return None
    return obj


def str_field(obj: Any, key: str) -> str:
    """``obj[key]`` when ``obj`` is a dict and the value a string, else ""."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, str) else ""


def estimate_prompt_tokens(prompt: Prompt) -> int:
    """A cheap over-estimate-ish of prompt tokens (4 characters a token, 4 per message)."""
    chars = [len(m.content) + sum(len(c.arguments) + len(c.name) for c in m.tool_calls)
             for m in prompt.messages]
    tools = sum(len(t.description) + len(str(t.parameters)) for t in prompt.tools)
    return sum(math.ceil(n / 4) + 4 for n in chars) + math.ceil(tools / 4)
