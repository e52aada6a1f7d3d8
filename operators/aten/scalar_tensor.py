"""aten::scalar_tensor — a 0-D tensor holding a Python number."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from operators.aten._alloc import FILL_KERNEL, HERE, AllocProblem, expected_tensor
from operators.registry import register
from operators.spec import Call, Case, Cost, EntryPoint, Expected, Kind, Negative, case

SOLUTION = r'''
import torch
import triton
import triton.language as tl
''' + FILL_KERNEL + r'''

def scalar_tensor(s, *, dtype=None, device=None):
    out = torch.empty((), dtype=dtype or torch.float32, device=device)
    return _fill(out, s)
'''

# Infers the dtype from the number (int -> int64) like torch.tensor does; scalar_tensor's
# default is float32 whatever s is.
NEGATIVE_INFERS_DTYPE = SOLUTION.replace(
    "    out = torch.empty((), dtype=dtype or torch.float32, device=device)\n",
    "    inferred = torch.int64 if isinstance(s, int) and not isinstance(s, bool) else "
    "torch.float32\n"
    "    out = torch.empty((), dtype=dtype or inferred, device=device)\n")


@register("aten::scalar_tensor", version=1, kind=Kind.ALLOC)
class ScalarTensor(AllocProblem):
    timed = False  # one element: launch-bound whatever the kernel
    entry_points = (
        EntryPoint("scalar_tensor", "scalar_tensor(s: Scalar, *, dtype: Optional[torch.dtype] = "
                   "None, device: Optional[torch.device] = None) -> Tensor",
                   "A 0-D tensor holding s (default dtype float32)."),
    )
    description = (
        "Following `torch.scalar_tensor`: a new 0-D tensor on `device` holding the Python "
        "number `s` converted to `dtype` — float32 by default, **whatever the type of s** "
        "(unlike `torch.tensor`). s may be inf or nan. Write the value with your Triton kernel "
        "(`torch.full`, `torch.tensor(s)` as the result … are not allowed)."
    )
    solution = SOLUTION
    negatives = (Negative("infers_dtype", "infers int64 for an int s", NEGATIVE_INFERS_DTYPE),)

    def cases(self) -> Sequence[Case]:
        return [
            case("scalar_tensor", "float32", (), s=0.001, cpu=True),
            case("scalar_tensor", "float32", (), s=-111.999, cpu=True),
            case("scalar_tensor", "float32", (), s=7, cpu=True),
            case("scalar_tensor", "float16", (), s=math.inf, dtype_arg=True, cpu=True),
            case("scalar_tensor", "int64", (), s=2**40 + 1, dtype_arg=True, cpu=True),
            case("scalar_tensor", "bool", (), s=True, dtype_arg=True, cpu=True),
            case("scalar_tensor", "float64", (), s=math.nan, dtype_arg=True, cpu=True),
        ]

    def benchmark_cases(self) -> Sequence[Case]:
        return []

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        kwargs: dict[str, object] = {"device": HERE}
        if c.get("dtype_arg"):
            kwargs["dtype"] = c.torch_dtype
        return Call("scalar_tensor", (c["s"],), kwargs)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        dtype = call.kwargs.get("dtype", torch.float32)
        return (expected_tensor(torch.scalar_tensor(call.args[0], dtype=dtype)),)

    def baseline(self, call: Call) -> object:
        return torch.scalar_tensor(*call.args, **call.kwargs)

    def cost(self, c: Case) -> Cost:
        return Cost(0.0, float(c.torch_dtype.itemsize), c.dtype)
