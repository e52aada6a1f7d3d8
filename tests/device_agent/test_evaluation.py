"""Hidden cases: reproducible for a candidate, different across candidates, secret-dependent;
public cases are fixed; what goes to a worker carries inputs only."""

from __future__ import annotations

import torch

import operators
from device_agent.evaluation import Evaluator, _call_to_wire, hidden_seed, public_seed
from device_agent.platforms.cpu import CpuPlatform

ADD = operators.get("aten::add")


def test_hidden_seed_depends_on_secret_problem_and_candidate() -> None:
    a = hidden_seed(b"secret", ADD, "a" * 64)
    assert a == hidden_seed(b"secret", ADD, "a" * 64)
    assert a != hidden_seed(b"secret", ADD, "b" * 64)
    assert a != hidden_seed(b"other secret", ADD, "a" * 64)
    assert a != hidden_seed(b"secret", operators.get("aten::mm"), "a" * 64)


def test_public_seeds_are_fixed_and_per_case() -> None:
    names = [c.name for c in ADD.cases()]
    seeds = [public_seed(ADD, n) for n in names]
    assert seeds == [public_seed(ADD, n) for n in names]
    assert len(set(seeds)) == len(seeds)


def test_hidden_inputs_differ_between_candidates_but_not_between_runs() -> None:
    ev = Evaluator(CpuPlatform(), [], b"k")
    p1 = ev._prepare(ADD, "1" * 64, ADD.solution)
    p1_again = ev._prepare(ADD, "1" * 64, ADD.solution)
    p2 = ev._prepare(ADD, "2" * 64, ADD.solution)
    hidden = [i for i, h in enumerate(p1.hidden) if h]
    assert hidden, "no hidden cases drawn"
    first = hidden[0]
    assert torch.equal(p1.calls[first].args[0], p1_again.calls[first].args[0])
    assert (p1.calls[first].args[0].shape != p2.calls[first].args[0].shape
            or not torch.equal(p1.calls[first].args[0], p2.calls[first].args[0]))
    assert all(n.startswith("hidden#") for n, h in zip(p1.names, p1.hidden, strict=True) if h)


def test_worker_messages_carry_inputs_not_answers() -> None:
    ev = Evaluator(CpuPlatform(), [], b"k")
    p = ev._prepare(ADD, "1" * 64, ADD.solution)
    wire = _call_to_wire(p.calls[0])
    assert set(wire) == {"entry", "args", "kwargs", "outputs", "mutable", "out_buffers"}


def test_public_references_are_computed_once_per_problem_and_bounded() -> None:
    ev = Evaluator(CpuPlatform(), [], b"k")
    p1 = ev._prepare(ADD, "1" * 64, ADD.solution)
    p2 = ev._prepare(ADD, "2" * 64, ADD.solution)
    n_public = len(ADD.public_cases(ev.tier))
    assert all(p1.calls[i] is p2.calls[i] and p1.expected[i] is p2.expected[i]
               for i in range(n_public))  # shared, not recomputed
    assert p1.calls[n_public:] and p1.calls[n_public] is not p2.calls[n_public]  # hidden: own
    tiny = Evaluator(CpuPlatform(), [], b"k", public_cache_bytes=1)
    softmax = operators.get("aten::softmax")
    tiny._prepare(ADD, "1" * 64, ADD.solution)
    tiny._prepare(softmax, "1" * 64, softmax.solution)
    assert list(tiny._public_cache) == [softmax.ref]  # over budget: the older problem dropped
