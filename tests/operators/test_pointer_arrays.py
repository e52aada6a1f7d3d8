"""Device arrays of pointers (cuBLAS's Batched routines take ``Aarray``, ``Barray``, ``Carray``):
Triton's interpreter loads and stores through them on the cpu tier, and the harness moves,
poisons and checks their pointees like any argument."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
import torch

from operators.checking import poison_value, same_bits
from operators.invoke import collect, invoke, map_call, prepare
from operators.spec import (
    Call,
    Case,
    Cost,
    EntryPoint,
    Expected,
    Negative,
    OperatorSpec,
    Out,
    PointerArray,
    Tier,
    Tolerance,
    case,
)
from operators.testing import load_module, run_cases

# A batched scale: y_b[i] = alpha * x_b[i] for i < n, each y_b at its own pointer.
SCALE_BATCHED = r'''
import triton
import triton.language as tl


@triton.jit
def _kernel(x_array, y_array, n, alpha, BLOCK: tl.constexpr):
    b = tl.program_id(0)
    x = tl.load(x_array + b).to(tl.pointer_type(tl.float32))
    y = tl.load(y_array + b).to(tl.pointer_type(tl.float32))
    i = tl.arange(0, BLOCK)
    m = i < n
    tl.store(y + i, alpha * tl.load(x + i, mask=m), mask=m)


def scale_batched(n, alpha, x_array, y_array, batch):
    if n > 0 and batch > 0:
        _kernel[(batch,)](x_array, y_array, n, alpha, BLOCK=triton.next_power_of_2(n))
'''

# Pairs y_b with x_{batch-1-b}: right only for a batch of one.
SCALE_BATCHED_REVERSED = SCALE_BATCHED.replace(
    "tl.load(x_array + b)", "tl.load(x_array + (tl.num_programs(0) - 1 - b))")


def test_the_interpreter_loads_and_stores_through_device_pointers() -> None:
    module = load_module(SCALE_BATCHED)
    x = torch.arange(12, dtype=torch.float32)
    y = torch.full((12,), float("nan"))
    x_ptrs = torch.tensor([x.data_ptr() + 4 * o for o in (8, 0, 4)], dtype=torch.int64)
    y_ptrs = torch.tensor([y.data_ptr() + 4 * o for o in (0, 4, 8)], dtype=torch.int64)
    module.scale_batched(3, 2.0, x_ptrs, y_ptrs, 3)
    want = torch.tensor([16, 18, 20, 0, 0, 2, 4, 0, 8, 10, 12, 0], dtype=torch.float32)
    want[[3, 7, 11]] = float("nan")  # the gaps between pointees are never written
    assert torch.equal(y.nan_to_num(-1), want.nan_to_num(-1))


def test_pointers_follow_the_buffer_and_the_candidate_gets_the_int64_tensor() -> None:
    buf = torch.arange(10, dtype=torch.float64)
    arr = PointerArray(buf, (6, 0, 6))
    assert arr.pointers.dtype == torch.int64 and arr.pointers.device == buf.device
    assert arr.pointers.tolist() == [buf.data_ptr() + 48, buf.data_ptr(), buf.data_ptr() + 48]
    call = Call("f", (3, arr), outputs=(Out.arg(1),), mutable=frozenset({1}),
                out_buffers=frozenset({1}))
    moved = prepare(call, "cpu")
    new = moved.args[1]
    assert isinstance(new, PointerArray) and new.buffer.data_ptr() != buf.data_ptr()
    assert new.pointers.tolist() == [new.buffer.data_ptr() + 48, new.buffer.data_ptr(),
                                     new.buffer.data_ptr() + 48]
    assert bool(new.buffer.isnan().all())  # an out-buffer's pointees are poisoned
    assert bool((buf == torch.arange(10)).all())  # the pristine call is left alone
    seen: list[object] = []
    invoke(lambda n, ptrs: seen.append(ptrs), moved)
    assert seen == [new.pointers]
    assert collect(moved, None) == [new.buffer]  # the output of a pointer array: its pointees
    assert dict(moved.tensor_args()) == {1: new.buffer}
    args, _ = moved.passed()
    assert args == (3, new.pointers)


def test_a_pointer_array_refuses_pointees_outside_its_buffer() -> None:
    with pytest.raises(ValueError, match="offset 10 .* 10 elements"):
        PointerArray(torch.zeros(10), (0, 10))
    with pytest.raises(ValueError, match="1-D"):
        PointerArray(torch.zeros(2, 5), (0,))
    empty = PointerArray(torch.zeros(0), ())
    assert empty.pointers.numel() == 0


def test_map_call_rebuilds_pointers_for_fresh_buffers() -> None:
    arr = PointerArray(torch.ones(8), (4, 0))
    call = Call("f", (arr,), kwargs={"y": PointerArray(torch.ones(3), (2,))})
    mapped = map_call(call, lambda t: torch.zeros_like(t), "cpu")
    a, y = mapped.args[0], mapped.kwargs["y"]
    assert a.pointers.tolist() == [a.buffer.data_ptr() + 16, a.buffer.data_ptr()]
    assert y.pointers.tolist() == [y.buffer.data_ptr() + 8]


# ---- a whole problem over pointer arrays, through the in-process harness ------------------------

class _ScaleBatched(OperatorSpec):
    """A toy Batched routine: x pointees are read-only, y pointees are out-buffers whose gaps
    (between and after the pointees) must come back as they were (poison)."""

    id = "test::scale_batched"
    version = 1
    entry_points = (EntryPoint("scale_batched", "scale_batched(n, alpha, x_array, y_array, batch)"),)
    negatives = (Negative("reversed", "x_{batch-1-b}", SCALE_BATCHED_REVERSED),)
    tolerances = {"float32": Tolerance.ulps("float32", 1)}

    def cases(self) -> Sequence[Case]:
        return [case("scale_batched", "float32", (5, 1), spread=False, cpu=True),
                case("scale_batched", "float32", (7, 4), spread=True, cpu=True)]

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        return [case("scale_batched", "float32", (rng.randrange(1, 9), 3), spread=True, cpu=True)]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        n, batch = c.shape
        gap = 2 if c["spread"] else 0
        x = torch.randn(batch * (n + gap), generator=gen)
        x_offsets = tuple((n + gap) * b for b in range(batch))
        y_offsets = x_offsets[::-1] if c["spread"] else x_offsets  # pointees out of order
        args = (n, 1.5, PointerArray(x, x_offsets),
                PointerArray(torch.empty(batch * (n + gap)), y_offsets), batch)
        return Call(c.entry, args, outputs=(Out.arg(3),), mutable=frozenset({3}),
                    out_buffers=frozenset({3}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        n, alpha, xa, ya, batch = call.args
        value = torch.full(ya.buffer.shape, poison_value(torch.float32), dtype=torch.float64)
        for xo, yo in zip(xa.offsets, ya.offsets, strict=True):
            value[yo:yo + n] = alpha * xa.buffer[xo:xo + n].double()
        return (Expected(value, torch.float32),)

    def cost(self, c: Case) -> Cost:
        return Cost(0.0, 0.0)


def test_a_batched_problem_passes_its_solution_and_catches_mismatched_pointers() -> None:
    spec = _ScaleBatched()
    good = run_cases(spec, SCALE_BATCHED, tier=Tier.CPU)
    assert all(o.passed for o in good), [o.mismatch or o.error for o in good]
    bad = run_cases(spec, SCALE_BATCHED_REVERSED, tier=Tier.CPU, hidden=False)
    assert [o.passed for o in bad] == [True, False]


def test_writing_a_read_only_pointee_is_an_input_mutation() -> None:
    spec = _ScaleBatched()
    writes_x = SCALE_BATCHED.replace("tl.load(x + i, mask=m), mask=m)\n",
                                     "tl.load(x + i, mask=m), mask=m)\n"
                                     "    tl.store(x + i, 0.0, mask=m)\n")
    assert writes_x != SCALE_BATCHED
    out = run_cases(spec, writes_x, tier=Tier.CPU, hidden=False)
    assert all(o.mismatch is not None and "input argument 2 was modified" in o.mismatch.summary
               for o in out)


def test_pristine_and_prepared_buffers_compare_bitwise() -> None:
    spec = _ScaleBatched()
    call = spec.make_call(spec.cases()[1], torch.Generator().manual_seed(3))
    moved = prepare(call, "cpu")
    assert same_bits(call.args[2].buffer, moved.args[2].buffer)
