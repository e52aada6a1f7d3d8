"""``sample`` with ``rounds`` (the paper's sequential Pass@K) against the scripted fake LLM server.

Round 1 at temperature 0, later rounds at ``round_temperature``, only a problem still failing
sampled again, the last verdict fed back or not, every call recorded before its candidate is
judged. Verdicts come from a scripted evaluator (a candidate passes when it is the problem's
reference solution), so each test knows its answers; the requests are the ones the server saw.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import generators
import operators
from generators import EndReason, MethodError, Trajectory, TrajectoryContext
from generators.evaluation import Evaluator, infra_verdict
from generators.llm import CallStatus
from generators.providers import EndpointConfig, create
from operators.spec import OperatorSpec
from protos.records import CaseResult, Status, Verdict
from tests.generators.fake_llm_server import FakeServer, fake_server
from tests.generators.test_methods_llm import MODEL, PRICES, Recorder, _fenced, _ok, _reconcile

ADD = operators.get("aten::add")
ACOSH = operators.get("aten::acosh")
WRONG = "output: 3 of 10 elements differ (atol 1e-05); first: at [2]: got 1.5, expected 2.5"


class Judge:
    """A candidate passes when it is its problem's reference solution; anything else is a
    WRONG_ANSWER on one public case (``infra``: every verdict is the system's failure)."""

    def __init__(self, infra: bool = False) -> None:
        self.infra = infra

    async def evaluate(self, operator_id: str, source: str) -> Verdict:
        if self.infra:
            return infra_verdict(operator_id, source, "agent unreachable")
        if source.strip() == operators.get(operator_id).solution.strip():
            return Verdict(Status.PASSED, operator_id, 1, "h")
        return Verdict(Status.WRONG_ANSWER, operator_id, 1, "h", message="1 of 1 cases wrong",
                       cases=(CaseResult("public_0", False, mismatch=WRONG),))


def _wrong(spec: OperatorSpec, tag: str) -> str:
    """A candidate of ``spec`` that defines every entry point and is not its solution."""
    return _fenced(f"# attempt {tag}\n{spec.solution}")


async def _trajectories(server: FakeServer, options: dict[str, Any], specs: list[OperatorSpec],
                        rec: Recorder, evaluator: Evaluator | None) -> list[Trajectory]:
    method = generators.create_trajectory("sample", **options)
    config = EndpointConfig(name="fake-openai", kind="openai", base_url=server.url("ep", "openai"),
                            timeout_s=10, max_retries=0)
    async with create(config, PRICES) as provider:
        ctx = TrajectoryContext(provider=provider, model=MODEL, record=rec.record, platform="cpu",
                                temperature=0.8, max_tokens=4096, evaluator=evaluator)
        return list(await asyncio.gather(*(method.run(s, 0, ctx) for s in specs)))


def _go(tmp_path: Path, script: dict[str, Any], options: dict[str, Any], specs: list[OperatorSpec],
        evaluator: Evaluator | None = None) -> tuple[list[Trajectory], list[dict[str, Any]], Recorder]:
    rec = Recorder(evaluator or Judge())
    tmp_path.mkdir(exist_ok=True)
    with fake_server({"endpoints": {"ep": script}}, tmp_path) as server:
        trajs = asyncio.run(_trajectories(server, options, specs, rec, rec))
        server.wait_billing(sum(len(t.steps) for t in trajs))
        requests = server.requests()
        _reconcile(trajs, rec, server, "openai")
    return trajs, requests, rec


def _of(requests: list[dict[str, Any]], spec: OperatorSpec) -> list[dict[str, Any]]:
    """The request bodies that asked for ``spec``, in the order they were answered."""
    return [r["body"] for r in requests
            if f"Problem `{spec.id}`" in " ".join(m["content"] for m in r["body"]["messages"])]


def test_round_one_at_zero_later_rounds_at_round_temperature_only_for_failing_problems(
        tmp_path: Path) -> None:
    script = {"routes": {"aten::add|0.0|1": [_ok("openai", _fenced(ADD.solution))],
                         "aten::acosh|0.0|1": [_ok("openai", _wrong(ACOSH, "greedy"))],
                         "aten::acosh|0.7|1": [_ok("openai", _fenced(ACOSH.solution))]}}
    (add, acosh), requests, rec = _go(tmp_path, script, {"rounds": 3, "round_temperature": 0.7},
                                      [ADD, ACOSH])
    assert len(requests) == 3                       # add once, acosh twice, nobody a third time
    assert [b["temperature"] for b in _of(requests, ADD)] == [0.0]
    assert [b["temperature"] for b in _of(requests, ACOSH)] == [0.0, 0.7]
    assert add.end is EndReason.SOLVED and [s.turn for s in add.steps] == [1]
    assert acosh.end is EndReason.SOLVED and [s.turn for s in acosh.steps] == [1, 2]
    assert [s.verdict.status for s in acosh.steps if s.verdict] == [Status.WRONG_ANSWER,
                                                                   Status.PASSED]
    # What was recorded is what was sent: the temperature and the round as the turn.
    assert sorted((c.prompt.operator_id, c.extra["turn"], c.temperature) for c in rec.calls) == [
        ("aten::acosh", "1", 0.0), ("aten::acosh", "2", 0.7), ("aten::add", "1", 0.0)]
    # Persist before use: the recorder's evaluate asserts its source was recorded already.
    assert [e for e, _ in rec.events].count("evaluate") == 3
    # Without feedback each round is the problem's prompt afresh.
    first, second = _of(requests, ACOSH)
    assert second["messages"] == first["messages"] and acosh.steps[0].feedback is None


def test_a_problem_that_never_passes_uses_every_round(tmp_path: Path) -> None:
    script = {"default": _ok("openai", _wrong(ADD, "again"))}
    (traj,), requests, _ = _go(tmp_path, script, {"rounds": 3, "temperature": 0.5}, [ADD])
    assert traj.end is EndReason.TURNS_EXHAUSTED and traj.detail == "3 rounds used"
    assert [s.turn for s in traj.steps] == [1, 2, 3] and len(requests) == 3
    # round_temperature unset: the method's temperature for rounds 2 on; round 1 still at 0
    assert [b["temperature"] for b in _of(requests, ADD)] == [0.0, 0.5, 0.5]
    assert all(s.feedback is None for s in traj.steps)


def test_feedback_sends_the_last_verdict_only(tmp_path: Path) -> None:
    replies = [_ok("openai", _wrong(ADD, "one")), _ok("openai", "I would tile it by 1024."),
               _ok("openai", _wrong(ADD, "three")), _ok("openai", _fenced(ADD.solution))]
    (traj,), requests, _ = _go(tmp_path, {"replies": replies},
                               {"rounds": 4, "round_temperature": 0.3, "feedback": True}, [ADD])
    assert traj.end is EndReason.SOLVED and len(traj.steps) == 4 == len(requests)
    base = requests[0]["body"]["messages"]
    assert [r["body"]["temperature"] for r in requests] == [0.0, 0.3, 0.3, 0.3]
    for i, r in enumerate(requests[1:]):
        msgs = r["body"]["messages"]
        # the problem's prompt, the previous round's reply and the feedback on it: nothing older
        assert msgs[:-2] == base and len(msgs) == len(base) + 2
        assert msgs[-2] == {"role": "assistant", "content": replies[i]["text"]}
        assert msgs[-1]["content"] == traj.steps[i].feedback.content  # type: ignore[union-attr]
    assert "WRONG_ANSWER" in requests[1]["body"]["messages"][-1]["content"]
    assert WRONG[:40] in requests[1]["body"]["messages"][-1]["content"]
    assert "no python code block" in requests[2]["body"]["messages"][-1]["content"].lower()
    assert traj.steps[-1].feedback is None


def test_feedback_off_sends_the_same_prompt_each_round(tmp_path: Path) -> None:
    replies = [_ok("openai", _wrong(ADD, "one")), _ok("openai", "I would tile it by 1024."),
               _ok("openai", _fenced(ADD.solution))]
    (traj,), requests, _ = _go(tmp_path, {"replies": replies}, {"rounds": 3}, [ADD])
    assert traj.end is EndReason.SOLVED and len(requests) == 3
    assert all(r["body"]["messages"] == requests[0]["body"]["messages"] for r in requests)
    assert all(s.feedback is None for s in traj.steps)
    # round_temperature and temperature unset: rounds 2 on at the context's (the model's) 0.8
    assert [r["body"]["temperature"] for r in requests] == [0.0, 0.8, 0.8]


def test_the_last_round_gets_no_feedback_and_a_pass_or_infra_error_stops(tmp_path: Path) -> None:
    (traj,), requests, _ = _go(tmp_path / "a", {"default": _ok("openai", _wrong(ADD, "x"))},
                               {"rounds": 2, "feedback": True}, [ADD])
    assert traj.end is EndReason.TURNS_EXHAUSTED and len(requests) == 2
    assert traj.steps[0].feedback is not None and traj.steps[1].feedback is None
    (traj,), requests, _ = _go(tmp_path / "b", {"default": _ok("openai", _wrong(ADD, "x"))},
                               {"rounds": 3, "feedback": True}, [ADD], Judge(infra=True))
    assert traj.end is EndReason.INFRA_ERROR and traj.detail == "agent unreachable"
    assert len(requests) == 1 and traj.steps[0].feedback is None


def test_a_failed_call_in_a_later_round_ends_the_trajectory(tmp_path: Path) -> None:
    script = {"replies": [_ok("openai", _wrong(ADD, "x")),
                          {"kind": "error", "status": 400, "body": '{"error": "bad model"}'}]}
    (traj,), requests, _ = _go(tmp_path, script, {"rounds": 3}, [ADD])
    assert traj.end is EndReason.LLM_ERROR and "CLIENT_ERROR" in traj.detail
    assert len(requests) == 2 and traj.steps[-1].call.status is CallStatus.CLIENT_ERROR


def test_rounds_1_is_the_single_sample_of_before(tmp_path: Path) -> None:
    rec = Recorder()
    with fake_server({"endpoints": {"ep": {"default": _ok("openai", _fenced(ADD.solution))}}},
                     tmp_path) as server:
        plain = asyncio.run(_trajectories(server, {}, [ADD], rec, None))
        one = asyncio.run(_trajectories(server, {"rounds": 1}, [ADD], rec, None))
        requests = server.requests()
    assert [t.end for t in plain + one] == [EndReason.CANDIDATE] * 2
    assert requests[0]["body"] == requests[1]["body"] and requests[0]["body"]["temperature"] == 0.8
    assert not generators.create_trajectory("sample", rounds=1).needs_evaluator
    assert generators.create_trajectory("sample", rounds=2).needs_evaluator
    assert repr(generators.create_trajectory("sample", rounds=1)) == \
        "SampleMethod(n=1, temperature=None)"


def test_rounds_without_an_evaluator_is_refused_before_any_call(tmp_path: Path) -> None:
    rec = Recorder()
    with fake_server({"endpoints": {"ep": {"default": _ok("openai", "x")}}}, tmp_path) as server:
        with pytest.raises(MethodError, match="rounds > 1 needs an evaluator"):
            asyncio.run(_trajectories(server, {"rounds": 2}, [ADD], rec, None))
        assert server.requests() == [] and rec.calls == []


@pytest.mark.parametrize("options, key", [
    ({"rounds": 0}, "rounds"), ({"rounds": 2.0}, "rounds"), ({"rounds": True}, "rounds"),
    ({"rounds": 2, "round_temperature": -0.1}, "round_temperature"),
    ({"rounds": 2, "round_temperature": "hot"}, "round_temperature"),
    ({"rounds": 2, "feedback": "yes"}, "feedback"), ({"rounds": 2, "feedback": 1}, "feedback"),
    ({"round_temperature": 0.7}, "round_temperature"), ({"rounds": 1, "feedback": True}, "feedback"),
    ({"rounds": 2, "n": 3}, "n"),  # n chains would each pay for the same temperature-0 round 1
])
def test_bad_round_options_are_refused_naming_the_key(options: dict[str, Any], key: str) -> None:
    with pytest.raises(MethodError) as info:
        generators.create_trajectory("sample", **options)
    assert str(info.value).startswith(f"sample: {key} "), str(info.value)
