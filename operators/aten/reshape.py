"""aten::reshape — ``self`` with a new shape: a view when the strides allow it, else a copy."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from operators.aten._views import COPY_KERNEL, ViewProblem, copy_cost, make_input
from operators.registry import register
from operators.spec import Call, Case, Cost, EntryPoint, Kind, Negative, case

SOLUTION = r'''
import torch
import triton
import triton.language as tl
''' + COPY_KERNEL + r'''

def _infer(shape, numel):
    shape = list(shape)
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    if -1 in shape:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{shape}' is invalid for input of size {numel}")
        shape[shape.index(-1)] = numel // known
    elif known != numel:
        raise RuntimeError(f"shape '{shape}' is invalid for input of size {numel}")
    return shape


def _view_strides(old, old_strides, new):
    """Strides that let `new` view the elements of (old, old_strides) in row-major order, or
    None when no view can (then reshape copies)."""
    if not old:
        return [1] * len(new)
    numel = 1
    for s in old:
        numel *= s
    if numel == 0 and list(old) == list(new):
        return list(old_strides)
    strides = [0] * len(new)
    if numel == 0:
        for d in range(len(new) - 1, -1, -1):
            strides[d] = 1 if d == len(new) - 1 else max(new[d + 1], 1) * strides[d + 1]
        return strides
    view_d = len(new) - 1
    base = old_strides[-1]
    tensor_numel, view_numel = 1, 1
    for d in range(len(old) - 1, -1, -1):
        tensor_numel *= old[d]
        # a chunk of old dims ends where the next one is not laid out right before it
        if d == 0 or (old[d - 1] != 1 and old_strides[d - 1] != tensor_numel * base):
            while view_d >= 0 and (view_numel < tensor_numel or new[view_d] == 1):
                strides[view_d] = view_numel * base
                view_numel *= new[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if d > 0:
                base = old_strides[d - 1]
                tensor_numel, view_numel = 1, 1
    if view_d != -1:
        return None
    return strides


def reshape(self, shape):
    shape = _infer(shape, self.numel())
    strides = _view_strides(list(self.shape), list(self.stride()), shape)
    if strides is not None:
        return self.as_strided(shape, strides, self.storage_offset())
    out = torch.empty(tuple(self.shape), dtype=self.dtype, device=self.device)
    _copy_into(self, out)
    return out.view(shape)
'''

# Views every input with row-major strides, as if it were contiguous: right for contiguous
# inputs, the wrong elements for transposed or strided ones.
NEGATIVE_ALWAYS_VIEWS = SOLUTION.replace(
    "    strides = _view_strides(list(self.shape), list(self.stride()), shape)\n",
    "    strides = _view_strides(list(self.shape), _row_major(list(self.shape)), shape)\n") + r'''

def _row_major(shape):
    strides, step = [], 1
    for s in reversed(shape):
        strides.insert(0, step)
        step *= max(s, 1)
    return strides
'''


@register("aten::reshape", version=1, kind=Kind.VIEW)
class Reshape(ViewProblem):
    entry_points = (
        EntryPoint("reshape", "reshape(self: Tensor, shape: List[int]) -> Tensor",
                   "self's elements (row-major order) in a new shape; a view when possible."),
    )
    description = (
        "Following `torch.reshape`: `self`'s elements, taken in row-major (C) order, arranged "
        "in `shape` (one entry may be -1, inferred from the others). When self's strides allow "
        "it, the result is a **view** sharing self's storage, with the strides PyTorch's view "
        "rule gives (dims of size 1 are free); otherwise it is a **new contiguous tensor** "
        "holding a copy, which your Triton kernel must write. Inputs may be non-contiguous, "
        "0-D or empty."
    )
    solution = SOLUTION
    negatives = (
        Negative("always_views", "views every input as if it were contiguous",
                 NEGATIVE_ALWAYS_VIEWS),
    )

    def cases(self) -> Sequence[Case]:
        return [
            case("reshape", "float32", (63, 145), to=(145, 63), cpu=True),
            case("reshape", "float32", (7, 17, 31), to=(7, -1), cpu=True),
            case("reshape", "float16", (33, 65), to=(-1,), layout="transposed", cpu=True),
            case("reshape", "bfloat16", (40, 30), to=(20, 2, 30), layout="strided", cpu=True),
            case("reshape", "float32", (12, 10), to=(2, 6, 10), layout="transposed", cpu=True),
            case("reshape", "int32", (), to=(1, 1), cpu=True),
            case("reshape", "float32", (0, 6), to=(3, 0, 2), cpu=True),
            case("reshape", "complex64", (6, 8), to=(48,), layout="transposed", cpu=True),
            case("reshape", "float32", (16, 7, 57, 32), to=(112, -1)),
        ]

    def benchmark_cases(self) -> Sequence[Case]:
        return [  # transposed inputs: no view exists, 256 MiB / 128 MiB are copied
            case("reshape", "float32", (8192, 8192), to=(-1,), layout="transposed"),
            case("reshape", "bfloat16", (8192, 8192), to=(4096, -1), layout="transposed"),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        return Call("reshape", (make_input(c, gen), list(c["to"])))

    def torch_op(self, call: Call) -> torch.Tensor:
        return torch.reshape(*call.args)

    def cost(self, c: Case) -> Cost:
        return copy_cost(c)
