"""Anthropic Messages: ``POST {base_url}/v1/messages``.

Headers ``x-api-key`` and ``anthropic-version``. System messages are joined (blank line between)
into the top-level ``system`` field; the others go as ``messages``. The API requires
``max_tokens``, so ``None`` sends :data:`DEFAULT_MAX_TOKENS` (recorded in the call). The reply's
text is the concatenation of its ``text`` blocks (thinking blocks are not part of the answer).
``stop_reason == "max_tokens"`` is ``TRUNCATED``; a 2xx body without a ``content`` list is
``MALFORMED``.

Usage mapping: Anthropic's ``input_tokens`` excludes the prompt tokens read from or written to
its cache, so ``prompt_tokens = input_tokens + cache_read_input_tokens +
cache_creation_input_tokens``, ``cached_tokens = cache_read_input_tokens`` and
``cache_write_tokens = cache_creation_input_tokens``;
``completion_tokens = output_tokens``. Extended-thinking tokens are inside ``output_tokens`` and
the API does not report them apart, so ``reasoning_tokens`` is 0 (not reported, not "none"):
a call's thinking budget is in its ``extra["request_options"]``. Cache writes are priced at the
prompt price (Anthropic charges them 1.25x; the price table has no separate rate). Why raw HTTP
and not the ``anthropic`` SDK: see :mod:`generators.providers.base`.

Request options (:mod:`generators.providers.options`): ``thinking_budget`` goes as ``thinking =
{"type": "enabled", "budget_tokens": N}``, ``top_p`` as ``top_p`` and ``stop`` as
``stop_sequences``. Streaming (``stream = true``) sends ``stream: true``: ``message_start``
carries the id and the usage so far (the prompt's tokens), ``content_block_delta`` events with
``text_delta`` the text (``thinking_delta`` is not the answer), ``message_delta`` the stop reason
and the cumulative usage, ``message_stop`` ends it; an ``error`` event ends the attempt as
``RATE_LIMITED`` (``rate_limit_error``) or ``SERVER_ERROR`` (any other type).

Tools: a prompt's tools go as ``tools: [{name, description, input_schema}]``; an assistant
message's tool calls as ``tool_use`` blocks after its text (``input`` is the call's arguments
decoded; the API only ever sent objects); tool results as ``tool_result`` blocks of one user
message — consecutive results, and a user message right after them, are merged into that one
message, as the API demands. A reply's ``tool_use`` blocks become
:class:`~generators.llm.ToolCall` s whose ``arguments`` are the ``input`` object as JSON text; a
``tool_use`` block without an id, a name or an object ``input`` makes the reply ``MALFORMED``.
Streamed, a ``content_block_start`` of type ``tool_use`` opens a call and its
``input_json_delta`` pieces are its arguments' text.
"""

from __future__ import annotations

from typing import Any

import orjson

from generators.llm import CallStatus, Message, Prompt, Role, ToolCall, Usage
from generators.providers.base import Provider, WireReply, WireRequest, int_field, str_field
from generators.providers.registry import register_provider
from generators.providers.stream import StreamState
from generators.providers.wire import ToolCallParts

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 8192


def _input(arguments: str) -> Any:
    """A tool call's arguments as the ``input`` object (``{}`` for text that is not one)."""
    try:
        value = orjson.loads(arguments) if arguments else {}
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """The non-system messages in the Messages API's shape (see the module doc on tools)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role is Role.SYSTEM:
            continue
        if m.role is Role.TOOL:
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id,
                                     "content": m.content}
        elif m.role is Role.USER and out and out[-1]["role"] == "user" \
                and isinstance(out[-1]["content"], list):
            block = {"type": "text", "text": m.content}
        else:
            content: Any = m.content
            if m.tool_calls:
                content = [{"type": "text", "text": m.content}] if m.content else []
                content += [{"type": "tool_use", "id": c.id, "name": c.name,
                             "input": _input(c.arguments)} for c in m.tool_calls]
            out.append({"role": m.role.value, "content": content})
            continue
        if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
            out[-1]["content"].append(block)
        else:
            out.append({"role": "user", "content": [block]})
    return out


def _tool_uses(content: list[Any]) -> tuple[ToolCall, ...] | str:
    """The ``tool_use`` blocks of a reply's content, or what is wrong with one."""
    calls = []
    for block in content:
        if not isinstance(block, dict) or block.get("type") != "tool_use":
            continue
        if not str_field(block, "id") or not str_field(block, "name") \
                or not isinstance(block.get("input"), dict):
            return "a tool_use block has no id, name or object input"
        calls.append(ToolCall(block["id"], block["name"], orjson.dumps(block["input"]).decode()))
    return tuple(calls)


@register_provider("anthropic")
class AnthropicProvider(Provider):
    kind = "anthropic"

    def build_request(self, prompt: Prompt, *, model: str, temperature: float | None,
                      max_tokens: int | None) -> WireRequest:
        system = "\n\n".join(m.content for m in prompt.messages if m.role is Role.SYSTEM)
        sent_max = DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": sent_max,
            "messages": _messages(prompt.messages),
        }
        if prompt.tools:
            body["tools"] = [{"name": t.name, "description": t.description,
                              "input_schema": t.parameters} for t in prompt.tools]
        if system:
            body["system"] = system
        if temperature is not None:
            body["temperature"] = temperature
        options = self.config.options_for(model)
        if options.thinking_budget is not None:
            body["thinking"] = {"type": "enabled", "budget_tokens": options.thinking_budget}
        if options.top_p is not None:
            body["top_p"] = options.top_p
        if options.stop:
            body["stop_sequences"] = list(options.stop)
        if self.config.stream:
            body["stream"] = True
        return WireRequest("/v1/messages", body, {"anthropic-version": ANTHROPIC_VERSION},
                           max_tokens=sent_max, stream=self.config.stream)

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"x-api-key": key} if key else {}

    def parse_usage(self, usage: Any) -> Usage | None:
        given = int_field(usage, "input_tokens")
        output = int_field(usage, "output_tokens")
        if given is None and output is None:
            return None
        read = int_field(usage, "cache_read_input_tokens") or 0
        written = int_field(usage, "cache_creation_input_tokens") or 0
        return Usage(prompt_tokens=(given or 0) + read + written, completion_tokens=output or 0,
                     cached_tokens=read, reasoning_tokens=0, cache_write_tokens=written)

    def parse_reply(self, data: Any) -> WireReply:
        if not isinstance(data, dict):
            return WireReply(CallStatus.MALFORMED, error="reply is not a JSON object")
        response_id = str_field(data, "id")
        stop = str_field(data, "stop_reason")
        content = data.get("content")
        if not isinstance(content, list):
            return WireReply(CallStatus.MALFORMED, finish_reason=stop, response_id=response_id,
                             error="reply has no content list")
        text = "".join(block["text"] for block in content
                       if isinstance(block, dict) and block.get("type") == "text"
                       and isinstance(block.get("text"), str))
        calls = _tool_uses(content)
        if isinstance(calls, str):
            return WireReply(CallStatus.MALFORMED, finish_reason=stop, response_id=response_id,
                             error=calls)
        status = CallStatus.TRUNCATED if stop == "max_tokens" else CallStatus.OK
        return WireReply(status, text, stop, response_id, tool_calls=calls)

    def new_stream(self) -> StreamState:
        return _MessageStream()


class _MessageStream(StreamState):
    """Messages events: ``message_start``, content blocks and their deltas, ``message_delta``,
    ``message_stop``."""

    def __init__(self) -> None:
        super().__init__()
        self.tools = ToolCallParts()

    def on_event(self, event: str, obj: dict[str, Any]) -> None:
        kind = str_field(obj, "type") or event
        if kind == "content_block_delta":
            delta = obj.get("delta")
            piece = delta.get("text") if isinstance(delta, dict) else None
            if isinstance(delta, dict) and delta.get("type") == "text_delta" \
                    and isinstance(piece, str):
                self.parts.append(piece)
            index = int_field(obj, "index")
            partial = delta.get("partial_json") if isinstance(delta, dict) else None
            if index is not None and index in self.tools and isinstance(partial, str):
                self.tools.add(index, arguments=partial)
        elif kind == "content_block_start":
            block = obj.get("content_block")
            index = int_field(obj, "index")
            if str_field(block, "type") == "tool_use" and index is not None:
                self.tools.add(index, str_field(block, "id"), str_field(block, "name"))
        elif kind == "message_start":
            message = obj.get("message")
            self.response_id = str_field(message, "id")
            usage = message.get("usage") if isinstance(message, dict) else None
            if isinstance(usage, dict):
                self.usage = dict(usage)
        elif kind == "message_delta":
            self.finish_reason = str_field(obj.get("delta"), "stop_reason") or self.finish_reason
            usage = obj.get("usage")
            if isinstance(usage, dict):  # cumulative: the newest count of each field wins
                self.usage = {**(self.usage or {}), **usage}
        elif kind == "message_stop":
            self.complete = True
        elif kind == "error":
            error = obj.get("error")
            rate = str_field(error, "type") == "rate_limit_error"
            self.fail(CallStatus.RATE_LIMITED if rate else CallStatus.SERVER_ERROR,
                      f"{str_field(error, 'type')}: {str_field(error, 'message')}")

    def reply(self) -> WireReply:
        status = CallStatus.TRUNCATED if self.finish_reason == "max_tokens" else CallStatus.OK
        calls = self.tools.calls(empty_arguments="{}")
        if any(not c.id or not c.name for c in calls):
            return WireReply(CallStatus.MALFORMED, finish_reason=self.finish_reason,
                             response_id=self.response_id,
                             error="a streamed tool_use block has no id or name")
        return WireReply(status, self.text, self.finish_reason, self.response_id, tool_calls=calls)
