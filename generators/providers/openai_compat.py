"""OpenAI-compatible Chat Completions: OpenAI, vLLM, SGLang, DeepSeek and other servers.

``POST {base_url}/chat/completions`` with ``Authorization: Bearer <key>`` (no header when the
endpoint has no key variable). Messages go as they are, system messages included. Usage:
``prompt_tokens`` and ``completion_tokens``; cached tokens from
``prompt_tokens_details.cached_tokens`` (DeepSeek's ``prompt_cache_hit_tokens`` when that is
absent); cache writes from ``prompt_tokens_details.cache_write_tokens`` (or
``cache_creation_input_tokens``, as gateways in front of Anthropic models send them); reasoning
tokens from ``completion_tokens_details.reasoning_tokens`` (already inside ``completion_tokens``).
``finish_reason == "length"`` is ``TRUNCATED`` whatever the content
(a reasoning model may spend the whole budget thinking and return no text). A 2xx body without
``choices[0].message`` or whose content is not text is ``MALFORMED``. Why raw HTTP and not the
``openai`` SDK: see :mod:`generators.providers.base`.

Request options (:mod:`generators.providers.options`): ``reasoning_effort``, ``top_p``, ``seed``
and ``stop`` go as the fields of those names. Streaming (``stream = true``) sends ``stream: true``
with ``stream_options: {"include_usage": true}``: the reply is chunks whose
``choices[0].delta.content`` are the text's pieces and whose ``finish_reason`` ends it, then one
chunk with ``choices: []`` and the usage, then ``data: [DONE]``; an ``error`` object in a chunk
ends the attempt as ``SERVER_ERROR``.

Tools: a prompt's tools go as ``tools: [{"type": "function", "function": {name, description,
parameters}}]``; an assistant message's tool calls as its ``tool_calls`` list (``content`` null
when it has no text); a tool result as ``{"role": "tool", "tool_call_id", "content"}``. A reply's
``choices[0].message.tool_calls`` become :class:`~generators.llm.ToolCall` s with the
``arguments`` text as sent (its ``content`` may then be null: that is a reply, not a malformed
one); a tool call that is not an object with an id and a ``function`` name makes the reply
``MALFORMED``. Streamed, ``delta.tool_calls`` pieces are joined by their ``index``.
"""

from __future__ import annotations

from typing import Any

from generators.llm import CallStatus, Message, Prompt, Role, ToolCall, Usage
from generators.providers.base import Provider, WireReply, WireRequest, int_field, str_field
from generators.providers.registry import register_provider
from generators.providers.stream import StreamState
from generators.providers.wire import ToolCallParts


def _message(m: Message) -> dict[str, Any]:
    if m.role is Role.TOOL:
        return {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content}
    out: dict[str, Any] = {"role": m.role.value, "content": m.content}
    if m.tool_calls:
        out["content"] = m.content or None
        out["tool_calls"] = [{"id": c.id, "type": "function",
                              "function": {"name": c.name, "arguments": c.arguments}}
                             for c in m.tool_calls]
    return out


def _tool_calls(raw: Any) -> tuple[ToolCall, ...] | str:
    """A message's ``tool_calls`` list, or what is wrong with it."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        return "reply's tool_calls is not a list"
    calls = []
    for i, item in enumerate(raw):
        function = item.get("function") if isinstance(item, dict) else None
        name = str_field(function, "name")
        if not name or not str_field(item, "id"):
            return f"reply's tool call {i} has no id or function name"
        arguments = function.get("arguments") if isinstance(function, dict) else None
        calls.append(ToolCall(str_field(item, "id"), name,
                              arguments if isinstance(arguments, str) else ""))
    return tuple(calls)


@register_provider("openai")
class OpenAICompatProvider(Provider):
    kind = "openai"

    def build_request(self, prompt: Prompt, *, model: str, temperature: float | None,
                      max_tokens: int | None) -> WireRequest:
        body: dict[str, Any] = {
            "model": model,
            "messages": [_message(m) for m in prompt.messages],
        }
        if prompt.tools:
            body["tools"] = [{"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.parameters}}
                for t in prompt.tools]
        if temperature is not None:
            body["temperature"] = temperature
        if max_tokens is not None:
            body[self.config.max_tokens_param] = max_tokens
        options = self.config.options_for(model)
        for name in ("reasoning_effort", "top_p", "seed"):
            if getattr(options, name) is not None:
                body[name] = getattr(options, name)
        if options.stop:
            body["stop"] = list(options.stop)
        if self.config.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return WireRequest("/chat/completions", body, max_tokens=max_tokens,
                           stream=self.config.stream)

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {key}"} if key else {}

    def parse_usage(self, usage: Any) -> Usage | None:
        prompt = int_field(usage, "prompt_tokens")
        completion = int_field(usage, "completion_tokens")
        if prompt is None and completion is None:
            return None
        cached = int_field(usage, "prompt_tokens_details", "cached_tokens")
        if cached is None:
            cached = int_field(usage, "prompt_cache_hit_tokens")
        reasoning = int_field(usage, "completion_tokens_details", "reasoning_tokens")
        written = int_field(usage, "prompt_tokens_details", "cache_write_tokens")
        if written is None:  # gateways in front of Anthropic models (OpenRouter, LiteLLM)
            written = int_field(usage, "cache_creation_input_tokens")
        return Usage(prompt_tokens=prompt or 0, completion_tokens=completion or 0,
                     cached_tokens=cached or 0, reasoning_tokens=reasoning or 0,
                     cache_write_tokens=written or 0)

    def parse_reply(self, data: Any) -> WireReply:
        if not isinstance(data, dict):
            return WireReply(CallStatus.MALFORMED, error="reply is not a JSON object")
        response_id = str_field(data, "id")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return WireReply(CallStatus.MALFORMED, response_id=response_id,
                             error="reply has no choices")
        choice = choices[0]
        finish = str_field(choice, "finish_reason")
        message = choice.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        calls = _tool_calls(message.get("tool_calls") if isinstance(message, dict) else None)
        if isinstance(calls, str):
            return WireReply(CallStatus.MALFORMED, finish_reason=finish, response_id=response_id,
                             error=calls)
        if finish == "length":
            text = content if isinstance(content, str) else ""
            return WireReply(CallStatus.TRUNCATED, text, finish, response_id, tool_calls=calls)
        if content is None and calls:
            content = ""
        if not isinstance(content, str):
            return WireReply(CallStatus.MALFORMED, finish_reason=finish, response_id=response_id,
                             error="reply's message has no text content")
        return WireReply(CallStatus.OK, content, finish, response_id, tool_calls=calls)

    def new_stream(self) -> StreamState:
        return _ChunkStream()


class _ChunkStream(StreamState):
    """Chat Completions chunks: text and tool-call deltas, the finish reason, then usage, then
    ``[DONE]``."""

    def __init__(self) -> None:
        super().__init__()
        self.tools = ToolCallParts()

    def on_done(self) -> None:
        self.complete = True

    def on_event(self, event: str, obj: dict[str, Any]) -> None:
        error = obj.get("error")
        if error is not None:
            message = str_field(error, "message") or str(error)[:200]
            self.fail(CallStatus.SERVER_ERROR, message)
            return
        self.response_id = self.response_id or str_field(obj, "id")
        usage = obj.get("usage")
        if isinstance(usage, dict):
            self.usage = usage
        choices = obj.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return
        choice = choices[0]
        delta = choice.get("delta")
        content = delta.get("content") if isinstance(delta, dict) else None
        if isinstance(content, str):
            self.parts.append(content)
        pieces = delta.get("tool_calls") if isinstance(delta, dict) else None
        for piece in pieces if isinstance(pieces, list) else ():
            function = piece.get("function") if isinstance(piece, dict) else None
            index = int_field(piece, "index")
            if index is None:
                self.malformed = self.malformed or f"event {self.events}: a tool call without index"
                continue
            arguments = function.get("arguments") if isinstance(function, dict) else None
            self.tools.add(index, str_field(piece, "id"), str_field(function, "name"),
                           arguments if isinstance(arguments, str) else "")
        finish = str_field(choice, "finish_reason")
        if finish:
            self.finish_reason = finish

    def reply(self) -> WireReply:
        status = CallStatus.TRUNCATED if self.finish_reason == "length" else CallStatus.OK
        calls = self.tools.calls()
        if any(not c.id or not c.name for c in calls):
            return WireReply(CallStatus.MALFORMED, finish_reason=self.finish_reason,
                             response_id=self.response_id,
                             error="a streamed tool call has no id or function name")
        return WireReply(status, self.text, self.finish_reason, self.response_id, tool_calls=calls)
