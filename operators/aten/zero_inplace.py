"""aten::zero_ — every element of ``self`` set to 0, in place."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from operators.aten._alloc import FILL_KERNEL, AllocProblem, expected_tensor, source_tensor
from operators.registry import register
from operators.spec import Call, Case, Cost, EntryPoint, Expected, Kind, Negative, Out, case

SOLUTION = r'''
import torch
import triton
import triton.language as tl
''' + FILL_KERNEL + r'''

def zero_(self):
    return _fill(self, 0)
'''

# Covers the flat index range 0 .. numel-1 of self's storage instead of self's own elements:
# right for contiguous and transposed self, wrong for a strided one.
NEGATIVE_FLAT = SOLUTION.replace(
    "    strides = [0] * (MAX_DIMS - out.dim()) + list(out.stride())\n",
    "    strides = [0] * (MAX_DIMS - out.dim()) + _row_major(list(out.shape))\n") + r'''

def _row_major(shape):
    strides, step = [], 1
    for s in reversed(shape):
        strides.insert(0, step)
        step *= max(s, 1)
    return strides
'''


@register("aten::zero_", version=1, kind=Kind.ALLOC)
class ZeroInplace(AllocProblem):
    entry_points = (
        EntryPoint("zero_", "zero_(self: Tensor) -> Tensor",
                   "Sets every element of self to 0; returns self."),
    )
    description = (
        "Following `Tensor.zero_`: writes 0 (False for bool) into every element of `self`, in "
        "place, and returns `self`. self may be non-contiguous (only its own elements are "
        "written), 0-D or empty. Write the zeros with your Triton kernel (`torch.zeros`, "
        "`Tensor.zero_`, `fill_` … are not allowed)."
    )
    solution = SOLUTION
    negatives = (Negative("flat_range", "writes the first numel storage slots", NEGATIVE_FLAT),)

    def cases(self) -> Sequence[Case]:
        return [
            case("zero_", "float32", (63, 145), cpu=True),
            case("zero_", "float16", (33, 65), layout="transposed", cpu=True),
            case("zero_", "bfloat16", (40, 30), layout="strided", cpu=True),
            case("zero_", "int64", (7, 17, 31), cpu=True),
            case("zero_", "bool", (5, 6), layout="strided", cpu=True),
            case("zero_", "float32", (), cpu=True),
            case("zero_", "float32", (16, 7, 57, 32), layout="strided"),
        ]

    def benchmark_cases(self) -> Sequence[Case]:
        return [case("zero_", "float32", (8192, 8192)),
                case("zero_", "bfloat16", (8192, 16384), layout="transposed")]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        return Call("zero_", (source_tensor(c, gen),), outputs=(Out.arg(0),),
                    mutable=frozenset({0}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        return (expected_tensor(torch.zeros_like(call.args[0])),)

    def baseline(self, call: Call) -> object:
        return call.args[0].zero_()

    def cost(self, c: Case) -> Cost:
        n = 1
        for d in c.shape:
            n *= d
        return Cost(0.0, float(n * c.torch_dtype.itemsize), c.dtype)
