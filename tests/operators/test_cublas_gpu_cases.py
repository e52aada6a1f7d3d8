"""The per-case, per-process checking the GPU tests use (tests/operators/cublas_gpu_cases.py),
exercised on the cpu, where each problem's baseline is its PyTorch equivalent: a stand-in
baseline that raises on one case and writes a wrong value on another must have both named, and
the cases after them still run."""

from __future__ import annotations

from typing import Any

import operators
from operators.cublas._cublas import CublasError
from operators.spec import Call, Tier
from tests.operators import cublas_gpu_cases as g

SAXPY = "cublas::cublasSaxpy_v2"


class _Faulty:
    """A problem whose baseline raises on case ``raise_at`` and adds 1 to the output of case
    ``wrong_at`` (counted in calls)."""

    def __init__(self, spec: Any, raise_at: int, wrong_at: int) -> None:
        self._spec, self._raise_at, self._wrong_at, self.calls = spec, raise_at, wrong_at, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._spec, name)

    def baseline(self, call: Call) -> object:
        i, self.calls = self.calls, self.calls + 1
        if i == self._raise_at:
            raise CublasError("cublasSaxpy_v2 failed: CUBLAS_STATUS_NOT_SUPPORTED")
        self._spec.baseline(call)
        if i == self._wrong_at:
            out = call.args[call.outputs[0].key]
            out.add_(1.0)
        return None


def test_a_correct_baseline_has_no_failures_on_the_cpu_tier() -> None:
    assert g.failures(operators.get(SAXPY), "public", "cpu", Tier.CPU) == []


def test_every_failing_case_is_named_and_a_raising_case_does_not_stop_the_rest() -> None:
    spec = operators.get(SAXPY)
    names = [c.name for c in g.cases(spec, "public", Tier.CPU)]
    faulty = _Faulty(spec, raise_at=1, wrong_at=3)
    wrong = g.failures(faulty, "public", "cpu", Tier.CPU)
    assert faulty.calls == len(names)  # every case ran
    assert len(wrong) == 2, wrong
    assert wrong[0].startswith(f"{names[1]} raised CublasError: ") and "NOT_SUPPORTED" in wrong[0]
    assert wrong[1].startswith(f"{names[3]} ")


def test_in_place_cases_alias_c_with_its_operand() -> None:
    spec = operators.get("cublas::cublasSgeam")
    assert g.cases(spec, "inplace", Tier.CPU)
    assert g.failures(spec, "inplace", "cpu", Tier.CPU) == []
    wrong = g.failures(_Faulty(spec, raise_at=-1, wrong_at=0), "inplace", "cpu", Tier.CPU)
    assert len(wrong) == 1 and "C aliasing argument" in wrong[0]


def test_the_isolated_run_answers_from_a_fresh_process_and_reports_a_crash() -> None:
    assert g.run_isolated(SAXPY, "public", device="cpu", tier="cpu", timeout=300) == []
    (crash,) = g.run_isolated("cublas::no_such_routine", "public", device="cpu", tier="cpu",
                              timeout=300)
    assert "without an answer" in crash and "no_such_routine" in crash
