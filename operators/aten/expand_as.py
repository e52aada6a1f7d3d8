"""aten::expand_as — ``self`` broadcast to ``other``'s shape, as a view."""

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


def expand_as(self, other):
    size = list(other.shape)
    nd, new = self.dim(), len(size)
    if new < nd:
        raise RuntimeError("expand_as: other has fewer dimensions than self")
    sizes, strides = [], []
    for i in range(new):
        j = i - (new - nd)  # right-aligned
        if j < 0:
            sizes.append(size[i])
            strides.append(0)
        elif self.shape[j] == size[i]:
            sizes.append(size[i])
            strides.append(self.stride(j))
        elif self.shape[j] == 1:
            sizes.append(size[i])
            strides.append(0)
        else:
            raise RuntimeError(f"The expanded size of the tensor ({size[i]}) must match the "
                               f"existing size ({self.shape[j]}) at non-singleton dimension {i}")
    return self.as_strided(sizes, strides, self.storage_offset())
'''

# Aligns dims from the left: right when self and other have the same number of dims.
# (and, written as carelessly, never checks the sizes it is given).
NEGATIVE_LEFT_ALIGNED = SOLUTION.replace(
    "        j = i - (new - nd)  # right-aligned\n        if j < 0:\n",
    "        j = i if i < nd else -1\n        if j < 0:\n").replace(
    "            raise RuntimeError(f\"The expanded size of the tensor ({size[i]}) must match the \"\n"
    "                               f\"existing size ({self.shape[j]}) at non-singleton dimension {i}\")",
    "            sizes.append(size[i])\n            strides.append(0)")


@register("aten::expand_as", version=1, kind=Kind.VIEW)
class ExpandAs(ViewProblem):
    entry_points = (
        EntryPoint("expand_as", "expand_as(self: Tensor, other: Tensor) -> Tensor",
                   "self broadcast to other's shape, as a view (other's values are not read)."),
    )
    description = (
        "Following `Tensor.expand_as`: `self.expand(other.shape)` — a **view** of `self` "
        "broadcast to `other`'s shape. Sizes align from the right; size-1 dims of self and new "
        "leading dims get stride 0. Nothing is copied: the result shares self's storage and "
        "offset; `other` is only used for its shape."
    )
    solution = SOLUTION
    negatives = (
        Negative("left_aligned", "aligns dims from the left instead of the right",
                 NEGATIVE_LEFT_ALIGNED),
    )

    def cases(self) -> Sequence[Case]:
        return [
            case("expand_as", "float32", (63, 1), other=(63, 145), cpu=True),
            case("expand_as", "float32", (145,), other=(4, 63, 145), cpu=True),
            case("expand_as", "float16", (7, 1, 31), other=(3, 7, 17, 31), cpu=True),
            case("expand_as", "bfloat16", (33, 1), other=(33, 65), layout="transposed", cpu=True),
            case("expand_as", "int32", (), other=(5, 6), cpu=True),
            case("expand_as", "float32", (16, 1, 57, 1), other=(16, 7, 57, 32)),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        x = make_input(c, gen)
        other = torch.empty(c["other"], dtype=x.dtype)
        other.zero_()
        return Call("expand_as", (x, other))

    def torch_op(self, call: Call) -> torch.Tensor:
        x: torch.Tensor = call.args[0]
        return x.expand_as(call.args[1])
