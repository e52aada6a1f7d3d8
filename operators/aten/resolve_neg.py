"""aten::resolve_neg — a tensor with its neg bit materialised; self when the bit is unset."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from operators.aten._views import COPY_KERNEL, ViewProblem, make_input
from operators.registry import register
from operators.spec import Call, Case, EntryPoint, Kind, Negative, case

# Tensors reach the candidate through the harness as plain strided tensors, so the neg bit is
# never set on them: every case is the "nothing to resolve" case, whose contract is to return
# self itself (an alias, no copy). docs/suite.md says so.
SOLUTION = r'''
import torch
import triton
import triton.language as tl


def resolve_neg(self):
    if not self.is_neg():
        return self
    raise NotImplementedError("inputs with the neg bit set are not part of this problem")
'''

# Always copies (into a fresh contiguous tensor): the values are right, but the result no longer
# aliases self, which callers that write through it rely on; only an empty tensor cannot tell.
NEGATIVE_COPIES = r'''
import torch
import triton
import triton.language as tl
''' + COPY_KERNEL + r'''

def resolve_neg(self):
    out = torch.empty(tuple(self.shape), dtype=self.dtype, device=self.device)
    return _copy_into(self, out)
'''


@register("aten::resolve_neg", version=1, kind=Kind.VIEW)
class ResolveNeg(ViewProblem):
    entry_points = (
        EntryPoint("resolve_neg", "resolve_neg(self: Tensor) -> Tensor",
                   "self with its neg bit materialised; self itself when the bit is unset."),
    )
    description = (
        "Following `torch.resolve_neg`: when `self.is_neg()` is False (always the case for "
        "the tensors of this problem) the result is `self` itself — the same tensor, sharing "
        "its storage, strides and offset, not a copy. Inputs may be non-contiguous, complex, "
        "integer, 0-D or empty."
    )
    solution = SOLUTION
    negatives = (
        Negative("copies", "returns a fresh copy instead of self", NEGATIVE_COPIES),
    )

    def cases(self) -> Sequence[Case]:
        return [
            case("resolve_neg", "float32", (63, 145), cpu=True),
            case("resolve_neg", "complex64", (7, 17), layout="transposed", cpu=True),
            case("resolve_neg", "float16", (40, 30), layout="strided", cpu=True),
            case("resolve_neg", "int32", (), cpu=True),
            case("resolve_neg", "float32", (0, 4), cpu=True),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        return Call("resolve_neg", (make_input(c, gen),))

    def torch_op(self, call: Call) -> torch.Tensor:
        return torch.resolve_neg(call.args[0])
