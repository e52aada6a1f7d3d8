"""aten::empty_strided — an uninitialised tensor with the given sizes and strides."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from operators.aten._alloc import HERE, AllocProblem, expected_tensor
from operators.registry import register
from operators.spec import Call, Case, Cost, EntryPoint, Expected, Kind, Negative, case

# Nothing to compute: the answer is the allocation's geometry. No kernel, nothing to time.
SOLUTION = r'''
import torch
import triton
import triton.language as tl


def empty_strided(size, stride, *, dtype=None, device=None):
    if len(size) != len(stride):
        raise RuntimeError(f"mismatch in length of strides and shape: {len(size)} vs "
                           f"{len(stride)}")
    return torch.empty_strided(tuple(size), tuple(stride), dtype=dtype or torch.float32,
                               device=device)
'''

# Allocates row-major whatever stride says: right when stride is row-major.
NEGATIVE_IGNORES_STRIDE = SOLUTION.replace(
    "    return torch.empty_strided(tuple(size), tuple(stride), dtype=dtype or torch.float32,\n"
    "                               device=device)",
    "    return torch.empty(tuple(size), dtype=dtype or torch.float32, device=device)")


@register("aten::empty_strided", version=1, kind=Kind.ALLOC)
class EmptyStrided(AllocProblem):
    metadata_only = True
    entry_points = (
        EntryPoint("empty_strided", "empty_strided(size: List[int], stride: List[int], *, dtype: "
                   "Optional[torch.dtype] = None, device: Optional[torch.device] = None) -> "
                   "Tensor", "A new tensor with these sizes and strides; values undefined."),
    )
    description = (
        "Following `torch.empty_strided`: a new tensor of shape `size` whose strides are exactly "
        "`stride` (in elements; they may be non-row-major, e.g. column-major, or have gaps), of "
        "`dtype` (default float32) on `device`. Its values are undefined and are not checked: "
        "dtype, shape and strides are the answer."
    )
    solution = SOLUTION
    negatives = (Negative("ignores_stride", "allocates row-major whatever stride says",
                          NEGATIVE_IGNORES_STRIDE),)

    def cases(self) -> Sequence[Case]:
        return [
            case("empty_strided", "float32", (63, 145), stride=(145, 1), cpu=True),
            case("empty_strided", "float32", (63, 145), stride=(1, 63), cpu=True),
            case("empty_strided", "float16", (7, 17, 31), stride=(1, 7, 119), cpu=True),
            case("empty_strided", "int64", (5, 6), stride=(12, 2), cpu=True),
            case("empty_strided", "bfloat16", (4, 1, 3), stride=(3, 3, 1), cpu=True),
            case("empty_strided", "float32", (), stride=(), cpu=True),
            case("empty_strided", "float32", (0, 4), stride=(4, 1), cpu=True),
        ]

    def benchmark_cases(self) -> Sequence[Case]:
        return []

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        kwargs = {"device": HERE} if c.dtype == "float32" else {"dtype": c.torch_dtype,
                                                                 "device": HERE}
        return Call("empty_strided", (list(c.shape), list(c["stride"])), kwargs)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        size, stride = call.args
        t = torch.empty_strided(size, stride, dtype=call.kwargs.get("dtype", torch.float32))
        return (expected_tensor(t, strides=True, values=False),)

    def baseline(self, call: Call) -> object:
        return torch.empty_strided(*call.args, **call.kwargs)

    def cost(self, c: Case) -> Cost:
        return Cost(0.0, 0.0, c.dtype)
