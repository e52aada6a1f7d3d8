"""aten::contiguous — ``self`` when already row-major contiguous, else a contiguous copy."""

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

def _is_row_major(x):
    step = 1
    for size, stride in zip(reversed(x.shape), reversed(x.stride())):
        if size != 1 and stride != step:
            return False
        step *= size
    return True


def contiguous(self, memory_format=torch.contiguous_format):
    if memory_format is not torch.contiguous_format:
        raise NotImplementedError("only torch.contiguous_format is part of this problem")
    if self.numel() == 0 or _is_row_major(self):
        return self
    out = torch.empty(tuple(self.shape), dtype=self.dtype, device=self.device)
    return _copy_into(self, out)
'''

# Calls a tensor contiguous when its last dim has stride 1 and returns it unchanged: wrong for
# row slices of a wider tensor (x[:, :k]).
NEGATIVE_LAST_STRIDE_ONLY = SOLUTION.replace(
    "    if self.numel() == 0 or _is_row_major(self):\n",
    "    if self.numel() == 0 or self.dim() == 0 or self.stride(-1) == 1:\n")


@register("aten::contiguous", version=1, kind=Kind.VIEW)
class Contiguous(ViewProblem):
    entry_points = (
        EntryPoint("contiguous", "contiguous(self: Tensor, *, memory_format: torch.memory_format"
                   " = torch.contiguous_format) -> Tensor",
                   "self if row-major contiguous, else a row-major contiguous copy."),
    )
    description = (
        "Following `Tensor.contiguous()` (memory_format `torch.contiguous_format` only): when "
        "`self` is already row-major contiguous (strides of size-1 dims do not matter; empty "
        "tensors count as contiguous) the result is `self` itself — no copy; otherwise a **new "
        "row-major contiguous tensor** with self's values, written by your Triton kernel. Inputs "
        "may be transposed, strided, sliced, 0-D, complex or integer."
    )
    solution = SOLUTION
    negatives = (
        Negative("last_stride_only", "treats any tensor whose last stride is 1 as contiguous",
                 NEGATIVE_LAST_STRIDE_ONLY),
    )

    def cases(self) -> Sequence[Case]:
        return [
            case("contiguous", "float32", (63, 145), cpu=True),
            case("contiguous", "float32", (63, 145), layout="transposed", cpu=True),
            case("contiguous", "float16", (7, 17, 31), layout="strided", cpu=True),
            case("contiguous", "bfloat16", (40, 30), layout="sliced", cpu=True),
            case("contiguous", "int32", (5, 1, 7), layout="transposed", cpu=True),
            case("contiguous", "complex64", (9, 4), layout="transposed", cpu=True),
            case("contiguous", "float32", (), cpu=True),
            case("contiguous", "float32", (16, 7, 57, 32), layout="sliced"),
        ]

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            case("contiguous", "float32", (8192, 8192), layout="transposed"),
            case("contiguous", "bfloat16", (64, 512, 1024), layout="sliced"),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        if c.get("layout") == "sliced":  # x[..., :n] of a tensor 3 columns wider
            wide = make_input(Case(c.entry, c.dtype, (*c.shape[:-1], c.shape[-1] + 3)), gen)
            return Call("contiguous", (wide[..., : c.shape[-1]],))
        return Call("contiguous", (make_input(c, gen),))

    def torch_op(self, call: Call) -> torch.Tensor:
        x: torch.Tensor = call.args[0]
        return x.contiguous()

    def cost(self, c: Case) -> Cost:
        return copy_cost(c)
