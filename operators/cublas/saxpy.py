"""cublas::cublasSaxpy_v2 — ``y[i*incy] = alpha * x[i*incx] + y[i*incy]`` for i < n, in place."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.cublas import _blas, _cublas
from operators.inputs import randn
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
    Out,
    Tier,
    Tolerance,
    case,
)

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _saxpy_kernel(x_ptr, y_ptr, n, alpha, incx, incy, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    i = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    x = tl.load(x_ptr + i * incx, mask=mask)
    y = tl.load(y_ptr + i * incy, mask=mask)
    tl.store(y_ptr + i * incy, alpha * x + y, mask=mask)


def cublasSaxpy_v2(n, alpha, x, incx, y, incy):
    if n <= 0:
        return None
    BLOCK = 1024 if x.device.type == "cpu" else 4096
    grid = (triton.cdiv(n, BLOCK),)
    _saxpy_kernel[grid](x, y, n, alpha, incx, incy, BLOCK=BLOCK, num_warps=8)
    return None
'''

# Loads x with incy and y with incx: right whenever incx == incy.
NEGATIVE_SWAPPED_INCREMENTS = SOLUTION.replace(
    "    x = tl.load(x_ptr + i * incx, mask=mask)\n    y = tl.load(y_ptr + i * incy, mask=mask)\n"
    "    tl.store(y_ptr + i * incy, alpha * x + y, mask=mask)",
    "    xm = mask & (i * incy <= (n - 1) * incx)\n"
    "    ym = mask & (i * incx <= (n - 1) * incy)\n"
    "    x = tl.load(x_ptr + i * incy, mask=xm)\n"
    "    y = tl.load(y_ptr + i * incx, mask=ym)\n"
    "    tl.store(y_ptr + i * incx, alpha * x + y, mask=ym)",
)

# Treats y as dense (unit stride): right whenever incy == 1.
NEGATIVE_DENSE_Y = SOLUTION.replace(
    "    y = tl.load(y_ptr + i * incy, mask=mask)\n    tl.store(y_ptr + i * incy, alpha * x + y, mask=mask)",
    "    y = tl.load(y_ptr + i, mask=mask)\n    tl.store(y_ptr + i, alpha * x + y, mask=mask)",
)

_GRID_N = (1, 32, 71, 160, 497, 1024, 4113, 4096, 5333)
_GRID_ALPHA = (0.0, 1.0, -1.5, 0.3)
_INCS = (1, 2, 3)


@register("cublas::cublasSaxpy_v2", version=1, kind=Kind.COMPUTE)
class Saxpy(OperatorSpec):
    entry_points = (
        EntryPoint(
            "cublasSaxpy_v2",
            "cublasSaxpy_v2(n: int, alpha: float, x: Tensor, incx: int, y: Tensor, incy: int) -> None",
            "For i in 0..n-1: y[i*incy] = alpha * x[i*incx] + y[i*incy], updating y in place.",
        ),
    )
    description = (
        "cuBLAS `cublasSaxpy_v2` (handle omitted): for i in 0..n-1, "
        "`y[i*incy] = alpha * x[i*incx] + y[i*incy]`, updating `y` in place and returning None. "
        "`x` and `y` are 1-D contiguous float32 tensors holding the whole device buffers "
        "(x has at least 1+(n-1)*incx elements, y at least 1+(n-1)*incy); `incx` and `incy` are "
        "positive integers; `alpha` is a Python float, used as a float32 (a C float in cuBLAS). "
        "Elements of `y` that are not at positions i*incy (i < n) must be left untouched, and `x` "
        "must not be modified. Compute in float32."
    )
    solution = SOLUTION
    negatives = (
        Negative("swapped_increments", "strides x by incy and y by incx; right only when incx == incy",
                 NEGATIVE_SWAPPED_INCREMENTS),
        Negative("dense_y", "ignores incy and updates y[i]; right only when incy == 1",
                 NEGATIVE_DENSE_Y),
    )
    # One product and one sum, each rounded once (or one fused rounding): <= 2 ulps of
    # |alpha*x| + |y|; untouched elements have scale 0 and must come back exactly.
    tolerances = {"float32": Tolerance.ulps("float32", 2)}

    def cases(self) -> Sequence[Case]:
        cs = [
            case("cublasSaxpy_v2", "float32", (71,), alpha=-1.5, incx=1, incy=1, cpu=True),
            case("cublasSaxpy_v2", "float32", (497,), alpha=0.3, incx=2, incy=3, cpu=True),
            case("cublasSaxpy_v2", "float32", (160,), alpha=1.0, incx=1, incy=2, cpu=True),
            case("cublasSaxpy_v2", "float32", (32,), alpha=0.0, incx=3, incy=2, cpu=True),
            case("cublasSaxpy_v2", "float32", (1,), alpha=2.5, incx=3, incy=3, cpu=True),
            case("cublasSaxpy_v2", "float32", (1500,), alpha=-0.75, incx=2, incy=2, cpu=True),
            case("cublasSaxpy_v2", "float32", (2049,), alpha=1.25, incx=3, incy=1, cpu=True),
        ]
        seen = {c.name for c in cs}
        for n in _GRID_N:
            for alpha in _GRID_ALPHA:
                for incx in _INCS:
                    for incy in _INCS:
                        c = case("cublasSaxpy_v2", "float32", (n,), alpha=alpha, incx=incx, incy=incy)
                        if c.name not in seen:
                            cs.append(c)
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for _ in range(4 if small else 8):
            n = rng.randrange(1, 3000 if small else 300_000)
            alpha = rng.choice([0.0, 1.0, -1.0, 0.1, -2.75, 1e-3, 7.5])
            out.append(case("cublasSaxpy_v2", "float32", (n,), alpha=alpha,
                            incx=rng.randrange(1, 5), incy=rng.randrange(1, 5), cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            case("cublasSaxpy_v2", "float32", (64 * 2**20,), alpha=1.5, incx=1, incy=1),
            case("cublasSaxpy_v2", "float32", (32 * 2**20,), alpha=-0.5, incx=2, incy=2),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        (n,) = c.shape
        incx, incy = c["incx"], c["incy"]
        x = randn((1 + (n - 1) * incx,), "float32", gen)
        y = randn((1 + (n - 1) * incy,), "float32", gen)
        return Call(c.entry, (n, c["alpha"], x, incx, y, incy), outputs=(Out.arg(4),),
                    mutable=frozenset({4}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        n, alpha, x, incx, y, incy = call.args
        alpha = _blas.as_real(alpha, "float32")  # cuBLAS takes a C float
        x64 = x.double()[: (n - 1) * incx + 1: incx]
        value = y.double().clone()
        scale = torch.zeros_like(value)
        yv = value[: (n - 1) * incy + 1: incy]
        ax = alpha * x64
        scale[: (n - 1) * incy + 1: incy] = ax.abs() + yv.abs()
        yv.add_(ax)
        return (Expected(value, torch.float32, scale),)

    def baseline_library(self) -> str:
        return _cublas.library()

    def baseline(self, call: Call) -> object:
        n, alpha, x, incx, y, incy = call.args
        if x.is_cuda and _cublas.available():
            _cublas.call("cublasSaxpy_v2", n, _cublas.scalar(alpha, torch.float32, x.device),
                         x, incx, y, incy)
            return None
        xv = x.as_strided((n,), (incx,))
        yv = y.as_strided((n,), (incy,))
        yv.add_(xv, alpha=alpha)  # cuBLAS saxpy on GPU, a vectorised loop on CPU
        return None

    def cost(self, c: Case) -> Cost:
        (n,) = c.shape
        # x read, y read and written once each (strided cases move whole sectors in practice).
        return Cost(flops=2.0 * n, bytes=12.0 * n, dtype="float32")
