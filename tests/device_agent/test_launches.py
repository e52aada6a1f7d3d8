"""Launch accounting on its own: a compute problem's answer must come from the candidate's own
Triton kernels. A decoy kernel that is never launched is caught with the static and runtime
layers switched off; honest candidates (autotuned ones included) launch their kernels."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

import operators
from device_agent import triton_hooks
from device_agent.platforms.cpu import install_interpreter_support
from operators.invoke import invoke, prepare
from operators.spec import Kind, Tier
from operators.testing import load_module
from protos.records import Status
from tests.device_agent.test_agent import evaluate, fixture
from tests.helpers import only_layer, running_agent


def _own_launches(spec: operators.OperatorSpec, source: str) -> list[int]:
    install_interpreter_support()
    triton_hooks.install()
    module = load_module(source)
    counts = []
    cases = spec.public_cases(Tier.CPU)
    for i, c in enumerate(cases):
        call = prepare(spec.make_call(c, torch.Generator().manual_seed(i)), "cpu")
        if any(t.numel() == 0 for _, t in call.tensor_args()):
            continue  # nothing to compute: launching no kernel is right
        if len(counts) == 4:
            break
        triton_hooks.start_recording()
        invoke(getattr(module, c.entry), call)
        counts.append(sum(1 for m in triton_hooks.launches() if m == module.__name__))
    return counts


# As the agent's launch accounting: only compute problems must launch (views and allocations
# may be answered without a kernel).
@pytest.mark.parametrize("spec", [s for s in operators.all_specs() if s.kind is Kind.COMPUTE],
                         ids=lambda s: s.id)
def test_references_launch_their_own_kernels(spec: operators.OperatorSpec) -> None:
    assert all(n >= 1 for n in _own_launches(spec, spec.solution))


def test_autotuned_launch_counts_once_per_call() -> None:
    counts = _own_launches(operators.get("aten::add"), fixture("add_autotuned.py").decode())
    assert counts and all(n == 1 for n in counts)


def test_decoy_kernel_launches_nothing() -> None:
    assert _own_launches(operators.get("aten::add"), fixture("add_decoy_kernel.py").decode()) \
        == [0, 0, 0, 0]


@pytest.fixture(scope="module")
def launches_only_agent(agent_secret_env: None) -> Iterator[str]:
    with running_agent(*only_layer("launches")) as address:
        yield address


def test_agent_catches_decoy_with_only_launch_accounting(launches_only_agent: str) -> None:
    v = evaluate(launches_only_agent, fixture("add_decoy_kernel.py"))
    assert v.status is Status.CHEAT_DETECTED, v.message
    assert v.findings[0].layer == "launches" and v.findings[0].rule == "no-own-kernel"
    ok = evaluate(launches_only_agent, operators.get("aten::add").solution)
    assert ok.status is Status.PASSED


def test_a_launchless_wrong_answer_is_wrong_not_a_cheat(launches_only_agent: str) -> None:
    """A quick return that forgets to write cuBLAS's 0 (n <= 0) launches nothing and is wrong:
    WRONG_ANSWER, with no launches finding (raised only where the values are right)."""
    spec = operators.get("cublas::cublasSdot_v2")
    forgot = next(n for n in spec.negatives if n.name == "no_zero_for_empty")
    v = evaluate(launches_only_agent, forgot.source, op=spec.id)
    assert v.status is Status.WRONG_ANSWER, v.message
    assert not [f for f in v.findings if f.layer == "launches"]


def test_a_case_whose_inputs_are_all_empty_needs_no_kernel() -> None:
    """Judged as the agent does: where every input is empty, an allowed fill (a sum over
    nothing is 0) is the whole honest answer and no launch is asked for."""
    from types import SimpleNamespace

    from device_agent import judging
    from device_agent.protocol import CaseOutputs

    spec = operators.get("aten::add")
    case = spec.public_cases(Tier.CPU)[0]
    call = spec.make_call(case, torch.Generator().manual_seed(0))
    expected = spec.reference(call)
    p = SimpleNamespace(spec=spec, calls=[call], expected=[expected], names=["c"],
                        case_objs=[case])
    out = CaseOutputs(index=0, outputs=[torch.ones(4)], layouts=[], post_inputs={},
                      seconds=0.0, own_launches=0, guard=(), integrity=(), ghost_outputs=None,
                      repeat_outputs=None, replay_outputs=None)
    layers = frozenset({"launches"})
    assert judging.launches_finding(p, 0, out, layers) is not None  # type: ignore[arg-type]
    empty = {k: t[:0] if t.dim() else t for k, t in call.tensor_args()}
    p.calls = [type(call)(call.entry, tuple(empty.get(i, a) for i, a in enumerate(call.args)),
                          {k: empty.get(k, v) for k, v in call.kwargs.items()}, call.outputs,
                          call.mutable, call.out_buffers)]
    assert judging.launches_finding(p, 0, out, layers) is None  # type: ignore[arg-type]
