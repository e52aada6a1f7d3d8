"""cublas::cublasDaxpy_v2 — ``y_i = alpha * x_i + y_i`` for i < n, strided float64 vectors."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from operators.cublas import _blas, _cublas, _level1
from operators.registry import register
from operators.spec import (
    Call,
    Case,
    Cost,
    EntryPoint,
    Expected,
    Kind,
    Negative,
    Out,
    Tolerance,
    case,
)

SOLUTION = r'''
import triton
import triton.language as tl


@triton.jit
def _daxpy_kernel(x_ptr, y_ptr, n, alpha: tl.float64, incx, incy, x0, y0, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    x = tl.load(x_ptr + x0 + i * incx, mask=mask)
    py = y_ptr + y0 + i * incy
    y = tl.load(py, mask=mask)
    tl.store(py, alpha * x + y, mask=mask)


def _start(n, inc):
    # A negative increment starts at the far end: element i is at (n - 1 - i) * |inc|.
    return (n - 1) * -inc if inc < 0 else 0


def cublasDaxpy_v2(n, alpha, x, incx, y, incy):
    if n <= 0 or alpha == 0:  # BLAS's quick returns: y is left as it is
        return None
    BLOCK = 1024 if x.device.type == "cpu" else 2048
    _daxpy_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, float(alpha), incx, incy, _start(n, incx),
                                            _start(n, incy), BLOCK=BLOCK, num_warps=8)
    return None
'''

# Takes |inc| and walks forward from x[0]: right when both increments have the same sign.
NEGATIVE_ABS_INCREMENT = _blas.variant(SOLUTION, (
    "x, y, n, float(alpha), incx, incy, _start(n, incx),\n"
    "                                            _start(n, incy),",
    "x, y, n, float(alpha), abs(incx), abs(incy), 0, 0,"))

# Scales y instead of x: right when alpha == 1.
NEGATIVE_ALPHA_ON_Y = _blas.variant(SOLUTION, ("tl.store(py, alpha * x + y, mask=mask)",
                                               "tl.store(py, x + alpha * y, mask=mask)"))


@register("cublas::cublasDaxpy_v2", version=1, kind=Kind.COMPUTE)
class Daxpy(_level1.Level1):
    routine, precision = "cublasDaxpy_v2", "float64"
    alphas, incs = (0.0, 1.0, -1.5, 0.3), (1, 2, -1, -3)
    hidden_alphas = (0.0, 1.0, -1.0, 0.1, -2.75, 1e-3, 7.5)
    entry_points = (
        EntryPoint(
            "cublasDaxpy_v2",
            "cublasDaxpy_v2(n: int, alpha: float, x: Tensor, incx: int, y: Tensor, incy: int) "
            "-> None",
            "For i in 0..n-1: y_i = alpha * x_i + y_i over strided float64 vectors, in place.",
        ),
    )
    description = (
        "cuBLAS `cublasDaxpy_v2` (handle omitted): `y_i = alpha * x_i + y_i` for i in 0..n-1, "
        "updating `y` in place and returning None. `x` and `y` are 1-D contiguous float64 "
        "tensors holding the device buffers; `alpha` is a Python float. Element i of x is "
        "`x[i*incx]` when incx > 0; a negative increment starts at the far end, element i "
        "being `x[(n-1-i)*|incx|]`; likewise for y with incy (increments are never 0). Each "
        "buffer holds at least 1 + (n-1)*|inc| elements; the elements of y that are not the "
        "vector's must be left untouched, and x must not be modified. When n <= 0 or "
        "alpha == 0 nothing is done (y keeps its values). Compute in float64."
    )
    solution = SOLUTION
    negatives = (
        Negative("abs_increment", "walks forward from x[0] and y[0] by |inc| for negative "
                 "increments; right only when both increments have the same sign",
                 NEGATIVE_ABS_INCREMENT),
        Negative("alpha_on_y", "computes x + alpha * y; right only when alpha == 1",
                 NEGATIVE_ALPHA_ON_Y),
    )
    # One product and one sum, each rounded once (or one fused rounding): <= 2 u of
    # |alpha*x| + |y|; untouched elements have scale 0 and must come back exactly.
    tolerances = {"float64": Tolerance.ulps("float64", 2)}

    def edge_cases(self) -> list[Case]:
        e, d = self.routine, self.precision
        return [
            case(e, d, (71,), alpha=-1.5, incx=1, incy=1, cpu=True),
            case(e, d, (497,), alpha=0.3, incx=2, incy=3, cpu=True),
            case(e, d, (160,), alpha=1.0, incx=-1, incy=-2, cpu=True),
            case(e, d, (33,), alpha=1.0, incx=-3, incy=1, cpu=True),
            case(e, d, (1500,), alpha=-0.75, incx=1, incy=-1, cpu=True),
            case(e, d, (32,), alpha=0.0, incx=3, incy=2, cpu=True),
            case(e, d, (0,), alpha=2.5, incx=1, incy=1, cpu=True),
            case(e, d, (1000,), alpha=1e100, incx=2, incy=1, std=1e150),
        ]

    def benchmark_cases(self) -> Sequence[Case]:
        e, d = self.routine, self.precision
        return [case(e, d, (32 * 2**20,), alpha=1.5, incx=1, incy=1),
                case(e, d, (32 * 2**20,), alpha=-0.5, incx=-1, incy=1),
                case(e, d, (16 * 2**20,), alpha=0.25, incx=2, incy=2)]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        (n,) = c.shape
        x = _level1.vector(c, c["incx"], gen)
        y = _level1.vector(c, c["incy"], gen)
        return Call(c.entry, (n, c["alpha"], x, c["incx"], y, c["incy"]), outputs=(Out.arg(4),),
                    mutable=frozenset({4}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        n, alpha, x, incx, y, incy = call.args
        ax = float(alpha) * _blas.gather(x, n, incx).double()
        yv = _blas.gather(y, n, incy).double()
        return (Expected(_level1.updated(y, n, incy, ax + yv), torch.float64,
                         _level1.at(y, n, incy, ax.abs() + yv.abs())),)

    def baseline(self, call: Call) -> object:
        n, alpha, x, incx, y, incy = call.args
        if x.is_cuda and _cublas.available():
            _cublas.call("cublasDaxpy_v2", n, _cublas.scalar(alpha, torch.float64, x.device),
                         x, incx, y, incy)
        elif n > 0 and alpha != 0:
            _blas.scatter_(y, n, incy, torch.add(_blas.gather(y, n, incy),
                                                 _blas.gather(x, n, incx), alpha=alpha))
        return None

    def cost(self, c: Case) -> Cost:
        (n,) = c.shape
        work = max(n, 0) if c["alpha"] != 0 else 0
        return _blas.streaming_cost(2 * work, 3 * work, "float64")
