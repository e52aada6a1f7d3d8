"""aten::unsafe_split — chunks of ``split_size`` along a dim (the last may be shorter), as views."""

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


def unsafe_split_Tensor(self, split_size, dim=0):
    nd = self.dim()
    if nd == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    if dim < 0:
        dim += nd
    size = self.shape[dim]
    if split_size <= 0 and size > 0:
        raise RuntimeError("split_size can only be 0 if dimension size is 0")
    chunks = max(1, -(-size // split_size)) if split_size > 0 else 1
    pieces = []
    for k in range(chunks):
        start = k * split_size
        length = min(split_size, size - start)
        sizes = list(self.shape)
        sizes[dim] = length
        offset = self.storage_offset() + start * self.stride(dim)
        pieces.append(self.as_strided(sizes, tuple(self.stride()), offset))
    return pieces
'''

# Counts the chunks with floor division: drops the shorter last chunk whenever the size is not
# a multiple of split_size.
NEGATIVE_DROPS_TAIL = SOLUTION.replace("chunks = max(1, -(-size // split_size))",
                                       "chunks = max(1, size // split_size)")


@register("aten::unsafe_split", version=1, kind=Kind.VIEW)
class UnsafeSplit(ViewProblem):
    entry_points = (
        EntryPoint("unsafe_split_Tensor",
                   "unsafe_split_Tensor(self: Tensor, split_size: int, dim: int = 0) -> "
                   "List[Tensor]",
                   "self cut into views of split_size along dim (the last may be shorter)."),
    )
    description = (
        "Following `torch.unsafe_split` (the same results as `torch.split` with an int): a "
        "list of **views** of `self`, consecutive chunks of `split_size` elements along `dim` "
        "(negative counts from the end); the last chunk is shorter when the size is not a "
        "multiple. Each chunk shares self's storage: self's strides, storage offset moved by "
        "`start * stride(dim)`; nothing is copied. Inputs may be non-contiguous."
    )
    solution = SOLUTION
    negatives = (
        Negative("drops_tail", "drops the shorter last chunk", NEGATIVE_DROPS_TAIL),
    )

    def cases(self) -> Sequence[Case]:
        return [
            case("unsafe_split_Tensor", "float32", (63, 145), split=10, dim=0, cpu=True),
            case("unsafe_split_Tensor", "float32", (63, 145), split=50, dim=1, cpu=True),
            case("unsafe_split_Tensor", "float16", (7, 17, 31), split=4, dim=-2, cpu=True),
            case("unsafe_split_Tensor", "bfloat16", (33, 65), split=33, dim=0,
                 layout="transposed", cpu=True),
            case("unsafe_split_Tensor", "int32", (49,), split=100, dim=0, cpu=True),
            case("unsafe_split_Tensor", "float32", (16, 7, 57, 32), split=8, dim=3),
        ]

    def _n_out(self, c: Case) -> int:
        dim: int = c["dim"]
        split: int = c["split"]
        size = c.shape[dim]
        return max(1, -(-size // split))

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        return split_call("unsafe_split_Tensor", make_input(c, gen), self._n_out(c),
                          c["split"], c["dim"])

    def torch_op(self, call: Call) -> list[torch.Tensor]:
        x, split, dim = call.args
        return list(torch.unsafe_split(x, split, dim))
