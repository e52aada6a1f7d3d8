"""OpenAI-compatible Chat Completions: OpenAI, vLLM, SGLang, DeepSeek and other servers.

``POST {base_url}/chat/completions`` with ``Authorization: Bearer <key>`` (no header when the
endpoint has no key variable). Messages go as they are, system messages included. Usage:
``prompt_tokens`` and ``completion_tokens``; cached tokens from
``prompt_tokens_details.cached_tokens`` (DeepSeek's ``prompt_cache_hit_tokens`` when that is
absent); reasoning tokens from ``completion_tokens_details.reasoning_tokens`` (already inside
``completion_tokens``). ``finish_reason == "length"`` is ``TRUNCATED`` whatever the content
(a reasoning model may spend the whole budget thinking and return no text). A 2xx body without
``choices[0].message`` or whose content is not text is ``MALFORMED``. Why raw HTTP and not the
``openai`` SDK: see :mod:`generators.providers.base`.
"""

from __future__ import annotations

from typing import Any

from generators.llm import CallStatus, Prompt, Usage
from generators.providers.base import Provider, WireReply, WireRequest, int_field, str_field
from generators.providers.registry import register_provider


@register_provider("openai")
class OpenAICompatProvider(Provider):
    kind = "openai"

    def build_request(self, prompt: Prompt, *, model: str, temperature: float | None,
                      max_tokens: int | None) -> WireRequest:
        body: dict[str, Any] = {
            "model": model,
            "messages": [{"role": m.role.value, "content": m.content} for m in prompt.messages],
        }
        if temperature is not None:
            body["temperature"] = temperature
        if max_tokens is not None:
            body[self.config.max_tokens_param] = max_tokens
        return WireRequest("/chat/completions", body, max_tokens=max_tokens)

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
        return Usage(prompt_tokens=prompt or 0, completion_tokens=completion or 0,
                     cached_tokens=cached or 0, reasoning_tokens=reasoning or 0)

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
        if finish == "length":
            text = content if isinstance(content, str) else ""
            return WireReply(CallStatus.TRUNCATED, text, finish, response_id)
        if not isinstance(content, str):
            return WireReply(CallStatus.MALFORMED, finish_reason=finish, response_id=response_id,
                             error="reply's message has no text content")
        return WireReply(CallStatus.OK, content, finish, response_id)
