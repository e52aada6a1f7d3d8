"""aten::sgn — the sign of each element (overloads default, out), real floats and integers."""

from __future__ import annotations

import torch

from operators.aten._unary import (
    FLOATS,
    INF,
    NAN,
    PLAIN_WRAPPERS,
    Unary,
    describe,
    half_denormals,
    ignores_strides,
    pick,
    solution,
)
from operators.registry import register
from operators.spec import Call, Case, EntryPoint, Kind, Negative, Tolerance

OP = r'''
@triton.jit
def _op(x, p0, p1):
    # (x > 0) - (x < 0): 0 for zeros and, as in PyTorch, for NaN
    return (x > 0).to(x.dtype) - (x < 0).to(x.dtype)
'''

SOLUTION = solution(OP, PLAIN_WRAPPERS, name="sgn")

# numpy's convention: NaN propagates (PyTorch's sgn gives 0 for NaN).
NEGATIVE_NAN_PROPAGATES = SOLUTION.replace(
    "    return (x > 0).to(x.dtype) - (x < 0).to(x.dtype)",
    "    return tl.where(x != x, x, (x > 0).to(x.dtype) - (x < 0).to(x.dtype))")


@register("aten::sgn", version=1, kind=Kind.COMPUTE)
class Sgn(Unary):
    op = "sgn"
    int_dtypes = ("int32", "int64")
    entry_points = (
        EntryPoint("sgn", "sgn(self: Tensor) -> Tensor",
                   "The sign of each element: -1, 0 or 1, in self's dtype."),
        EntryPoint("sgn_out", "sgn_out(self: Tensor, *, out: Tensor) -> Tensor",
                   "Writes sgn(self) into out (same shape and dtype) and returns out."),
    )
    description = describe(
        "The elementwise sign `out = (x > 0) - (x < 0)` in the input's dtype, following "
        "PyTorch's `torch.sgn` on real tensors (complex inputs, where sgn is x / |x|, are not "
        "part of this problem): 1 for positive values (+inf and subnormals included), -1 for "
        "negative ones, 0 for ±0 and — as PyTorch does — 0 for NaN.", FLOATS,
        ints="int32 and int64 inputs (full range) give exact -1/0/1 of the same dtype.")
    solution = SOLUTION
    negatives = (
        Negative("nan_propagates", "returns NaN for NaN inputs (numpy's sign) where PyTorch's "
                 "sgn gives 0", NEGATIVE_NAN_PROPAGATES),
        Negative("ignores_input_strides", "indexes a sliced input as if contiguous",
                 ignores_strides(SOLUTION)),
    )
    # -1, 0 and 1 are exact in every dtype.
    tolerances = {
        "float16": Tolerance(0.0, 0.0),
        "bfloat16": Tolerance(0.0, 0.0),
        "float32": Tolerance(0.0, 0.0),
    }
    flops_per_element = 2.0

    def sample(self, n: int, c: Case, gen: torch.Generator) -> torch.Tensor:
        # zeros are common in practice (e.g. sgn in abs' gradient of ReLU outputs)
        z = torch.randn(n, generator=gen, dtype=torch.float64)
        return pick(n, gen, z, z, z * 1e-3, torch.zeros(n, dtype=torch.float64))

    def edges(self, dtype: torch.dtype, c: Case) -> list[float]:
        # float32-range subnormals are left out: a flush to 0 would turn ±1 into 0
        fi = torch.finfo(dtype)
        return [INF, -INF, NAN, 0.0, -0.0, fi.max, -fi.max, *half_denormals(dtype)]

    def ref64(self, x: torch.Tensor, call: Call) -> tuple[torch.Tensor, None]:
        return (x > 0).double() - (x < 0).double(), None

    def ref_int(self, x: torch.Tensor, call: Call) -> torch.Tensor:
        return (x > 0).long() - (x < 0).long()
