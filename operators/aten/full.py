"""aten::full — a new tensor of ``size`` filled with ``fill_value`` (overloads default, out)."""

from __future__ import annotations

import math
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
from operators.spec import Call, Case, Cost, EntryPoint, Expected, Kind, Negative, Out, case

SOLUTION = r'''
import torch
import triton
import triton.language as tl
''' + FILL_KERNEL + r'''

def _infer_dtype(value):
    if isinstance(value, bool):
        return torch.bool
    if isinstance(value, int):
        return torch.int64
    return torch.float32


def full(size, fill_value, *, dtype=None, device=None):
    dtype = dtype or _infer_dtype(fill_value)
    out = torch.empty(tuple(size), dtype=dtype, device=device)
    return _fill(out, fill_value)


def full_out(size, fill_value, *, out):
    return _fill(out, fill_value)
'''

# Infers float32 for every Python number: right for float fill values only.
NEGATIVE_ALWAYS_FLOAT = SOLUTION.replace("    if isinstance(value, int):\n        return torch.int64\n",
                                         "")


@register("aten::full", version=1, kind=Kind.ALLOC)
class Full(AllocProblem):
    entry_points = (
        EntryPoint("full", "full(size: List[int], fill_value: Scalar, *, dtype: "
                   "Optional[torch.dtype] = None, device: Optional[torch.device] = None) -> "
                   "Tensor", "A new contiguous tensor of shape size filled with fill_value."),
        EntryPoint("full_out", "full_out(size: List[int], fill_value: Scalar, *, out: Tensor) "
                   "-> Tensor", "Fills out (already of shape size) with fill_value."),
    )
    description = (
        "Following `torch.full`: a new row-major contiguous tensor of shape `size` on `device`, "
        "every element `fill_value` converted to the result dtype. Without `dtype` the dtype "
        "follows the Python type of `fill_value`: bool -> torch.bool, int -> torch.int64, "
        "float -> torch.float32. `fill_value` may be inf, -inf or nan, and is converted with "
        "round-to-nearest-even. `full_out` writes it into every element of `out` (any strides). "
        "Write the values with your Triton kernel (`torch.full`, `zeros`, `ones` … are not "
        "allowed)."
    )
    solution = SOLUTION
    negatives = (Negative("always_float", "infers float32 for int fill values",
                          NEGATIVE_ALWAYS_FLOAT),)

    def cases(self) -> Sequence[Case]:
        return [
            case("full", "float32", (63, 145), value=0.001, cpu=True),
            case("full", "float16", (7, 17, 31), value=-111.999, dtype_arg=True, cpu=True),
            case("full", "bfloat16", (49,), value=math.inf, dtype_arg=True, cpu=True),
            case("full", "float32", (5, 5), value=math.nan, cpu=True),
            case("full", "int64", (5, 7), value=2**40 + 3, cpu=True),
            case("full", "int32", (4,), value=-7, dtype_arg=True, cpu=True),
            case("full", "bool", (3, 4), value=True, cpu=True),
            case("full", "float64", (), value=0.1, dtype_arg=True, cpu=True),
            case("full_out", "float32", (40, 30), value=-0.999, layout="strided", cpu=True),
            case("full", "float32", (0, 3), value=1.0, cpu=True),
            case("full", "float32", (16, 7, 57, 32, 29), value=100.001),
        ]

    def benchmark_cases(self) -> Sequence[Case]:
        return [case("full", "float32", (8192, 8192), value=0.5),
                case("full", "bfloat16", (16384, 8192), value=-2.0, dtype_arg=True)]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        value = c["value"]
        if c.entry == "full_out":
            out = source_tensor(c, gen)
            return Call(c.entry, (list(c.shape), value), {"out": out}, outputs=(Out.arg("out"),),
                        mutable=frozenset({"out"}), out_buffers=frozenset({"out"}))
        kwargs: dict[str, object] = {"device": HERE}
        if c.get("dtype_arg"):
            kwargs["dtype"] = c.torch_dtype
        return Call(c.entry, (list(c.shape), value), kwargs)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        size, value = call.args
        if call.entry == "full_out":
            out = call.kwargs["out"]
            return (expected_tensor(torch.full(out.shape, value, dtype=out.dtype)),)
        dtype = call.kwargs.get("dtype")
        return (expected_tensor(torch.full(size, value, dtype=dtype), strides=True),)

    def baseline(self, call: Call) -> object:
        return torch.full(*call.args, **call.kwargs)

    def cost(self, c: Case) -> Cost:
        return write_cost(c.shape, c.dtype)
