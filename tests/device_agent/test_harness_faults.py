"""A fault of the harness itself (the problem's input generation, reference or baseline, the
copies of its inputs, the output checker) on the agent (making the cases, checking them) is the
system's INFRA_ERROR naming the part and its exception, never the honest candidate's
RUNTIME_ERROR or WRONG_ANSWER. In the worker while timing (building, measuring, re-checking) the
part is named, but only the worker — the candidate's process — says so: the verdict stays the
candidate's. A candidate that raises the harness's fault type itself owns its exception."""

from __future__ import annotations

import asyncio
import time
import types
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import operators
from device_agent import judging
from device_agent.evaluation import Evaluator, StageBudgets
from device_agent.fault_reproduction import Outcome
from device_agent.harness_faults import HarnessFault, blamed, candidate_code
from device_agent.platforms.cpu import CpuPlatform
from device_agent.protocol import TimingError
from device_agent.sandboxed_job import _Candidate
from operators.spec import Tier
from protos.records import EvalRequest, Status, Verdict
from tests.device_agent import broken_harness_platform as broken
from tests.device_agent.test_evaluation import TORCH_SUM
from tests.helpers import evaluate_in_process

ADD = operators.get("aten::add")
SUM = operators.get(broken.OPERATOR)
NOT_THE_CANDIDATE = "the harness failed, not the candidate"


def _harness_fault(v: Verdict, part: str, method: str) -> None:
    """``v`` is the system's, naming the harness's ``part`` and the exception ``method`` raised."""
    assert v.status is Status.INFRA_ERROR, (v.status, v.message, v.log[-2000:])
    assert NOT_THE_CANDIDATE in v.message and part in v.message, v.message
    assert f"RuntimeError: {method} {broken.MESSAGE}" in v.message, v.message


# ---- on the agent: making the cases (no worker needed) -------------------------------------------

def _prepared_on_the_agent(op: str, source: str) -> Verdict:
    async def go() -> Verdict:
        ev = Evaluator(CpuPlatform(), [], b"k")
        try:
            return await ev.evaluate(EvalRequest(uuid.uuid4().hex, op, source.encode()),
                                     time.monotonic() + 60)
        finally:
            ev.close()

    return asyncio.run(go())


def _raise(method: str) -> Any:
    def raising(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"{method} {broken.MESSAGE}")

    return raising


@pytest.mark.parametrize(("method", "part"), [("reference", "the problem's reference"),
                                              ("make_call", "the problem's input generation")])
def test_a_problem_failing_to_make_its_cases_is_the_systems(
        method: str, part: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(type(ADD), method, _raise(method))
    v = _prepared_on_the_agent(ADD.id, ADD.solution)
    _harness_fault(v, part, method)
    assert v.message.startswith("case "), v.message  # which case it was
    assert "Traceback" in v.log and "in raising" in v.log  # the harness's, for its author


def test_a_hidden_case_is_named_by_its_number_only(monkeypatch: pytest.MonkeyPatch) -> None:
    real = type(ADD).reference
    n_public = len(list(ADD.public_cases(Tier.CPU)))
    calls: list[int] = []

    def fails_after_the_public_ones(self: Any, call: Any) -> Any:
        calls.append(1)
        if len(calls) > n_public:
            raise RuntimeError(f"reference {broken.MESSAGE}")
        return real(self, call)

    monkeypatch.setattr(type(ADD), "reference", fails_after_the_public_ones)
    v = _prepared_on_the_agent(ADD.id, ADD.solution)
    _harness_fault(v, "the problem's reference", "reference")
    assert v.message.startswith(f"case hidden#{n_public}:"), v.message


# ---- on the agent: checking a case's outputs -----------------------------------------------------

def test_the_checker_failing_on_the_agent_is_the_systems(monkeypatch: pytest.MonkeyPatch,
                                                         agent_secret_env: None) -> None:
    monkeypatch.setattr(judging, "check", _raise("check"))
    v = evaluate_in_process(CpuPlatform(), ADD.id, ADD.solution)
    _harness_fault(v, "the output checker", "check")
    assert v.message.startswith("case "), v.message


# ---- in the worker, while timing -----------------------------------------------------------------

@pytest.fixture
def broken_workers(monkeypatch: pytest.MonkeyPatch, agent_secret_env: None) -> Iterator[None]:
    monkeypatch.setenv("KGB_PLATFORM_MODULES", broken.__name__)
    yield


class _TimedCpu(CpuPlatform):
    timings_meaningful = True


def _timed_on(workers: Any, source: str = TORCH_SUM) -> Verdict:
    """``source`` on a cpu agent that times, with one worker of the ``workers`` platform."""
    v: Verdict = evaluate_in_process(_TimedCpu(), SUM.id, source, pool_platform=workers,
                                     budgets=StageBudgets(timing_case_budget_s=0.3),
                                     layers=frozenset({"timing"}))
    return v


@pytest.fixture
def solution_is_torch_sum(monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent's copy of the problem ships TORCH_SUM as its solution (the Triton one takes
    the interpreter minutes at benchmark sizes); workers get sources by job, so this is what
    the agent re-runs to settle a claim."""
    monkeypatch.setattr(SUM, "solution", TORCH_SUM)


@pytest.mark.parametrize(("platform", "part"), [
    (broken.BrokenInputs, "the problem's input generation"),
    (broken.BrokenReference, "the problem's reference"),  # the re-check after timing
    (broken.BrokenBaseline, "the problem's baseline"),
    (broken.BrokenChecker, "the output checker"),  # the re-check's comparison
])
def test_a_harness_fault_while_timing_that_the_solution_meets_too_is_the_systems(
        platform: type[broken._BrokenHarness], part: str, broken_workers: None,
        solution_is_torch_sum: None) -> None:
    """Only the worker — the candidate's own process — can say its harness code raised while
    timing; the agent believes it once the problem's own solution, on a fresh worker, meets
    the same fault at the same case."""
    v = _timed_on(platform())
    assert v.status is Status.INFRA_ERROR, (v.status, v.message, v.log[-2000:])
    bench = SUM.benchmark_cases()[0].name
    assert v.message.startswith(f"timing case {bench}: {NOT_THE_CANDIDATE}"), v.message
    assert part in v.message and f"RuntimeError: {platform.broken} {broken.MESSAGE}" in v.message
    assert v.message.endswith(f"; {Outcome.REPRODUCED.value}"), v.message
    assert all(c.passed for c in v.cases) and v.cases  # what the candidate did stays recorded
    assert "Traceback" in v.log  # the worker's traceback of the harness's exception


# Right everywhere, but breaks the problem's baseline in its own worker: the harness fault it
# makes the worker report is a claim the problem's solution does not reproduce.
SABOTAGES_THE_BASELINE = TORCH_SUM + f'''

import operators as _operators

def _broken_baseline(self, call):
    raise RuntimeError("baseline {broken.MESSAGE}")

type(_operators.get({broken.OPERATOR!r})).baseline = _broken_baseline
'''


def test_a_harness_fault_the_candidate_made_stays_its_own(
        agent_secret_env: None, solution_is_torch_sum: None) -> None:
    v = _timed_on(CpuPlatform(), SABOTAGES_THE_BASELINE)
    assert v.status is Status.RUNTIME_ERROR, (v.status, v.message)
    bench = SUM.benchmark_cases()[0].name
    assert v.message.startswith(f"timing failed: timing case {bench}: the worker reports the "
                                "harness failed (unverified"), v.message
    assert "the problem's baseline" in v.message and NOT_THE_CANDIDATE not in v.message
    assert v.message.endswith(f"; {Outcome.NOT_REPRODUCED.value}"), v.message


# Right everywhere; on benchmark-sized inputs it raises the harness's own fault type.
RAISES_HARNESS_FAULTS = TORCH_SUM.replace('''def sum(self, *, dtype=None):
    return torch.sum(self, dtype=dtype)''', '''from device_agent.harness_faults import HarnessFault

def sum(self, *, dtype=None):
    if self.numel() >= 1 << 22:
        raise HarnessFault("reference", "", RuntimeError("not my fault"))
    return torch.sum(self, dtype=dtype)''')


def test_a_candidate_raising_the_harness_fault_type_owns_it(agent_secret_env: None) -> None:
    v = _timed_on(CpuPlatform(), RAISES_HARNESS_FAULTS)
    assert v.status is Status.RUNTIME_ERROR, (v.status, v.message)
    assert "timing failed" in v.message and "harness's fault type" in v.message, v.message


# ---- the worker's report of a fault --------------------------------------------------------------

class _Channel:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    def send(self, message: Any) -> None:
        self.sent.append(message)


def _reference_fails() -> None:
    with blamed("reference", "case x"):
        raise RuntimeError("boom")


def test_the_worker_reports_the_part_only_while_the_harness_is_intact(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ch = _Channel()
    c = _Candidate(ch, types.ModuleType("m"), SUM, CpuPlatform(), frozenset(), None)  # type: ignore[arg-type]
    assert c.attempt(3, _reference_fails) is None
    monkeypatch.setattr(_Candidate, "tampering", lambda self: ("torch.empty was replaced",))
    assert c.attempt(3, _reference_fails) is None
    first, second = ch.sent
    assert isinstance(first, TimingError) and isinstance(second, TimingError)
    assert first.harness_fault == "reference" and first.message == "RuntimeError: boom"
    assert second.harness_fault is None  # a changed harness: the candidate's, as any exception


def test_harness_faults_out_of_candidate_code_are_the_candidates() -> None:
    with pytest.raises(HarnessFault):
        _reference_fails()
    with pytest.raises(RuntimeError, match="the candidate's code raised the harness's fault"), \
            candidate_code():
        _reference_fails()
    with pytest.raises(ValueError, match="unknown harness part"), blamed("the moon"):
        pass
