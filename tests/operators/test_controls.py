"""Every problem's controls behave under Triton's interpreter on the cpu tier.

The reference solution passes every public and hidden cpu case; every negative control passes
at least one public case (it is plausible) and fails at least one (it is caught). These run
in-process for speed; tests/e2e repeats them through a real agent.
"""

from __future__ import annotations

import pytest

import operators
from device_agent.platforms.cpu import install_interpreter_support
from operators.spec import Tier
from operators.testing import run_cases

SPECS = operators.all_specs()
# The same interpreter support cpu workers install (bf16 dots, libdevice, autotune timer).
install_interpreter_support()


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.id)
def test_reference_solution_passes(spec: operators.OperatorSpec) -> None:
    for seed in (0,):  # one hidden-case seed in CI; `kgb operators validate` uses another
        outcomes = run_cases(spec, spec.solution, tier=Tier.CPU, seed=seed)
        bad = [(o.case.name, o.mismatch or o.error) for o in outcomes if not o.passed]
        assert not bad, f"{spec.id} reference fails: {bad[:2]}"


@pytest.mark.parametrize("spec,negative",
                         [(s, n) for s in SPECS for n in s.negatives],
                         ids=lambda x: x.id if isinstance(x, operators.OperatorSpec) else x.name)
def test_negative_control_is_plausible_but_caught(spec: operators.OperatorSpec,
                                                  negative: operators.Negative) -> None:
    public = run_cases(spec, negative.source, tier=Tier.CPU, seed=0, hidden=False)
    errors = [o.error for o in public if o.error]
    assert not errors, f"negative {negative.name} crashes instead of being wrong: {errors[0]}"
    assert any(o.passed for o in public), f"negative {negative.name} passes no public case"
    assert not all(o.passed for o in public), f"negative {negative.name} passes every public case"


def test_softmax_reference_survives_a_fully_masked_first_block() -> None:
    """Rows longer than one block whose first block is all -inf (masked attention rows): the
    online pass must not compute -inf - -inf."""
    import torch

    from operators.testing import load_module

    module = load_module(operators.get("aten::softmax").solution)
    x = torch.randn(2, 4100)
    x[0, :4096] = float("-inf")
    x[1, :] = float("-inf")  # a fully masked row is NaN, as in PyTorch
    torch.testing.assert_close(module.softmax_int(x, -1), torch.softmax(x, -1), equal_nan=True)
