"""aten::gt — elementwise ``self > other`` as a bool tensor (overloads Tensor, Scalar,
Tensor_out, Scalar_out), with broadcasting and PyTorch's type promotion."""

from __future__ import annotations

import torch

from operators.aten._pointwise import ComparisonSpec, comparison_solution
from operators.registry import register
from operators.spec import Kind, Negative

SOLUTION = comparison_solution("gt", ">")

# Compares everything in float32: right for float32/half operands and small integers, wrong for
# int64 (2**60 + 1 > 2**60 becomes 2**60 > 2**60) and for float64 neighbours.
NEGATIVE_ALL_FLOAT32 = SOLUTION.replace("CT=_TL[common])", "CT=tl.float32)")

# Takes the flat fast path whenever the shapes match, ignoring strides: right for contiguous
# operands, wrong for transposed or strided ones (still reading inside their storage).
NEGATIVE_SHAPE_ONLY = SOLUTION.replace("flat = all(_dense(t, shape) for t in tensors)",
                                       "flat = all(list(t.shape) == shape for t in tensors)")

assert NEGATIVE_ALL_FLOAT32 != SOLUTION and NEGATIVE_SHAPE_ONLY != SOLUTION


@register("aten::gt", version=1, kind=Kind.COMPUTE)
class Gt(ComparisonSpec):
    op = "gt"
    symbol = ">"
    word = "greater than"
    torch_op = staticmethod(torch.gt)
    entry_points = ComparisonSpec.make_entry_points("gt", ">")
    description = ComparisonSpec.make_description("gt", ">", "greater than")
    solution = SOLUTION
    negatives = (
        Negative("compares_in_float32", "casts both operands to float32 whatever their result "
                 "type: large int32/int64 and float64 neighbours compare equal",
                 NEGATIVE_ALL_FLOAT32),
        Negative("ignores_strides", "indexes same-shape operands with the output's flat index, "
                 "ignoring their strides (transposed or strided inputs)", NEGATIVE_SHAPE_ONLY),
    )
