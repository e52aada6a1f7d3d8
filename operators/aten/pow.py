"""aten::pow — ``self ** exponent`` with broadcasting (overloads Tensor_Tensor, Tensor_Scalar,
Scalar (a Python-number base), Tensor_Tensor_out)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch

from operators.aten._binary import (
    OUT,
    SCALAR,
    SCALAR_SELF,
    TENSOR,
    BinaryProblem,
    grid,
    hidden,
    normal,
    solution,
    uniform,
)
from operators.inputs import randint
from operators.registry import register
from operators.spec import Case, EntryPoint, Kind, Negative, Tier, Tolerance, case

_OP = r'''
@triton.jit
def _op(a, b, p, MODE: tl.constexpr):
    if MODE == 0:
        r = libdevice.pow(a, b)  # C pow: (-8) ** 3 = -512, (-8) ** 0.5 = nan, 0 ** -1 = inf
    else:
        # Integers, exactly as PyTorch: square-and-multiply (wrapping on overflow); a negative
        # exponent gives 1 for base 1, +-1 for base -1 and 0 otherwise.
        e = tl.where(b < 0, 0, b)
        base = a
        r = tl.zeros_like(a) + 1
        while tl.max(e, axis=0) > 0:
            r = tl.where((e & 1) != 0, r * base, r)
            base = base * base
            e = e >> 1
        odd = (b & 1) != 0
        neg = tl.where(a == 1, 1, tl.where(a == -1, tl.where(odd, -1, 1), 0))
        r = tl.where(b < 0, neg.to(r.dtype), r)
    return r
'''

_WRAPPERS = r'''

def _pow(a, b, out):
    ct = _CT[out.dtype]
    return _launch(a, b, out, 0, ct, 0 if ct.is_floating() else 1)


def pow_Tensor_Tensor(self, exponent):
    a, b = torch.broadcast_tensors(self, exponent)
    out = torch.empty(a.shape, dtype=self.dtype, device=self.device)
    return _pow(a, b, out)


def pow_Tensor_Scalar(self, exponent):
    b = _scalar(exponent, _CT[self.dtype], self.device).expand(self.shape)
    out = torch.empty(self.shape, dtype=self.dtype, device=self.device)
    return _pow(self, b, out)


def pow_Scalar(self, exponent):
    a = _scalar(self, _CT[exponent.dtype], exponent.device).expand(exponent.shape)
    out = torch.empty(exponent.shape, dtype=exponent.dtype, device=exponent.device)
    return _pow(a, exponent, out)


def pow_Tensor_Tensor_out(self, exponent, *, out):
    a, b = torch.broadcast_tensors(self, exponent)
    return _pow(a, b, out)
'''

SOLUTION = solution(_OP, _WRAPPERS)

# exp2(y * log2(x)): nan for every negative base, even with integer exponents.
NEGATIVE_EXP_LOG = SOLUTION.replace(
    "        r = libdevice.pow(a, b)  # C pow: (-8) ** 3 = -512, (-8) ** 0.5 = nan, 0 ** -1 = inf",
    "        r = tl.exp2(b * tl.log2(a))")
# Integer powers through float32 pow: inexact beyond 2**24.
NEGATIVE_INT_VIA_FLOAT = SOLUTION.replace(
    "    return _launch(a, b, out, 0, ct, 0 if ct.is_floating() else 1)",
    "    return _launch(a, b, out, 0, tl.float32, 0)")

_ENTRIES = [("pow_Tensor_Tensor", TENSOR), ("pow_Tensor_Scalar", SCALAR),
            ("pow_Scalar", SCALAR_SELF), ("pow_Tensor_Tensor_out", OUT)]


@register("aten::pow", version=1, kind=Kind.COMPUTE)
class Pow(BinaryProblem):
    op_name = "pow"
    forms = dict(_ENTRIES)
    entry_points = (
        EntryPoint("pow_Tensor_Tensor",
                   "pow_Tensor_Tensor(self: Tensor, exponent: Tensor) -> Tensor",
                   "self ** exponent, broadcasting self and exponent."),
        EntryPoint("pow_Tensor_Scalar",
                   "pow_Tensor_Scalar(self: Tensor, exponent: Scalar) -> Tensor",
                   "self ** exponent for a Python-number exponent."),
        EntryPoint("pow_Scalar", "pow_Scalar(self: Scalar, exponent: Tensor) -> Tensor",
                   "self ** exponent for a Python-number base self (as in 2 ** x)."),
        EntryPoint("pow_Tensor_Tensor_out",
                   "pow_Tensor_Tensor_out(self: Tensor, exponent: Tensor, *, out: Tensor) "
                   "-> Tensor",
                   "Writes self ** exponent into out (already of the broadcast shape, possibly "
                   "non-contiguous) and returns out."),
    )
    description = (
        "Elementwise power `out = self ** exponent`, following PyTorch's `torch.pow`, with C's "
        "`pow` semantics for floats: negative bases with integer-valued exponents give signed "
        "results ((-2) ** 3 = -8), with non-integer exponents nan; x ** 0 = 1 even for nan; "
        "1 ** y = 1 even for nan; 0 ** negative = inf (-inf for -0 and odd exponents); infinite "
        "bases and exponents follow C99 (e.g. 0.5 ** inf = 0, (-1) ** inf = 1); results beyond "
        "the dtype's range are inf. `self` and `exponent` broadcast (either may be 0-d; empty "
        "tensors give empty results); inputs and `out` may be non-contiguous (transposed or "
        "strided). The tensor operands have one dtype (float16, bfloat16, float32, float64, "
        "int32 or int64) and the result has that dtype; a Python-number base or exponent is a "
        "float for float tensors and an int for int tensors (no negative int Scalar exponent). "
        "Integer powers are exact (square-and-multiply, wrapping modulo 2**bits on overflow); a "
        "negative integer exponent in a tensor gives 1 for base 1, +-1 for base -1 (by the "
        "exponent's parity) and 0 for any other base. For float16/bfloat16, compute in float32 "
        "and round once; a float scalar is held in float32 (float64 for float64)."
    )
    solution = SOLUTION
    negatives = (
        Negative("exp2_log2", "computes exp2(exponent * log2(self)): nan for negative bases "
                 "even with integer exponents", NEGATIVE_EXP_LOG),
        Negative("int_via_float32", "integer powers through float32 pow, inexact beyond 2**24",
                 NEGATIVE_INT_VIA_FLOAT),
    )
    # The scale carries pow's conditioning, |x**y| * (1 + |y| + |y ln x|): a float32 pow (or
    # exp2(y log2 x)) errs by ~|y ln x| units, a float base held in float32 by ~|y| units.
    # Then one rounding of the result and ~1 unit of the library pow.
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 4),
        "float64": Tolerance.ulps("float64", 4),
    }

    def draw(self, role: str, shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator,
             c: Case) -> torch.Tensor:
        signed = c.get("values") == "signed"
        if not dtype.is_floating_point:
            if role == "self":
                return randint(shape, dtype, gen, low=-6, high=7)
            return randint(shape, dtype, gen, low=-3 if signed else 0, high=13)
        if role == "self":
            return normal(shape, dtype, gen, std=2.0) if signed else \
                uniform(shape, dtype, gen, low=0.05, high=4.0)
        if signed:  # integer-valued exponents: negative bases give signed results
            return randint(shape, dtype, gen, low=-4, high=6)
        return uniform(shape, dtype, gen, low=-4.0, high=4.0)

    def edge_values(self, role: str, dtype: torch.dtype) -> Sequence[float]:
        inf, nan = float("inf"), float("nan")
        if role == "self":
            return (inf, -inf, nan, 0.0, -0.0, 1.0, -1.0)
        return (inf, -inf, nan, 0.0, -0.0, 0.5, -1.0, 3.0)

    def ref64(self, a: torch.Tensor, b: torch.Tensor, kw: dict[str, Any],
              dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor | None]:
        value = torch.pow(a, b)
        cond = (b * torch.log(a.abs())).abs()
        cond = torch.where(torch.isfinite(cond), cond, torch.zeros_like(cond))
        return value, value.abs() * (1 + b.abs().nan_to_num(posinf=0.0) + cond)

    def cases(self) -> Sequence[Case]:
        tt, ts, sb = "pow_Tensor_Tensor", "pow_Tensor_Scalar", "pow_Scalar"
        cs = grid(tt, scalar=ts, out="pow_Tensor_Tensor_out", scalars=(2.0, -1.5))
        cs += [
            case(tt, "float32", (37, 61), other=(37, 61), values="signed", cpu=True),
            case(tt, "float16", (511, 257), other=(257,), values="signed", edge=True),
            case(tt, "bfloat16", (511, 257), other=(511, 1), values="signed"),
            case(tt, "float64", (511, 257), other=(511, 257), edge=True),
            case(tt, "float64", (45, 31), other=(45, 31), values="signed", cpu=True),
            case(ts, "float32", (49, 63), other=3.0, values="signed", edge=True, cpu=True),
            case(ts, "float32", (63, 45), other=0.5),
            case(ts, "float16", (49, 63), other=-2.0, values="signed", edge=True),
            case(ts, "bfloat16", (49, 63), other=2.5),
            case(sb, "float32", (49, 63), self=2.0, edge=True, cpu=True),
            case(sb, "float16", (63, 45), self=2.5, layout="transposed"),
            case(sb, "bfloat16", (49, 63), self=0.5, edge=True),
            case(sb, "float32", (96, 80), self=10.0, layout="strided"),
            case(tt, "int64", (31, 45), other=(31, 45), values="signed", cpu=True),
            case(tt, "int64", (63, 145), other=(63, 145), values="signed"),
            case(tt, "int32", (511, 257), other=(257,)),
            case(ts, "int32", (49, 63), other=3),
            case(sb, "int64", (49, 63), self=3),
            case("pow_Tensor_Tensor_out", "int64", (7, 17, 31), other=(17, 1),
                 values="signed"),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        return hidden(rng, tier, _ENTRIES, scalars=(2.0, 0.5, 3.0, 1.5),
                      variants=({}, {"values": "signed"}))

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            case("pow_Tensor_Tensor", "float32", (2048, 4096), other=(2048, 4096)),  # 96 MiB
            case("pow_Tensor_Scalar", "bfloat16", (4096, 4096), other=2.5),  # 64 MiB
            case("pow_Scalar", "float16", (4096, 4096), self=2.0),  # 64 MiB
        ]
