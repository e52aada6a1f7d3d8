"""The scripted server's streamed replies: server-sent events as OpenAI and Anthropic send them.

:func:`events` turns a scripted ``ok``/``truncated`` reply into the list of events of its stream,
each with the usage object it carries (None for most), so the server can log exactly the usage
that went out when a stream is cut off. Options of the reply: ``chunk_chars`` (text per delta,
default 8), ``bad_event`` (index at which a non-JSON event is inserted), ``stream_error`` (index
at which an error event replaces the rest of the stream; ``error_type`` for Anthropic, default
``overloaded_error``). A reply's ``tool_calls`` follow its text: OpenAI sends each call's id and
name in its first ``delta.tool_calls`` piece and its arguments in ``chunk_chars`` pieces
(finish_reason ``tool_calls``); Anthropic sends one ``tool_use`` block each, its arguments as
``input_json_delta`` pieces (stop_reason ``tool_use``).
"""

from __future__ import annotations

import json
from typing import Any

Event = tuple[bytes, Any]  # (the event's bytes on the wire, the usage object it carries)


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    body = data if isinstance(data, str) else json.dumps(data)
    return f"{head}data: {body}\n\n".encode()


def _pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def _arguments(call: dict[str, Any]) -> str:
    arguments = call["arguments"]
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _openai(reply: dict[str, Any], seq: int) -> list[Event]:
    cid = f"chatcmpl-{seq}"
    calls = reply.get("tool_calls") or []
    finish = "length" if reply["kind"] == "truncated" else "tool_calls" if calls else "stop"
    size = int(reply.get("chunk_chars", 8))

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        return _sse({"id": cid, "object": "chat.completion.chunk", "model": "fake", "usage": None,
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]})

    out: list[Event] = [(chunk({"role": "assistant", "content": ""}), None)]
    out += [(chunk({"content": p}), None) for p in _pieces(reply.get("text", ""), size)]
    for i, c in enumerate(calls):
        out.append((chunk({"tool_calls": [{"index": i, "id": c["id"], "type": "function",
                                           "function": {"name": c["name"], "arguments": ""}}]}),
                    None))
        out += [(chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]}), None)
                for p in _pieces(_arguments(c), size)]
    out.append((chunk({}, finish), None))
    usage = reply.get("usage")
    if usage is not None:
        out.append((_sse({"id": cid, "object": "chat.completion.chunk", "model": "fake",
                          "choices": [], "usage": usage}), usage))
    out.append((_sse("[DONE]"), None))
    return out


def _anthropic_tool(i: int, call: dict[str, Any], size: int) -> list[Event]:
    arguments = call["arguments"]
    text = json.dumps(json.loads(arguments) if isinstance(arguments, str) else arguments)
    out: list[Event] = [(_sse({"type": "content_block_start", "index": i, "content_block": {
        "type": "tool_use", "id": call["id"], "name": call["name"], "input": {}}},
        "content_block_start"), None)]
    out += [(_sse({"type": "content_block_delta", "index": i,
                   "delta": {"type": "input_json_delta", "partial_json": p}},
                  "content_block_delta"), None) for p in _pieces(text, size)]
    out.append((_sse({"type": "content_block_stop", "index": i}, "content_block_stop"), None))
    return out


def _anthropic(reply: dict[str, Any], seq: int) -> list[Event]:
    calls = reply.get("tool_calls") or []
    stop = "max_tokens" if reply["kind"] == "truncated" else "tool_use" if calls else "end_turn"
    usage = reply.get("usage")
    start_usage = None if usage is None else {**usage, "output_tokens": 1}
    message: dict[str, Any] = {"id": f"msg_{seq}", "type": "message", "role": "assistant",
                               "content": [], "model": "fake", "stop_reason": None}
    if start_usage is not None:
        message["usage"] = start_usage
    out: list[Event] = [
        (_sse({"type": "message_start", "message": message}, "message_start"), start_usage),
        (_sse({"type": "content_block_start", "index": 0,
               "content_block": {"type": "thinking", "thinking": ""}}, "content_block_start"), None),
        (_sse({"type": "content_block_delta", "index": 0,
               "delta": {"type": "thinking_delta", "thinking": "hmm"}}, "content_block_delta"), None),
        (_sse({"type": "content_block_stop", "index": 0}, "content_block_stop"), None),
        (_sse({"type": "content_block_start", "index": 1,
               "content_block": {"type": "text", "text": ""}}, "content_block_start"), None),
        (_sse({"type": "ping"}, "ping"), None),
    ]
    out += [(_sse({"type": "content_block_delta", "index": 1,
                   "delta": {"type": "text_delta", "text": p}}, "content_block_delta"), None)
            for p in _pieces(reply.get("text", ""), int(reply.get("chunk_chars", 8)))]
    out.append((_sse({"type": "content_block_stop", "index": 1}, "content_block_stop"), None))
    for i, c in enumerate(calls):
        out += _anthropic_tool(2 + i, c, int(reply.get("chunk_chars", 8)))
    delta_usage = None if usage is None else {"output_tokens": usage["output_tokens"]}
    delta: dict[str, Any] = {"type": "message_delta",
                             "delta": {"stop_reason": stop, "stop_sequence": None}}
    if delta_usage is not None:
        delta["usage"] = delta_usage
    out.append((_sse(delta, "message_delta"), delta_usage))
    out.append((_sse({"type": "message_stop"}, "message_stop"), None))
    return out


def events(wire: str, reply: dict[str, Any], seq: int) -> list[Event]:
    """The stream of ``reply`` in ``wire``'s format, with the reply's faults applied."""
    out = _openai(reply, seq) if wire == "openai" else _anthropic(reply, seq)
    if "stream_error" in reply:
        at = int(reply["stream_error"])
        if wire == "openai":
            error = _sse({"error": {"message": "scripted failure", "type": "server_error"}})
        else:
            error = _sse({"type": "error", "error": {"type": reply.get("error_type", "overloaded_error"),
                                                     "message": "scripted failure"}}, "error")
        out = out[:at] + [(error, None)]
    if "bad_event" in reply:
        at = int(reply["bad_event"])
        out.insert(at, (b"data: {not json\n\n", None))
    return out


def carried(wire: str, sent: list[Event]) -> Any:
    """The usage the sent events carried, as a client merging them would read it (OpenAI: the
    usage chunk's; Anthropic: message_start's, updated by message_delta's); None when none."""
    usage: dict[str, Any] | None = None
    for _, u in sent:
        if u is not None:
            usage = dict(u) if wire == "openai" or usage is None else {**usage, **u}
    return usage
