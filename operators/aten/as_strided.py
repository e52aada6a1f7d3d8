"""aten::as_strided — a view with the given sizes, strides and storage offset."""

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


def as_strided(self, size, stride, storage_offset=None):
    size, stride = list(size), list(stride)
    if len(size) != len(stride):
        raise RuntimeError(f"mismatch in length of strides and shape: {len(size)} vs {len(stride)}")
    if any(s < 0 for s in size) or any(s < 0 for s in stride):
        raise RuntimeError("as_strided: negative sizes or strides are not supported")
    offset = self.storage_offset() if storage_offset is None else storage_offset
    return self.as_strided(size, stride, offset)
'''

# Keeps self's storage offset whatever storage_offset says: right when it is None or equal.
NEGATIVE_IGNORES_OFFSET = SOLUTION.replace(
    "    offset = self.storage_offset() if storage_offset is None else storage_offset\n",
    "    offset = self.storage_offset()\n")


@register("aten::as_strided", version=1, kind=Kind.VIEW)
class AsStrided(ViewProblem):
    entry_points = (
        EntryPoint("as_strided", "as_strided(self: Tensor, size: List[int], stride: List[int], "
                   "storage_offset: Optional[int] = None) -> Tensor",
                   "A view of self's storage with these sizes, strides and offset."),
    )
    description = (
        "Following `torch.as_strided`: a **view** of `self`'s storage with sizes `size`, strides "
        "`stride` (in elements) and storage offset `storage_offset` (absolute, in elements from "
        "the start of the storage; None keeps self's own offset). Elements may overlap (stride "
        "0 or strides smaller than sizes). Nothing is copied; the result shares self's storage. "
        "Sizes and strides must have the same length; every element must lie inside the "
        "storage (the inputs here always satisfy that)."
    )
    solution = SOLUTION
    negatives = (
        Negative("ignores_storage_offset", "keeps self's offset instead of storage_offset",
                 NEGATIVE_IGNORES_OFFSET),
    )

    def cases(self) -> Sequence[Case]:
        return [
            case("as_strided", "float32", (63, 145), size=(145, 63), stride=(1, 145), offset=None,
                 cpu=True),
            case("as_strided", "float32", (4096,), size=(31, 64), stride=(64, 1), offset=7,
                 cpu=True),
            case("as_strided", "float16", (1000,), size=(40, 8), stride=(3, 1), offset=11,
                 cpu=True),  # overlapping windows
            case("as_strided", "bfloat16", (50,), size=(6, 7), stride=(0, 2), offset=0, cpu=True),
            case("as_strided", "int32", (7, 17, 31), size=(17, 31), stride=(31, 1), offset=527,
                 cpu=True),
            case("as_strided", "float32", (10,), size=(), stride=(), offset=9, cpu=True),
            case("as_strided", "float32", (1 << 20,), size=(512, 512, 2), stride=(1024, 2, 1),
                 offset=3),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        return Call("as_strided", (make_input(c, gen), list(c["size"]), list(c["stride"]),
                                   c["offset"]))

    def torch_op(self, call: Call) -> torch.Tensor:
        x, size, stride, offset = call.args
        return torch.as_strided(x, size, stride, offset)
