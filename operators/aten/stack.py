"""aten::stack — tensors of one shape joined along a new dim (overloads default, out)."""

from __future__ import annotations

import functools
import random
from collections.abc import Sequence

import torch

from operators.aten._copying import COPY_SOURCE, EXACT, convert, itemsize, make_values, numel
from operators.registry import register
from operators.spec import (
    Call,
    Case,
    Cost,
    EntryPoint,
    Expected,
    Kind,
    Negative,
    OperatorSpec,
    Out,
    Tier,
    case,
    dtype_from_name,
)

SOLUTION = COPY_SOURCE + r'''

def _result_dtype(tensors):
    # torch.promote_types over the inputs' dtypes, via result_type on empty stand-ins (a
    # dimensioned stand-in for dimensioned tensors, so no input counts as a "scalar")
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        holder = torch.empty((0,) if t.dim() else (), dtype=dtype, device=t.device)
        dtype = torch.result_type(holder, t)
    return dtype


def _stack_into(tensors, dim, out):
    # tensor i goes to out.select(dim, i), converted to out's dtype: one copy launch each
    for i, t in enumerate(tensors):
        if t.numel() > 0:
            _copy(out.select(dim, i), t)
    return out


def stack(tensors, dim=0):
    dtype = _result_dtype(tensors)
    shape = list(tensors[0].shape)
    d = dim % (len(shape) + 1)
    shape.insert(d, len(tensors))
    out = torch.empty(shape, dtype=dtype, device=tensors[0].device)
    return _stack_into(tensors, d, out)


def stack_out(tensors, dim=0, *, out):
    return _stack_into(tensors, dim % (tensors[0].dim() + 1), out)
'''

# Wraps a negative dim modulo the inputs' rank instead of the result's: right for dim >= 0,
# one dim off for negative dims.
NEGATIVE_WRAP = SOLUTION.replace("d = dim % (len(shape) + 1)", "d = dim % max(len(shape), 1)")

# Gives the result the first tensor's dtype instead of promoting over all of them.
NEGATIVE_NO_PROMOTION = SOLUTION.replace("    dtype = _result_dtype(tensors)\n",
                                         "    dtype = tensors[0].dtype\n")

_FLOATS = ("float16", "bfloat16", "float32")


@register("aten::stack", version=1, kind=Kind.COMPUTE)
class Stack(OperatorSpec):
    entry_points = (
        EntryPoint("stack", "stack(tensors: list[Tensor], dim: int = 0) -> Tensor",
                   "The tensors (all of one shape) joined along a new dim inserted at dim."),
        EntryPoint("stack_out",
                   "stack_out(tensors: list[Tensor], dim: int = 0, *, out: Tensor) -> Tensor",
                   "Writes stack(tensors, dim) into out (already of the stacked shape and the "
                   "result dtype) and returns out."),
    )
    description = (
        "Stacking, following PyTorch's `torch.stack(tensors, dim)`: the tensors (a list of n "
        "tensors of one shape, 0 to 4 dims, possibly with zero elements) are joined along a new "
        "dim inserted at `dim`, so `result.select(dim, i)` is `tensors[i]`. `dim` ranges over the "
        "result's dims: -(rank+1) <= dim <= rank, negative values counting from the end of the "
        "result (dim=-1 appends the new dim last). The result dtype is PyTorch's type promotion "
        "over all the inputs' dtypes (float16 with float32 gives float32, int32 with int64 gives "
        "int64); values are converted exactly. Inputs may be non-contiguous (transposed, strided). "
        "Dtypes: float16, bfloat16, float32, int32, int64, bool. `stack_out` writes into a given "
        "`out`."
    )
    solution = SOLUTION
    negatives = (
        Negative("wraps_dim_by_input_rank", "wraps a negative dim modulo the inputs' rank "
                 "instead of the result's, inserting the new dim one place too early",
                 NEGATIVE_WRAP),
        Negative("no_dtype_promotion", "gives the result the first tensor's dtype instead of "
                 "promoting over all inputs", NEGATIVE_NO_PROMOTION),
    )
    tolerances = EXACT  # pure data movement; the covered promotions are exact widenings

    def cases(self) -> Sequence[Case]:
        # n: how many tensors; dtypes: per-input dtypes when they differ; layout applies to
        # every other input (the others contiguous).
        cs: list[Case] = [
            case("stack", "float32", (63, 17), n=3, dim=0, cpu=True),
            case("stack", "float16", (33, 65), n=2, dim=-1, layout="transposed", cpu=True),
            case("stack", "bfloat16", (7, 17, 9), n=4, dim=2, layout="strided", cpu=True),
            case("stack", "int32", (5, 7, 11), n=3, dim=-3, cpu=True),
            case("stack_out", "float32", (13, 29), n=5, dim=1, layout="transposed", cpu=True),
            case("stack", "float16", (2065,), n=2, dim=-2, dtypes=("float16", "float32"),
                 cpu=True),
            case("stack", "bool", (), n=7, dim=0, cpu=True),
            case("stack", "float32", (0, 5), n=3, dim=1, cpu=True),
        ]
        for dt in (*_FLOATS, "int32", "int64", "bool"):
            cs += [
                case("stack", dt, (1024, 1024), n=3, dim=0),
                case("stack", dt, (511, 257), n=2, dim=-1, layout="transposed"),
                case("stack", dt, (16, 7, 57, 32), n=3, dim=2, layout="strided"),
                case("stack_out", dt, (2, 3, 4, 129), n=9, dim=-3),
                case("stack", dt, (49,), n=63, dim=1),
            ]
        cs += [
            case("stack", "bfloat16", (64, 100), n=2, dim=1, dtypes=("bfloat16", "float32")),
            case("stack_out", "int32", (50, 77), n=2, dim=0, dtypes=("int32", "int64")),
            case("stack", "bool", (9, 5), n=3, dim=2, dtypes=("bool", "int32")),
            case("stack", "float32", (), n=1, dim=-1),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for _ in range(2 if small else 6):
            rank = rng.choice([1, 2, 3])
            shape = [rng.randrange(1, 7 if small else 30) for _ in range(rank)]
            shape[-1] = rng.randrange(2, 60 if small else 1000)
            out.append(case(rng.choice(["stack", "stack_out"]),
                            rng.choice((*_FLOATS, "int32", "bool")), shape,
                            n=rng.randrange(1, 6), dim=rng.randrange(-rank - 1, rank + 1),
                            layout=rng.choice(["contiguous", "transposed", "strided"]),
                            cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            case("stack", "float32", (4096, 4096), n=4, dim=0),
            case("stack", "bfloat16", (4096, 4096), n=4, dim=-1),
            case("stack", "float16", (64, 512, 512), n=4, dim=1),
        ]

    @staticmethod
    def _inputs_meta(c: Case) -> list[tuple[str, str]]:
        """(dtype, layout) of each input, in order."""
        dtypes = c.get("dtypes")
        return [(dtypes[i % len(dtypes)] if dtypes else c.dtype,
                 c.get("layout", "contiguous") if i % 2 == 0 else "contiguous")
                for i in range(c["n"])]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        tensors = [make_values(c.shape, dt, None, gen, lay) for dt, lay in self._inputs_meta(c)]
        if c.entry == "stack_out":
            ref = torch.stack(tensors, c["dim"])
            out = torch.empty(ref.shape, dtype=ref.dtype)
            return Call(c.entry, (tensors, c["dim"]), {"out": out}, outputs=(Out.arg("out"),),
                        mutable=frozenset({"out"}), out_buffers=frozenset({"out"}))
        return Call(c.entry, (tensors, c["dim"]))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        tensors, dim = call.args
        dtype = functools.reduce(torch.promote_types, [t.dtype for t in tensors])
        return (Expected(torch.stack([convert(t, dtype) for t in tensors], dim), dtype),)

    def baseline(self, call: Call) -> object:
        tensors, dim = call.args
        if call.entry == "stack_out":
            return torch.stack(tensors, dim, out=call.kwargs["out"])
        return torch.stack(tensors, dim)

    def cost(self, c: Case) -> Cost:
        metas = self._inputs_meta(c)
        out_dtype = functools.reduce(torch.promote_types, [dtype_from_name(d) for d, _ in metas])
        moved = sum(numel(c.shape) * (itemsize(d) + itemsize(out_dtype)) for d, _ in metas)
        return Cost(flops=0.0, bytes=float(moved), dtype=c.dtype)
