"""aten::le — elementwise ``self <= other`` as a bool tensor (overloads Tensor, Scalar,
Tensor_out, Scalar_out), with broadcasting and PyTorch's type promotion."""

from __future__ import annotations

import torch

from operators.aten._pointwise import ComparisonSpec, comparison_solution
from operators.registry import register
from operators.spec import Kind, Negative

SOLUTION = comparison_solution("le", "<=")

# Computes `not (self > other)`: the same for every ordered pair, wrong where a NaN is involved
# (PyTorch's le is False there, the negation True).
NEGATIVE_NOT_GT = SOLUTION.replace("tl.store(out_ptr + out_off, a <= b, mask=mask)",
                                   "tl.store(out_ptr + out_off, (a > b) == 0, mask=mask)")

assert NEGATIVE_NOT_GT != SOLUTION


@register("aten::le", version=1, kind=Kind.COMPUTE)
class Le(ComparisonSpec):
    op = "le"
    symbol = "<="
    word = "less than or equal to"
    torch_op = staticmethod(torch.le)
    entry_points = ComparisonSpec.make_entry_points("le", "<=")
    description = ComparisonSpec.make_description("le", "<=", "less than or equal to")
    solution = SOLUTION
    negatives = (
        Negative("not_greater", "computes not (self > other), which is True instead of False "
                 "where either side is NaN", NEGATIVE_NOT_GT),
    )
