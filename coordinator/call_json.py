"""The stored JSON form of an :class:`~generators.llm.LLMCall` (the ``call`` column of
``llm_calls``): the whole call — prompt messages, tools and template, status, text, tool calls,
usage, cost, latency, attempts, finish reason, error, extra — with enums as bare names.

Tool fields are written only when present, and read with defaults when absent, so rows written
before tools existed load unchanged and a plain call's JSON is what it always was.
"""

from __future__ import annotations

from typing import Any

from generators.llm import CallStatus, LLMCall, Message, Prompt, Role, ToolCall, ToolSpec, Usage


def _calls_to_json(calls: tuple[ToolCall, ...]) -> list[dict[str, str]]:
    return [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls]


def _calls_from_json(data: Any) -> tuple[ToolCall, ...]:
    return tuple(ToolCall(str(c["id"]), str(c["name"]), str(c["arguments"])) for c in data or ())


def _message_to_json(m: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": m.role.value, "content": m.content}
    if m.tool_calls:
        out["tool_calls"] = _calls_to_json(m.tool_calls)
    if m.tool_call_id:
        out["tool_call_id"] = m.tool_call_id
    return out


def _message_from_json(m: dict[str, Any]) -> Message:
    return Message(Role(m["role"]), m["content"], _calls_from_json(m.get("tool_calls")),
                   str(m.get("tool_call_id", "")))


def llm_call_to_json(call: LLMCall) -> dict[str, Any]:
    """The whole call as JSON; :func:`llm_call_from_json` reverses it."""
    u = call.usage
    prompt: dict[str, Any] = {"template": call.prompt.template,
                              "operator_id": call.prompt.operator_id,
                              "messages": [_message_to_json(m) for m in call.prompt.messages]}
    if call.prompt.tools:
        prompt["tools"] = [{"name": t.name, "description": t.description,
                            "parameters": t.parameters} for t in call.prompt.tools]
    out: dict[str, Any] = {
        "provider": call.provider, "model": call.model, "prompt": prompt,
        "status": call.status.value, "text": call.text,
        "usage": None if u is None else {
            "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
            "cached_tokens": u.cached_tokens, "reasoning_tokens": u.reasoning_tokens,
            "cache_write_tokens": u.cache_write_tokens},
        "cost_usd": call.cost_usd, "latency_s": call.latency_s, "attempts": call.attempts,
        "finish_reason": call.finish_reason, "error": call.error, "response_id": call.response_id,
        "temperature": call.temperature, "max_tokens": call.max_tokens, "extra": dict(call.extra),
    }
    if call.tool_calls:
        out["tool_calls"] = _calls_to_json(call.tool_calls)
    return out


def llm_call_from_json(data: dict[str, Any]) -> LLMCall:
    p = data["prompt"]
    u = data["usage"]
    tools = tuple(ToolSpec(t["name"], t["description"], dict(t["parameters"]))
                  for t in p.get("tools", ()))
    return LLMCall(
        provider=data["provider"], model=data["model"],
        prompt=Prompt(messages=tuple(_message_from_json(m) for m in p["messages"]),
                      template=p["template"], operator_id=p["operator_id"], tools=tools),
        status=CallStatus(data["status"]), text=data["text"],
        usage=None if u is None else Usage(u["prompt_tokens"], u["completion_tokens"],
                                           u["cached_tokens"], u["reasoning_tokens"],
                                           u.get("cache_write_tokens", 0)),
        cost_usd=float(data["cost_usd"]), latency_s=float(data["latency_s"]),
        attempts=int(data["attempts"]), finish_reason=data["finish_reason"], error=data["error"],
        response_id=data["response_id"], temperature=data["temperature"],
        max_tokens=data["max_tokens"], extra={str(k): str(v) for k, v in data["extra"].items()},
        tool_calls=_calls_from_json(data.get("tool_calls")),
    )
