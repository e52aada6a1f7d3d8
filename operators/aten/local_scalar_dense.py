"""aten::_local_scalar_dense — the one element of a tensor as a Python number."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from operators.aten._views import make_input
from operators.registry import register
from operators.spec import (
    Call,
    Case,
    Cost,
    EntryPoint,
    Expected,
    Kind,
    Negative,
    OperatorSpec,
    Tier,
    Tolerance,
    case,
    high_precision,
)

# Reading one element back to the host is the whole operation: a device-to-host copy, no
# kernel to write and nothing worth timing (docs/suite.md).
SOLUTION = r'''
import torch
import triton
import triton.language as tl


def _local_scalar_dense(self):
    if self.numel() != 1:
        raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to Scalar")
    return self.item()
'''

# Widens integers and bools to a Python float: right for floating and complex tensors only.
NEGATIVE_ALWAYS_FLOAT = SOLUTION.replace(
    "    return self.item()",
    "    v = self.item()\n    return float(v) if isinstance(v, int) else v")

PY_TYPE = {"bool": "bool", "int8": "int", "uint8": "int", "int16": "int", "int32": "int",
           "int64": "int", "complex64": "complex", "complex128": "complex"}
EXACT = {n: Tolerance(0.0, 0.0) for n in ("float64", "complex128")}


@register("aten::_local_scalar_dense", version=1, kind=Kind.SCALAR)
class LocalScalarDense(OperatorSpec):
    entry_points = (
        EntryPoint("_local_scalar_dense", "_local_scalar_dense(self: Tensor) -> Scalar",
                   "The one element of self as a Python bool, int, float or complex."),
    )
    description = (
        "Following `torch.ops.aten._local_scalar_dense`: the single element of `self` (any "
        "shape with exactly one element: 0-D, (1,), (1, 1) …; any dtype; any strides) as a "
        "**Python number**: `bool` for "
        "torch.bool, `int` for integer dtypes, `float` for floating dtypes (the exact value, "
        "widened), `complex` for complex dtypes. NaN, inf, -0.0 and denormals come back as they "
        "are. A tensor with another number of elements is a RuntimeError."
    )
    solution = SOLUTION
    negatives = (Negative("always_float", "returns a float for integer and bool tensors",
                          NEGATIVE_ALWAYS_FLOAT),)
    tolerances = EXACT

    def cases(self) -> Sequence[Case]:
        return [
            case("_local_scalar_dense", "float32", (), cpu=True),
            case("_local_scalar_dense", "float16", (1,), special="nan", cpu=True),
            case("_local_scalar_dense", "bfloat16", (1, 1), special="-inf", cpu=True),
            case("_local_scalar_dense", "float32", (1,), special="denormal", cpu=True),
            case("_local_scalar_dense", "float64", (), special="-0.0", cpu=True),
            case("_local_scalar_dense", "int64", (), special="big", cpu=True),
            case("_local_scalar_dense", "int32", (1, 1, 1), cpu=True),
            case("_local_scalar_dense", "bool", (), cpu=True),
            case("_local_scalar_dense", "complex64", (1,), cpu=True),
        ]

    def hidden_cases(self, rng: object, tier: Tier) -> Sequence[Case]:
        return []

    def benchmark_cases(self) -> Sequence[Case]:
        return []

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        special = c.get("special")
        if c.dtype == "bool":
            x = torch.randint(0, 2, c.shape, generator=gen).bool()
        elif special == "big":
            x = torch.full(c.shape, 2**62 + int(torch.randint(0, 1000, (), generator=gen)),
                           dtype=torch.int64)
        else:
            x = make_input(c, gen)
        if special in ("nan", "-inf", "-0.0"):
            x = torch.full(c.shape, float(special.replace("-0.0", "-0")), dtype=x.dtype)
        elif special == "denormal":
            x = x * 1e-39
        return Call("_local_scalar_dense", (x,))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x = call.args[0]
        kind = PY_TYPE.get(str(x.dtype).removeprefix("torch."), "float")
        dtype = {"float": torch.float64, "complex": torch.complex128}.get(kind, x.dtype)
        value = x.reshape(()).to(high_precision(x.dtype) if kind in ("float", "complex")
                                 else x.dtype)
        return (Expected(value.to(dtype), dtype, python=kind),)

    def baseline(self, call: Call) -> object:
        return call.args[0].item()

    def cost(self, c: Case) -> Cost:
        return Cost(0.0, float(c.torch_dtype.itemsize), c.dtype)
