"""aten::fill_ — every element of ``self`` set to a value, in place (overloads Scalar, Tensor)."""

from __future__ import annotations

import math
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

def fill__Scalar(self, value):
    return _fill(self, value)


def fill__Tensor(self, value):
    if value.dim() != 0:
        raise RuntimeError("fill_ only supports 0-dimension value tensor but got tensor with "
                           f"{value.dim()} dimensions.")
    return _fill_from(self, value)
'''

# Treats self as contiguous: writes the first numel elements of its storage, which covers a
# transposed self exactly but leaves the gaps and misses the tail of a strided one.
NEGATIVE_AS_CONTIGUOUS = SOLUTION.replace(
    "    strides = [0] * (MAX_DIMS - out.dim()) + list(out.stride())\n",
    "    strides = [0] * (MAX_DIMS - out.dim()) + _row_major(list(out.shape))\n") + r'''

def _row_major(shape):
    strides, step = [], 1
    for s in reversed(shape):
        strides.insert(0, step)
        step *= max(s, 1)
    return strides
'''


@register("aten::fill_", version=1, kind=Kind.ALLOC)
class FillInplace(AllocProblem):
    entry_points = (
        EntryPoint("fill__Scalar", "fill__Scalar(self: Tensor, value: Scalar) -> Tensor",
                   "Sets every element of self to value; returns self."),
        EntryPoint("fill__Tensor", "fill__Tensor(self: Tensor, value: Tensor) -> Tensor",
                   "Sets every element of self to the 0-D tensor value's element; returns self."),
    )
    description = (
        "Following `Tensor.fill_`: writes `value` (a Python number, or the element of a 0-D "
        "tensor of any dtype) into every element of `self`, converted to self's dtype "
        "(round-to-nearest-even; nonzero -> True for bool), in place, and returns `self`. self "
        "may be non-contiguous (transposed, strided: only its own elements are written) or "
        "empty. Write the values with your Triton kernel (`torch.full`, `Tensor.fill_` … are not "
        "allowed)."
    )
    solution = SOLUTION
    negatives = (Negative("as_contiguous", "writes self's storage as if self were contiguous",
                          NEGATIVE_AS_CONTIGUOUS),)

    def cases(self) -> Sequence[Case]:
        return [
            case("fill__Scalar", "float32", (63, 145), value=0.001, cpu=True),
            case("fill__Scalar", "float16", (33, 65), value=-111.999, layout="transposed",
                 cpu=True),
            case("fill__Scalar", "bfloat16", (40, 30), value=math.inf, layout="strided", cpu=True),
            case("fill__Scalar", "int32", (7, 17, 31), value=-7, cpu=True),
            case("fill__Scalar", "bool", (5, 6), value=0, cpu=True),
            case("fill__Tensor", "float32", (49,), value=2.5, value_dtype="float64", cpu=True),
            case("fill__Tensor", "int64", (5, 7), value=3, value_dtype="int32",
                 layout="strided", cpu=True),
            case("fill__Scalar", "float32", (), value=math.nan, cpu=True),
            case("fill__Scalar", "float32", (16, 7, 57, 32), value=100.001, layout="strided"),
        ]

    def benchmark_cases(self) -> Sequence[Case]:
        return [case("fill__Scalar", "float32", (8192, 8192), value=0.5),
                case("fill__Tensor", "bfloat16", (8192, 16384), value=-2.0,
                     value_dtype="float32")]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        x = source_tensor(c, gen)
        value = c["value"]
        if c.entry == "fill__Tensor":
            v = torch.empty((), dtype=getattr(torch, c["value_dtype"]))
            v.fill_(value)
            value = v
        return Call(c.entry, (x, value), outputs=(Out.arg(0),), mutable=frozenset({0}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x, value = call.args
        return (expected_tensor(x.clone().fill_(value)),)

    def baseline(self, call: Call) -> object:
        return call.args[0].fill_(call.args[1])

    def cost(self, c: Case) -> Cost:
        n = 1
        for d in c.shape:
            n *= d
        return Cost(0.0, float(n * c.torch_dtype.itemsize), c.dtype)
