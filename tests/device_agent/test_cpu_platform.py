"""The cpu platform owns the interpreter's gaps: honest candidates that autotune, call libdevice
or use bf16 dots pass; what the interpreter cannot run is a platform limit, not a candidate fault."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

import operators
from device_agent.platforms.cpu import cpu_bench, install_interpreter_support, is_interpreter_limit
from protos.records import Status
from tests.device_agent.test_agent import evaluate, fixture
from tests.helpers import softmax_with_libdevice


def test_autotune_with_several_configs_passes(cpu_agent: str) -> None:
    v = evaluate(cpu_agent, fixture("add_autotuned.py"))
    assert v.status is Status.PASSED, (v.message, v.log[-1500:])


def test_libdevice_calls_pass(cpu_agent: str) -> None:
    v = evaluate(cpu_agent, softmax_with_libdevice(), op="aten::softmax")
    assert v.status is Status.PASSED, (v.message, v.log[-1500:])


def test_bf16_dot_cases_run_in_fp32(cpu_agent: str) -> None:
    spec = operators.get("aten::mm")
    v = evaluate(cpu_agent, spec.solution, op="aten::mm")
    assert v.status is Status.PASSED, v.message
    assert any("bfloat16" in c.name for c in v.cases if not c.hidden)


def test_interpreter_limit_is_not_the_candidates_fault(cpu_agent: str) -> None:
    v = evaluate(cpu_agent, fixture("add_inline_asm.py"))
    assert v.status is Status.INFRA_ERROR
    assert "cpu platform cannot run" in v.message and "inline_asm" in v.message


@triton.jit
def _dot_and_libdevice(a_ptr, b_ptr, c_ptr, x_ptr, y_ptr, B: tl.constexpr):
    r = tl.arange(0, B)
    a = tl.load(a_ptr + r[:, None] * B + r[None, :])
    b = tl.load(b_ptr + r[:, None] * B + r[None, :])
    tl.store(c_ptr + r[:, None] * B + r[None, :], tl.dot(a, b))
    x = tl.load(x_ptr + r)
    tl.store(y_ptr + r, libdevice.pow(libdevice.tanh(x), 2.0) + libdevice.erf(x))


def test_patches_in_process() -> None:
    assert os.environ.get("TRITON_INTERPRET") == "1"
    install_interpreter_support()
    install_interpreter_support()  # idempotent
    a, b = torch.randn(16, 16).bfloat16(), torch.randn(16, 16).bfloat16()
    c, x, y = torch.empty(16, 16), torch.randn(16), torch.empty(16)
    _dot_and_libdevice[(1,)](a, b, c, x, y, B=16)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(y, x.tanh() ** 2 + torch.erf(x), rtol=1e-5, atol=1e-6)


def test_cpu_bench_and_limit_classification() -> None:
    calls = []
    assert cpu_bench(lambda: calls.append(1), warmup=1, rep=3) >= 0
    assert len(calls) == 4
    assert len(cpu_bench(lambda: None, quantiles=(0.5, 0.2, 0.8))) == 3
    assert not is_interpreter_limit(ValueError("candidate bug"))
    try:
        np.zeros(1).reshape(2)
    except ValueError as exc:
        assert not is_interpreter_limit(exc)


@pytest.mark.parametrize("name", ["add_autotuned.py", "add_inline_asm.py"])
def test_fixtures_exist(name: str) -> None:
    assert fixture(name)
