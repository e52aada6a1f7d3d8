"""How a timed case holds its inputs (device memory): the candidate times on the built sets
themselves, the baseline on its own copies, and the re-check on a copy of set 0 made before
anything ran, kept on the host when large. The re-check still sees set 0 as built whatever the
candidate did to its inputs while timed, and pointer arrays survive the trip to the host."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import operators
from device_agent import timing
from device_agent.platforms.cpu import install_interpreter_support
from device_agent.timing import WallTimer, build_sets, time_case, upload_sets
from operators.checking import poison_value, same_bits
from operators.invoke import prepare
from operators.spec import Call, Kind, Out, PointerArray, case
from operators.testing import load_module
from tests.operators.test_pointer_arrays import (
    SCALE_BATCHED,
    SCALE_BATCHED_REVERSED,
    _ScaleBatched,
)

ADD = operators.get("aten::add")
CASE = case("add_Tensor", "float32", (8, 8), other=(8, 8), alpha=1.0)
L2 = 1 << 12


class Recorder:
    """A stand-in candidate for ``add_Tensor``: records a copy of the inputs of every call,
    answers right, and (``corrupt``) then overwrites its inputs, as a kernel scribbling on them
    would; (``wrong_after``) answers wrong from that call on (right while checked, wrong while
    timed)."""

    def __init__(self, corrupt: bool = False, wrong_after: int | None = None) -> None:
        self.seen: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.corrupt, self.wrong_after = corrupt, wrong_after

    def __call__(self, x: torch.Tensor, other: torch.Tensor, *, alpha: Any = 1) -> torch.Tensor:
        self.seen.append((x.clone(), other.clone()))
        out = torch.add(x, other, alpha=alpha)
        if self.corrupt:
            x.fill_(7.0)
            other.fill_(-3.0)
        if self.wrong_after is not None and len(self.seen) > self.wrong_after:
            out.zero_()
        return out


def _time(fn: Any) -> dict[str, Any]:
    return time_case(ADD, CASE, fn, seed=11, device="cpu", budget_s=0.05, l2_bytes=L2)


def test_the_recheck_runs_on_set_0_as_built_whatever_the_candidate_did_to_its_inputs() -> None:
    cand = Recorder(corrupt=True)
    r = _time(cand)
    assert r["samples"] >= 2 and r["input_sets"] >= 2
    built = build_sets(ADD, CASE, seed=11, l2_bytes=L2)[0]
    x, other = cand.seen[-1]  # the re-check's call
    assert torch.equal(x, built.args[0]) and torch.equal(other, built.args[1])
    assert not torch.equal(cand.seen[-2][0], built.args[0])  # the timed sets were corrupted
    assert r["recheck"] is None  # judged on the pristine inputs, its answer is right


@pytest.mark.parametrize("threshold", [0, 1 << 40])
def test_the_recheck_passes_the_honest_and_catches_drift_wherever_set_0_is_kept(
        monkeypatch: pytest.MonkeyPatch, threshold: int) -> None:
    monkeypatch.setattr(timing, "PRISTINE_ON_DEVICE_MAX_BYTES", threshold)
    assert _time(Recorder())["recheck"] is None
    msg = _time(Recorder(wrong_after=4))["recheck"]
    assert msg is not None and "after timing" in msg and "differs from the reference" in msg


def test_a_large_set_0_is_kept_on_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    call = build_sets(ADD, CASE, seed=1, l2_bytes=L2)[0]
    assert timing._pristine_place(call, "cuda:0") == "cuda:0"
    monkeypatch.setattr(timing, "PRISTINE_ON_DEVICE_MAX_BYTES", 8 * 8 * 4 * 2 - 1)
    assert timing._pristine_place(call, "cuda:0") == "cpu"
    monkeypatch.setattr(timing, "PRISTINE_ON_DEVICE_MAX_BYTES", 8 * 8 * 4 * 2)
    assert timing._pristine_place(call, "cuda:0") == "cuda:0"


def _ptrs(call: Call) -> list[int]:
    return [t.untyped_storage().data_ptr() for _, t in call.tensor_args()]


def test_the_candidate_times_on_the_built_sets_and_the_baseline_on_copies() -> None:
    source = build_sets(ADD, CASE, seed=3, l2_bytes=L2)
    originals = [c.args[0].clone() for c in source]
    sets = upload_sets(ADD, CASE, source, device="cpu", l2_bytes=L2, timer=WallTimer())
    assert len(sets.cand_sets) == len(sets.base_sets) == len(source) >= 2
    assert all(c is s for c, s in zip(sets.cand_sets, source, strict=True))
    cand = {p for c in sets.cand_sets for p in _ptrs(c)}
    base = {p for c in sets.base_sets for p in _ptrs(c)}
    pristine = set(_ptrs(sets.pristine))
    assert not cand & base and not cand & pristine and not base & pristine
    for b, o in zip(sets.base_sets, originals, strict=True):
        assert torch.equal(b.args[0], o)


def test_adopt_copies_what_is_not_laid_out_as_a_copy_would_be() -> None:
    out = torch.zeros(4)
    call = Call("f", (torch.ones(4), out), outputs=(Out.arg(1),), mutable=frozenset({1}),
                out_buffers=frozenset({1}))
    assert timing._adopt(call, "cpu") is call  # on the device already: itself ...
    assert same_bits(out, torch.full((4,), poison_value(torch.float32)))  # ... poisoned
    moved = timing._adopt(call, "meta")
    assert moved is not call and moved.args[0].device.type == "meta"
    base = torch.ones(8)
    for args in [(base[:4], base[4:]), (base[:4], base[:4]), (torch.ones(4), torch.device("meta"))]:
        copied = timing._adopt(Call("f", args), "cpu")  # offset, shared storage, another device
        assert copied.args[0].untyped_storage().data_ptr() != base.untyped_storage().data_ptr()
        assert copied.args[0] is not args[0]


def test_cuda_and_cuda_0_are_one_device_while_0_is_current(
        monkeypatch: pytest.MonkeyPatch) -> None:
    same = timing._same_device
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert same(torch.device("cuda"), torch.device("cuda:0"))
    assert same(torch.device("cuda:0"), torch.device("cuda"))
    assert not same(torch.device("cuda"), torch.device("cuda:1"))
    assert not same(torch.device("cpu"), torch.device("cuda"))
    assert same(torch.device("cpu"), torch.device("cpu"))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    assert same(torch.device("cuda"), torch.device("cuda:1"))
    assert not same(torch.device("cuda"), torch.device("cuda:0"))


class _TimedScaleBatched(_ScaleBatched):
    """The toy Batched routine with a baseline to time against (its pointees, written here)."""

    kind = Kind.COMPUTE

    def baseline(self, call: Call) -> None:
        n, alpha, xa, ya, _ = call.args
        for xo, yo in zip(xa.offsets, ya.offsets, strict=True):
            ya.buffer[yo:yo + n] = alpha * xa.buffer[xo:xo + n]


@pytest.fixture
def interpreter() -> None:
    install_interpreter_support()


def test_pointer_arrays_survive_the_host_copy_of_set_0(
        monkeypatch: pytest.MonkeyPatch, interpreter: None) -> None:
    monkeypatch.setattr(timing, "PRISTINE_ON_DEVICE_MAX_BYTES", 0)
    spec = _TimedScaleBatched()
    c = spec.cases()[1]  # pointees out of order, gaps between them
    source = build_sets(spec, c, seed=5, l2_bytes=L2)
    x_built = source[0].args[2].buffer.clone()
    sets = upload_sets(spec, c, source, device="cpu", l2_bytes=L2, timer=WallTimer())
    kept = sets.pristine.args[2]
    assert isinstance(kept, PointerArray) and kept.buffer is not source[0].args[2].buffer
    assert torch.equal(kept.buffer, x_built)
    assert kept.pointers.tolist() == [kept.buffer.data_ptr() + 4 * o for o in kept.offsets]
    again = prepare(sets.pristine, "cpu").args[3]  # what the re-check runs on
    assert again.pointers.tolist() == [again.buffer.data_ptr() + 4 * o for o in again.offsets]
    good = time_case(spec, c, load_module(SCALE_BATCHED).scale_batched, seed=5, device="cpu",
                     budget_s=0.05, l2_bytes=L2)
    assert good["recheck"] is None
    bad = time_case(spec, c, load_module(SCALE_BATCHED_REVERSED).scale_batched, seed=5,
                    device="cpu", budget_s=0.05, l2_bytes=L2)
    assert bad["recheck"] is not None and "differs from the reference" in bad["recheck"]
