"""LLM methods (``sample``, ``refine``), budgets and feedback against real processes.

The model is the scripted fake LLM server (a separate process on loopback, logging every request
body and what it billed); verdicts come from a real ``cpu`` device agent (the session fixture).
Every test reconciles the tokens the trajectory recorded with the server's billing log.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import generators
import operators
from coordinator.fleet import AgentEvaluator
from generators import Budget, EndReason, MethodError, Trajectory, TrajectoryContext
from generators.evaluation import Evaluator
from generators.extract import ExtractStatus
from generators.feedback import MAX_FEEDBACK_CHARS, feedback_message
from generators.llm import CallStatus, LLMCall, Prompt, Role, Usage
from generators.providers import EndpointConfig, ModelPrice, PriceTable, create
from operators.aten.add import NEGATIVE_NO_ALPHA
from protos.records import CaseResult, CaseTiming, Finding, Status, Verdict
from tests.generators.fake_llm_server import FakeServer, fake_server

ADD = operators.get("aten::add")
MODEL = "fake-coder"
PRICES = PriceTable({MODEL: ModelPrice(prompt=1.0, completion=4.0)})
ADD_PROMPT = Prompt(messages=(), template="t/v1", operator_id="aten::add")


def _fenced(source: str) -> str:
    return f"Here is the kernel.\n\n```python\n{source.strip()}\n```\n"


def _usage(wire: str, prompt: int, completion: int) -> dict[str, Any]:
    if wire == "openai":
        return {"prompt_tokens": prompt, "completion_tokens": completion,
                "total_tokens": prompt + completion}
    return {"input_tokens": prompt, "output_tokens": completion}


def _ok(wire: str, text: str, prompt: int = 1000, completion: int = 500) -> dict[str, Any]:
    return {"kind": "ok", "text": text, "usage": _usage(wire, prompt, completion)}


def _server_total(server: FakeServer, wire: str) -> Usage:
    total = Usage()
    for row in server.billing():
        u = row["usage"]
        if row["sent"] and u is not None:
            total = total + (Usage(u["prompt_tokens"], u["completion_tokens"]) if wire == "openai"
                             else Usage(u["input_tokens"], u["output_tokens"]))
    return total


class Recorder:
    """The ``record`` callback and an evaluator wrapper writing one shared event log."""

    def __init__(self, inner: Evaluator | None = None) -> None:
        self.inner = inner
        self.calls: list[LLMCall] = []
        self.events: list[tuple[str, str]] = []

    async def record(self, call: LLMCall) -> None:
        await asyncio.sleep(0)  # a real store awaits I/O here
        self.calls.append(call)
        self.events.append(("record", call.extra["turn"]))

    async def evaluate(self, operator_id: str, source: str) -> Verdict:
        # The text this source came from must have been recorded already.
        assert any(source.strip() in c.text for c in self.calls), "evaluated before recorded"
        self.events.append(("evaluate", str(len(self.calls))))
        assert self.inner is not None
        return await self.inner.evaluate(operator_id, source)


async def _run(server: FakeServer, wire: str, method: str, options: dict[str, Any], *,
               recorder: Recorder, evaluator: Evaluator | None = None, samples: int | None = None,
               **ctx_kw: Any) -> list[Trajectory]:
    m = generators.create_trajectory(method, **options)
    config = EndpointConfig(name=f"fake-{wire}", kind=wire,  # type: ignore[arg-type]
                            base_url=server.url("ep", wire), timeout_s=10, max_retries=0)
    async with create(config, PRICES) as provider:
        ctx = TrajectoryContext(provider=provider, model=MODEL, record=recorder.record,
                                platform="cpu", temperature=0.8, max_tokens=4096,
                                evaluator=evaluator, **ctx_kw)
        n = m.samples(ADD) if samples is None else samples
        return list(await asyncio.gather(*(m.run(ADD, s, ctx) for s in range(n))))


def _reconcile(trajs: list[Trajectory], recorder: Recorder, server: FakeServer, wire: str) -> None:
    recorded = [c for c in recorder.calls if c.usage is not None]
    ours = sum((c.usage for c in recorded if c.usage is not None), Usage())
    assert ours == sum((t.usage for t in trajs), Usage()) == _server_total(server, wire)
    assert sorted(c.response_id for c in recorder.calls) == \
        sorted(c.response_id for t in trajs for c in t.calls)
    assert sum(t.cost_usd for t in trajs) == pytest.approx(sum(c.cost_usd for c in recorder.calls))


# -- registry and option checks -----------------------------------------------------------------


def test_registry_lists_both_kinds_and_keeps_them_apart() -> None:
    assert {"reference", "replay", "sample", "refine"} <= set(generators.method_names())
    assert generators.method_kind("sample") == "trajectory"
    assert generators.method_kind("reference") == "candidate"
    with pytest.raises(MethodError, match="create_trajectory"):
        generators.create("refine")
    with pytest.raises(MethodError, match="candidate method"):
        generators.create_trajectory("reference")
    with pytest.raises(MethodError, match="turns must be an int >= 1"):
        generators.create_trajectory("refine", turns=0)
    with pytest.raises(MethodError, match="unexpected keyword"):
        generators.create_trajectory("sample", turns=3)
    assert generators.create_trajectory("sample", n=3).samples(ADD) == 3


# -- sample -------------------------------------------------------------------------------------


def test_sample_n2_gives_two_recorded_candidates(tmp_path: Path) -> None:
    script = {"endpoints": {"ep": {"replies": [_ok("openai", _fenced(ADD.solution), 900, 400),
                                               _ok("openai", _fenced(NEGATIVE_NO_ALPHA), 900, 450)]}}}
    rec = Recorder()
    with fake_server(script, tmp_path) as server:
        trajs = asyncio.run(_run(server, "openai", "sample", {"n": 2, "temperature": 1.0}, recorder=rec))
        server.wait_billing(2)
        requests = server.requests()
        _reconcile(trajs, rec, server, "openai")
    assert [t.end for t in trajs] == [EndReason.CANDIDATE] * 2
    assert {c.source.strip() for t in trajs for c in t.candidates} == \
        {ADD.solution.strip(), NEGATIVE_NO_ALPHA.strip()}
    assert all(len(t.steps) == 1 and t.steps[0].verdict is None for t in trajs)
    assert sorted(c.extra["sample"] for c in rec.calls) == ["0", "1"]
    assert all(c.extra["method"] == "sample" and c.extra["turn"] == "1" for c in rec.calls)
    # Both requests were the same first-turn prompt, at the method's temperature.
    assert len(requests) == 2
    assert requests[0]["body"]["messages"] == requests[1]["body"]["messages"]
    assert {r["body"]["temperature"] for r in requests} == {1.0}
    assert trajs[0].usage.total_tokens + trajs[1].usage.total_tokens == 900 * 2 + 400 + 450


def test_sample_extraction_failure_and_llm_error_end_the_trajectory(tmp_path: Path) -> None:
    script = {"endpoints": {"ep": {"replies": [
        {"kind": "truncated", "text": "```python\nimport triton\n@triton.jit\ndef _k(",
         "usage": _usage("anthropic", 700, 4096)},
        {"kind": "error", "status": 400, "body": '{"error": "bad model"}'}]}}}
    rec = Recorder()
    with fake_server(script, tmp_path) as server:
        async def go() -> list[Trajectory]:
            first = await _run(server, "anthropic", "sample", {}, recorder=rec)
            return first + await _run(server, "anthropic", "sample", {}, recorder=rec)

        trajs = asyncio.run(go())
        server.wait_billing(2)
        _reconcile(trajs, rec, server, "anthropic")
    cut, failed = trajs
    assert cut.end is EndReason.EXTRACTION_FAILED and cut.candidates == ()
    assert cut.steps[0].extraction is not None
    assert cut.steps[0].extraction.status is ExtractStatus.TRUNCATED
    assert cut.steps[0].call.status is CallStatus.TRUNCATED and cut.usage == Usage(700, 4096)
    assert failed.end is EndReason.LLM_ERROR and "CLIENT_ERROR" in failed.detail
    assert failed.steps[0].extraction is None and failed.usage == Usage()
    assert len(rec.calls) == 2


# -- refine with a real cpu agent -----------------------------------------------------------------


def test_refine_wrong_then_right_is_solved_on_turn_2(tmp_path: Path, cpu_agent: str) -> None:
    wrong, right = _fenced(NEGATIVE_NO_ALPHA), _fenced(ADD.solution)
    script = {"endpoints": {"ep": {"replies": [_ok("openai", wrong, 1200, 700),
                                               _ok("openai", right, 2600, 720)]}}}

    async def go(server: FakeServer) -> list[Trajectory]:
        async with AgentEvaluator(cpu_agent, timeout_s=120) as agent:
            rec.inner = agent
            return await _run(server, "openai", "refine", {"turns": 3}, recorder=rec, evaluator=rec)

    rec = Recorder()
    with fake_server(script, tmp_path) as server:
        (traj,) = asyncio.run(go(server))
        server.wait_billing(2)
        requests = server.requests()
        _reconcile([traj], rec, server, "openai")
    assert traj.end is EndReason.SOLVED, (traj.end, traj.detail)
    assert len(traj.steps) == 2 and len(requests) == 2
    first, second = traj.steps
    assert first.verdict is not None and first.verdict.status is Status.WRONG_ANSWER
    assert second.verdict is not None and second.verdict.status is Status.PASSED
    assert traj.best is not None and traj.best.source.strip() == ADD.solution.strip()
    # Persist before use: each call recorded before its candidate was evaluated.
    assert rec.events == [("record", "1"), ("evaluate", "1"), ("record", "2"), ("evaluate", "2")]
    # The second request is the first conversation + the reply + feedback with the mismatch.
    msgs = requests[1]["body"]["messages"]
    assert msgs[:-2] == requests[0]["body"]["messages"]
    assert msgs[-2] == {"role": "assistant", "content": wrong}
    assert msgs[-1]["role"] == "user" and msgs[-1]["content"] == first.feedback.content  # type: ignore[union-attr]
    failing = [c for c in first.verdict.cases if not c.passed and not c.hidden]
    assert failing, first.verdict.cases
    assert failing[0].mismatch.strip()[:200] in msgs[-1]["content"]
    assert f"case {failing[0].name}:" in msgs[-1]["content"]
    assert "WRONG_ANSWER" in msgs[-1]["content"] and "```python" in msgs[-1]["content"]
    for hidden in (c for c in first.verdict.cases if c.hidden and not c.passed):
        assert hidden.name not in msgs[-1]["content"]
        assert hidden.mismatch[:80] not in msgs[-1]["content"]
    # The stored prompt of call 2 is exactly what was sent.
    assert [m.content for m in second.call.prompt.messages] == [m["content"] for m in msgs]


def test_refine_feeds_back_no_code_and_cut_off_replies(tmp_path: Path, cpu_agent: str) -> None:
    script = {"endpoints": {"ep": {"replies": [
        _ok("openai", "I would use a Triton kernel with a 1D grid.", 1000, 20),
        {"kind": "truncated", "text": "```python\nimport torch\nimport triton\n\n@triton.jit\ndef _k(",
         "usage": _usage("openai", 1100, 4096)},
        _ok("openai", _fenced(ADD.solution), 1300, 700)]}}}

    async def go(server: FakeServer) -> list[Trajectory]:
        async with AgentEvaluator(cpu_agent, timeout_s=120) as agent:
            rec.inner = agent
            return await _run(server, "openai", "refine", {"turns": 3}, recorder=rec, evaluator=rec)

    rec = Recorder()
    with fake_server(script, tmp_path) as server:
        (traj,) = asyncio.run(go(server))
        server.wait_billing(3)
        requests = server.requests()
        _reconcile([traj], rec, server, "openai")
    assert traj.end is EndReason.SOLVED and len(traj.steps) == 3 and len(rec.calls) == 3
    assert [s.extraction.status for s in traj.steps if s.extraction] == \
        [ExtractStatus.NO_CODE, ExtractStatus.TRUNCATED, ExtractStatus.OK]
    assert traj.steps[0].verdict is None and traj.steps[1].candidate is None
    assert "no python code block found" in requests[1]["body"]["messages"][-1]["content"].lower()
    assert "cut off" in requests[2]["body"]["messages"][-1]["content"]
    assert rec.events[-2:] == [("record", "3"), ("evaluate", "3")]


def test_refine_ends_infra_error_when_the_agent_is_unreachable(tmp_path: Path) -> None:
    script = {"endpoints": {"ep": {"replies": [_ok("openai", _fenced(ADD.solution))]}}}

    async def go(server: FakeServer) -> list[Trajectory]:
        async with AgentEvaluator("127.0.0.1:9", timeout_s=5) as agent:
            return await _run(server, "openai", "refine", {"turns": 3}, recorder=rec, evaluator=agent)

    rec = Recorder()
    with fake_server(script, tmp_path) as server:
        (traj,) = asyncio.run(go(server))
        assert len(server.requests()) == 1
    assert traj.end is EndReason.INFRA_ERROR and "127.0.0.1:9" in traj.detail
    assert traj.steps[0].verdict is not None and traj.steps[0].feedback is None


# -- budgets ------------------------------------------------------------------------------------


def test_trajectory_budget_stops_before_the_second_call(tmp_path: Path) -> None:
    script = {"endpoints": {"ep": {"replies": [_ok("anthropic", "Let me think about it.", 1000, 500)],
                                   "default": _ok("anthropic", _fenced(ADD.solution))}}}
    rec = Recorder()
    with fake_server(script, tmp_path) as server:
        (traj,) = asyncio.run(_run(server, "anthropic", "refine", {"turns": 4}, recorder=rec,
                                   evaluator=rec, trajectory_max_tokens=1200))
        server.wait_billing(1)
        assert len(server.requests()) == 1
        _reconcile([traj], rec, server, "anthropic")
    assert traj.end is EndReason.BUDGET_SPENT
    assert traj.detail == "trajectory token budget of 1200 spent (1500 used)"
    assert [c.status for c in rec.calls] == [CallStatus.OK, CallStatus.BUDGET]
    unsent = traj.steps[-1].call
    assert unsent.usage is None and not unsent.billed and unsent.cost_usd == 0 and unsent.attempts == 0
    assert unsent.error == traj.detail and rec.events == [("record", "1"), ("record", "2")]


def test_sweep_budget_is_shared_by_trajectories(tmp_path: Path) -> None:
    script = {"endpoints": {"ep": {"default": _ok("openai", _fenced(ADD.solution), 1000, 500)}}}
    sweep = Budget(max_cost_usd=0.002, scope="sweep")  # one call costs $0.003
    rec = Recorder()
    with fake_server(script, tmp_path) as server:
        async def go() -> list[Trajectory]:
            out: list[Trajectory] = []
            for _ in range(3):
                out += await _run(server, "openai", "sample", {}, recorder=rec, sweep_budget=sweep)
            return out

        trajs = asyncio.run(go())
        server.wait_billing(1)
        assert len(server.requests()) == 1
        _reconcile(trajs, rec, server, "openai")
    assert [t.end for t in trajs] == [EndReason.CANDIDATE, EndReason.BUDGET_SPENT,
                                      EndReason.BUDGET_SPENT]
    assert trajs[1].detail == "sweep cost budget of $0.0020 spent ($0.0030 used)"
    assert sweep.used_tokens == 1500 and sweep.charged_calls == 1


def test_budget_checks_and_messages() -> None:
    b = Budget(max_tokens=20000)
    assert b.check() is None
    b.charge(LLMCall("p", "m", ADD_PROMPT, CallStatus.OK, usage=Usage(20000, 480)))
    assert b.check() == "trajectory token budget of 20000 spent (20480 used)"
    b.charge(LLMCall("p", "m", ADD_PROMPT, CallStatus.SERVER_ERROR))  # no usage: not billed
    assert b.used_tokens == 20480 and b.charged_calls == 1
    assert Budget().check() is None
    with pytest.raises(ValueError, match="max_tokens"):
        Budget(max_tokens=-1)
    with pytest.raises(ValueError, match="max_cost_usd"):
        Budget(max_cost_usd=float("nan"), scope="sweep")


# -- feedback -----------------------------------------------------------------------------------

def _verdict(status: Status, **kw: Any) -> Verdict:
    return Verdict(status=status, operator_id="aten::add", operator_version=1, candidate_hash="h", **kw)


def test_feedback_hides_hidden_cases_and_is_bounded() -> None:
    secret = "output: 7 of 4096 elements differ (tolerance ...); first: at [3, 17]: got 1.5, expected 2.5"
    cases = tuple(CaseResult(f"public_{i}", False, mismatch="output: 3 of 10 elements differ " + "x" * 2000)
                  for i in range(6)) + (CaseResult("hidden#0", False, True, secret),
                                        CaseResult("hidden#1", False, True, "input argument 'self' was "
                                                   "modified; it must stay intact"),
                                        CaseResult("ok", True))
    msg = feedback_message(_verdict(Status.WRONG_ANSWER, cases=cases,
                                    message=f"8 of 9 cases wrong; first hidden#0: {secret}"))
    assert msg.role is Role.USER and len(msg.content) <= MAX_FEEDBACK_CHARS
    text = msg.content
    assert "8 of 9 correctness cases failed (6 public, 2 hidden)" in text
    assert "case public_0:" in text and "... and 3 more public cases failed" in text
    assert "a hidden case failed: values differ from the reference beyond tolerance" in text
    assert "a hidden case failed: an input that must stay intact was modified" in text
    assert "hidden#0" not in text and "[3, 17]" not in text and "4096" not in text
    assert text.endswith("no other code blocks.") and "```python" in text
    # A hidden case's details quoted in another status's message are withheld too.
    text = feedback_message(_verdict(Status.RUNTIME_ERROR, cases=cases[6:7],
                                     message=f"case hidden#0 failed: {secret}" + "m" * 5000)).content
    assert "[3, 17]" not in text and "[a hidden case: values differ" in text
    long = feedback_message(_verdict(Status.RUNTIME_ERROR, message="m" * 9000, log="l" * 9000))
    assert len(long.content) <= MAX_FEEDBACK_CHARS and long.content.endswith("no other code blocks.")


def test_feedback_for_errors_findings_and_passes() -> None:
    log = "noise\n" * 2000 + "Traceback ...\nValueError: BLOCK must be a power of 2"
    text = feedback_message(_verdict(Status.COMPILE_ERROR, message="kernel failed to compile",
                                     log=log)).content
    assert "COMPILE_ERROR" in text and "kernel failed to compile" in text
    assert text.count("noise") < 500 and "ValueError: BLOCK must be a power of 2" in text
    evidence = "case c1: outputs are still right with the candidate's Triton kernels disabled"
    text = feedback_message(_verdict(Status.CHEAT_DETECTED, findings=(
        Finding("kernels-off", "still-correct", evidence),))).content
    assert evidence in text and "[kernels-off/still-correct]" in text
    timed = (CaseTiming("large", True, 80.0, samples=50, baseline_median_us=100.0, speedup=1.25,
                        sol_percent=41.5), CaseTiming("tiny", False))
    text = feedback_message(_verdict(Status.PASSED, timings=timed)).content
    assert "case large:" in text and "1.25x" in text and "41.5%" in text and "tiny" not in text
    assert "faster" in text and text.rstrip().endswith("no other code blocks.")
    text = feedback_message(_verdict(Status.PASSED, timings=(CaseTiming("a", False),))).content
    assert "not meaningful" in text


def test_record_failure_stops_before_the_text_is_used(tmp_path: Path) -> None:
    script = {"endpoints": {"ep": {"default": _ok("openai", _fenced(ADD.solution))}}}
    evaluated: list[str] = []

    class Never:
        async def evaluate(self, operator_id: str, source: str) -> Verdict:
            evaluated.append(source)
            raise AssertionError("evaluated a candidate whose call was not stored")

    def broken_store(call: LLMCall) -> None:
        raise OSError("disk full")

    async def go(server: FakeServer) -> None:
        config = EndpointConfig(name="fake", kind="openai", base_url=server.url("ep", "openai"),
                                max_retries=0)
        async with create(config, PRICES) as provider:
            ctx = TrajectoryContext(provider=provider, model=MODEL, record=broken_store,
                                    platform="cpu", evaluator=Never())
            await generators.create_trajectory("refine").run(ADD, 0, ctx)

    with fake_server(script, tmp_path) as server, pytest.raises(OSError, match="disk full"):
        asyncio.run(go(server))
    assert evaluated == []


def test_sample_with_an_evaluator_judges_its_candidate(tmp_path: Path, cpu_agent: str) -> None:
    script = {"endpoints": {"ep": {"replies": [_ok("openai", _fenced(ADD.solution)),
                                               _ok("openai", _fenced(NEGATIVE_NO_ALPHA))]}}}

    async def go(server: FakeServer) -> list[Trajectory]:
        async with AgentEvaluator(cpu_agent, timeout_s=120) as agent:
            rec.inner = agent
            out: list[Trajectory] = []
            for _ in range(2):
                out += await _run(server, "openai", "sample", {}, recorder=rec, evaluator=rec)
            return out

    rec = Recorder()
    with fake_server(script, tmp_path) as server:
        trajs = asyncio.run(go(server))
        server.wait_billing(2)
        _reconcile(trajs, rec, server, "openai")
    assert [t.end for t in trajs] == [EndReason.SOLVED, EndReason.TURNS_EXHAUSTED]
    assert trajs[1].detail == "WRONG_ANSWER" and trajs[1].steps[0].feedback is None


class TimedEvaluator:
    """Verdicts as a GPU agent gives them (meaningful timings), which a cpu agent cannot: PASSED
    with the scripted speedups in turn."""

    def __init__(self, speedups: list[float]) -> None:
        self.speedups = speedups

    async def evaluate(self, operator_id: str, source: str) -> Verdict:
        s = self.speedups.pop(0)
        return _verdict(Status.PASSED, timings=(
            CaseTiming("big", True, 100.0 / s, samples=30, baseline_median_us=100.0, speedup=s,
                       sol_percent=30.0 * s),))


@pytest.mark.parametrize("speedups, end, turns_used", [
    ([1.1, 2.0], EndReason.TARGET_REACHED, 2),
    ([1.3, 1.2], EndReason.TURNS_EXHAUSTED, 2),
])
def test_refine_asks_for_speed_until_the_target(tmp_path: Path, speedups: list[float], end: EndReason,
                                                turns_used: int) -> None:
    script = {"endpoints": {"ep": {"default": _ok("openai", _fenced(ADD.solution))}}}
    rec = Recorder(TimedEvaluator(list(speedups)))
    with fake_server(script, tmp_path) as server:
        (traj,) = asyncio.run(_run(server, "openai", "refine", {"turns": 2, "target_speedup": 1.5},
                                   recorder=rec, evaluator=rec))
        requests = server.requests()
        _reconcile([traj], rec, server, "openai")
    assert traj.end is end and len(traj.steps) == turns_used == len(requests)
    second = requests[1]["body"]["messages"][-1]["content"]
    assert "PASSED" in second and f"speedup {speedups[0]:.2f}x" in second
    assert "faster" in second and "% of speed-of-light" in second
    assert traj.best is not None and traj.best.label == ("turn 2" if speedups[1] > speedups[0] else "turn 1")
