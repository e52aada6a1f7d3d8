"""Anthropic Messages: ``POST {base_url}/v1/messages``.

Headers ``x-api-key`` and ``anthropic-version``. System messages are joined (blank line between)
into the top-level ``system`` field; the others go as ``messages``. The API requires
``max_tokens``, so ``None`` sends :data:`DEFAULT_MAX_TOKENS` (recorded in the call). The reply's
text is the concatenation of its ``text`` blocks (thinking blocks are not part of the answer).
``stop_reason == "max_tokens"`` is ``TRUNCATED``; a 2xx body without a ``content`` list is
``MALFORMED``.

Usage mapping: Anthropic's ``input_tokens`` excludes the prompt tokens read from or written to
its cache, so ``prompt_tokens = input_tokens + cache_read_input_tokens +
cache_creation_input_tokens`` and ``cached_tokens = cache_read_input_tokens``;
``completion_tokens = output_tokens``. Extended-thinking tokens are inside ``output_tokens`` and
the API does not report them apart, so ``reasoning_tokens`` is 0. Cache writes are priced at the
prompt price (Anthropic charges them 1.25x; the price table has no separate rate). Why raw HTTP
and not the ``anthropic`` SDK: see :mod:`generators.providers.base`.
"""

from __future__ import annotations

from typing import Any

from generators.llm import CallStatus, Prompt, Role, Usage
from generators.providers.base import Provider, WireReply, WireRequest, int_field, str_field
from generators.providers.registry import register_provider

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 8192


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
            "messages": [{"role": m.role.value, "content": m.content}
                         for m in prompt.messages if m.role is not Role.SYSTEM],
        }
        if system:
            body["system"] = system
        if temperature is not None:
            body["temperature"] = temperature
        return WireRequest("/v1/messages", body, {"anthropic-version": ANTHROPIC_VERSION},
                           max_tokens=sent_max)

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
                     cached_tokens=read, reasoning_tokens=0)

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
        status = CallStatus.TRUNCATED if stop == "max_tokens" else CallStatus.OK
        return WireReply(status, text, stop, response_id)
