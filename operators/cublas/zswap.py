"""cublas::cublasZswap_v2 — exchange the strided complex128 vectors x and y (i < n)."""

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
    case,
)

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _zswap_kernel(x_ptr, y_ptr, n, incx, incy, x0, y0, BLOCK: tl.constexpr):
    # x_ptr, y_ptr: the float64 views; a complex element is two doubles (real, imaginary).
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    part = tl.arange(0, 2)
    mask = (i < n)[:, None]
    px = x_ptr + (2 * (x0 + i * incx))[:, None] + part[None, :]
    py = y_ptr + (2 * (y0 + i * incy))[:, None] + part[None, :]
    vx = tl.load(px, mask=mask)
    vy = tl.load(py, mask=mask)
    tl.store(px, vy, mask=mask)
    tl.store(py, vx, mask=mask)


def _start(n, inc):
    # A negative increment starts at the far end: element i is at (n - 1 - i) * |inc|.
    return (n - 1) * -inc if inc < 0 else 0


def cublasZswap_v2(n, x, incx, y, incy):
    if n <= 0:
        return None
    xr = torch.view_as_real(x)
    yr = torch.view_as_real(y)
    BLOCK = 512 if x.device.type == "cpu" else 1024
    _zswap_kernel[(triton.cdiv(n, BLOCK),)](xr, yr, n, incx, incy, _start(n, incx),
                                            _start(n, incy), BLOCK=BLOCK, num_warps=8)
    return None
'''

# Takes |inc| and walks forward from x[0]: right when both increments have the same sign.
NEGATIVE_ABS_INCREMENT = _blas.variant(SOLUTION, (
    "xr, yr, n, incx, incy, _start(n, incx),\n"
    "                                            _start(n, incy),",
    "xr, yr, n, abs(incx), abs(incy), 0, 0,"))

# Steps y by incx too, bounded by y's buffer: right when incx == incy.
NEGATIVE_ONE_INCREMENT = _blas.variant(
    SOLUTION,
    ("def _zswap_kernel(x_ptr, y_ptr, n, incx, incy, x0, y0, BLOCK: tl.constexpr):",
     "def _zswap_kernel(x_ptr, y_ptr, n, incx, incy, x0, y0, y_len, BLOCK: tl.constexpr):"),
    ("    mask = (i < n)[:, None]\n",
     "    mask = ((i < n) & (y0 + i * incx < y_len) & (y0 + i * incx >= 0))[:, None]\n"),
    ("(2 * (y0 + i * incy))", "(2 * (y0 + i * incx))"),
    ("                                            _start(n, incy), BLOCK=BLOCK,",
     "                                            _start(n, incx), y.numel(), BLOCK=BLOCK,"))


@register("cublas::cublasZswap_v2", version=1, kind=Kind.COMPUTE)
class Zswap(_level1.Level1):
    routine, precision = "cublasZswap_v2", "complex128"
    entry_points = (
        EntryPoint(
            "cublasZswap_v2",
            "cublasZswap_v2(n: int, x: Tensor, incx: int, y: Tensor, incy: int) -> None",
            "For i in 0..n-1: exchange x_i and y_i, both complex128 vectors updated in place.",
        ),
    )
    description = (
        "cuBLAS `cublasZswap_v2` (handle omitted): exchanges the double-precision complex "
        "vectors x and y, `x_i, y_i = y_i, x_i` for i in 0..n-1, updating both in place and "
        "returning None. `x` and `y` are 1-D contiguous complex128 tensors holding the device "
        "buffers (they never overlap); `torch.view_as_real` gives their float64 view, element "
        "k's real part at [k, 0] and imaginary part at [k, 1]. Element i of x is `x[i*incx]` "
        "when incx > 0; a negative increment starts at the far end, element i being "
        "`x[(n-1-i)*|incx|]`; likewise for y with incy (increments are never 0). Each buffer "
        "holds at least 1 + (n-1)*|inc| elements; the elements of either buffer that are not "
        "its vector's must be left untouched. When n <= 0 nothing is done. The exchange is "
        "exact, bit for bit, both parts: inf and NaN included."
    )
    solution = SOLUTION
    negatives = (
        Negative("abs_increment", "walks forward from x[0] and y[0] by |inc| for negative "
                 "increments; right only when both increments have the same sign",
                 NEGATIVE_ABS_INCREMENT),
        Negative("one_increment", "steps y by incx (bounded by y's buffer); right only when "
                 "incx == incy", NEGATIVE_ONE_INCREMENT),
    )
    tolerances = {"complex128": _blas.exact()}

    def edge_cases(self) -> list[Case]:
        e, d = self.routine, self.precision
        return [
            case(e, d, (71,), incx=1, incy=1, cpu=True),
            case(e, d, (497,), incx=2, incy=3, cpu=True),
            case(e, d, (160,), incx=-1, incy=-2, cpu=True),
            case(e, d, (33,), incx=-3, incy=1, cpu=True),
            case(e, d, (1025,), incx=2, incy=-1, specials=True, cpu=True),
            case(e, d, (0,), incx=1, incy=1, cpu=True),
            case(e, d, (1000,), incx=1, incy=3, std=1e300),
            case(e, d, (1000,), incx=-1, incy=2, subnormal=True),  # exchanged exactly, no flush
        ]

    def benchmark_cases(self) -> Sequence[Case]:
        e, d = self.routine, self.precision
        return [case(e, d, (16 * 2**20,), incx=1, incy=1),
                case(e, d, (16 * 2**20,), incx=-1, incy=1)]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        (n,) = c.shape
        x = _level1.vector(c, c["incx"], gen)
        y = _level1.vector(c, c["incy"], gen)
        return Call(c.entry, (n, x, c["incx"], y, c["incy"]), outputs=(Out.arg(1), Out.arg(3)),
                    mutable=frozenset({1, 3}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        n, x, incx, y, incy = call.args
        new_x = _level1.updated(x, n, incx, _blas.gather(y, n, incy))
        new_y = _level1.updated(y, n, incy, _blas.gather(x, n, incx))
        return (Expected(new_x, torch.complex128, torch.zeros_like(new_x)),
                Expected(new_y, torch.complex128, torch.zeros_like(new_y)))

    def baseline(self, call: Call) -> object:
        n, x, incx, y, incy = call.args
        if x.is_cuda and _cublas.available():
            _cublas.call("cublasZswap_v2", n, x, incx, y, incy)
        elif n > 0:
            vx = _blas.gather(x, n, incx)
            _blas.scatter_(x, n, incx, _blas.gather(y, n, incy))
            _blas.scatter_(y, n, incy, vx)
        return None

    def cost(self, c: Case) -> Cost:
        (n,) = c.shape
        return _blas.streaming_cost(0, 4 * max(n, 0), "complex128")
