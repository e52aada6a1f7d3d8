"""aten::unsafe_split_with_sizes — chunks of the given sizes along a dim, as views."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from operators.aten._views import ViewProblem, make_input, split_call
from operators.registry import register
from operators.spec import Call, Case, EntryPoint, Kind, Negative, case

SOLUTION = r'''
import torch
import triton
import triton.language as tl


def unsafe_split_with_sizes(self, split_sizes, dim=0):
    nd = self.dim()
    if nd == 0:
        raise RuntimeError("split_with_sizes expects at least a 1-dimensional tensor")
    if dim < 0:
        dim += nd
    if sum(split_sizes) != self.shape[dim]:
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to "
                           f"{self.shape[dim]} (input tensor's size at dimension {dim}), "
                           f"but got split_sizes={list(split_sizes)}")
    pieces = []
    start = 0
    for length in split_sizes:
        sizes = list(self.shape)
        sizes[dim] = length
        offset = self.storage_offset() + start * self.stride(dim)
        pieces.append(self.as_strided(sizes, tuple(self.stride()), offset))
        start += length
    return pieces
'''

# Skips chunks of size 0 (as if they were nothing to return): the list is then too short.
NEGATIVE_SKIPS_EMPTY = SOLUTION.replace(
    "        pieces.append(self.as_strided(sizes, tuple(self.stride()), offset))\n",
    "        if length:\n"
    "            pieces.append(self.as_strided(sizes, tuple(self.stride()), offset))\n")


@register("aten::unsafe_split_with_sizes", version=1, kind=Kind.VIEW)
class UnsafeSplitWithSizes(ViewProblem):
    entry_points = (
        EntryPoint("unsafe_split_with_sizes",
                   "unsafe_split_with_sizes(self: Tensor, split_sizes: List[int], dim: int = 0) "
                   "-> List[Tensor]",
                   "self cut into views of the given sizes along dim."),
    )
    description = (
        "Following `torch.unsafe_split_with_sizes` (the same results as `torch.split` with a "
        "list): a list of **views** of `self`, consecutive chunks along `dim` (negative counts "
        "from the end) whose sizes are `split_sizes` (they sum to self's size there; a size may "
        "be 0). Each chunk shares self's storage: self's strides, storage offset moved by "
        "`start * stride(dim)` where `start` is the sum of the sizes before it; nothing is "
        "copied. Inputs may be non-contiguous."
    )
    solution = SOLUTION
    negatives = (
        Negative("skips_empty_chunks", "leaves chunks of size 0 out of the list",
                 NEGATIVE_SKIPS_EMPTY),
    )

    def cases(self) -> Sequence[Case]:
        return [
            case("unsafe_split_with_sizes", "float32", (63, 145), sizes=(21, 21, 21), dim=0,
                 cpu=True),
            case("unsafe_split_with_sizes", "float32", (63, 145), sizes=(5, 100, 40), dim=1,
                 cpu=True),
            case("unsafe_split_with_sizes", "float16", (7, 17, 31), sizes=(1, 0, 16), dim=-2,
                 cpu=True),
            case("unsafe_split_with_sizes", "bfloat16", (33, 65), sizes=(30, 3), dim=0,
                 layout="transposed", cpu=True),
            case("unsafe_split_with_sizes", "int32", (49,), sizes=(49,), dim=0, cpu=True),
            case("unsafe_split_with_sizes", "float32", (16, 7, 57, 32), sizes=(7, 25, 25), dim=2),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        return split_call("unsafe_split_with_sizes", make_input(c, gen), len(c["sizes"]),
                          list(c["sizes"]), c["dim"])

    def torch_op(self, call: Call) -> list[torch.Tensor]:
        x, sizes, dim = call.args
        return list(torch.unsafe_split_with_sizes(x, sizes, dim))
