"""The freshness probe of random problems (device_agent/resample.py): the second call runs on the
same tensors, its new outputs where the first call's freed outputs were, so samples seeded from an
address, a shape or a constant come out the same; a per-call seed draws new ones."""

from __future__ import annotations

from typing import Any

import torch

import operators
from device_agent.case_inputs import CaseInputs
from device_agent.judging import determinism_finding
from device_agent.protocol import CaseOutputs
from device_agent.resample import ReuseFreed, freed_storages, resample_run
from operators.invoke import collect, invoke, prepare
from operators.spec import Call, Out, Tier

_counter = [0]


def _by_address(p: torch.Tensor) -> torch.Tensor:
    out = torch.empty(p.shape, dtype=p.dtype)
    g = torch.Generator().manual_seed(out.data_ptr() % 2**31)
    out.copy_(torch.rand(p.shape, generator=g) < p)
    return out


def _by_counter(p: torch.Tensor) -> torch.Tensor:
    _counter[0] += 1
    out = torch.empty(p.shape, dtype=p.dtype)
    g = torch.Generator().manual_seed(1234 + _counter[0])
    out.copy_(torch.rand(p.shape, generator=g) < p)
    return out


def _first_then_resample(fn: Any) -> tuple[torch.Tensor, torch.Tensor]:
    call = Call("bernoulli", (torch.full((64, 64), 0.5),))
    dev_call = prepare(call, "cpu")
    produced = collect(dev_call, invoke(fn, dev_call))
    freed = freed_storages(dev_call, produced)
    first = produced[0].clone()
    del produced
    again = resample_run(fn, call, dev_call, freed)
    assert again is not None
    return first, again[0]


def test_a_freed_output_block_is_handed_to_the_next_allocation_of_its_size() -> None:
    kept = torch.empty(100, dtype=torch.float32)
    gone = torch.empty(100, dtype=torch.float32)
    storages = [gone.untyped_storage(), kept.untyped_storage()]
    address = gone.data_ptr()
    del gone
    with ReuseFreed(storages) as mode:
        other_size = torch.empty(7)
        same_size = torch.zeros((20, 5), dtype=torch.int32)  # 400 bytes, another dtype
        next_one = torch.empty(100)
    assert same_size.data_ptr() == address and bool((same_size == 0).all())
    assert other_size.data_ptr() != address and next_one.data_ptr() not in (address,
                                                                            kept.data_ptr())
    assert mode.reused == 1  # ``kept`` is still referred to: never handed out


def test_an_address_seeded_sampler_repeats_and_a_per_call_one_does_not() -> None:
    first, again = _first_then_resample(_by_address)
    assert torch.equal(first, again)
    first, again = _first_then_resample(_by_counter)
    assert not torch.equal(first, again)


def test_an_in_place_sampler_runs_again_on_the_same_tensor_refilled() -> None:
    seen: list[tuple[int, float]] = []

    def exponential_(x: torch.Tensor) -> torch.Tensor:
        seen.append((x.data_ptr(), float(x.sum())))
        g = torch.Generator().manual_seed(x.data_ptr() % 2**31)
        return x.copy_(torch.empty(x.shape).exponential_(generator=g))

    call = Call("exponential_", (torch.full((16, 16), -1.0),), outputs=(Out.arg(0),),
                mutable=frozenset({0}))
    dev_call = prepare(call, "cpu")
    produced = collect(dev_call, invoke(exponential_, dev_call))
    first = produced[0].clone()
    assert not freed_storages(dev_call, produced)  # self is the call's own tensor
    again = resample_run(exponential_, call, dev_call, [])
    assert again is not None and torch.equal(first, again[0])
    assert seen[0] == seen[1] == (dev_call.args[0].data_ptr(), -256.0)  # refilled as first seen


def test_repeated_samples_are_a_finding_that_says_why() -> None:
    spec = operators.get("aten::bernoulli")
    p = CaseInputs(Tier.CPU, b"k", frozenset()).prepare(spec, "2" * 64, spec.solution)
    i = min(p.probes)
    first = [torch.ones(e.value.shape, dtype=e.dtype) for e in p.expected[i]]

    def outputs(second: list[Any]) -> CaseOutputs:
        return CaseOutputs(index=i, outputs=first, layouts=[None], post_inputs={}, seconds=0.0,
                           own_launches=1, guard=(), integrity=(), repeat_outputs=second)

    finding = determinism_finding(p, i, outputs([t.clone() for t in first]))
    assert finding is not None and finding.rule == "repeats-samples"
    assert "address" in finding.evidence and "shape" in finding.evidence
    assert determinism_finding(p, i, outputs([torch.zeros_like(t) for t in first])) is None
