"""The runtime dispatch guard on its own: torch compute in any syntax is caught during the
candidate's own code; Triton launches (interpreter, autotuner) are not counted; honest code
passes. The agent tests run with every other layer off, so a catch here is the runtime's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

import operators
from device_agent import triton_hooks
from device_agent.dispatch_guard import DispatchGuard, allowed_ops
from device_agent.platforms.cpu import install_interpreter_support
from operators.invoke import invoke, prepare
from operators.spec import Kind, Tier
from operators.testing import load_module
from protos.records import Status
from tests.device_agent.test_agent import evaluate, fixture
from tests.helpers import only_layer, running_agent, softmax_with_libdevice


@pytest.fixture(scope="module", autouse=True)
def _patched() -> None:
    install_interpreter_support()
    triton_hooks.install()


def _ops(spec: operators.OperatorSpec, source: str) -> set[str]:
    module = load_module(source)
    seen: set[str] = set()
    # The first four cpu cases (as the launch-accounting test): the reference solution's own
    # tests already run every case, this one only needs its wrapper's torch calls.
    for i, c in enumerate(spec.public_cases(Tier.CPU)[:4]):
        call = prepare(spec.make_call(c, torch.Generator().manual_seed(i)), "cpu")
        guard = DispatchGuard(spec.kind)
        with guard:
            invoke(getattr(module, c.entry), call)
        seen |= guard.violations
    return seen


@pytest.mark.parametrize("spec", operators.all_specs(), ids=lambda s: s.id)
def test_reference_solutions_run_no_forbidden_op(spec: operators.OperatorSpec) -> None:
    assert _ops(spec, spec.solution) == set()


def test_honest_fixtures_run_no_forbidden_op() -> None:
    assert _ops(operators.get("aten::add"), fixture("add_autotuned.py").decode()) == set()
    assert _ops(operators.get("aten::softmax"), softmax_with_libdevice().decode()) == set()


def test_disguised_torch_arithmetic_is_seen() -> None:
    seen = _ops(operators.get("aten::add"), fixture("add_torch_operators.py").decode())
    assert any("aten.add" in s for s in seen) and any("aten.mul" in s for s in seen)


def test_kind_allow_lists() -> None:
    assert "_local_scalar_dense" in allowed_ops(Kind.SCALAR)
    assert "_local_scalar_dense" not in allowed_ops(Kind.COMPUTE)
    assert "zeros" in allowed_ops(Kind.COMPUTE) and "zeros" not in allowed_ops(Kind.ALLOC)


def test_dtype_arithmetic_is_not_compute() -> None:
    """Working out a result dtype (as cat or stack must) touches no tensor data."""
    guard = DispatchGuard(Kind.COMPUTE)
    with guard:
        torch.promote_types(torch.float16, torch.float32)
        torch.can_cast(torch.float32, torch.int32)
        torch.result_type(torch.ones(2), 2.5)
    assert not guard.violations, guard.violations


@pytest.fixture(scope="module")
def runtime_only_agent(agent_secret_env: None) -> Iterator[str]:
    with running_agent(*only_layer("runtime"), workers=2) as address:
        yield address


@pytest.mark.parametrize("name", ["add_torch_operators.py", "add_torch_add.py"])
def test_agent_flags_torch_compute_as_cheat(runtime_only_agent: str, name: str) -> None:
    v = evaluate(runtime_only_agent, fixture(name))
    assert v.status is Status.CHEAT_DETECTED, v.message
    guard = [f for f in v.findings if f.layer == "runtime"]
    assert guard and guard[0].rule == "dispatch-guard" and "aten.add" in guard[0].evidence
    if name == "add_torch_operators.py":  # it launches a token kernel: only the guard fires
        assert [f.layer for f in v.findings] == ["runtime"]


@pytest.mark.parametrize("kind", list(Kind))
def test_pytorch_out_conventions_are_not_compute(kind: Kind) -> None:
    """``resize_`` of an out tensor, ``zero_``/``fill_`` for empty inputs, ``copy_`` of a
    kernel's result into ``out``: honest in every kind; their cheating twins are still seen."""
    x, kernel_result = torch.randn(6), torch.randn(6)
    out = torch.empty(0)
    guard = DispatchGuard(kind)
    with guard:
        out.resize_(x.shape)  # the out= convention (a no-op when the shape matches)
        out.resize_(x.shape)
        out.copy_(kernel_result)  # a kernel's result into the given out
        torch.empty(0).resize_as_(x).zero_()
        torch.empty(3).fill_(0.0)
    assert guard.violations == set()
    twin = DispatchGuard(kind)
    with twin:
        grown = torch.empty(0).resize_(6)  # a buffer grown, then filled by torch
        torch.cumsum(x, 0, out=grown)
        out.copy_(x.exp())  # a torch-computed result copied into out
    assert any("cumsum" in v for v in twin.violations)
    assert any("exp" in v for v in twin.violations)


_OWN = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _total(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0))


def total(x):
    out = torch.empty(1, dtype=torch.float32)
    _total[(1,)](x, out, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
    return out
'''


@pytest.mark.parametrize("kind", [Kind.COMPUTE, Kind.RANDOM, Kind.VIEW])
def test_item_is_judged_by_provenance(kind: Kind) -> None:
    """``.item()`` of a scalar the candidate's own kernel produced is allowed in every kind; of
    an input (one its kernel read included), or of a torch-computed tensor, it is still seen."""
    module = load_module(_OWN)
    x = torch.randn(10)
    expected = float(x.double().sum())
    triton_hooks.start_recording()
    own = DispatchGuard(kind, module.__name__, [x])
    with own:
        kernel_sum = module.total(x)
        got = kernel_sum[0].item()  # a view of its own result
        kernel_sum.item()
    assert own.violations == set() and abs(got - expected) < 1e-4
    for twin in (lambda: x[3].item(),  # an input its kernel was handed: the input's values
                 lambda: x.sum().item(),  # a torch-computed reduction
                 lambda: torch.empty(1).copy_(x[:1]).item()):  # data moved, by torch
        triton_hooks.start_recording()
        guard = DispatchGuard(kind, module.__name__, [x])
        with guard:
            module.total(x)
            twin()
        assert "aten._local_scalar_dense.default" in guard.violations, guard.violations
    triton_hooks.start_recording()
    foreign = DispatchGuard(kind, "another_module", [x])  # another module's kernel
    with foreign:
        module.total(x).item()
    assert "aten._local_scalar_dense.default" in foreign.violations
