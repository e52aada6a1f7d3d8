"""aten::eq — elementwise ``self == other`` as a bool tensor (overloads Tensor, Scalar,
Tensor_out, Scalar_out), with broadcasting and PyTorch's type promotion."""

from __future__ import annotations

import torch

from operators.aten._pointwise import ComparisonSpec, comparison_solution
from operators.registry import register
from operators.spec import Kind, Negative

SOLUTION = comparison_solution("eq", "==")

# Compares a Scalar in float32 without rounding it to the tensor's dtype first: right for
# float32, integer and exactly representable scalars, wrong where PyTorch rounds the number
# (a float16 100.0 equals 100.001 for PyTorch, not in float32).
NEGATIVE_UNROUNDED_SCALAR = SOLUTION.replace(
    "    b = torch.empty((), dtype=common, device=self.device)\n",
    "    common = torch.float32 if common.is_floating_point else common\n"
    "    b = torch.empty((), dtype=common, device=self.device)\n")

# Compares the raw bits (as integers of the same width): right for integers and ordinary
# floats, wrong for NaN (equal to itself) and signed zeros (-0.0 != 0.0).
NEGATIVE_RAW_BITS = SOLUTION.replace(
    "    tl.store(out_ptr + out_off, a == b, mask=mask)",
    "    if CT.is_floating():\n"
    "        a = a.to(tl.float32).to(tl.int32, bitcast=True)\n"
    "        b = b.to(tl.float32).to(tl.int32, bitcast=True)\n"
    "    tl.store(out_ptr + out_off, a == b, mask=mask)")

assert NEGATIVE_UNROUNDED_SCALAR != SOLUTION and NEGATIVE_RAW_BITS != SOLUTION


@register("aten::eq", version=1, kind=Kind.COMPUTE)
class Eq(ComparisonSpec):
    op = "eq"
    symbol = "=="
    word = "equal to"
    torch_op = staticmethod(torch.eq)
    entry_points = ComparisonSpec.make_entry_points("eq", "==")
    description = ComparisonSpec.make_description("eq", "==", "equal to")
    solution = SOLUTION
    negatives = (
        Negative("unrounded_scalar", "compares a Python number in float32 instead of rounding "
                 "it to the tensor's dtype first, as PyTorch does", NEGATIVE_UNROUNDED_SCALAR),
        Negative("raw_bits", "compares floats by their bit patterns: NaN equals itself and "
                 "-0.0 differs from 0.0", NEGATIVE_RAW_BITS),
    )
