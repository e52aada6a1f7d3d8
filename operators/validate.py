"""``kgb operators validate``: checks of the problems themselves, not of candidates.

For each correctness case of the tier (and a few hidden ones): the reference is deterministic
and leaves its inputs as they were; the tolerance accepts PyTorch's own result computed in the
case's precision (a second, lower-precision reference) on a fresh seed; outputs depend on the
inputs (two seeds differ) and are not near-constant. Benchmark cases must fit the memory
budget, and every correctness case of the full tier (hidden ones over many seeds) the smaller
correctness budget.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

import torch

from operators.checking import check, same_bits
from operators.invoke import collect, layouts, prepare
from operators.spec import Case, Expected, Kind, OperatorSpec, Tier

MEMORY_BUDGET_BYTES = 8 * 1024**3
# A correctness case travels between agent and worker (outputs, inputs after the call, replay
# copies) and is checked in fp64 on the agent's CPU: hidden cases drawn at random must stay small.
CASE_BUDGET_BYTES = 512 * 1024**2
HIDDEN_SEEDS_SIZED = 64


@dataclass
class ValidationReport:
    problems: list[str] = field(default_factory=list)
    checks: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems


def _same(a: tuple[torch.Tensor, ...], b: tuple[torch.Tensor, ...]) -> bool:
    return all(torch.equal(x.nan_to_num(), y.nan_to_num()) for x, y in zip(a, b, strict=True))


def validate(spec: OperatorSpec, tier: Tier = Tier.CPU, seed: int = 12345, *,
             controls: bool = False, device: str = "cpu") -> ValidationReport:
    """Check ``spec`` itself (see the module docstring); with ``controls`` also run its
    reference solution (public and hidden cases) and its negative controls (public cases) on
    ``device`` — on ``cpu`` this needs ``TRITON_INTERPRET=1`` set before triton is imported."""
    t0 = time.monotonic()
    rep = ValidationReport()
    cases = spec.public_cases(tier) + list(spec.hidden_cases(random.Random(seed), tier))
    for i, c in enumerate(cases):
        _check_reference(spec, c, seed + i, rep)
        expected = _check_baseline(spec, c, seed + 10_000 + i, rep)
        if expected is not None:
            _check_informative(spec, c, expected, seed + 20_000 + i, rep)
    _check_benchmark_memory(spec, rep)
    _check_case_sizes(spec, rep)
    if controls:
        _check_controls(spec, tier, rep, device)
    rep.seconds = time.monotonic() - t0
    return rep


def _check_reference(spec: OperatorSpec, c: Case, seed: int, rep: ValidationReport) -> None:
    """The reference leaves its inputs as they were and gives the same values twice."""
    call = spec.make_call(c, torch.Generator().manual_seed(seed))
    pristine = [(k, t.clone()) for k, t in call.tensor_args()]
    exp1 = spec.reference(call)
    rep.checks += 1
    for key, before in pristine:
        if not same_bits(before, call.buffer(key)):
            # The agent sends the call's inputs to the worker after computing the answer.
            rep.problems.append(f"{c.name}: reference modifies input argument {key!r}")
    exp2 = spec.reference(spec.make_call(c, torch.Generator().manual_seed(seed)))
    rep.checks += 1
    by_value = [i for i, e in enumerate(exp1) if e.by_value]  # undefined/random: no value
    if not _same(tuple(exp1[k].value for k in by_value),
                 tuple(exp2[k].value for k in by_value)):
        rep.problems.append(f"{c.name}: reference is not deterministic")


def _check_baseline(spec: OperatorSpec, c: Case, seed: int, rep: ValidationReport
                    ) -> tuple[Expected, ...] | None:
    """PyTorch in the case's own precision must pass the tolerance (fresh seed). Returns the
    reference's expectations for that seed, or None where PyTorch cannot run the case on CPU."""
    fresh = spec.make_call(c, torch.Generator().manual_seed(seed))
    expected = spec.reference(fresh)
    native = prepare(fresh, "cpu")
    try:
        result = spec.baseline(native)
    except RuntimeError as exc:  # e.g. an op PyTorch lacks on CPU for this dtype
        rep.problems.append(f"{c.name}: baseline failed on CPU: {exc}")
        return None
    rep.checks += 1
    outs = collect(native, result)
    for o, got, exp, lay in zip(fresh.outputs, outs, expected, layouts(native, outs),
                                strict=True):
        m = check(got, exp, spec.tolerance(c, exp.dtype), lay)
        if m is not None:
            rep.problems.append(f"{c.name}: tolerance rejects PyTorch's own result "
                                f"({o.describe()}): {m.summary[:300]}")
    return expected


def _check_informative(spec: OperatorSpec, c: Case, expected: tuple[Expected, ...], seed: int,
                       rep: ValidationReport) -> None:
    """A different seed gives different outputs, and outputs vary."""
    rep.checks += 1
    other = spec.reference(spec.make_call(c, torch.Generator().manual_seed(seed)))
    for e1, e2 in zip(expected, other, strict=True):
        if spec.kind is Kind.ALLOC or not e1.by_value or e1.from_shapes:
            continue  # an allocation's values are its parameters'; random/undefined values
        v1, v2 = e1.value, e2.value
        if v1.numel() > 1 and torch.equal(v1.nan_to_num(), v2.nan_to_num()):
            rep.problems.append(f"{c.name}: outputs do not depend on the inputs' seed")
        if v1.numel() > 8 and (v1.is_floating_point() or v1.is_complex()):
            finite = v1[torch.isfinite(v1)] if not v1.is_complex() else v1.abs().flatten()
            if finite.numel() > 8 and float(finite.double().std()) == 0.0:
                rep.problems.append(f"{c.name}: outputs are constant")


def _check_benchmark_memory(spec: OperatorSpec, rep: ValidationReport) -> None:
    """Every benchmark case within the memory budget. The cost model's unique bytes (inputs
    read + outputs written) measure a case's memory without building gigabytes of inputs on
    this CPU (that took most of validate's time)."""
    for c in spec.benchmark_cases():
        rep.checks += 1
        need = spec.cost(c).bytes
        if need > MEMORY_BUDGET_BYTES:
            rep.problems.append(f"benchmark {c.name}: {need / 2**30:.1f} GiB of inputs and "
                                f"outputs exceeds the {MEMORY_BUDGET_BYTES / 2**30:.0f} GiB "
                                "budget")


def _check_case_sizes(spec: OperatorSpec, rep: ValidationReport) -> None:
    """Every full-tier correctness case, hidden ones over many seeds, within the case budget
    (by the cost model: nothing is built)."""
    rep.checks += 1
    cases = list(spec.public_cases(Tier.FULL))
    for seed in range(HIDDEN_SEEDS_SIZED):
        cases += spec.hidden_cases(random.Random(seed), Tier.FULL)
    for c in cases:
        need = spec.cost(c).bytes
        if need > CASE_BUDGET_BYTES:
            rep.problems.append(f"correctness case {c.name}: {need / 2**20:.0f} MiB of inputs "
                                f"and outputs exceeds the {CASE_BUDGET_BYTES / 2**20:.0f} MiB "
                                "budget for a correctness case")
            return


def _check_controls(spec: OperatorSpec, tier: Tier, rep: ValidationReport, device: str) -> None:
    """The reference solution passes every case; each negative control is plausible (passes
    a public case), caught (fails one) and wrong rather than crashing."""
    from operators.testing import run_cases

    rep.checks += 1
    for o in run_cases(spec, spec.solution, tier=tier, seed=1, device=device):
        if not o.passed:
            why = o.mismatch.summary if o.mismatch else (o.error or "").strip().splitlines()[-1:]
            rep.problems.append(f"reference solution fails {o.case.name}: {str(why)[:300]}")
            break
    for neg in spec.negatives:
        rep.checks += 1
        public = run_cases(spec, neg.source, tier=tier, seed=0, hidden=False, device=device)
        if any(o.error for o in public):
            rep.problems.append(f"negative {neg.name} crashes instead of being wrong")
        elif all(o.passed for o in public):
            rep.problems.append(f"negative {neg.name} passes every public case: not caught")
        elif not any(o.passed for o in public):
            rep.problems.append(f"negative {neg.name} passes no public case: not plausible")
