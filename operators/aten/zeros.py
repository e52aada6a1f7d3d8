"""aten::zeros — a new tensor of ``size`` filled with 0 (overloads default, out)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from operators.aten._alloc import (
    FILL_KERNEL,
    HERE,
    AllocProblem,
    expected_tensor,
    source_tensor,
    write_cost,
)
from operators.registry import register
from operators.spec import (
    Call,
    Case,
    Cost,
    EntryPoint,
    Expected,
    Kind,
    Negative,
    Out,
    case,
    dtype_from_name,
)

SOLUTION = r'''
import torch
import triton
import triton.language as tl
''' + FILL_KERNEL + r'''

def zeros(size, *, dtype=None, device=None):
    out = torch.empty(tuple(size), dtype=dtype or torch.float32, device=device)
    return _fill(out, 0)


def zeros_out(size, *, out):
    return _fill(out, 0)
'''

# Ignores the dtype argument: right only for the float32 default.
NEGATIVE_IGNORES_DTYPE = SOLUTION.replace("dtype=dtype or torch.float32", "dtype=torch.float32")


@register("aten::zeros", version=1, kind=Kind.ALLOC)
class Zeros(AllocProblem):
    entry_points = (
        EntryPoint("zeros", "zeros(size: List[int], *, dtype: Optional[torch.dtype] = None, "
                   "device: Optional[torch.device] = None) -> Tensor",
                   "A new contiguous tensor of shape size filled with 0 (default dtype float32)."),
        EntryPoint("zeros_out", "zeros_out(size: List[int], *, out: Tensor) -> Tensor",
                   "Fills out (already of shape size) with 0 and returns it."),
    )
    description = (
        "Following `torch.zeros`: a new contiguous tensor of shape `size` (may be `[]` for a 0-D "
        "tensor, or contain 0) filled with zeros, of `dtype` (default float32) on `device`. "
        "`zeros_out` writes zeros into every element of `out` (any strides) and returns it. "
        "Allocate with `torch.empty`; the zeros themselves must be written by your Triton kernel "
        "(`torch.zeros`, `zeros_like`, `full` … are the answer and are not allowed)."
    )
    solution = SOLUTION
    negatives = (
        Negative("ignores_dtype", "always allocates float32", NEGATIVE_IGNORES_DTYPE),
    )

    def cases(self) -> Sequence[Case]:
        return [
            case("zeros", "float32", (63, 145), cpu=True),
            case("zeros", "float16", (7, 17, 31), cpu=True),
            case("zeros", "bfloat16", (49,), cpu=True),
            case("zeros", "int64", (5, 7), cpu=True),
            case("zeros", "bool", (3, 4), cpu=True),
            case("zeros", "float32", (), cpu=True),
            case("zeros", "float32", (0, 3), cpu=True),
            case("zeros_out", "float32", (40, 30), layout="strided", cpu=True),
            case("zeros_out", "int32", (33, 65), layout="transposed", cpu=True),
            case("zeros", "float32", (16, 7, 57, 32, 29)),
        ]

    def benchmark_cases(self) -> Sequence[Case]:
        return [case("zeros", "float32", (8192, 8192)), case("zeros", "bfloat16", (16384, 8192))]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        dt = dtype_from_name(c.dtype)
        if c.entry == "zeros_out":
            out = source_tensor(c, gen)
            return Call(c.entry, (list(c.shape),), {"out": out}, outputs=(Out.arg("out"),),
                        mutable=frozenset({"out"}), out_buffers=frozenset({"out"}))
        kwargs = {"device": HERE} if dt == torch.float32 else {"dtype": dt, "device": HERE}
        return Call(c.entry, (list(c.shape),), kwargs)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        if call.entry == "zeros_out":
            out = call.kwargs["out"]
            return (expected_tensor(torch.zeros(out.shape, dtype=out.dtype)),)
        dtype = call.kwargs.get("dtype", torch.float32)
        return (expected_tensor(torch.zeros(call.args[0], dtype=dtype), strides=True),)

    def baseline(self, call: Call) -> object:
        if call.entry == "zeros_out":
            return torch.zeros(call.args[0], out=call.kwargs["out"])
        return torch.zeros(call.args[0], **call.kwargs)

    def cost(self, c: Case) -> Cost:
        return write_cost(c.shape, c.dtype)
