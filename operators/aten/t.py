"""aten::t — the transpose of a tensor of at most 2 dims, as a view (0-d and 1-d: itself)."""

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


def t(self):
    if self.dim() > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {self.dim()}D")
    if self.dim() < 2:
        return self.as_strided(tuple(self.shape), tuple(self.stride()), self.storage_offset())
    rows, cols = self.shape
    s0, s1 = self.stride()
    return self.as_strided((cols, rows), (s1, s0), self.storage_offset())
'''

# Takes a non-contiguous 2-d input for "already transposed" and returns it as it is: right for
# contiguous inputs only.
NEGATIVE_SKIPS_NONCONTIGUOUS = SOLUTION.replace(
    "    rows, cols = self.shape\n",
    "    if not self.is_contiguous():\n"
    "        return self.as_strided(tuple(self.shape), tuple(self.stride()), "
    "self.storage_offset())\n"
    "    rows, cols = self.shape\n")


@register("aten::t", version=1, kind=Kind.VIEW)
class T(ViewProblem):
    entry_points = (
        EntryPoint("t", "t(self: Tensor) -> Tensor",
                   "The transpose of a tensor of at most 2 dims, sharing its storage."),
    )
    description = (
        "Transpose of a tensor with at most 2 dimensions, following `torch.t`: a 2-D tensor of "
        "shape (m, n) gives a **view** of shape (n, m) with the two strides swapped (no data is "
        "copied: the result shares the input's storage and storage offset); 0-D and 1-D tensors "
        "come back as a view of themselves. Inputs may be non-contiguous. More than 2 dims is an "
        "error (RuntimeError)."
    )
    solution = SOLUTION
    negatives = (
        Negative("skips_noncontiguous", "returns a non-contiguous 2-d input untransposed",
                 NEGATIVE_SKIPS_NONCONTIGUOUS),
    )

    def cases(self) -> Sequence[Case]:
        return [
            case("t", "float32", (63, 145), cpu=True),
            case("t", "float32", (145,), cpu=True),
            case("t", "float32", (), cpu=True),
            case("t", "float16", (33, 65), layout="transposed", cpu=True),
            case("t", "bfloat16", (40, 30), layout="strided", cpu=True),
            case("t", "int32", (7, 1), cpu=True),
            case("t", "float32", (0, 5), cpu=True),
            case("t", "complex64", (4, 9), cpu=True),
            case("t", "float32", (1024, 1024)),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        return Call("t", (make_input(c, gen),))

    def torch_op(self, call: Call) -> torch.Tensor:
        return torch.t(call.args[0])
