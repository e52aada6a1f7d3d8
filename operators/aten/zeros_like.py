"""aten::zeros_like — zeros shaped (and, for dense inputs, laid out) like ``self``."""

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

def _dense_strides(x):
    """x's strides if x is dense and non-overlapping (preserve_format keeps them), else None."""
    dims = sorted(range(x.dim()), key=lambda d: (x.stride(d), -d))
    step = 1
    for d in dims:
        if x.shape[d] != 1 and x.stride(d) != step:
            return None
        step *= x.shape[d]
    return tuple(x.stride())


def zeros_like(self, *, dtype=None, memory_format=torch.preserve_format):
    dtype = dtype or self.dtype
    strides = _dense_strides(self) if memory_format is torch.preserve_format else None
    if strides is not None:
        out = torch.empty_strided(tuple(self.shape), strides, dtype=dtype, device=self.device)
    else:
        out = torch.empty(tuple(self.shape), dtype=dtype, device=self.device)
    return _fill(out, 0)
'''

# Always allocates row-major: right for contiguous inputs, wrong strides for transposed ones.
NEGATIVE_ROW_MAJOR = SOLUTION.replace(
    "    strides = _dense_strides(self) if memory_format is torch.preserve_format else None\n",
    "    strides = None\n")


@register("aten::zeros_like", version=1, kind=Kind.ALLOC)
class ZerosLike(AllocProblem):
    entry_points = (
        EntryPoint("zeros_like", "zeros_like(self: Tensor, *, dtype: Optional[torch.dtype] = "
                   "None, memory_format: torch.memory_format = torch.preserve_format) -> Tensor",
                   "A new tensor of self's shape filled with 0."),
    )
    description = (
        "Following `torch.zeros_like`: a new tensor of `self`'s shape and device filled with "
        "zeros, of `dtype` (default self's). With `memory_format=torch.preserve_format` (the "
        "default) a dense, non-overlapping `self` (e.g. a transposed tensor) gives a result with "
        "self's strides; otherwise (and with `torch.contiguous_format`) the result is "
        "row-major contiguous. self's values are not read. Write the zeros with your Triton "
        "kernel (`torch.zeros*`, `full*` are not allowed)."
    )
    solution = SOLUTION
    negatives = (Negative("row_major", "ignores preserve_format", NEGATIVE_ROW_MAJOR),)

    def cases(self) -> Sequence[Case]:
        return [
            case("zeros_like", "float32", (63, 145), cpu=True),
            case("zeros_like", "float16", (33, 65), layout="transposed", cpu=True),
            case("zeros_like", "bfloat16", (40, 30), layout="strided", cpu=True),
            case("zeros_like", "float32", (7, 17, 31), to="int64", cpu=True),
            case("zeros_like", "bool", (5, 4), layout="transposed", cpu=True),
            case("zeros_like", "float32", (), cpu=True),
            case("zeros_like", "float32", (16, 7, 57, 32), layout="transposed"),
        ]

    def benchmark_cases(self) -> Sequence[Case]:
        return [case("zeros_like", "float32", (8192, 8192), layout="transposed")]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        kwargs = {"dtype": getattr(torch, c["to"])} if c.get("to") else {}
        return Call("zeros_like", (source_tensor(c, gen),), kwargs)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        return (expected_tensor(torch.zeros_like(call.args[0], **call.kwargs), strides=True),)

    def baseline(self, call: Call) -> object:
        return torch.zeros_like(call.args[0], **call.kwargs)

    def cost(self, c: Case) -> Cost:
        return write_cost(c.shape, c.get("to") or c.dtype)
