"""aten::select — one index of one dim, dropping that dim, as a view (overload int)."""

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


def select_int(self, dim, index):
    nd = self.dim()
    if nd == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    if dim < 0:
        dim += nd
    size = self.shape[dim]
    if index < -size or index >= size:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{tuple(self.shape)} at dimension {dim}")
    if index < 0:
        index += size
    sizes = [s for d, s in enumerate(self.shape) if d != dim]
    strides = [s for d, s in enumerate(self.stride()) if d != dim]
    return self.as_strided(sizes, strides, self.storage_offset() + index * self.stride(dim))
'''

# Steps along the last dim's stride whatever dim is selected: right only when selecting from
# the last dim (or index 0).
NEGATIVE_LAST_STRIDE = SOLUTION.replace("index * self.stride(dim))", "index * self.stride(-1))")


@register("aten::select", version=1, kind=Kind.VIEW)
class Select(ViewProblem):
    entry_points = (
        EntryPoint("select_int", "select_int(self: Tensor, dim: int, index: int) -> Tensor",
                   "self[..., index, ...] at dimension dim, as a view without that dimension."),
    )
    description = (
        "Following `torch.select`: a **view** of `self` at position `index` of dimension `dim`, "
        "with that dimension removed (negative `dim` and `index` count from the end; an index out "
        "of range is an IndexError). Shares self's storage: the remaining strides, storage offset "
        "moved by `index * stride(dim)`; nothing is copied. Selecting from a 1-D tensor gives a "
        "0-D view. Inputs may be non-contiguous."
    )
    solution = SOLUTION
    negatives = (
        Negative("last_dim_stride", "moves by the last dim's stride whatever dim is selected",
                 NEGATIVE_LAST_STRIDE),
    )

    def cases(self) -> Sequence[Case]:
        return [
            case("select_int", "float32", (63, 145), dim=1, index=7, cpu=True),
            case("select_int", "float32", (63, 145), dim=0, index=-3, cpu=True),
            case("select_int", "float16", (7, 17, 31), dim=-2, index=16, cpu=True),
            case("select_int", "bfloat16", (33, 65), dim=1, index=64, layout="transposed",
                 cpu=True),
            case("select_int", "float32", (40, 30), dim=0, index=39, layout="strided", cpu=True),
            case("select_int", "int32", (49,), dim=0, index=11, cpu=True),
            case("select_int", "float32", (16, 7, 57, 32), dim=2, index=50),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        return Call("select_int", (make_input(c, gen), c["dim"], c["index"]))

    def torch_op(self, call: Call) -> torch.Tensor:
        return torch.select(*call.args)
