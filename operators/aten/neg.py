"""aten::neg — ``-self`` elementwise (overloads default, out), floats and integers."""

from __future__ import annotations

import torch

from operators.aten._unary import (
    FLOATS,
    PLAIN_WRAPPERS,
    Unary,
    denormals,
    describe,
    ignores_strides,
    solution,
)
from operators.registry import register
from operators.spec import Call, EntryPoint, Kind, Negative, Tolerance

OP = r'''
@triton.jit
def _op(x, p0, p1):
    return -x
'''

SOLUTION = solution(OP, PLAIN_WRAPPERS, name="neg")

# Routes integers through float32 too (one code path for every dtype): exact for floats, wrong
# for integers beyond 2**24.
NEGATIVE_INT_VIA_FLOAT = SOLUTION.replace("    y = _op(x, p0, p1)",
                                          "    y = _op(x.to(tl.float32), p0, p1)")


@register("aten::neg", version=1, kind=Kind.COMPUTE)
class Neg(Unary):
    op = "neg"
    int_dtypes = ("int32", "int64")
    entry_points = (
        EntryPoint("neg", "neg(self: Tensor) -> Tensor", "-self, elementwise."),
        EntryPoint("neg_out", "neg_out(self: Tensor, *, out: Tensor) -> Tensor",
                   "Writes -self into out (same shape and dtype) and returns out."),
    )
    description = describe(
        "Elementwise negation `out = -self`, following PyTorch's `torch.neg`.", FLOATS,
        ints="Integer inputs (int32, int64, full range) stay integers and must be exact; "
             "negating the most negative value wraps around to itself, as in PyTorch.")
    solution = SOLUTION
    negatives = (
        Negative("int_via_float32", "converts integers to float32 before negating, losing "
                 "every value beyond 2**24", NEGATIVE_INT_VIA_FLOAT),
        Negative("ignores_input_strides", "indexes a sliced input as if contiguous",
                 ignores_strides(SOLUTION)),
    )
    # Negation is exact; the absolute floor of one smallest normal admits flushed subnormals.
    tolerances = {
        "float16": Tolerance.ulps("float16", 0, atol_ulps=1),
        "bfloat16": Tolerance.ulps("bfloat16", 0, atol_ulps=1),
        "float32": Tolerance.ulps("float32", 0, atol_ulps=1),
    }

    def edges(self, dtype: torch.dtype, c: object) -> list[float]:
        fi = torch.finfo(dtype)
        return [float("inf"), float("-inf"), float("nan"), 0.0, -0.0, fi.max, -fi.max,
                *denormals(dtype)]

    def ref64(self, x: torch.Tensor, call: Call) -> tuple[torch.Tensor, None]:
        return -x, None

    def ref_int(self, x: torch.Tensor, call: Call) -> torch.Tensor:
        return torch.neg(x)  # two's complement wrap-around for the most negative value
