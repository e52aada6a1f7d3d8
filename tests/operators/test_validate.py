"""``kgb operators validate`` logic: every problem is valid; broken problems are caught."""

from __future__ import annotations

import pytest
import torch

import operators
from operators.spec import Call, Expected, Tier
from operators.validate import validate


@pytest.mark.parametrize("spec", operators.all_specs(), ids=lambda s: s.id)
def test_every_problem_validates(spec: operators.OperatorSpec) -> None:
    report = validate(spec, Tier.CPU)
    assert report.ok, report.problems
    assert report.checks > 0


def test_too_tight_tolerance_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = operators.get("aten::softmax")
    monkeypatch.setattr(type(spec), "tolerance",
                        lambda self, c, dt: operators.Tolerance(rtol=0.0, atol=0.0))
    report = validate(spec, Tier.CPU)
    assert any("tolerance rejects" in p for p in report.problems)


def test_uninformative_reference_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = operators.get("aten::add")

    def constant(self: object, call: Call) -> tuple[Expected, ...]:
        a = call.args[0]
        return (Expected(torch.zeros(a.shape, dtype=torch.float64), a.dtype),)

    monkeypatch.setattr(type(spec), "reference", constant)
    report = validate(spec, Tier.CPU)
    assert any("do not depend" in p or "constant" in p for p in report.problems)


def test_benchmark_cases_over_the_memory_budget_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = operators.get("aten::add")
    monkeypatch.setattr(type(spec), "cost",
                        lambda self, c: operators.spec.Cost(flops=1.0, bytes=9 * 2.0**30))
    report = validate(spec, Tier.CPU)
    assert any("exceeds the 8 GiB budget" in p for p in report.problems)


def test_controls_are_run_and_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    from device_agent.platforms.cpu import install_interpreter_support

    install_interpreter_support()
    spec = operators.get("aten::zeros")
    assert validate(spec, Tier.CPU, controls=True).ok
    same = operators.Negative("same", "the solution itself", spec.solution)
    monkeypatch.setattr(type(spec), "negatives", (same,))
    monkeypatch.setattr(type(spec), "solution", spec.solution.replace("_fill(out, 0)",
                                                                        "_fill(out, 1)"))
    problems = validate(spec, Tier.CPU, controls=True).problems
    assert any(p.startswith("reference solution fails") for p in problems)
    assert any("not plausible" in p or "not caught" in p for p in problems)


def test_correctness_cases_over_the_case_budget_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hidden cases drawn at random are sized too: one over the correctness-case budget (a
    product of random dims can reach gigabytes) is a problem with the problem."""
    spec = operators.get("aten::add")
    monkeypatch.setattr(type(spec), "cost",
                        lambda self, c: operators.spec.Cost(flops=1.0, bytes=600 * 2.0**20))
    report = validate(spec, Tier.CPU)
    assert any("exceeds the 512 MiB budget for a correctness case" in p
               for p in report.problems)
    assert not any("GiB budget" in p for p in report.problems)  # benchmark budget: within


def test_sorts_hidden_rows_of_distinct_16_bit_keys_can_be_drawn() -> None:
    """A row of distinct keys cannot be longer than the dtype has values (found on the H200: a
    hidden bfloat16 case asked for 78 991 distinct values and the agent failed to prepare)."""
    import random

    spec = operators.get("aten::sort")
    drawn = 0
    for seed in range(64):
        for c in spec.hidden_cases(random.Random(seed), Tier.FULL):
            if c.dtype in ("float16", "bfloat16") and c.get("keys") != "ties":
                spec.make_call(c, torch.Generator().manual_seed(seed))
                drawn += 1
    assert drawn > 20


def test_a_reference_that_writes_its_inputs_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent ships a call's inputs to the worker after computing the reference from them:
    a reference that writes the answer into an in-place output would let a candidate that does
    nothing pass."""
    spec = operators.get("cublas::cublasDcopy_v2")
    honest = type(spec).reference

    def in_place(self: object, call: Call) -> tuple[Expected, ...]:
        out = honest(self, call)  # type: ignore[arg-type]
        call.args[3].copy_(out[0].value)
        return out

    monkeypatch.setattr(type(spec), "reference", in_place)
    report = validate(spec, Tier.CPU)
    assert any("reference modifies input argument 3" in p for p in report.problems)


def test_an_output_of_the_shapes_alone_is_exempt_from_seed_dependence(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """topk_softmax's token_expert_indices (k * num_tokens + t) are the same for every seed:
    allowed because the reference says so, not otherwise."""
    import dataclasses

    spec = operators.get("vllm::topk_softmax")
    assert validate(spec, Tier.CPU).ok
    reference = type(spec).reference

    def unmarked(self: object, call: Call) -> tuple[Expected, ...]:
        return tuple(dataclasses.replace(e, from_shapes=False) for e in reference(spec, call))

    monkeypatch.setattr(type(spec), "reference", unmarked)
    assert any("do not depend" in p for p in validate(spec, Tier.CPU).problems)
