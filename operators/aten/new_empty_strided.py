"""aten::new_empty_strided — an uninitialised tensor with the given sizes and strides, with
``self``'s dtype and device."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from operators.aten._alloc import AllocProblem, expected_tensor, source_tensor
from operators.registry import register
from operators.spec import Call, Case, Cost, EntryPoint, Expected, Kind, Negative, case

# Nothing to compute: the answer is the allocation's geometry. No kernel, nothing to time.
SOLUTION = r'''
import torch
import triton
import triton.language as tl


def new_empty_strided(self, size, stride, *, dtype=None):
    if len(size) != len(stride):
        raise RuntimeError(f"mismatch in length of strides and shape: {len(size)} vs "
                           f"{len(stride)}")
    return torch.empty_strided(tuple(size), tuple(stride), dtype=dtype or self.dtype,
                               device=self.device)
'''

# Falls back to float32 instead of self's dtype.
NEGATIVE_DEFAULT_FLOAT32 = SOLUTION.replace("dtype=dtype or self.dtype",
                                            "dtype=dtype or torch.float32")


@register("aten::new_empty_strided", version=1, kind=Kind.ALLOC)
class NewEmptyStrided(AllocProblem):
    metadata_only = True
    entry_points = (
        EntryPoint("new_empty_strided", "new_empty_strided(self: Tensor, size: List[int], "
                   "stride: List[int], *, dtype: Optional[torch.dtype] = None) -> Tensor",
                   "A new tensor with these sizes and strides, like self; values undefined."),
    )
    description = (
        "Following `Tensor.new_empty_strided`: a new tensor of shape `size` with exactly the "
        "strides `stride`, on `self`'s device, of `dtype` (default: self's dtype). self's values "
        "and shape are not used. The result's values are undefined and are not checked: dtype, "
        "shape and strides are the answer."
    )
    solution = SOLUTION
    negatives = (Negative("default_float32", "defaults to float32 instead of self's dtype",
                          NEGATIVE_DEFAULT_FLOAT32),)

    def cases(self) -> Sequence[Case]:
        return [
            case("new_empty_strided", "float32", (3,), size=(63, 145), stride=(1, 63), cpu=True),
            case("new_empty_strided", "float16", (3,), size=(7, 17, 31), stride=(527, 31, 1),
                 cpu=True),
            case("new_empty_strided", "int32", (2, 2), size=(5, 6), stride=(12, 2), cpu=True),
            case("new_empty_strided", "bfloat16", (2,), size=(4, 4), stride=(1, 4), to="float64",
                 cpu=True),
            case("new_empty_strided", "float32", (2,), size=(), stride=(), cpu=True),
        ]

    def benchmark_cases(self) -> Sequence[Case]:
        return []

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        kwargs = {"dtype": getattr(torch, c["to"])} if c.get("to") else {}
        return Call("new_empty_strided", (source_tensor(c, gen), list(c["size"]),
                                          list(c["stride"])), kwargs)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x, size, stride = call.args
        t = x.new_empty_strided(size, stride, **call.kwargs)
        return (expected_tensor(t, strides=True, values=False),)

    def baseline(self, call: Call) -> object:
        x, size, stride = call.args
        return x.new_empty_strided(size, stride, **call.kwargs)

    def cost(self, c: Case) -> Cost:
        return Cost(0.0, 0.0, c.dtype)
