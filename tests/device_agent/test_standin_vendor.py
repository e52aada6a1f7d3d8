"""A stand-in vendor platform end to end (issue #28): registered from outside the package
(``KGB_PLATFORM_MODULES``), its workers resolve it, a candidate passes through it, and its
compiler's crash, hang and failure on valid code are TOOLCHAIN_ERROR with a signature, while the
same candidate without the marker passes and a candidate's own crash stays RUNTIME_ERROR."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import operators
from device_agent.platforms import platform_names, resolve
from device_agent.run_harness import StageBudgets
from operators.spec import PLATFORMS
from protos.records import Status
from tests.device_agent.standin_platform import NAME, StandinPlatform
from tests.helpers import evaluate_in_process

ADD = operators.get("aten::add")
MARK_AFTER = "    pid = tl.program_id(0)\n"


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch, agent_secret_env: None) -> Iterator[None]:
    monkeypatch.setenv("KGB_PLATFORM_MODULES", "tests.device_agent.standin_platform")
    # A vendor's name is one the problems may run on (operators.spec.PLATFORMS).
    monkeypatch.setattr(type(ADD), "platforms", PLATFORMS | {NAME})
    yield


def _marked(marker: str) -> str:
    assert MARK_AFTER in ADD.solution
    return ADD.solution.replace(MARK_AFTER, f"{MARK_AFTER}    # {marker}\n", 1)


def _run(source: str, **args: Any) -> Any:
    return evaluate_in_process(StandinPlatform(), "aten::add", source,
                               pool_platform=StandinPlatform(), **args)


def test_the_standin_is_discovered_and_resolved(standin: None) -> None:
    assert NAME in platform_names() and isinstance(resolve(NAME), StandinPlatform)


def test_a_candidate_passes_through_the_standin_vendor(standin: None) -> None:
    v = _run(ADD.solution)
    assert v.status is Status.PASSED, v.message
    assert v.system.platform == NAME and v.toolchain_fault is None


def test_a_compiler_crash_is_a_toolchain_error_with_its_signature(standin: None) -> None:
    v = _run(_marked("STANDIN_CRASH"))
    assert v.status is Status.TOOLCHAIN_ERROR, (v.status, v.message, v.log[-3000:])
    f = v.toolchain_fault
    assert f is not None and f.kind == "crash" and f.pass_name == "lower"
    assert "LLVM ERROR" in f.message and len(f.message_hash) == 16, v.log[-3000:]
    again = _run(_marked("STANDIN_CRASH") + "\n# another candidate, the same fault\n")
    assert again.toolchain_fault is not None
    assert again.toolchain_fault.signature == f.signature  # the address is normalised away


def test_a_compiler_hang_is_a_toolchain_error(standin: None) -> None:
    v = _run(_marked("STANDIN_HANG"), budgets=StageBudgets(correctness_s=8.0))
    assert v.status is Status.TOOLCHAIN_ERROR, (v.status, v.message, v.log[-3000:])
    assert v.toolchain_fault is not None and v.toolchain_fault.kind == "hang"
    assert v.toolchain_fault.pass_name == "lower"


def test_a_failure_raised_in_the_compiler_is_a_toolchain_error(standin: None) -> None:
    v = _run(_marked("STANDIN_FAIL"))
    assert v.status is Status.TOOLCHAIN_ERROR, (v.status, v.message)
    f = v.toolchain_fault
    assert f is not None and f.kind == "error" and f.pass_name == "lower"
    assert "PassManager::run failed" in f.message


def test_the_candidates_own_hang_stays_a_timeout(standin: None) -> None:
    looping = ADD.solution.replace("def _launch(a, b, out, alpha):\n",
                                   "def _launch(a, b, out, alpha):\n    while True:\n        pass\n", 1)
    v = _run(looping, budgets=StageBudgets(correctness_s=8.0))
    assert v.status is Status.TIMEOUT, (v.status, v.message)
    assert v.toolchain_fault is None
