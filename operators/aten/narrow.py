"""aten::narrow — ``length`` elements of one dim from ``start``, as a view."""

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


def narrow(self, dim, start, length):
    nd = self.dim()
    if nd == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    if dim < 0:
        dim += nd
    size = self.shape[dim]
    if start < 0:
        start += size
    if start < 0 or length < 0 or start + length > size:
        raise IndexError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    sizes = list(self.shape)
    sizes[dim] = length
    offset = self.storage_offset() + start * self.stride(dim)
    return self.as_strided(sizes, tuple(self.stride()), offset)
'''

# Moves the start by ``start`` elements instead of ``start`` steps along the dim: right only
# where that dim's stride is 1 (or start is 0).
NEGATIVE_ELEMENT_OFFSET = SOLUTION.replace("start * self.stride(dim)", "start")


@register("aten::narrow", version=1, kind=Kind.VIEW)
class Narrow(ViewProblem):
    entry_points = (
        EntryPoint("narrow", "narrow(self: Tensor, dim: int, start: int, length: int) -> Tensor",
                   "self's elements start .. start+length-1 along dim, as a view."),
    )
    description = (
        "Following `torch.narrow`: a **view** of `self` keeping `length` elements of dimension "
        "`dim` from index `start` (negative `dim` and `start` count from the end). The result "
        "shares self's storage: same strides, storage offset moved by `start * stride(dim)`; "
        "nothing is copied. Inputs may be non-contiguous. `length` may be 0."
    )
    solution = SOLUTION
    negatives = (
        Negative("element_offset", "offsets by start elements, ignoring the dim's stride",
                 NEGATIVE_ELEMENT_OFFSET),
    )

    def cases(self) -> Sequence[Case]:
        return [
            case("narrow", "float32", (63, 145), dim=1, start=7, length=50, cpu=True),
            case("narrow", "float32", (63, 145), dim=0, start=5, length=20, cpu=True),
            case("narrow", "float16", (7, 17, 31), dim=-2, start=-9, length=4, cpu=True),
            case("narrow", "bfloat16", (33, 65), dim=0, start=0, length=33, layout="transposed",
                 cpu=True),
            case("narrow", "float32", (40, 30), dim=1, start=3, length=11, layout="strided",
                 cpu=True),
            case("narrow", "int32", (49,), dim=0, start=48, length=1, cpu=True),
            case("narrow", "float32", (10, 12), dim=1, start=4, length=0, cpu=True),
            case("narrow", "float32", (16, 7, 57, 32), dim=2, start=13, length=31),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        return Call("narrow", (make_input(c, gen), c["dim"], c["start"], c["length"]))

    def torch_op(self, call: Call) -> torch.Tensor:
        return torch.narrow(*call.args)
