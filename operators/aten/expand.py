"""aten::expand — broadcast size-1 dims (and new leading dims) to ``size``, as a view."""

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


def expand(self, size, *, implicit=False):
    size = list(size)
    nd, new = self.dim(), len(size)
    if new < nd:
        raise RuntimeError(f"expand: the number of sizes provided ({new}) must be greater or "
                           f"equal to the number of dimensions in the tensor ({nd})")
    sizes, strides = [], []
    for i in range(new):
        j = i - (new - nd)  # the input dim aligned with output dim i (right-aligned)
        want = size[i]
        if j < 0:
            if want < 0:
                raise RuntimeError("expand: -1 is not allowed in a leading, new dimension")
            sizes.append(want)
            strides.append(0)
            continue
        have = self.shape[j]
        if want == -1:
            want = have
        if have == want:
            sizes.append(have)
            strides.append(self.stride(j))
        elif have == 1:
            sizes.append(want)
            strides.append(0)
        else:
            raise RuntimeError(f"The expanded size of the tensor ({want}) must match the "
                               f"existing size ({have}) at non-singleton dimension {i}")
    return self.as_strided(sizes, strides, self.storage_offset())
'''

# Reads -1 as "size 1" instead of "keep this size": right wherever -1 stands for a size-1 dim.
# (and, written as carelessly, never checks the sizes it is given).
NEGATIVE_MINUS_ONE = SOLUTION.replace(
    "        if want == -1:\n            want = have\n",
    "        if want == -1:\n            want = 1\n").replace(
    "            raise RuntimeError(f\"The expanded size of the tensor ({want}) must match the \"\n"
    "                               f\"existing size ({have}) at non-singleton dimension {i}\")",
    "            sizes.append(want)\n            strides.append(self.stride(j))")


@register("aten::expand", version=1, kind=Kind.VIEW)
class Expand(ViewProblem):
    entry_points = (
        EntryPoint("expand", "expand(self: Tensor, size: List[int], *, implicit: bool = False) "
                   "-> Tensor", "self broadcast to size, as a view with stride 0 on new dims."),
    )
    description = (
        "Following `Tensor.expand`: a **view** of `self` broadcast to `size`. Sizes align from "
        "the right; a size-1 dim of self may take any size (its stride becomes 0); -1 keeps "
        "self's size in that dim; extra leading dims are new, with stride 0 (-1 not allowed "
        "there). Nothing is copied: the result shares self's storage and offset. Inputs may be "
        "non-contiguous or 0-D."
    )
    solution = SOLUTION
    negatives = (
        Negative("minus_one_is_one", "treats -1 as size 1 instead of keeping the size",
                 NEGATIVE_MINUS_ONE),
    )

    def cases(self) -> Sequence[Case]:
        return [
            case("expand", "float32", (63, 1), size=(63, 145), cpu=True),
            case("expand", "float32", (1, 145), size=(4, -1, 145), cpu=True),
            case("expand", "float16", (7, 1, 31), size=(3, 7, 17, -1), cpu=True),
            case("expand", "bfloat16", (33, 1), size=(-1, 65), layout="transposed", cpu=True),
            case("expand", "float32", (1, 30), size=(40, 30), layout="strided", cpu=True),
            case("expand", "int32", (), size=(5, 6), cpu=True),
            case("expand", "float32", (1, 1), size=(-1, -1), cpu=True),
            case("expand", "float32", (16, 1, 57, 1), size=(16, 7, 57, 32)),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        return Call("expand", (make_input(c, gen), list(c["size"])))

    def torch_op(self, call: Call) -> torch.Tensor:
        x: torch.Tensor = call.args[0]
        return x.expand(call.args[1])
