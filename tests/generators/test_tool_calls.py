"""Tool calls over both wire formats, whole and streamed, against the scripted server.

A prompt with tools and a conversation holding earlier tool calls and results goes out in each
format's own spelling (read back from the server's request log); a reply asking for tools comes
back as typed :class:`~generators.llm.ToolCall` s with their arguments' text, billed like any
reply; a tool call that breaks the wire format is ``MALFORMED`` (and still billed).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from generators.llm import CallStatus, LLMCall, Message, Prompt, Role, ToolCall, ToolSpec
from generators.providers import create
from tests.generators.fake_llm_server import fake_server
from tests.generators.llm_helpers import KEY, KEY_ENV, MODEL, PRICES, endpoint, server_usage
from tests.generators.llm_helpers import wire_usage as u

TOOLS = (ToolSpec("write_kernel", "Write kernel.py.",
                  {"type": "object", "properties": {"source": {"type": "string"}},
                   "required": ["source"]}),
         ToolSpec("verify", "Run the public cases.", {"type": "object", "properties": {}}))
HISTORY = Prompt(messages=(
    Message(Role.SYSTEM, "You write Triton kernels."),
    Message(Role.USER, "Write softmax."),
    Message(Role.ASSISTANT, "Writing it.", (ToolCall("call_1", "write_kernel", '{"source": "x = 1"}'),
                                            ToolCall("call_2", "verify", "{}"))),
    Message(Role.TOOL, "wrote 5 characters", tool_call_id="call_1"),
    Message(Role.TOOL, "COMPILE_ERROR", tool_call_id="call_2"),
    Message(Role.USER, "Keep going."),
), template="agent/v1", operator_id="aten::softmax", tools=TOOLS)
CALLS = [{"id": "call_9", "name": "write_kernel", "arguments": {"source": "import triton\n" * 3}},
         {"id": "call_10", "name": "verify", "arguments": {}}]


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


async def _complete(server: Any, wire: str, stream: bool) -> LLMCall:
    async with create(endpoint(server, wire, "e", stream=stream), PRICES) as provider:
        return await provider.complete(HISTORY, model=MODEL, temperature=None, max_tokens=500,
                                       deadline_s=10)


def _expected_wire_messages(wire: str) -> Any:
    if wire == "openai":
        return [
            {"role": "system", "content": "You write Triton kernels."},
            {"role": "user", "content": "Write softmax."},
            {"role": "assistant", "content": "Writing it.", "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "write_kernel", "arguments": '{"source": "x = 1"}'}},
                {"id": "call_2", "type": "function",
                 "function": {"name": "verify", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "wrote 5 characters"},
            {"role": "tool", "tool_call_id": "call_2", "content": "COMPILE_ERROR"},
            {"role": "user", "content": "Keep going."}]
    return [
        {"role": "user", "content": "Write softmax."},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Writing it."},
            {"type": "tool_use", "id": "call_1", "name": "write_kernel", "input": {"source": "x = 1"}},
            {"type": "tool_use", "id": "call_2", "name": "verify", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": "wrote 5 characters"},
            {"type": "tool_result", "tool_use_id": "call_2", "content": "COMPILE_ERROR"},
            {"type": "text", "text": "Keep going."}]}]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_tool_calls_round_trip(tmp_path: Path, wire: str, stream: bool) -> None:
    usage = u(wire, 900, 120, 300)
    script = {"endpoints": {"e": {"replies": [
        {"kind": "ok", "text": "Let me write it.", "tool_calls": CALLS, "usage": usage,
         "chunk_chars": 5}]}}}
    with fake_server(script, tmp_path) as server:
        call = asyncio.run(_complete(server, wire, stream))
        sent = server.requests()[0]["body"]
        billed = server.wait_billing(1)
    assert call.status is CallStatus.OK, call.error
    assert call.text == "Let me write it."
    assert call.finish_reason == ("tool_calls" if wire == "openai" else "tool_use")
    assert [(c.id, c.name) for c in call.tool_calls] == [("call_9", "write_kernel"),
                                                        ("call_10", "verify")]
    assert [json.loads(c.arguments) for c in call.tool_calls] == [c["arguments"] for c in CALLS]
    assert call.usage == server_usage(wire, billed[0]["usage"])
    assert sent["messages"] == _expected_wire_messages(wire)
    if wire == "openai":
        assert sent["tools"][0] == {"type": "function", "function": {
            "name": "write_kernel", "description": "Write kernel.py.",
            "parameters": TOOLS[0].parameters}}
    else:
        assert sent["system"] == "You write Triton kernels."
        assert sent["tools"][1] == {"name": "verify", "description": "Run the public cases.",
                                    "input_schema": {"type": "object", "properties": {}}}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_openai_arguments_kept_as_written(tmp_path: Path, stream: bool) -> None:
    """Arguments that do not parse are the model's mistake, told to it by the agent: the reply
    is OK and carries the text exactly."""
    bad = '{"source": "unterminated'
    script = {"endpoints": {"e": {"replies": [
        {"kind": "ok", "tool_calls": [{"id": "c1", "name": "write_kernel", "arguments": bad}],
         "usage": u("openai", 10, 5)}]}}}
    with fake_server(script, tmp_path) as server:
        call = asyncio.run(_complete(server, "openai", stream))
    assert call.status is CallStatus.OK
    assert call.text == ""
    assert call.tool_calls == (ToolCall("c1", "write_kernel", bad),)


@pytest.mark.parametrize("wire,raw", [
    ("openai", [{"type": "function", "function": {"arguments": "{}"}}]),
    ("openai", "not a list"),
    ("anthropic", {"type": "tool_use", "id": "t1", "name": "verify", "input": "not an object"}),
    ("anthropic", {"type": "tool_use", "name": "verify", "input": {}}),
])
def test_broken_tool_call_is_malformed_and_billed(tmp_path: Path, wire: str, raw: Any) -> None:
    usage = u(wire, 40, 7)
    script = {"endpoints": {"e": {"replies": [{"kind": "ok", "text": "t", "raw_tool_calls": raw,
                                               "usage": usage}]}}}
    with fake_server(script, tmp_path) as server:
        call = asyncio.run(_complete(server, wire, False))
        billed = server.wait_billing(1)
    assert call.status is CallStatus.MALFORMED
    assert "tool" in call.error
    assert call.tool_calls == ()
    assert call.usage == server_usage(wire, billed[0]["usage"])


def test_plain_prompt_sends_no_tools(tmp_path: Path) -> None:
    plain = Prompt(messages=HISTORY.messages[:2], template="t", operator_id="aten::softmax")
    script = {"endpoints": {"e": {"replies": [{"kind": "ok", "text": "hi",
                                               "usage": u(w, 1, 1)} for w in ("openai", "anthropic")]}}}

    async def both(server: Any) -> None:
        for wire in ("openai", "anthropic"):
            async with create(endpoint(server, wire, "e"), PRICES) as provider:
                call = await provider.complete(plain, model=MODEL, temperature=None,
                                               max_tokens=10, deadline_s=10)
                assert call.status is CallStatus.OK and call.tool_calls == ()

    with fake_server(script, tmp_path) as server:
        asyncio.run(both(server))
        bodies = [r["body"] for r in server.requests()]
    assert all("tools" not in b for b in bodies)
    assert bodies[1]["messages"] == [{"role": "user", "content": "Write softmax."}]


def test_stored_call_keeps_tools(tmp_path: Path) -> None:
    """A tool call, the tools offered and the conversation's tool messages survive the store,
    so a resumed agent trajectory replays its turns (the prompt compares equal) and a plain
    call's JSON has no tool keys (old rows and new ones read alike)."""
    from coordinator.call_json import llm_call_from_json, llm_call_to_json
    from coordinator.store import Store, TrajectoryKey

    call = LLMCall(provider="e", model=MODEL, prompt=HISTORY, status=CallStatus.OK, text="t",
                   tool_calls=(ToolCall("c1", "verify", "{}"),))
    store = Store(tmp_path / "s.sqlite")
    key = TrajectoryKey("aten::softmax", 1, "agent", MODEL, 0)
    store.add_llm_call("r", key, 1, call)
    back = store.llm_call("r", key, 1)
    store.close()
    assert back == call
    plain = LLMCall(provider="e", model=MODEL, prompt=Prompt(HISTORY.messages[:2], "t", "x"),
                    status=CallStatus.OK)
    data = llm_call_to_json(plain)
    assert "tool_calls" not in data and "tools" not in data["prompt"]
    assert all(set(m) == {"role", "content"} for m in data["prompt"]["messages"])
    assert llm_call_from_json(data) == plain
