"""aten::add_ — in-place ``self += alpha * other``, other broadcast to self's shape (overloads
Tensor, Scalar). aten::add (out of place) is operators/aten/add.py."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch

from operators.aten._binary import (
    INPLACE,
    INPLACE_SCALAR,
    BinaryProblem,
    grid,
    hidden,
    solution,
)
from operators.registry import register
from operators.spec import Case, EntryPoint, Kind, Negative, Tier, Tolerance, case

_OP = r'''
@triton.jit
def _op(a, b, p, MODE: tl.constexpr):
    return a + p * b
'''

_WRAPPERS = r'''

def _alpha(x, alpha):
    return float(alpha) if x.dtype.is_floating_point else int(alpha)


def add__Tensor(self, other, *, alpha=1):
    # Each element of self is read and then written by the same lane, so self can be both the
    # input and the output of the kernel (whatever its strides).
    b = other.expand(self.shape)
    return _launch(self, b, self, _alpha(self, alpha))


def add__Scalar(self, other, alpha=1):
    b = _scalar(other, _CT[self.dtype], self.device).expand(self.shape)
    return _launch(self, b, self, _alpha(self, alpha))
'''

SOLUTION = solution(_OP, _WRAPPERS)

# Forgets the positional alpha of the Scalar overload: right only when alpha == 1.
# (the last launch in the source is add__Scalar's)
_HEAD, _TAIL = SOLUTION.rsplit("_alpha(self, alpha))", 1)
NEGATIVE_SCALAR_NO_ALPHA = _HEAD + "_alpha(self, 1))" + _TAIL

_ENTRIES = [("add__Tensor", INPLACE), ("add__Scalar", INPLACE_SCALAR)]
_ALPHAS = ({"alpha": 1}, {"alpha": 0.5}, {"alpha": -2.0}, {"alpha": 3.0})


@register("aten::add_", version=1, kind=Kind.COMPUTE)
class AddInplace(BinaryProblem):
    op_name = "add"
    method = "add_"
    forms = dict(_ENTRIES)
    kw_names = ("alpha",)
    flops_per_element = 2
    entry_points = (
        EntryPoint("add__Tensor",
                   "add__Tensor(self: Tensor, other: Tensor, *, alpha: Scalar = 1) -> Tensor",
                   "In place: self += alpha * other (other broadcast to self's shape); "
                   "returns self."),
        EntryPoint("add__Scalar",
                   "add__Scalar(self: Tensor, other: Scalar, alpha: Scalar = 1) -> Tensor",
                   "In place: self += alpha * other for a Python number other; returns self."),
    )
    description = (
        "In-place elementwise addition with a scale: `self = self + alpha * other`, following "
        "PyTorch's `Tensor.add_`; the entry points write into `self` (which may be "
        "non-contiguous: transposed or strided — write through its strides) and return `self`. "
        "`other` broadcasts to `self`'s shape (it may be 0-d, or have fewer or size-1 dims); "
        "empty tensors are a no-op. Both tensors have the same dtype (float16, bfloat16, "
        "float32, int32 or int64); `alpha` and a Python-number `other` are ints for int tensors "
        "and floats (or ints) for float tensors. For float16/bfloat16, compute in float32 and "
        "round once. IEEE semantics: inf + -inf = nan, nan propagates, results beyond the "
        "dtype's range are inf. Integer results are exact modulo 2**bits."
    )
    solution = SOLUTION
    negatives = (
        Negative("scalar_ignores_alpha", "the Scalar overload adds other, dropping its positional "
                 "alpha", NEGATIVE_SCALAR_NO_ALPHA),
    )
    # As aten::add: the product alpha * other and the sum, each rounded once, plus the
    # rounding of alpha to float32 for float32 tensors.
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 4),
    }

    def ref64(self, a: torch.Tensor, b: torch.Tensor, kw: dict[str, Any],
              dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor | None]:
        alpha = kw.get("alpha", 1)
        return a + alpha * b, a.abs() + (alpha * b).abs()

    def exact(self, a: Any, b: Any, kw: dict[str, Any]) -> torch.Tensor:
        return torch.add(a, b, **kw)

    def cases(self) -> Sequence[Case]:
        cs = grid("add__Tensor", scalar="add__Scalar", variants=_ALPHAS, inplace=True,
                  scalars=(-0.999, 100.001))
        cs += [
            case("add__Tensor", "int32", (511, 257), other=(257,), alpha=3),
            case("add__Tensor", "int32", (45, 81), other=(45, 1), alpha=-2, layout="transposed",
                 cpu=True),
            case("add__Scalar", "int64", (49, 63), other=1 << 40, alpha=5),
            case("add__Tensor", "int64", (7, 17, 31), other=(7, 17, 31), alpha=1),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        return hidden(rng, tier, _ENTRIES, variants=_ALPHAS + ({"alpha": 0.001},))

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            case("add__Tensor", "float32", (2048, 4096), other=(2048, 4096), alpha=1),  # 96 MiB
            case("add__Tensor", "bfloat16", (4096, 4096), other=(4096,), alpha=0.5),  # 64 MiB
            case("add__Scalar", "float16", (4096, 4096), other=1.5, alpha=2),  # 64 MiB
        ]
