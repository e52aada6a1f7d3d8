"""Per-model request fields (reasoning effort, thinking budget, top_p, seed, stop): what each wire
format sends, what a call records, and what a configuration may not say."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from generators.llm import CallStatus, LLMCall, Usage
from generators.providers import EndpointConfig, ProviderConfigError, attempt_records, create
from generators.providers.attempts import AttemptRecord
from generators.providers.options import OptionError, RequestOptions
from tests.generators.fake_llm_server import fake_server
from tests.generators.llm_helpers import KEY, KEY_ENV, MODEL, PRICES, PROMPT, endpoint
from tests.generators.llm_helpers import wire_usage as u

OPTIONS = {
    "openai": RequestOptions(reasoning_effort="high", top_p=0.9, seed=7, stop=("</kernel>",)),
    "anthropic": RequestOptions(thinking_budget=2048, top_p=0.97, stop=("</kernel>", "END")),
}
SENT = {
    "openai": {"reasoning_effort": "high", "top_p": 0.9, "seed": 7, "stop": ["</kernel>"]},
    "anthropic": {"thinking": {"type": "enabled", "budget_tokens": 2048}, "top_p": 0.97,
                  "stop_sequences": ["</kernel>", "END"]},
}


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_request_fields_reach_the_wire_and_are_recorded(wire: str, stream: bool,
                                                         tmp_path: Path) -> None:
    ok = {"kind": "ok", "text": "ok", "usage": u(wire, 300, 200, 0, 150)}
    with fake_server({"endpoints": {"ep": {"default": ok}}}, tmp_path) as server:
        config = endpoint(server, wire, "ep", stream=stream,
                          model_options=((MODEL, OPTIONS[wire]),))

        async def run() -> list[LLMCall]:
            async with create(config, PRICES) as provider:
                return [await provider.complete(PROMPT, model=m, temperature=None, max_tokens=4096,
                                                deadline_s=10) for m in (MODEL, "other-model")]

        with_fields, without = asyncio.run(run())
        first, second = (r["body"] for r in server.requests())
    assert with_fields.status is without.status is CallStatus.OK
    assert {k: first[k] for k in SENT[wire]} == SENT[wire]
    assert not set(SENT[wire]) & set(second)  # another model id on the endpoint: none sent
    assert json.loads(with_fields.extra["request_options"]) == {
        k: list(v) if isinstance(v, tuple) else v
        for k, v in OPTIONS[wire].__dict__.items() if v not in (None, ())}
    assert "request_options" not in without.extra
    # Usage: OpenAI reports reasoning tokens apart; Anthropic counts thinking in output_tokens.
    expected = Usage(300, 200, 0, 150 if wire == "openai" else 0)
    assert with_fields.usage == expected and attempt_records(with_fields)[0].usage == expected


@pytest.mark.parametrize(("kind", "options", "field"), [
    ("openai", RequestOptions(thinking_budget=2048), "thinking_budget"),
    ("anthropic", RequestOptions(reasoning_effort="low"), "reasoning_effort"),
    ("anthropic", RequestOptions(seed=3), "seed"),
])
def test_an_endpoint_refuses_fields_its_kind_does_not_have(kind: str, options: RequestOptions,
                                                           field: str) -> None:
    with pytest.raises(ProviderConfigError, match=f"{field} is not a field of kind") as bad:
        EndpointConfig(name="x", kind=kind, base_url="http://127.0.0.1:1",  # type: ignore[arg-type]
                       model_options=(("m", options),))
    assert bad.value.field == field
    with pytest.raises(ProviderConfigError, match="two sets of request options"):
        EndpointConfig(name="x", kind="openai", base_url="http://127.0.0.1:1",
                       model_options=(("m", RequestOptions(seed=1)), ("m", RequestOptions(seed=2))))


@pytest.mark.parametrize(("kw", "field"), [
    ({"reasoning_effort": "hihg"}, "reasoning_effort"),
    ({"thinking_budget": 1023}, "thinking_budget"),
    ({"thinking_budget": 2048.0}, "thinking_budget"),
    ({"thinking_budget": True}, "thinking_budget"),
    ({"top_p": 0}, "top_p"),
    ({"top_p": True}, "top_p"),
    ({"top_p": float("nan")}, "top_p"),
    ({"seed": "7"}, "seed"),
    ({"seed": False}, "seed"),
    ({"stop": ["a"]}, "stop"),
    ({"stop": ("a", "")}, "stop"),
])
def test_request_options_check_their_types(kw: dict[str, Any], field: str) -> None:
    with pytest.raises(OptionError) as bad:
        RequestOptions(**kw)
    assert bad.value.field == field


def test_attempt_records_written_before_still_load() -> None:
    # As stored before issue #21 (json.dumps of dataclasses.asdict), a record with only the
    # fields every version has, and one from a later version with a usage field we do not know.
    old = {"attempt": 1, "status": "OK", "http_status": 200,
           "usage": {"prompt_tokens": 5, "completion_tokens": 6, "cached_tokens": 1,
                     "reasoning_tokens": 2},
           "cost_usd": 0.5, "latency_s": 0.25, "retry_after_s": None, "error": ""}
    minimal = {"attempt": 2, "status": "TIMEOUT"}
    later = {**old, "attempt": 3, "usage": {**old["usage"], "audio_tokens": 9}}
    call = LLMCall(provider="p", model="m", prompt=PROMPT, status=CallStatus.OK,
                   extra={"attempts": json.dumps([old, minimal, later])})
    first, second, third = attempt_records(call)
    assert first == AttemptRecord(1, CallStatus.OK, 200, Usage(5, 6, 1, 2), 0.5, 0.25)
    assert second == AttemptRecord(2, CallStatus.TIMEOUT)
    assert third.usage == first.usage
    assert attempt_records(LLMCall(provider="p", model="m", prompt=PROMPT,
                                   status=CallStatus.OK)) == ()
