"""Which library a speed-up was measured against travels with the timings.

The worker reports, with each timed case, the library its problem's baseline ran
(``Measurement.baseline``), and at warm-up which library each source's baselines use
(``operators.baseline_libraries``, the agent's Describe). No GPU and no vLLM here: a stand-in
``vllm._custom_ops`` (as tests/operators/test_vllm_moe_baseline.py stands it in) and a stand-in
cuBLAS host (a device and a libcublas, as tests/operators/test_cublas_binding.py fakes them)
flip what the problems' baselines are; the agent-level tests are in test_evaluation.py
(the verdict's field) and test_agent.py (Describe through a real agent).
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest

import operators
from device_agent.timing import Measurement, WallTimer, build_sets, measure, upload_sets
from operators.cublas import _cublas
from operators.spec import Tier
from operators.vllm import _baseline
from protos.records import SystemInfo

L2 = 1 << 10


def _timed(op: str) -> Measurement:
    """One public cpu case of ``op`` through the worker's timing code, on the host."""
    spec = operators.get(op)
    case = spec.public_cases(Tier.CPU)[0]
    timer = WallTimer()
    source = build_sets(spec, case, seed=1, l2_bytes=L2)
    sets = upload_sets(spec, case, source, device="cpu", l2_bytes=L2, timer=timer)
    return measure(sets, lambda *args, **kwargs: None, budget_s=0.01)


@pytest.fixture
def vllm_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """A stand-in ``vllm._custom_ops`` whose ``copy_blocks`` records each call."""
    calls: list[str] = []
    ops = types.ModuleType("vllm._custom_ops")

    def copy_blocks(*args: Any) -> None:
        calls.append("copy_blocks")

    ops.copy_blocks = copy_blocks  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm._custom_ops", ops)
    _baseline.custom_ops.cache_clear()
    yield calls
    _baseline.custom_ops.cache_clear()


@pytest.fixture
def no_vllm(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setitem(sys.modules, "vllm._custom_ops", None)  # the import fails
    _baseline.custom_ops.cache_clear()
    yield
    _baseline.custom_ops.cache_clear()


def test_where_vllm_imports_the_timed_baseline_is_vllms_kernel(vllm_calls: list[str]) -> None:
    m = _timed("vllm::copy_blocks")
    assert m.baseline == "vllm"
    assert len(vllm_calls) >= m.baseline_samples  # what was timed as the baseline: the stand-in
    libraries = operators.baseline_libraries()
    assert libraries["vllm"] == "vllm"
    # vllm::rotary_embedding's baseline is PyTorch's wherever vLLM imports: named on its own.
    assert libraries["vllm::rotary_embedding"] == "torch"
    assert {k for k in libraries if "::" in k} == {"vllm::rotary_embedding"}


def test_without_vllm_the_timed_baseline_is_pytorch(no_vllm: None) -> None:
    assert _timed("vllm::copy_blocks").baseline == "torch"
    assert operators.baseline_libraries()["vllm"] == "torch"


def test_on_a_cublas_host_the_cublas_problems_report_cublas(monkeypatch: pytest.MonkeyPatch,
                                                            no_vllm: None) -> None:
    """A device and the libcublas torch loaded (stood in): the warm-up answer and each timed
    case say cuBLAS. The call itself still runs PyTorch here, on host tensors — timing runs on
    the device only (the cpu platform never times), where the cuBLAS baselines call libcublas
    (tests/operators/test_cublas_binding.py)."""
    monkeypatch.setattr(_cublas, "available", lambda: True)
    assert _timed("cublas::cublasSaxpy_v2").baseline == "cublas"
    assert operators.baseline_libraries() == {"aten": "torch", "vllm": "torch",
                                              "cublas": "cublas"}
    monkeypatch.setattr(_cublas, "available", lambda: False)
    assert _timed("cublas::cublasSaxpy_v2").baseline == "torch"
    assert operators.baseline_libraries()["cublas"] == "torch"


def test_a_problem_unlike_its_source_is_named_by_id(monkeypatch: pytest.MonkeyPatch,
                                                    no_vllm: None) -> None:
    saxpy = type(operators.get("cublas::cublasSaxpy_v2"))
    monkeypatch.setattr(saxpy, "baseline_library", lambda self: "cublas")
    libraries = operators.baseline_libraries()
    assert libraries["cublas"] == "torch" and libraries["cublas::cublasSaxpy_v2"] == "cublas"
    info = SystemInfo(baselines=libraries)
    assert info.baseline_for("cublas::cublasSaxpy_v2") == "cublas"
    assert info.baseline_for("cublas::cublasDaxpy_v2") == "torch"
    assert SystemInfo().baseline_for("aten::add") == ""
