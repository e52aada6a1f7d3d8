"""aten::unsqueeze — a new dimension of size 1 at ``dim``, as a view."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from operators.aten._views import ViewProblem, make_input
from operators.registry import register
from operators.spec import Call, Case, EntryPoint, Kind, Negative, case

SOLUTION = r'''
import torch
import triton
import triton.language as tl


def unsqueeze(self, dim):
    nd = self.dim()
    if dim < 0:
        dim += nd + 1
    if dim < 0 or dim > nd:
        raise IndexError(f"Dimension out of range (expected to be in range of "
                         f"[{-nd - 1}, {nd}], but got {dim})")
    sizes = list(self.shape)
    strides = list(self.stride())
    new_stride = sizes[dim] * strides[dim] if dim < nd else 1
    sizes.insert(dim, 1)
    strides.insert(dim, new_stride)
    return self.as_strided(sizes, strides, self.storage_offset())
'''

# Wraps a negative dim against the input's rank instead of the result's: unsqueeze(x, -1)
# lands before the last dim instead of after it.
NEGATIVE_WRAP = SOLUTION.replace("        dim += nd + 1\n", "        dim += nd\n")


@register("aten::unsqueeze", version=1, kind=Kind.VIEW)
class Unsqueeze(ViewProblem):
    entry_points = (
        EntryPoint("unsqueeze", "unsqueeze(self: Tensor, dim: int) -> Tensor",
                   "self with a new dimension of size 1 inserted at dim, as a view."),
    )
    description = (
        "Following `torch.unsqueeze`: a **view** of `self` with a dimension of size 1 inserted "
        "at position `dim`, which ranges over [-self.dim()-1, self.dim()] (negative values count "
        "from the end of the *result*). Shares self's storage and offset; nothing is copied. "
        "Inputs may be non-contiguous or 0-D."
    )
    solution = SOLUTION
    negatives = (
        Negative("wraps_against_input_rank", "wraps a negative dim with the input's rank",
                 NEGATIVE_WRAP),
    )

    def cases(self) -> Sequence[Case]:
        return [
            case("unsqueeze", "float32", (63, 145), dim=1, cpu=True),
            case("unsqueeze", "float32", (63, 145), dim=-1, cpu=True),
            case("unsqueeze", "float16", (7, 17, 31), dim=0, cpu=True),
            case("unsqueeze", "bfloat16", (33, 65), dim=-2, layout="transposed", cpu=True),
            case("unsqueeze", "float32", (40, 30), dim=2, layout="strided", cpu=True),
            case("unsqueeze", "int32", (), dim=0, cpu=True),
            case("unsqueeze", "float32", (16, 7, 57, 32), dim=-3),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        return Call("unsqueeze", (make_input(c, gen), c["dim"]))

    def torch_op(self, call: Call) -> torch.Tensor:
        return torch.unsqueeze(*call.args)
