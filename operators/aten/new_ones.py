"""aten::new_ones — a new tensor of ``size`` filled with 1, with ``self``'s dtype and device."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from operators.aten._alloc import (
    FILL_KERNEL,
    AllocProblem,
    expected_tensor,
    source_tensor,
    write_cost,
)
from operators.registry import register
from operators.spec import Call, Case, Cost, EntryPoint, Expected, Kind, Negative, case

SOLUTION = r'''
import torch
import triton
import triton.language as tl
''' + FILL_KERNEL + r'''

def new_ones(self, size, *, dtype=None):
    out = torch.empty(tuple(size), dtype=dtype or self.dtype, device=self.device)
    return _fill(out, 1)
'''

# Falls back to float32 instead of self's dtype when dtype is None.
NEGATIVE_DEFAULT_FLOAT32 = SOLUTION.replace("dtype=dtype or self.dtype",
                                            "dtype=dtype or torch.float32")


@register("aten::new_ones", version=1, kind=Kind.ALLOC)
class NewOnes(AllocProblem):
    entry_points = (
        EntryPoint("new_ones", "new_ones(self: Tensor, size: List[int], *, dtype: "
                   "Optional[torch.dtype] = None) -> Tensor",
                   "A new contiguous tensor of shape size filled with 1, like self's dtype."),
    )
    description = (
        "Following `Tensor.new_ones`: a new row-major contiguous tensor of shape `size` filled "
        "with ones, on `self`'s device, of `dtype` (default: self's dtype). self's values and "
        "shape are not used. Write the ones with your Triton kernel (`torch.ones*`, `full*` … are "
        "not allowed)."
    )
    solution = SOLUTION
    negatives = (Negative("default_float32", "defaults to float32 instead of self's dtype",
                          NEGATIVE_DEFAULT_FLOAT32),)

    def cases(self) -> Sequence[Case]:
        return [
            case("new_ones", "float32", (3, 5), size=(63, 145), cpu=True),
            case("new_ones", "float16", (2,), size=(7, 17, 31), cpu=True),
            case("new_ones", "int32", (4, 4), size=(49,), cpu=True),
            case("new_ones", "bfloat16", (4,), size=(33, 65), to="float64", cpu=True),
            case("new_ones", "bool", (2, 2), size=(5, 6), cpu=True),
            case("new_ones", "float32", (1,), size=(), cpu=True),
            case("new_ones", "float32", (1,), size=(4, 0), cpu=True),
        ]

    def benchmark_cases(self) -> Sequence[Case]:
        return [case("new_ones", "float32", (1,), size=(8192, 8192))]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        kwargs = {"dtype": getattr(torch, c["to"])} if c.get("to") else {}
        return Call("new_ones", (source_tensor(c, gen), list(c["size"])), kwargs)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        return (expected_tensor(call.args[0].new_ones(call.args[1], **call.kwargs),
                                strides=True),)

    def baseline(self, call: Call) -> object:
        return call.args[0].new_ones(call.args[1], **call.kwargs)

    def cost(self, c: Case) -> Cost:
        return write_cost(c["size"], c.get("to") or c.dtype)
