"""The ``agent`` method against the scripted LLM server, in both wire formats.

The model's tool calls come from the script; ``verify`` goes to a scripted public-case
verifier that checks the kernel it is asked about was recorded first (persist before use).
Every way a model can misbehave — no tool call, an unknown tool, arguments that do not fit, a
loop past each budget — ends with a named end reason, and the tokens recorded equal the
server's billing.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import generators
import operators
from generators import EndReason, MethodError, Trajectory, TrajectoryContext
from generators.llm import CallStatus, LLMCall, Role, Usage
from generators.methods.agent import NUDGE, TOOL_NAMES
from generators.providers import EndpointConfig, ModelPrice, PriceTable, create
from protos.records import CaseResult, Status, Verdict, candidate_id
from tests.generators.fake_llm_server import FakeServer, fake_server

ADD = operators.get("aten::add")
MODEL = "fake-agent"
PRICES = PriceTable({MODEL: ModelPrice(prompt=1.0, completion=4.0)})
GOOD = ADD.solution
BAD = GOOD + "\n# BUG\n"


def _usage(wire: str, prompt: int, completion: int) -> dict[str, Any]:
    if wire == "openai":
        return {"prompt_tokens": prompt, "completion_tokens": completion}
    return {"input_tokens": prompt, "output_tokens": completion}


def _reply(wire: str, *calls: tuple[str, Any], text: str = "", tokens: int = 100,
           **kw: Any) -> dict[str, Any]:
    """A reply asking for ``calls`` ((name, arguments) pairs)."""
    tool_calls = [{"id": f"c{i}-{name}", "name": name, "arguments": args}
                  for i, (name, args) in enumerate(calls)]
    return {"kind": "ok", "text": text, "tool_calls": tool_calls,
            "usage": _usage(wire, tokens, tokens // 10), **kw}


def _write(source: str) -> tuple[str, Any]:
    return ("write_kernel", {"source": source})


class Verifier:
    """A public-case verifier: WRONG_ANSWER on a public case for a kernel marked BUG, else
    PASSED; it checks the kernel came from a recorded call."""

    def __init__(self, delay_s: float = 0.0, status: Status | None = None) -> None:
        self.calls: list[LLMCall] = []
        self.sources: list[str] = []
        self.delay_s = delay_s
        self.status = status

    async def record(self, call: LLMCall) -> None:
        await asyncio.sleep(0)
        self.calls.append(call)

    async def evaluate(self, operator_id: str, source: str) -> Verdict:
        assert operator_id == ADD.id
        written = [json.loads(c.arguments).get("source") for call in self.calls
                   for c in call.tool_calls if c.name == "write_kernel"]
        assert source in written, "verified before the call that wrote it was recorded"
        self.sources.append(source)
        await asyncio.sleep(self.delay_s)
        status = self.status or (Status.WRONG_ANSWER if "BUG" in source else Status.PASSED)
        cases = (CaseResult("small", False, False, "3 of 64 elements differ (max abs error 0.5)"),) \
            if status is Status.WRONG_ANSWER else (CaseResult("small", False, True),)
        return Verdict(status=status, operator_id=operator_id, operator_version=ADD.version,
                       candidate_hash=candidate_id(source), message="scripted", cases=cases)


async def _agent(server: FakeServer, wire: str, verifier: Verifier, stream: bool = False,
                 **options: Any) -> Trajectory:
    method = generators.create_trajectory("agent", **options)
    config = EndpointConfig(name=f"fake-{wire}", kind=wire,  # type: ignore[arg-type]
                            base_url=server.url("ep", wire), timeout_s=10, max_retries=0,
                            stream=stream)
    async with create(config, PRICES) as provider:
        ctx = TrajectoryContext(provider=provider, model=MODEL, record=verifier.record,
                                platform="cpu", verifier=verifier)
        return await method.run(ADD, 0, ctx)


def _play(tmp_path: Path, wire: str, replies: list[dict[str, Any]], verifier: Verifier | None = None,
          stream: bool = False, **options: Any) -> tuple[Trajectory, Verifier, list[dict[str, Any]]]:
    verifier = verifier or Verifier()
    script = {"endpoints": {"ep": {"replies": replies}}}
    with fake_server(script, tmp_path) as server:
        traj = asyncio.run(_agent(server, wire, verifier, stream, **options))
        billed = server.wait_billing(len(traj.calls))
        requests = server.requests()
    total = Usage()
    for row in billed:
        u = row["usage"]
        if not row["sent"] or u is None:
            continue
        total = total + (Usage(u["prompt_tokens"], u["completion_tokens"]) if wire == "openai"
                         else Usage(u["input_tokens"], u["output_tokens"]))
    assert traj.usage == total  # every billed token recorded
    assert [c.response_id for c in verifier.calls] == [c.response_id for c in traj.calls]
    return traj, verifier, requests


def _tool_results(request: dict[str, Any]) -> list[str]:
    """The tool results a request carries, in either wire format."""
    out = []
    for m in request["body"]["messages"]:
        if m["role"] == "tool":
            out.append(m["content"])
        elif isinstance(m["content"], list):
            out += [b["content"] for b in m["content"] if b.get("type") == "tool_result"]
    return out


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_write_verify_fix_submit(tmp_path: Path, wire: str, stream: bool) -> None:
    replies = [
        _reply(wire, ("show_problem", {})),
        _reply(wire, _write(BAD), ("verify", {}), text="First try."),
        _reply(wire, _write(GOOD), ("verify", {}), ("submit", {}), tokens=300),
    ]
    traj, verifier, requests = _play(tmp_path, wire, replies, stream=stream)
    assert traj.end is EndReason.CANDIDATE and traj.detail == "submitted"
    assert traj.final == GOOD and traj.best is not None and traj.best.source == GOOD
    assert verifier.sources == [BAD, GOOD]
    assert [t.verdict.status for t in traj.verifications if t.verdict] == \
        [Status.WRONG_ANSWER, Status.PASSED]
    assert all(s.verdict is None for s in traj.steps)  # public verdicts are never a score
    assert len(requests) == 3
    # what went back to the model: the problem, then the public-case feedback
    first = _tool_results(requests[1])
    second = _tool_results(requests[2])[len(first):]
    assert "aten::add" in first[0] and "add(" in first[0]
    assert second[0].startswith("kernel.py written")
    assert "WRONG_ANSWER" in second[1] and "3 of 64 elements differ" in second[1]
    assert "Public cases only" in second[1] and "9 verify calls left" in second[1]
    body = requests[0]["body"]
    names = ([t["function"]["name"] for t in body["tools"]] if wire == "openai"
             else [t["name"] for t in body["tools"]])
    assert names == list(TOOL_NAMES)
    assert all(c.extra["method"] == "agent" for c in traj.calls)
    assert [c.extra["turn"] for c in traj.calls] == ["1", "2", "3"]


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_model_that_never_calls_a_tool(tmp_path: Path, wire: str) -> None:
    text = {"kind": "ok", "text": "```python\nprint(1)\n```", "usage": _usage(wire, 50, 5)}
    traj, verifier, requests = _play(tmp_path, wire, [text, text, text])
    assert traj.end is EndReason.EXTRACTION_FAILED
    assert "no kernel written" in traj.detail
    assert len(traj.calls) == 2 and traj.final is None and verifier.sources == []
    last = requests[1]["body"]["messages"][-1]
    assert NUDGE in json.dumps(last["content"])


def test_reply_without_tool_call_after_a_kernel_ends_the_turn(tmp_path: Path) -> None:
    replies = [_reply("openai", _write(GOOD)),
               {"kind": "ok", "text": "Done.", "usage": _usage("openai", 50, 5)}]
    traj, _, _ = _play(tmp_path, "openai", replies)
    assert traj.end is EndReason.CANDIDATE and "without calling submit" in traj.detail
    assert traj.final == GOOD


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_unknown_tool(tmp_path: Path, wire: str) -> None:
    replies = [_reply(wire, ("bash", {"cmd": "ls"}))] * 4
    traj, _, requests = _play(tmp_path, wire, replies)
    assert traj.end is EndReason.AGENT_ERROR
    assert len(traj.calls) == 3 and "unknown tool 'bash'" in traj.detail
    assert "unknown tool 'bash'" in _tool_results(requests[1])[0]


@pytest.mark.parametrize("wire,args", [
    ("openai", '{"source": "unterminated'),
    ("openai", "[1, 2]"),
    ("anthropic", {"src": GOOD}),
    ("anthropic", {"source": ""}),
])
def test_malformed_arguments(tmp_path: Path, wire: str, args: Any) -> None:
    replies = [_reply(wire, ("write_kernel", args))] * 3
    traj, _, requests = _play(tmp_path, wire, replies)
    assert traj.end is EndReason.AGENT_ERROR and traj.final is None
    assert all(t.refused for s in traj.steps for t in s.tools)
    assert "write_kernel:" in _tool_results(requests[1])[0]


def test_a_good_call_resets_the_refusal_count(tmp_path: Path) -> None:
    bad = _reply("openai", ("nope", {}))
    replies = [bad, bad, _reply("openai", _write(GOOD)), bad, bad, _reply("openai", ("submit", {}))]
    traj, _, _ = _play(tmp_path, "openai", replies)
    assert traj.end is EndReason.CANDIDATE and len(traj.calls) == 6


def test_verify_past_its_limit(tmp_path: Path) -> None:
    replies = [_reply("openai", _write(BAD), ("verify", {}))] + [_reply("openai", ("verify", {}))] * 5
    traj, verifier, requests = _play(tmp_path, "openai", replies, max_verify_calls=1)
    assert verifier.sources == [BAD]  # the refused calls never reached the verifier
    assert len(traj.verifications) == 1
    assert traj.end is EndReason.AGENT_ERROR and "No verify calls left" in traj.detail
    assert "0 verify calls left" in _tool_results(requests[1])[1]
    assert traj.final == BAD  # still scored by the sweep


def test_turns_run_out(tmp_path: Path) -> None:
    replies = [_reply("openai", _write(BAD))] + [_reply("openai", ("show_problem", {}))] * 5
    traj, _, _ = _play(tmp_path, "openai", replies, turns=3)
    assert traj.end is EndReason.TURNS_EXHAUSTED and len(traj.calls) == 3
    assert traj.final == BAD


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_token_budget(tmp_path: Path, wire: str) -> None:
    replies = [_reply(wire, _write(BAD), tokens=1000)] + [_reply(wire, ("show_problem", {}),
                                                                 tokens=1000)] * 5
    traj, _, requests = _play(tmp_path, wire, replies, max_tokens=2000)
    assert traj.end is EndReason.BUDGET_SPENT and "2000" in traj.detail
    assert len(requests) == 2 and traj.calls[-1].status is CallStatus.BUDGET
    assert traj.final == BAD


def test_time_limit_counts_the_agents_time_not_the_checks(tmp_path: Path) -> None:
    slow = [_reply("openai", ("show_problem", {}), delay_s=0.3)] * 5
    traj, _, _ = _play(tmp_path, "openai", [_reply("openai", _write(BAD))] + slow,
                       time_limit_s=0.5)
    assert traj.end is EndReason.TIME_LIMIT and traj.final == BAD
    assert 2 <= len(traj.calls) <= 3
    # a check that takes longer than the whole limit does not use it up
    replies = [_reply("openai", _write(GOOD), ("verify", {})), _reply("openai", ("submit", {}))]
    traj, verifier, _ = _play(tmp_path / "x" if (tmp_path / "x").mkdir() is None else tmp_path,
                              "openai", replies, Verifier(delay_s=1.0), time_limit_s=0.8)
    assert traj.end is EndReason.CANDIDATE and verifier.sources == [GOOD]


def test_a_check_that_cannot_run_is_infra_error(tmp_path: Path) -> None:
    replies = [_reply("openai", _write(GOOD), ("verify", {}), ("submit", {}))]
    traj, _, _ = _play(tmp_path, "openai", replies, Verifier(status=Status.INFRA_ERROR))
    assert traj.end is EndReason.INFRA_ERROR and traj.detail == "scripted"


def test_options_are_checked_by_name() -> None:
    with pytest.raises(MethodError, match="max_verify_calls"):
        generators.create_trajectory("agent", max_verify_calls=-1)
    with pytest.raises(MethodError, match="time_limit_s"):
        generators.create_trajectory("agent", time_limit_s=0)
    with pytest.raises(MethodError, match="turns"):
        generators.create_trajectory("agent", turns=0)
    with pytest.raises(MethodError, match="max_tokens"):
        generators.create_trajectory("agent", max_tokens=0)
    with pytest.raises(MethodError, match="unexpected keyword"):
        generators.create_trajectory("agent", tools=["bash"])
    assert generators.method_kind("agent") == "trajectory"


def test_without_a_verifier_it_says_so() -> None:
    method = generators.create_trajectory("agent")

    async def go() -> None:
        ctx = TrajectoryContext(provider=None, model=MODEL, record=lambda c: None)  # type: ignore[arg-type]
        await method.run(ADD, 0, ctx)

    with pytest.raises(MethodError, match="verifier"):
        asyncio.run(go())
    assert Role.TOOL.value == "tool"


def test_docs_agent_spec_block_parses() -> None:
    import re

    from coordinator.sweep_spec import SweepSpecError, parse_spec

    doc = (Path(__file__).resolve().parents[2] / "docs" / "agents.md").read_text(encoding="utf-8")
    block, *cli_blocks = re.findall(r"```toml\n(.*?)```", doc, re.S)
    spec = parse_spec(block, "docs/agents.md")
    import tomllib

    from generators.agent_cli.logs import LOG_FORMATS

    assert len(cli_blocks) == 3  # agent-cli: Claude Code, Codex, OpenCode (CLIs not installed here)
    for cli in cli_blocks:
        (entry,) = tomllib.loads(cli)["methods"]
        assert entry["name"] == "agent-cli" and entry["log_format"] in LOG_FORMATS
    agent = spec.method("agent").instance
    assert repr(agent) == ("AgentMethod(turns=40, max_verify_calls=10, time_limit_s=3600.0, "
                           "max_tokens=2000000, n=2)")
    assert {m.name for m in spec.models} == {"sonnet", "gpt"}
    with pytest.raises(SweepSpecError, match=r"methods\[1\]\.max_verify_calls"):
        parse_spec(block.replace("max_verify_calls = 10", "max_verify_calls = -1"), "x.toml")
    with pytest.raises(SweepSpecError, match=r"methods\[1\]\.tools"):
        parse_spec(block.replace("turns = 40", 'turns = 40\ntools = ["bash"]'), "x.toml")


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_a_stored_agent_trajectory_replays_for_zero_tokens(tmp_path: Path, wire: str) -> None:
    """Tool calls, tool results and the tools offered are stored with each call, so running a
    finished trajectory again (a resume) sends nothing: every turn's prompt equals the stored
    one and is answered from the store."""
    from coordinator.recorded_provider import RecordedProvider
    from coordinator.store import Store, TrajectoryKey

    replies = [_reply(wire, ("show_problem", {})), _reply(wire, _write(BAD), ("verify", {})),
               _reply(wire, _write(GOOD), ("verify", {})), _reply(wire, ("submit", {}))]
    store = Store(tmp_path / "kgb.sqlite")
    key = TrajectoryKey(ADD.id, ADD.version, "agent", MODEL, 0)

    async def once(server: FakeServer) -> Trajectory:
        config = EndpointConfig(name=f"fake-{wire}", kind=wire,  # type: ignore[arg-type]
                                base_url=server.url("ep", wire), timeout_s=10, max_retries=0)
        verifier = Verifier()
        async with create(config, PRICES) as provider:
            rp = RecordedProvider(provider, store, "run", key)

            async def record(call: LLMCall) -> None:
                await rp.record(call)
                await verifier.record(call)

            ctx = TrajectoryContext(provider=rp, model=MODEL, record=record, platform="cpu",
                                    verifier=verifier)
            traj = await generators.create_trajectory("agent").run(ADD, 0, ctx)
            assert (rp.sent, rp.replayed) in ((4, 0), (0, 4))
            return traj

    with fake_server({"endpoints": {"ep": {"replies": replies}}}, tmp_path) as server:
        first = asyncio.run(once(server))
        second = asyncio.run(once(server))
        assert len(server.requests()) == 4
    store.close()
    assert first.end is second.end is EndReason.CANDIDATE and first.final == second.final == GOOD
    assert [c.tool_calls for c in first.calls] == [c.tool_calls for c in second.calls]
    assert all(c.extra.get("replayed") == "1" for c in second.calls)
